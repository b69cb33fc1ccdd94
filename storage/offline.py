"""Read-only access to a data directory, for tools that run beside (or instead of) a broker.

The PySpark reader and the exactly-once audit read partitions through this module. It
never opens a file for writing, takes no lock, and recovers, rebuilds or truncates
nothing, so a broker may be running on the same directory: whatever it finds past the
last complete, CRC-valid batch of a segment (preallocated zeros, a batch being written)
is simply where that segment ends. ``PartitionLog.open`` and ``TxnIndex.load`` are not
used on purpose: both repair files. Segments are read with ``pread``, not mapped: the
broker trims an active segment when it rolls, and touching a mapped page past the new
end of file would kill the reader with SIGBUS.

The files of one segment are named and read by ``segment_files`` (re-exported here for
the tools); this module adds the partitions of a data directory, the walk across
segments, and what that walk tells (``LogSummary``).

Works on Kafka's own data directories too: without ``topics.json`` the partitions are
found by their ``<topic>-<partition>`` directory names.
"""

from __future__ import annotations

import json
import os
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field

from minibroker_protocol.batch import BatchHeader, read_header
from minibroker_protocol.records import CONTROL_ABORT, CONTROL_COMMIT

from .catalog import CATALOG_FILE
from .errors import InvalidRecord
from .producer_state import read_control_marker
from .segment_files import (
    SEGMENT_FILE_KINDS,
    SegmentFiles,
    base_offset_of,
    log_tail,
    read_offset_index,
    read_txn_index,
    segment_file_kind,
    segment_file_list,
    segments,
    walk_segment,
)
from .txn_index import AbortedTxn, OngoingTxns, aborted_in_range

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


@dataclass(frozen=True, slots=True)
class PartitionDir:
    topic: str
    partition: int
    path: str


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


# --------------------------------------------------------------------- indexes


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
    txns: OngoingTxns = field(default_factory=OngoingTxns)  # the open transactions
    aborted: list[AbortedTxn] = field(default_factory=list)  # from the ABORT markers
    committed: int = 0

    @property
    def earliest(self) -> int:
        return self.log_start if self.log_start >= 0 else self.log_end

    @property
    def open_txns(self) -> dict[int, int]:
        """Producer id -> first offset of its undecided transaction."""
        return self.txns.firsts

    @property
    def last_stable(self) -> int:
        """The LSO: first offset of the earliest undecided transaction, else the end."""
        return self.txns.last_stable(self.log_end, max(self.log_start, 0))

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions that may hold batches in ``[start, end)``, found as a
        fetch finds them in the .txnindex."""
        return aborted_in_range(self.aborted, start, end)[0]


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
        s.txns.begin(pid, header.base_offset)
        return
    try:
        ctype = control_type(batch)
    except InvalidRecord:
        ctype = None
    # Any control batch closes what was open here, an empty or unreadable one too (the
    # live log ignores those); kept as this reader always did.
    txn_first = s.txns.end(pid)
    if ctype == CONTROL_ABORT:
        # Unlike the live log (Kafka's ProducerAppendInfo.appendEndTxnMarker), an abort
        # with no data here still gets an entry, spanning the marker: the data may be
        # below the log start (retention), which the walk cannot see.
        first = header.base_offset if txn_first is None else txn_first
        s.aborted.append(s.txns.aborted(pid, first, header.base_offset))
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
