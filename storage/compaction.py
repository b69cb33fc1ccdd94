"""What log compaction keeps of a batch: Kafka's cleaning rules, on bytes, with no files.

Theory of operation (Kafka's Cleaner, CleanedTransactionMetadata and
MemoryRecords.filterTo, storage/.../internals/log/ and clients/.../record/):

1. **The offset map.** Over the dirty part of the log (from the cleaner checkpoint to the
   first uncleanable offset) every key is mapped to the offset of its latest record.
   Records of aborted transactions and control batches do not count.
2. **The filter.** The log from its start to the map's end is then rewritten batch by
   batch. A record stays when a later record with its key does not exist, and it is not a
   tombstone whose delete horizon has passed. Records past the map's end all stay.
3. **Transactions.** The records of aborted transactions go. A transaction's marker stays
   while any batch of the transaction is left; once none is, the marker gets a delete
   horizon (``now + delete.retention.ms``, KIP-534: the batch's base timestamp, with
   attribute bit 6), and is dropped by a later cleaning after that time.
4. **Producer state.** A producer's last batch is kept, as an empty batch if nothing in it
   survives, so that reloading the log after a crash gives the producer back its epoch
   and last sequence. The last batch below the round's bound is kept (empty) too, so the
   log's end offset is not lost.

A batch whose records all stay, and that needs no new delete horizon, is copied byte for
byte; any other is rebuilt with its original offsets, sequence and codec.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from minibroker_protocol.batch import BatchHeader
from minibroker_protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    Record,
    decode_batch,
    empty_batch,
    parse_control_record,
    rebuild_batch,
)

from .txn_index import AbortedTxn

# Kafka's log.cleaner.dedupe.buffer.size (128 MiB) holds about 4 million 16-byte MD5 slots
# at its 0.9 load factor; a full map ends the round's dirty range early, and the next
# round goes on from there.
MAX_MAP_KEYS = 4_000_000
_LONG_MAX = 2**63 - 1


class OffsetMap:
    """Key -> offset of its latest record in the dirty range (Kafka's SkimpyOffsetMap, with
    exact keys instead of MD5 digests)."""

    __slots__ = ("offsets", "latest_offset", "max_keys")

    def __init__(self, max_keys: int = MAX_MAP_KEYS) -> None:
        self.offsets: dict[bytes, int] = {}
        self.latest_offset = -1
        self.max_keys = max_keys

    def __len__(self) -> int:
        return len(self.offsets)

    def get(self, key: bytes) -> int:
        return self.offsets.get(key, -1)

    def update_latest(self, offset: int) -> None:
        if offset > self.latest_offset:
            self.latest_offset = offset


class _AbortedSoFar:
    __slots__ = ("txn", "saw_batch")

    def __init__(self, txn: AbortedTxn) -> None:
        self.txn = txn
        self.saw_batch = False


class TxnTracker:
    """Which batches belong to aborted transactions, and which markers may go (Kafka's
    CleanedTransactionMetadata). Fed the batches in offset order."""

    def __init__(self, aborted: Iterable[AbortedTxn] = ()) -> None:
        self._pending = [(t.first_offset, t.producer_id, t.last_offset, t) for t in aborted]
        heapq.heapify(self._pending)
        self._aborted: dict[int, _AbortedSoFar] = {}  # producer id -> its aborted txn in progress
        self._committed: set[int] = set()  # producers whose committed txn had a batch seen
        # Entries for the cleaned segment's .txnindex: the aborted transactions whose
        # markers stay because some of their batches were seen.
        self.index: list[AbortedTxn] | None = None

    def _reach(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0][0] <= offset:
            txn = heapq.heappop(pending)[3]
            self._aborted.setdefault(txn.producer_id, _AbortedSoFar(txn))

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch was read; True when it belongs to an aborted transaction."""
        self._reach(header.last_offset)
        if not header.is_transactional:
            return False
        aborted = self._aborted.get(header.producer_id)
        if aborted is not None:
            aborted.saw_batch = True
            return True
        self._committed.add(header.producer_id)
        return False

    def on_marker(self, header: BatchHeader, control_type: int | None) -> bool:
        """A control batch was read (``control_type`` None: it has no record left); True
        when no batch of its transaction was seen, so the marker may go."""
        self._reach(header.last_offset)
        if control_type is None:
            return True
        pid = header.producer_id
        if control_type == CONTROL_ABORT:
            aborted = self._aborted.pop(pid, None)
            if aborted is not None and aborted.saw_batch:
                if self.index is not None:
                    self.index.append(aborted.txn)
                return False
            return True
        if control_type == CONTROL_COMMIT:
            if pid in self._committed:
                self._committed.discard(pid)
                return False
            return True
        return False


def control_type(batch) -> int | None:
    records = decode_batch(batch)
    if not records:
        return None
    return parse_control_record(records[0].key)[1]


def map_batch(header: BatchHeader, batch, start: int, omap: OffsetMap, txns: TxnTracker) -> bool:
    """Add one batch of the dirty range to the map; False when the map is full (the
    batch was not taken, the round's range ends before it)."""
    if header.is_control:
        txns.on_marker(header, control_type(batch))
    elif not txns.on_batch(header) and header.record_count:
        offsets = omap.offsets
        if offsets and len(offsets) + header.record_count > omap.max_keys:
            return False
        for r in decode_batch(batch):
            if r.key is not None and r.offset >= start:
                offsets[r.key] = r.offset
    if header.last_offset >= start:
        omap.update_latest(header.last_offset)
    return True


@dataclass
class CleanStats:
    batches_read: int = 0
    records_read: int = 0
    records_kept: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    tombstones_removed: int = 0
    aborted_batches_removed: int = 0
    markers_removed: int = 0
    empty_batches_kept: int = 0


class BatchFilter:
    """Decides, batch by batch, what a cleaning round writes (Kafka's logCleanerFilter)."""

    def __init__(self, omap: OffsetMap, txns: TxnTracker, *, now_ms: int, delete_retention_ms: int,
                 last_of_producers: Mapping[int, tuple[int, int]], upper_bound: int,
                 stats: CleanStats) -> None:
        self.omap = omap
        self.txns = txns
        self.now = now_ms
        self.delete_retention_ms = delete_retention_ms
        # producer id -> (last data offset or -1, epoch): Kafka's lastRecordsOfActiveProducers
        self.last_of_producers = last_of_producers
        self.upper_bound = upper_bound
        self.stats = stats

    def _is_last_of_producer(self, h: BatchHeader) -> bool:
        last = self.last_of_producers.get(h.producer_id)
        if last is None:
            return False
        last_data_offset, epoch = last
        if last_data_offset >= 0:
            return h.last_offset == last_data_offset
        return h.is_control and h.producer_epoch == epoch

    def apply(self, h: BatchHeader, batch) -> bytes | memoryview | None:
        """What to write for this batch: the batch itself, a rebuilt or empty one, or None."""
        stats = self.stats
        stats.batches_read += 1
        stats.bytes_read += h.size
        stats.records_read += h.record_count
        horizon = h.delete_horizon_ms
        records: list[Record] | None = None
        if h.is_control:
            records = decode_batch(batch)
            kind = parse_control_record(records[0].key)[1] if records else None
            can_discard = self.txns.on_marker(h, kind)
            drop_records = can_discard and horizon is not None and horizon <= self.now
        else:
            can_discard = drop_records = self.txns.on_batch(h)
        marker_of_empty_txn = can_discard and h.is_control
        if h.has_producer_id and self._is_last_of_producer(h):
            retain_empty = True
        elif h.next_offset == self.upper_bound:
            retain_empty = True
        elif drop_records:
            self._count_dropped(h)
            return None
        else:
            retain_empty = False

        if drop_records or h.record_count == 0:
            kept: list[Record] = []
            whole = h.record_count == 0
        elif h.is_control:
            kept = records or []
            whole = True
        else:
            kept, whole = self._keep(h, batch)
        if kept:
            tombstones = any(r.value is None for r in kept)
            new_horizon = (tombstones or marker_of_empty_txn) and horizon is None
            stats.records_kept += len(kept)
            if whole and not new_horizon:
                out = batch
            else:
                if new_horizon:
                    horizon = min(self.now + self.delete_retention_ms, _LONG_MAX)
                out = rebuild_batch(h, kept, horizon)
        elif retain_empty:
            if drop_records:
                self._count_dropped(h)
            stats.empty_batches_kept += 1
            out = empty_batch(h)
        else:
            return None
        stats.bytes_written += len(out)
        return out

    def _count_dropped(self, h: BatchHeader) -> None:
        if h.is_control:
            self.stats.markers_removed += 1
        else:
            self.stats.aborted_batches_removed += 1

    def _keep(self, h: BatchHeader, batch) -> tuple[list[Record], bool]:
        """The records of a data batch that stay, and whether that is all of them."""
        omap = self.omap
        latest = omap.latest_offset
        offsets = omap.offsets
        horizon = h.delete_horizon_ms
        deletes_due = horizon is not None and self.now >= horizon
        records = decode_batch(batch)
        kept = []
        for r in records:
            if r.offset > latest:
                kept.append(r)
            elif r.key is None:
                continue  # Kafka's cleaner drops keyless records (stats.invalidMessage)
            elif r.offset >= offsets.get(r.key, -1):
                if r.value is not None or not deletes_due:
                    kept.append(r)
                else:
                    self.stats.tombstones_removed += 1
        return kept, len(kept) == len(records)
