"""Kafka's transaction index: ``<base:020d>.txnindex``, one per segment.

It lists the aborted transactions whose ABORT marker is in the segment, so a
READ_COMMITTED fetch can tell the consumer which producers' batches in the
range it returns to drop (Kafka's TransactionIndex and AbortedTxn, apache/kafka
storage/src/main/java/org/apache/kafka/storage/internals/log/). Entries are
Kafka's, 34 bytes, big-endian, appended in order of their last offset::

    version int16 (0) | producerId int64 | firstOffset int64
    | lastOffset int64 (the marker's offset) | lastStableOffset int64

``lastStableOffset`` is the partition's LSO right after the marker; a search
can stop at an entry whose LSO is at or past the end of the fetched range,
because no transaction ending later can start below it
(TransactionIndex.collectAbortedTxns).

The entries live in memory; every append is also written to the file at once
(aborts are rare), and fsynced on flush. Unlike Kafka, an empty file is created
with each segment, so a missing file means a lost one: the partition log then
rebuilds it from the log's markers (see ``PartitionLog.open``).
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_left
from operator import itemgetter
from typing import NamedTuple

from .errors import StorageError
from .sync_job import SyncJob

__all__ = [
    "ABORTED_TXN_SIZE",
    "AbortedTxn",
    "OngoingTxns",
    "TXN_INDEX_SUFFIX",
    "TxnIndex",
    "TxnIndexContents",
    "TxnIndexCorrupt",
    "aborted_in_range",
    "parse_txn_index",
]

TXN_INDEX_SUFFIX = ".txnindex"
ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE = _ENTRY.size  # 34, Kafka's AbortedTxn.TOTAL_SIZE
_last_offset = itemgetter(2)


class TxnIndexCorrupt(Exception):
    pass


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int  # the LSO right after the marker

    def to_bytes(self) -> bytes:
        return _ENTRY.pack(ABORTED_TXN_VERSION, *self)


class OngoingTxns:
    """The open transactions of a partition, producer id -> first offset (Kafka's
    ongoingTxns), and the two things that follow from them: the last stable offset, and
    the index entry of a transaction an ABORT marker ends.

    The one computation of both, for the live log (``ProducerStateManager`` keeps one,
    ``PartitionLog`` asks it for the LSO and its ``.txnindex`` entries) and the offline
    readers (``offline.LogSummary``: dump-log, the Spark source). Kafka:
    ProducerStateManager.firstUnstableOffset, UnifiedLog.updateFirstUnstableOffset and
    the AbortedTxn UnifiedLog.append writes (storage/.../internals/log/).
    """

    __slots__ = ("firsts",)

    def __init__(self, firsts: dict[int, int] | None = None) -> None:
        # Insertion order is the order transactions began in, when built by ``begin``.
        self.firsts: dict[int, int] = {} if firsts is None else firsts

    def __len__(self) -> int:
        return len(self.firsts)

    def begin(self, producer_id: int, offset: int) -> None:
        """A transactional data batch at ``offset``: opens the producer's transaction
        unless one is open already."""
        self.firsts.setdefault(producer_id, offset)

    def end(self, producer_id: int) -> int | None:
        """A marker (or the producer's removal) closes its transaction: its first offset,
        None when none was open."""
        return self.firsts.pop(producer_id, None)

    def clear(self) -> None:
        self.firsts.clear()

    def first_unstable(self) -> int | None:
        """First offset of the oldest open transaction, None when none is open."""
        firsts = self.firsts
        if not firsts:
            return None
        return min(firsts.values()) if len(firsts) > 1 else next(iter(firsts.values()))

    def last_stable(self, high_watermark: int, log_start: int = 0) -> int:
        """Kafka's LSO: the first unstable offset (no lower than the log start,
        UnifiedLog.maybeIncrementFirstUnstableOffset), or the high watermark when that is
        lower or nothing is open."""
        first = self.first_unstable()
        if first is None or first >= high_watermark:
            return high_watermark
        return first if first > log_start else log_start

    def aborted(self, producer_id: int, first_offset: int, marker_offset: int,
                log_start: int = 0) -> AbortedTxn:
        """The index entry of the transaction aborted at ``marker_offset``, once ``end``
        has closed it: its LSO is the one right after the marker."""
        return AbortedTxn(producer_id, first_offset, marker_offset,
                          self.last_stable(marker_offset + 1, log_start))


def aborted_in_range(entries: list[AbortedTxn], fetch_offset: int,
                     upper_offset: int) -> tuple[list[AbortedTxn], bool]:
    """The entries (ordered by marker) whose transaction overlaps
    ``[fetch_offset, upper_offset)``, and True when no later entry can (one's LSO reached
    ``upper_offset``: no transaction ending later can start below it; Kafka's
    TransactionIndex.collectAbortedTxns and TxnIndexSearchResult.isComplete)."""
    found: list[AbortedTxn] = []
    # Entries ending before the range are not wanted; none of them can be the
    # stopping one either (its LSO is at most fetch_offset).
    i = bisect_left(entries, fetch_offset, key=_last_offset)
    for j in range(i, len(entries)):
        txn = entries[j]
        if txn.first_offset < upper_offset:
            found.append(txn)
        if txn.last_stable_offset >= upper_offset:
            return found, True
    return found, False


class TxnIndex:
    __slots__ = ("path", "base_offset", "entries", "stale", "_durable")

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.entries: list[AbortedTxn] = []
        # Why the file could not be used as it was ("missing", "corrupt: ..."),
        # None when it is trusted. Set by ``load``; the log rebuilds stale ones.
        self.stale: str | None = None
        self._durable = True

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        return f"TxnIndex({self.path!r}, {len(self.entries)} entries)"

    @property
    def last_offset(self) -> int:
        """Last offset of the newest entry, -1 when empty."""
        return self.entries[-1].last_offset if self.entries else -1

    # ------------------------------------------------------------- writes

    def create(self) -> None:
        """Start an empty index file (a new segment, or a reset)."""
        self.entries = []
        self._write_file(b"", os.O_TRUNC)
        self.stale = None

    reset = create

    def append(self, txn: AbortedTxn) -> None:
        """Record an aborted transaction whose marker is at ``txn.last_offset``."""
        if txn.last_offset <= self.last_offset:
            # Kafka's TransactionIndex.append refuses these too.
            raise ValueError(
                f"{self.path}: aborted transaction ending at {txn.last_offset} does not "
                f"follow the last one, ending at {self.last_offset}"
            )
        # In memory first: whatever the disk says, this process answers right.
        self.entries.append(txn)
        self._write_file(txn.to_bytes(), os.O_APPEND)

    def truncate_to(self, offset: int) -> int:
        """Drop the entries whose marker is at or past ``offset`` (a log tail
        that is gone); returns how many went."""
        keep = bisect_left(self.entries, offset, key=_last_offset)
        dropped = len(self.entries) - keep
        if dropped:
            del self.entries[keep:]
            try:
                os.truncate(self.path, keep * ABORTED_TXN_SIZE)
            except OSError as exc:
                raise StorageError(f"{self.path}: cannot truncate: {exc}") from exc
            self._durable = False
        return dropped

    def _write_file(self, data: bytes, mode: int) -> None:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | mode, 0o644)
            try:
                if data:
                    os.write(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            raise StorageError(f"{self.path}: cannot write the transaction index: {exc}") from exc
        self._durable = False

    def add_sync(self, job: SyncJob) -> None:
        """Leave this file's fsync to ``job`` (a sealed segment's: no entry is added
        while the job runs)."""
        if not self._durable and job.open(self.path):
            job.on_done(self._synced)

    def _synced(self) -> None:
        self._durable = True


    def delete(self) -> None:
        self.entries = []
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    # -------------------------------------------------------------- reads

    def collect(self, fetch_offset: int, upper_offset: int, out: list) -> bool:
        """Add to ``out`` every ``(producer_id, first_offset)`` whose transaction
        overlaps ``[fetch_offset, upper_offset)``; True when no later segment
        can hold one (Kafka's TxnIndexSearchResult.isComplete)."""
        found, complete = aborted_in_range(self.entries, fetch_offset, upper_offset)
        out.extend((t.producer_id, t.first_offset) for t in found)
        return complete

    def to_bytes(self) -> bytes:
        return b"".join(e.to_bytes() for e in self.entries)

    # --------------------------------------------------------------- load

    @classmethod
    def load(cls, path: str, base_offset: int, next_offset: int) -> TxnIndex:
        """The index on disk for a segment holding ``[base_offset, next_offset)``.

        Entries past the segment's end (its log lost a torn tail) are dropped
        from the file. A missing or inconsistent file gives an empty index
        with ``stale`` set: its entries must be rebuilt from the log.
        """
        index = cls(path, base_offset)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            index.stale = "missing"
            return index
        try:
            index.entries = _decode(data, path, base_offset)
        except TxnIndexCorrupt as exc:
            index.stale = f"corrupt: {exc}"
            return index
        index.truncate_to(next_offset)
        return index


class TxnIndexContents(NamedTuple):
    """A ``.txnindex`` file as stored, judged but not repaired: the one reading of the
    format, shared by ``TxnIndex.load`` and the offline tools (dump-log, the audit)."""

    entries: list[tuple[int, AbortedTxn]]  # (version, entry) of every whole entry, in file order
    trailing_bytes: int  # bytes after the last whole entry
    problems: list[tuple[int, str]]  # (entry number, what is wrong with it), in file order

    @property
    def usable(self) -> bool:
        """True when the broker would trust the file as it is."""
        return not self.trailing_bytes and not self.problems


def parse_txn_index(data: bytes, base_offset: int) -> TxnIndexContents:
    """Decode every entry of a ``.txnindex`` and note each one the broker would not trust."""
    usable = len(data) - len(data) % ABORTED_TXN_SIZE
    entries: list[tuple[int, AbortedTxn]] = []
    problems: list[tuple[int, str]] = []
    last = -1
    for n, (version, pid, first, last_offset, lso) in enumerate(_ENTRY.iter_unpack(data[:usable])):
        entries.append((version, AbortedTxn(pid, first, last_offset, lso)))
        # Kafka's TransactionIndex.sanityCheck (marker at or above the base offset), plus
        # what must hold of any entry we write: ordered by marker, first <= marker,
        # LSO <= marker + 1.
        if version != ABORTED_TXN_VERSION:
            problems.append((n, f"entry version {version}"))
        elif last_offset < base_offset:
            problems.append((n, f"marker offset {last_offset} is below the segment's base {base_offset}"))
        elif last_offset <= last:
            problems.append((n, f"marker offsets are not increasing ({last} then {last_offset})"))
        elif not 0 <= first <= last_offset or lso > last_offset + 1 or pid < 0:
            problems.append(
                (n, f"impossible entry: producer {pid}, offsets {first}..{last_offset}, LSO {lso}")
            )
        last = max(last, last_offset)
    return TxnIndexContents(entries, len(data) - usable, problems)


def _decode(data: bytes, path: str, base_offset: int) -> list[AbortedTxn]:
    contents = parse_txn_index(data, base_offset)
    if contents.trailing_bytes:
        raise TxnIndexCorrupt(f"{len(data)} bytes is not a whole number of {ABORTED_TXN_SIZE}-byte entries")
    if contents.problems:
        raise TxnIndexCorrupt(contents.problems[0][1])
    return [txn for _, txn in contents.entries]
