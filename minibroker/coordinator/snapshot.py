"""Coordinator snapshots: the state a replay of an internal topic would rebuild, up to
known offsets, so a restart replays only what was written after them (issue 13, defect 5).
The log cleaner compacts ``__transaction_state`` and ``__consumer_offsets`` too, so the full
replay a missing or untrusted snapshot falls back to reads the live state, not the history.

One file per coordinator in the data directory (``<name>.snapshot``), written atomically
(temporary file, fsync, rename, fsync of the directory) and checked at load: a file that
is missing, torn, of another version, of another incarnation of the topic (topic id), or
that claims offsets the log does not hold, is ignored with a log line, and the caller
replays the whole log instead. Layout, big-endian::

    magic b"MBCS" | version u16 | crc32c u32 of everything after it |
    topic_id 16 bytes | partitions u32 | partitions x (partition u32, offset i64) |
    entries u32 | entries x (length u32, bytes)

Entries are the coordinator's own records (its log's key/value encodings), so loading
one goes through the same decoder as the replay.
"""

from __future__ import annotations

import os
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from minibroker_protocol import checksum
from minibroker_storage.lazylog import get_logger

log = get_logger("minibroker.coordinator")

MAGIC = b"MBCS"
VERSION = 1
_HEAD = struct.Struct(">4sHI")
_U32 = struct.Struct(">I")
_POS = struct.Struct(">Iq")

# Periodic snapshots: after this many records written to the topic, or this long after
# the first record not yet covered, whichever comes first. A kill -9 then replays at most
# about this much history. Crash tests lower the count through the wiring's CrashPoints
# (Schedule.every_records), never through this module.
EVERY_SECONDS = 60.0
EVERY_RECORDS = 50_000


@dataclass(frozen=True)
class Snapshot:
    """A coordinator snapshot: its entries, and per partition of its topic the first offset not covered."""
    topic_id: uuid.UUID
    offsets: dict[int, int]  # partition -> first offset NOT covered
    entries: list[bytes]


def encode(topic_id: uuid.UUID, offsets: dict[int, int], entries: Iterable[bytes]) -> bytes:
    body = bytearray(topic_id.bytes)
    body += _U32.pack(len(offsets))
    for partition, offset in sorted(offsets.items()):
        body += _POS.pack(partition, offset)
    entries = list(entries)
    body += _U32.pack(len(entries))
    for e in entries:
        body += _U32.pack(len(e))
        body += e
    return _HEAD.pack(MAGIC, VERSION, checksum.crc32c(body)) + bytes(body)


class SnapshotError(ValueError):
    pass


def decode(data: bytes) -> Snapshot:
    if len(data) < _HEAD.size + 16 + 8:
        raise SnapshotError(f"{len(data)} bytes are too short for a snapshot")
    magic, version, crc = _HEAD.unpack_from(data, 0)
    if magic != MAGIC:
        raise SnapshotError("not a coordinator snapshot (bad magic)")
    if version != VERSION:
        raise SnapshotError(f"snapshot version {version}, this broker reads {VERSION}")
    body = memoryview(data)[_HEAD.size:]
    if checksum.crc32c(body) != crc:
        raise SnapshotError("checksum mismatch")
    try:
        topic_id = uuid.UUID(bytes=bytes(body[:16]))
        pos = 16
        (n,) = _U32.unpack_from(body, pos)
        pos += 4
        offsets = {}
        for _ in range(n):
            partition, offset = _POS.unpack_from(body, pos)
            pos += _POS.size
            offsets[partition] = offset
        (n,) = _U32.unpack_from(body, pos)
        pos += 4
        entries = []
        for _ in range(n):
            (size,) = _U32.unpack_from(body, pos)
            pos += 4
            if pos + size > len(body):
                raise SnapshotError("entry overruns the snapshot")
            entries.append(bytes(body[pos:pos + size]))
            pos += size
    except struct.error as e:
        raise SnapshotError(f"truncated snapshot: {e}") from None
    if pos != len(body):
        raise SnapshotError(f"{len(body) - pos} bytes after the last entry")
    return Snapshot(topic_id, offsets, entries)


def write_atomic(path: str, data: bytes) -> None:
    """Whole or not at all, and durable once this returns."""
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class _Log(Protocol):
    @property
    def log_end_offset(self) -> int: ...


def load(path: str, name: str, topic_id: uuid.UUID, logs: Mapping[int, _Log]) -> Snapshot | None:
    """The snapshot at ``path`` if it can be trusted for these logs (partition -> log),
    else None with one ``<name>.snapshot_ignored`` line saying why."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        log.warning(f"{name}.snapshot_ignored", path=path, reason=f"cannot read: {e}",
                    consequence="full replay")
        return None
    try:
        snap = decode(data)
    except SnapshotError as e:
        log.warning(f"{name}.snapshot_ignored", path=path, reason=str(e), consequence="full replay")
        return None
    reason = None
    if snap.topic_id != topic_id:
        reason = f"taken for topic id {snap.topic_id}, the topic is now {topic_id}"
    else:
        for partition, plog in logs.items():
            offset = snap.offsets.get(partition)
            if offset is None:
                reason = f"no offset for partition {partition}"
                break
            if offset > plog.log_end_offset:
                # The log lost what the snapshot covers (a torn tail cut at recovery):
                # the snapshot would hold transitions the log no longer has.
                reason = (f"partition {partition}: covers up to offset {offset}, beyond the "
                          f"log end {plog.log_end_offset}")
                break
    if reason is not None:
        log.warning(f"{name}.snapshot_ignored", path=path, reason=reason, consequence="full replay")
        return None
    return snap


class Writer:
    """Writes snapshots captured on the loop, from any thread, never an older capture
    over a newer one (a periodic write still in flight at shutdown must not overwrite
    the final snapshot)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._captures = 0
        self._written: dict[str, int] = {}

    def ticket(self) -> int:
        self._captures += 1
        return self._captures

    def write(self, name: str, ticket: int, captured: tuple[str, Callable[[], bytes], dict],
              reason: str) -> None:
        """``captured``: (path, a function encoding the captured state, fields to log)."""
        path, encode_captured, fields = captured
        with self._lock:
            if self._written.get(path, 0) > ticket:
                return
            t0 = time.perf_counter()
            try:
                data = encode_captured()
                write_atomic(path, data)
            except OSError as e:
                log.error(f"{name}.snapshot_failed", path=path, error=str(e), reason=reason,
                          consequence="the next start replays more of the log")
                return
            self._written[path] = ticket
        log.info(f"{name}.snapshot_written", path=path, bytes=len(data), reason=reason,
                 ms=round((time.perf_counter() - t0) * 1000, 1), **fields)


class Schedule:
    """When a coordinator's next periodic snapshot falls due."""

    def __init__(self, every_records: int | None = None) -> None:
        self.records = 0
        self.first_at: float | None = None
        # None: the module's EVERY_RECORDS, looked up when asked (tests patch it)
        self.every_records = every_records

    def wrote(self, n: int = 1) -> None:
        self.records += n
        if self.first_at is None:
            self.first_at = time.monotonic()

    def due(self) -> bool:
        if not self.records:
            return False
        return (self.records >= (self.every_records or EVERY_RECORDS)
                or time.monotonic() - (self.first_at or 0) >= EVERY_SECONDS)

    def taken(self) -> None:
        self.records = 0
        self.first_at = None
