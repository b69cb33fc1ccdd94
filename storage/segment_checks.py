"""Read-only checks of a segment's index files against its ``.log``, for dump-log.

Kafka's DumpLogSegments (apache/kafka tools/src/main/java/org/apache/kafka/tools/
DumpLogSegments.java) checks that each ``.index`` entry names the last offset of the
batch it points at, and that each ``.timeindex`` entry names a batch and its largest
timestamp. The same is checked here, plus one check Kafka's tool does not make: each
``.txnindex`` entry ends at an ABORT marker of its producer.

Only batch headers are read (``pread`` of 61 bytes per batch), hopping from the nearest
``.index`` entry that the log confirms, so checking a full 1 GiB segment reads a few
headers per entry instead of the whole file. Nothing is written, locked or repaired.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from typing import NamedTuple

from minibroker_protocol.batch import HEADER_SIZE, BatchHeader, check_batch
from minibroker_protocol.records import CONTROL_ABORT, CONTROL_COMMIT

from .errors import InvalidRecord
from .index_format import parse_offset_index
from .offline import control_type
from .txn_index import AbortedTxn

__all__ = [
    "Mismatch",
    "SegmentReader",
    "TimeIndexErrors",
    "TxnMismatch",
    "check_offset_index",
    "check_time_index",
    "check_txn_index",
]


class Mismatch(NamedTuple):
    """An index entry the log contradicts; ``found`` is -1 when no batch is there."""

    indexed: int
    found: int


class TimeIndexErrors(NamedTuple):
    timestamps: list[Mismatch]  # (index timestamp, the batch's max timestamp)
    offsets: list[Mismatch]  # (indexed offset, last offset of the batch found for it)


class TxnMismatch(NamedTuple):
    txn: AbortedTxn
    found: str  # what the log holds at the entry's lastOffset


class SegmentReader:
    """Batch headers of one ``.log`` by position or by offset (``with`` closes it)."""

    def __init__(self, log_path: str, base_offset: int, index_path: str | None = None) -> None:
        self.path = log_path
        self.base_offset = base_offset
        self._fd = os.open(log_path, os.O_RDONLY)
        self.size = os.fstat(self._fd).st_size
        # Only entries the log confirms may shorten a search: the index may be what is broken.
        self._anchors: list[tuple[int, int]] = []
        if index_path is not None:
            try:
                with open(index_path, "rb") as f:
                    contents = parse_offset_index(f.read(), base_offset, self.size)
            except FileNotFoundError:
                contents = None
            if contents is not None:
                for offset, pos in contents.entries[: contents.usable]:
                    header = self.header_at(pos)
                    if header is not None and header.last_offset == offset:
                        self._anchors.append((offset, pos))
        self._anchor_offsets = [o for o, _ in self._anchors]

    def __enter__(self) -> SegmentReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def header_at(self, pos: int) -> BatchHeader | None:
        """The batch header at byte ``pos``, None when no whole batch could start there."""
        if pos < 0 or pos + HEADER_SIZE > self.size:
            return None
        raw = os.pread(self._fd, HEADER_SIZE, pos)
        if len(raw) < HEADER_SIZE:
            return None
        header = check_batch(raw, 0, self.size - pos, origin=pos)
        return None if isinstance(header, str) else header

    def batch_holding(self, offset: int) -> BatchHeader | None:
        """The first batch whose last offset is >= ``offset``, None past the readable end."""
        i = bisect_left(self._anchor_offsets, offset)
        pos = self._anchors[i - 1][1] if i else 0
        while (header := self.header_at(pos)) is not None:
            if header.last_offset >= offset:
                return header
            pos = header.end
        return None

    def batch_bytes(self, header: BatchHeader) -> bytes:
        return os.pread(self._fd, header.size, header.position)


def check_offset_index(reader: SegmentReader, entries: list[tuple[int, int]]) -> list[Mismatch]:
    """Entries whose position does not hold a batch ending at their offset (Kafka's
    "Mismatches in": index offset, last offset of the batch there or -1)."""
    out = []
    for offset, pos in entries:
        header = reader.header_at(pos)
        found = -1 if header is None else header.last_offset
        if found != offset:
            out.append(Mismatch(offset, found))
    return out


def check_time_index(reader: SegmentReader, entries: list[tuple[int, int]]) -> TimeIndexErrors:
    """Kafka's dumpTimeIndex checks: the indexed offset is the last offset of a batch,
    and that batch's largest timestamp is the indexed one. The batch header's
    maxTimestamp stands for Kafka's walk over the records: the broker sets one from
    the other."""
    errors = TimeIndexErrors([], [])
    for ts, offset in entries:
        header = reader.batch_holding(offset)
        if header is None:
            errors.offsets.append(Mismatch(offset, -1))
        elif header.last_offset != offset:
            errors.offsets.append(Mismatch(offset, header.last_offset))
        elif header.max_timestamp != ts:
            errors.timestamps.append(Mismatch(ts, header.max_timestamp))
    return errors


def check_txn_index(reader: SegmentReader, txns: list[AbortedTxn]) -> list[TxnMismatch]:
    """Entries whose lastOffset is not an ABORT marker of their producer in the log."""
    out = []
    for txn in txns:
        header = reader.batch_holding(txn.last_offset)
        found = _describe(reader, header, txn.last_offset)
        if found != f"ABORT marker of producer {txn.producer_id}":
            out.append(TxnMismatch(txn, found))
    return out


def _describe(reader: SegmentReader, header: BatchHeader | None, offset: int) -> str:
    if header is None or header.base_offset > offset:
        return "no batch"
    if not header.is_control:
        return f"a data batch of producer {header.producer_id}"
    try:
        kind = control_type(reader.batch_bytes(header))
    except InvalidRecord as exc:
        return f"an unreadable control batch of producer {header.producer_id} ({exc})"
    names: dict[int | None, str] = {CONTROL_ABORT: "ABORT", CONTROL_COMMIT: "COMMIT"}
    name = names.get(kind, "empty control batch")
    return f"{name} marker of producer {header.producer_id}"
