"""Kafka's sparse segment indexes, kept in memory and appended to disk.

``.index``: 8-byte entries (int32 offset relative to the segment's base,
int32 byte position of a batch in the ``.log``), keyed by the batch's last
offset. ``.timeindex``: 12-byte entries (int64 timestamp, int32 relative
offset), timestamps strictly increasing. Both are big-endian like Kafka's,
and both are derived data: a missing or inconsistent file is rebuilt from the
``.log`` (see ``segment.py``), so they are fsynced only on flush and close.
"""

from __future__ import annotations

import os
import sys
from array import array
from bisect import bisect_right

from .index_format import OFFSET_ENTRY as _OFFSET_ENTRY
from .index_format import TIME_ENTRY as _TIME_ENTRY
from .index_format import IndexContents, parse_offset_index, parse_time_index
from .sync_job import SyncJob

# Write entries out in chunks: each append is a syscall, and a crash loses
# nothing that recovery cannot rebuild.
_PENDING_LIMIT = 64 * 1024


class IndexCorrupt(Exception):
    pass


class _IndexFile:
    __slots__ = ("path", "base_offset", "_pending", "_durable")

    entry_size: int

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._pending = bytearray()
        self._durable = True  # nothing written since the last fsync

    def persist(self) -> None:
        """Append the entries not yet on disk (``add_sync`` makes them durable)."""
        if not self._pending:
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, self._pending)
            self._pending.clear()
            self._durable = False
        finally:
            os.close(fd)

    def add_sync(self, job: SyncJob) -> None:
        """Write the pending entries now and leave their fsync to ``job`` (a sealed
        segment's index: nothing is appended to it while the job runs)."""
        self.persist()
        if not self._durable and job.open(self.path):
            job.on_done(self._synced)

    def _synced(self) -> None:
        self._durable = True

    def rewrite(self, fsync: bool = False) -> None:
        """Replace the file with every entry held in memory."""
        self._pending = bytearray(self.to_bytes())
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, self._pending)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        self._durable = fsync
        self._pending.clear()

    def delete(self) -> None:
        self._pending.clear()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def to_bytes(self) -> bytes:  # pragma: no cover - overridden
        raise NotImplementedError

    @classmethod
    def _read(cls, path: str) -> bytes | None:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        if len(data) % cls.entry_size:
            raise IndexCorrupt(f"{path}: {len(data)} bytes is not a whole number of entries")
        return data


class OffsetIndex(_IndexFile):
    __slots__ = ("_rel", "_pos")
    entry_size = _OFFSET_ENTRY.size

    def __init__(self, path: str, base_offset: int) -> None:
        super().__init__(path, base_offset)
        self._rel = array("i")
        self._pos = array("i")

    def __len__(self) -> int:
        return len(self._rel)

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        self._rel.append(rel)
        self._pos.append(position)
        self._pending += _OFFSET_ENTRY.pack(rel, position)
        if len(self._pending) >= _PENDING_LIMIT:
            self.persist()

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch whose last offset is <= ``offset``.

        Every batch from there on is worth walking; 0 when nothing qualifies.
        """
        i = bisect_right(self._rel, offset - self.base_offset)
        return self._pos[i - 1] if i else 0

    def floor_position(self, position: int) -> int:
        """The largest indexed batch position <= ``position`` (0 if none)."""
        i = bisect_right(self._pos, position)
        return self._pos[i - 1] if i else 0

    def last(self) -> tuple[int, int] | None:
        if not self._rel:
            return None
        return self.base_offset + self._rel[-1], self._pos[-1]

    def entries(self) -> list[tuple[int, int]]:
        return [(self.base_offset + r, p) for r, p in zip(self._rel, self._pos)]

    def to_bytes(self) -> bytes:
        out = array("i")
        for r, p in zip(self._rel, self._pos):
            out.append(r)
            out.append(p)
        if sys.byteorder == "little":
            out.byteswap()
        return out.tobytes()

    @classmethod
    def load(cls, path: str, base_offset: int, log_size: int) -> OffsetIndex | None:
        """The index on disk, None if missing; IndexCorrupt if it cannot be right."""
        data = cls._read(path)
        if data is None:
            return None
        contents = parse_offset_index(data, base_offset, log_size)
        _refuse_unsound(contents, path)
        index = cls(path, base_offset)
        index._rel, index._pos = contents.keys, contents.values
        return index


class TimeIndex(_IndexFile):
    __slots__ = ("_ts", "_rel")
    entry_size = _TIME_ENTRY.size

    def __init__(self, path: str, base_offset: int) -> None:
        super().__init__(path, base_offset)
        self._ts = array("q")
        self._rel = array("i")

    def __len__(self) -> int:
        return len(self._ts)

    def maybe_append(self, timestamp: int, offset: int) -> None:
        # Kafka's TimeIndex.maybeAppend: only a timestamp larger than the last,
        # and an empty index behaves as if its last timestamp were -1.
        if timestamp <= (self._ts[-1] if self._ts else -1):
            return
        rel = offset - self.base_offset
        self._ts.append(timestamp)
        self._rel.append(rel)
        self._pending += _TIME_ENTRY.pack(timestamp, rel)
        if len(self._pending) >= _PENDING_LIMIT:
            self.persist()

    def lookup(self, timestamp: int) -> int:
        """Offset to start searching for ``timestamp`` from: the entry with the
        largest timestamp <= ``timestamp`` (base offset when there is none)."""
        i = bisect_right(self._ts, timestamp)
        return self.base_offset + (self._rel[i - 1] if i else 0)

    def last(self) -> tuple[int, int] | None:
        if not self._ts:
            return None
        return self._ts[-1], self.base_offset + self._rel[-1]

    def entries(self) -> list[tuple[int, int]]:
        return [(t, self.base_offset + r) for t, r in zip(self._ts, self._rel)]

    def to_bytes(self) -> bytes:
        return b"".join(_TIME_ENTRY.pack(t, r) for t, r in zip(self._ts, self._rel))

    @classmethod
    def load(cls, path: str, base_offset: int, next_offset: int) -> TimeIndex | None:
        data = cls._read(path)
        if data is None:
            return None
        contents = parse_time_index(data, base_offset, next_offset)
        _refuse_unsound(contents, path)
        index = cls(path, base_offset)
        index._ts, index._rel = contents.keys, contents.values
        return index


def _refuse_unsound(contents: IndexContents, path: str) -> None:
    # A preallocated zero tail is no error for a reader, but entries appended after it
    # would be: the broker rebuilds such a file.
    if contents.problems:
        n, what = contents.problems[0]
        raise IndexCorrupt(f"{path}: entry {n}: {what}")
    if contents.zero_entries:
        raise IndexCorrupt(f"{path}: ends in {contents.zero_entries} zero entries")
