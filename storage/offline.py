"""Read-only access to a data directory, for tools that run beside (or instead of) a broker.

The PySpark reader and the exactly-once audit read partitions through this module. It
never opens a file for writing, takes no lock, and recovers, rebuilds or truncates
nothing, so a broker may be running on the same directory: whatever it finds past the
last complete, CRC-valid batch of a segment (preallocated zeros, a batch being written)
is simply where that segment ends. ``PartitionLog.open`` and ``TxnIndex.load`` are not
used on purpose: both repair files. Segments are read with ``pread``, not mapped: the
broker trims an active segment when it rolls, and touching a mapped page past the new
end of file would kill the reader with SIGBUS.

Works on Kafka's own data directories too: without ``topics.json`` the partitions are
found by their ``<topic>-<partition>`` directory names.
"""

from __future__ import annotations

import json
import os
import struct
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field

from crc32c import crc32c

from minibroker_protocol.batch import CRC_START, HEADER, HEADER_SIZE, MIN_BATCH_LENGTH, BatchHeader, read_header
from minibroker_protocol.records import CONTROL_ABORT, CONTROL_COMMIT

from .catalog import CATALOG_FILE
from .errors import InvalidRecord
from .index import IndexCorrupt
from .index_format import parse_offset_index
from .producer_state import SNAPSHOT_SUFFIX, read_control_marker
from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX
from .txn_index import TXN_INDEX_SUFFIX, AbortedTxn, parse_txn_index

__all__ = [
    "AbortedIndex",
    "LogSummary",
    "PartitionDir",
    "PartitionScan",
    "SEGMENT_FILE_KINDS",
    "SegmentFiles",
    "base_offset_of",
    "control_type",
    "iter_batches",
    "log_tail",
    "partition_dirs",
    "read_offset_index",
    "read_txn_index",
    "segment_file_kind",
    "segment_file_list",
    "segments",
    "summarize",
    "txn_index_entries",
    "walk_segment",
]

_SKIP_SUFFIXES = ("-delete", "-stray", "-future")
SEGMENT_FILE_KINDS = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX)


@dataclass(frozen=True, slots=True)
class PartitionDir:
    topic: str
    partition: int
    path: str


@dataclass(frozen=True, slots=True)
class SegmentFiles:
    base_offset: int
    log: str

    @property
    def index(self) -> str:
        return self.log[: -len(LOG_SUFFIX)] + INDEX_SUFFIX

    @property
    def txn_index(self) -> str:
        return self.log[: -len(LOG_SUFFIX)] + TXN_INDEX_SUFFIX


# ---------------------------------------------------------------------- layout


def _split_dir_name(name: str) -> tuple[str, int] | None:
    topic, sep, number = name.rpartition("-")
    if not sep or not topic or not number.isdigit():
        return None
    return topic, int(number)


def partition_dirs(data_dir: str) -> list[PartitionDir]:
    """Every partition directory of the topics in ``data_dir``, sorted by (topic, partition).

    ``topics.json`` decides which topics exist when present (a directory of a deleted
    topic can linger); otherwise every ``<topic>-<n>`` directory counts.
    """
    known: dict[str, int] | None = None
    try:
        with open(os.path.join(data_dir, CATALOG_FILE), encoding="utf-8") as f:
            doc = json.load(f)
        known = {name: int(entry["partitions"]) for name, entry in doc["topics"].items()}
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise OSError(f"{data_dir}/{CATALOG_FILE} is unreadable: {exc}") from exc
    out = []
    for name in os.listdir(data_dir):
        path = os.path.join(data_dir, name)
        if name.endswith(_SKIP_SUFFIXES) or not os.path.isdir(path):
            continue
        parsed = _split_dir_name(name)
        if parsed is None:
            continue
        topic, partition = parsed
        if known is not None and (topic not in known or partition >= known[topic]):
            continue
        out.append(PartitionDir(topic, partition, path))
    out.sort(key=lambda p: (p.topic, p.partition))
    return out


def segments(partition_path: str) -> list[SegmentFiles]:
    """The partition's ``.log`` files, by base offset."""
    out = []
    for name in os.listdir(partition_path):
        stem, dot, suffix = name.partition(".")
        if dot and "." + suffix == LOG_SUFFIX and stem.isdigit():
            out.append(SegmentFiles(int(stem), os.path.join(partition_path, name)))
    out.sort(key=lambda s: s.base_offset)
    return out


def segment_file_kind(path: str) -> str | None:
    """The suffix of a file a partition directory holds per segment (``.log``,
    ``.index``, ...), None for any other file (``*.deleted``, ``*.tmp``, checkpoints)."""
    name = os.path.basename(path)
    dot = name.rfind(".")
    return name[dot:] if dot > 0 and name[dot:] in SEGMENT_FILE_KINDS else None


def segment_file_list(directory: str) -> list[str]:
    """Every ``<offset>.<kind>`` file of ``directory``: by offset, then in
    SEGMENT_FILE_KINDS order (a segment's log before its indexes)."""
    found = []
    for name in os.listdir(directory):
        kind = segment_file_kind(name)
        offset = base_offset_of(name)
        if kind is not None and offset is not None and name == name.partition(".")[0] + kind:
            found.append((offset, SEGMENT_FILE_KINDS.index(kind), os.path.join(directory, name)))
    found.sort()
    return [path for _, _, path in found]


# --------------------------------------------------------------------- indexes


def read_offset_index(path: str, base_offset: int) -> list[tuple[int, int]]:
    """``(absolute offset, position)`` entries of a ``.index`` file, up to the first one
    the broker would refuse; [] when missing (a tool then walks the segment from its start)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    contents = parse_offset_index(data, base_offset)
    return contents.entries[: contents.usable]


def read_txn_index(path: str) -> list[AbortedTxn] | None:
    """The aborted transactions in a ``.txnindex`` file, None when it is missing or
    malformed (the broker would rebuild it from the log; tools use the markers)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    contents = parse_txn_index(data, base_offset_of(path) or 0)
    if not contents.usable:
        return None
    return [txn for _, txn in contents.entries]


def base_offset_of(path: str) -> int | None:
    """The base offset a segment file's name gives (``<20 digits>.<kind>``), None if none."""
    stem = os.path.basename(path).partition(".")[0]
    return int(stem) if stem.isdigit() else None


def log_tail(path: str, valid_end: int) -> tuple[int, bool]:
    """``(bytes, all_zero)`` of what follows the last readable batch, which ends at
    ``valid_end``. Zeros are space reserved for appends (the active segment, or one a
    crash left untrimmed); anything else is a torn or corrupt batch. Holes of a sparse
    file are skipped, not read."""
    with open(path, "rb") as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        pos = valid_end
        while pos < size:
            try:
                pos = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:
                break  # only holes from here on (ENXIO), or no SEEK_DATA: read on
            chunk = os.pread(fd, min(_CHUNK, size - pos), pos)
            if not chunk:
                break
            if chunk.count(0) != len(chunk):
                return size - valid_end, False
            pos += len(chunk)
    return max(size - valid_end, 0), True


class AbortedIndex:
    """Kafka's read_committed filter: a transactional batch of producer P at offset o is
    aborted when an aborted transaction of P spans it (first <= o <= last)."""

    __slots__ = ("_firsts", "_lasts")

    def __init__(self, txns) -> None:
        by_pid: dict[int, list[tuple[int, int]]] = {}
        for t in txns:
            by_pid.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))
        self._firsts: dict[int, list[int]] = {}
        self._lasts: dict[int, list[int]] = {}
        for pid, spans in by_pid.items():
            # Merged, so that one bisect finds the only span that can hold an offset even
            # when two sources (index and markers) describe the same transaction.
            merged: list[list[int]] = []
            for first, last in sorted(spans):
                if merged and first <= merged[-1][1] + 1:
                    merged[-1][1] = max(merged[-1][1], last)
                else:
                    merged.append([first, last])
            self._firsts[pid] = [f for f, _ in merged]
            self._lasts[pid] = [last for _, last in merged]

    def __len__(self) -> int:
        return sum(len(v) for v in self._firsts.values())

    def is_aborted(self, producer_id: int, offset: int) -> bool:
        firsts = self._firsts.get(producer_id)
        if firsts is None:
            return False
        i = bisect_right(firsts, offset)
        return i > 0 and offset <= self._lasts[producer_id][i - 1]


# --------------------------------------------------------------------- batches


_CHUNK = 1 << 20
_SEEK = struct.Struct(">qi11xi")  # baseOffset, batchLength, lastOffsetDelta


def _start_position(seg: SegmentFiles, offset: int, fd: int) -> int:
    """Where to start walking ``seg`` for ``offset``: the last indexed batch ending
    below it, if the log confirms that entry; else the segment start."""
    if offset <= seg.base_offset:
        return 0
    try:
        entries = read_offset_index(seg.index, seg.base_offset)
    except (OSError, IndexCorrupt):
        return 0
    i = bisect_right(entries, (offset - 1, 1 << 62))
    while i > 0:
        last, pos = entries[i - 1]
        head = os.pread(fd, _SEEK.size, pos)
        if len(head) == _SEEK.size:
            base, length, delta = _SEEK.unpack(head)
            if base + delta == last and length >= MIN_BATCH_LENGTH:
                return pos
        i -= 1  # an entry the log does not confirm (a torn tail): try an older one
    return 0


def iter_batches(partition_path: str, start_offset: int = 0, *, check_crc: bool = True,
                 segment_list: list[SegmentFiles] | None = None
                 ) -> Iterator[tuple[BatchHeader, memoryview, SegmentFiles]]:
    """``(header, batch, segment)`` of every batch whose last offset is >= ``start_offset``,
    in log order: ``header.position`` is the batch's position in its segment file and
    ``batch`` its bytes (``decode_batch(batch)`` decodes it).

    Each segment ends at its first incomplete, zeroed or (with ``check_crc``) corrupt batch.
    """
    segs = segment_list if segment_list is not None else segments(partition_path)
    bases = [s.base_offset for s in segs]
    first = max(bisect_right(bases, start_offset) - 1, 0)
    for seg in segs[first:]:
        for header, batch in walk_segment(seg, start_offset, check_crc):
            if header.last_offset >= start_offset:
                yield header, batch, seg


def control_type(batch) -> int | None:
    """CONTROL_COMMIT or CONTROL_ABORT for the end-transaction marker batch ``batch`` (its
    bytes); None for an empty (cleaned) control batch. Raises InvalidRecord when malformed."""
    marker = read_control_marker(batch, read_header(batch, 0))
    return None if marker is None else marker.control_type


# --------------------------------------------------------------------- summary


@dataclass(slots=True)
class LogSummary:
    """What a walk over a partition's batch headers tells."""

    log_start: int = -1  # first offset present (-1: no batch yet, see ``earliest``)
    log_end: int = 0  # the high watermark: next offset to be written
    batches: int = 0
    records: int = 0
    open_txns: dict[int, int] = field(default_factory=dict)  # producer id -> first offset
    aborted: list[AbortedTxn] = field(default_factory=list)  # from the ABORT markers
    committed: int = 0

    @property
    def earliest(self) -> int:
        return self.log_start if self.log_start >= 0 else self.log_end

    @property
    def last_stable(self) -> int:
        """The LSO: first offset of the earliest undecided transaction, else the end."""
        return min(self.open_txns.values(), default=self.log_end)

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions that may hold batches in ``[start, end)``."""
        return [t for t in self.aborted if t.last_offset >= start and t.first_offset < end]


class PartitionScan:
    """A partition's LogSummary, kept up to date by walking only what was appended since
    the last call (the streaming planner asks every trigger)."""

    def __init__(self, partition_path: str) -> None:
        self.path = partition_path
        self.summary = LogSummary()
        self._base = -1  # segment being walked
        self._pos = 0  # where the walk stopped in it

    def advance(self) -> LogSummary:
        s = self.summary
        segs = segments(self.path)
        if s.batches == 0 and segs:
            s.log_end = max(s.log_end, segs[0].base_offset)  # retention emptied the log
        for seg in segs:
            if seg.base_offset < self._base:
                continue
            if seg.base_offset > self._base:
                self._base, self._pos = seg.base_offset, 0
            for header, batch in walk_segment(seg, position=self._pos):
                self._pos = header.end
                _account(s, header, batch)
        return s


def walk_segment(seg: SegmentFiles, start_offset: int = 0, check_crc: bool = True,
                 position: int | None = None) -> Iterator[tuple[BatchHeader, memoryview]]:
    """``(header, batch)`` of the segment's valid batches from byte ``position``, or from
    the indexed batch nearest below ``start_offset``. ``header.position`` is the file
    position and ``batch`` the batch's bytes. It stops at the first batch that is
    incomplete, zeroed or (with ``check_crc``) corrupt - a batch the broker is still
    copying in must not be taken for data; ``header.end`` of the last one is where the
    walk stopped."""
    try:
        fd = os.open(seg.log, os.O_RDONLY)
    except FileNotFoundError:
        return  # deleted by retention while we walked
    try:
        file_size = os.fstat(fd).st_size
        pos = _start_position(seg, start_offset, fd) if position is None else position
        buf, buf_start = b"", pos
        while True:
            rel = pos - buf_start
            if rel + HEADER_SIZE > len(buf):
                buf, buf_start, rel = os.pread(fd, _CHUNK, pos), pos, 0
                if len(buf) < HEADER_SIZE:
                    return
            fields = HEADER.unpack_from(buf, rel)
            size = fields[1] + 12
            if fields[1] < MIN_BATCH_LENGTH or fields[3] != 2 or pos + size > file_size:
                return
            if rel + size > len(buf):
                buf, buf_start, rel = os.pread(fd, max(_CHUNK, size), pos), pos, 0
                if len(buf) < size:
                    return  # incomplete: the end of what was written
            batch = memoryview(buf)[rel: rel + size]
            if check_crc and crc32c(batch[CRC_START:]) != fields[4]:
                return
            yield BatchHeader(pos, *fields), batch
            pos += size
    finally:
        os.close(fd)


def _account(s: LogSummary, header: BatchHeader, batch) -> None:
    if s.log_start < 0:
        s.log_start = header.base_offset
    s.batches += 1
    s.records += header.record_count
    s.log_end = header.last_offset + 1
    if not header.is_transactional:
        return
    pid = header.producer_id
    if not header.is_control:
        s.open_txns.setdefault(pid, header.base_offset)
        return
    try:
        ctype = control_type(batch)
    except InvalidRecord:
        ctype = None
    txn_first = s.open_txns.pop(pid, header.base_offset)
    if ctype == CONTROL_ABORT:
        # Kafka's CompletedTxn: an abort with no data here still gets an entry.
        lso = min(s.open_txns.values(), default=header.base_offset + 1)
        s.aborted.append(AbortedTxn(pid, txn_first, header.base_offset, lso))
    elif ctype == CONTROL_COMMIT:
        s.committed += 1


def summarize(partition_path: str) -> LogSummary:
    """Walk every batch header of the partition once."""
    return PartitionScan(partition_path).advance()


def txn_index_entries(partition_path: str) -> list[AbortedTxn] | None:
    """Every segment's ``.txnindex`` entries; None if one is missing or malformed."""
    out: list[AbortedTxn] = []
    for seg in segments(partition_path):
        entries = read_txn_index(seg.txn_index)
        if entries is None:
            return None
        out.extend(entries)
    return out
