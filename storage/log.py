"""One partition's log: ``<data>/<topic>-<partition>/``, a list of segments.

Offsets are assigned here and only here. A batch is appended as the bytes the
producer sent, with baseOffset rewritten in place; records are never decoded
on the append or fetch paths.
"""

from __future__ import annotations

import os
import shutil
import time
from bisect import bisect_right
from collections.abc import Callable, Mapping
from typing import NamedTuple

from minibroker_protocol.batch import CONTROL_BIT, HEADER_SIZE, MIN_BATCH_LENGTH, BatchHeader, read_header

from . import segment_swap
from .atomic_file import fsync_dir
from .config import INT32_MAX, FlushPolicy, LogConfig
from .errors import LogClosed, OffsetOutOfRange, ProducerStateError, RecordBatchTooLarge, StorageError
from .lazylog import get_logger
from .leader_epochs import LeaderEpochs
from .producer_state import (
    ORIGINS,
    AppendOrigin,
    CompletedTxn,
    ProducerStateEntry,
    ProducerStateManager,
    read_control_marker,
)
from .segment import Segment
from .segment_files import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX
from .sync_job import SyncJob
from .txn_index import TXN_INDEX_SUFFIX, AbortedTxn
from .verified_marks import VerifiedMarks
from .verify import BadBatch

__all__ = [
    "AppendInfo",
    "CLEAN_SHUTDOWN_FILE",
    "FlushPolicy",
    "LogConfig",
    "OffsetOutOfRange",
    "PartitionLog",
]

_log = get_logger(__name__)

# Kafka's name for the marker; here it lives in each partition directory.
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
_EMPTY = memoryview(b"")
_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class AppendInfo(NamedTuple):
    base_offset: int
    last_offset: int
    log_append_time_ms: int = -1
    start_position: int = 0  # byte position of the batch in its segment file; -1 for a duplicate
    # A retry of one of the producer's last 5 batches: nothing was written and
    # the offsets are the original batch's. Answer it as a success.
    duplicate: bool = False
    # The transaction an end-transaction marker closed (for .txnindex / LSO).
    completed_txn: CompletedTxn | None = None


_new_info = tuple.__new__


class PartitionLog:
    """Not thread-safe: the broker drives it from its one event loop."""

    def __init__(
        self,
        path: str,
        config: LogConfig,
        segments: list[Segment],
        clock: Callable[[], int],
    ) -> None:
        self.path = path
        self.config = config
        self._clock = clock
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._active = segments[-1]
        self._next_offset = self._active.next_offset
        self._start_offset = segments[0].base_offset
        self._closed = False
        self._unflushed: list[Segment] = []  # sealed since the last flush
        self._dir_dirty = False
        self._last_flush_ms = clock()
        self._name = os.path.basename(path)
        self._logger = _log.bind(log=self._name)
        self._producers = ProducerStateManager(path, self._name, config.producer_id_expiration_ms)
        self._marks = VerifiedMarks(path)
        self._epochs = LeaderEpochs(path)
        self._epoch = 0  # stamped on every batch appended: the partition's leader epoch
        self._apply_config(config)

    # ------------------------------------------------------------------ open

    @classmethod
    def open(
        cls,
        path: str,
        config: LogConfig | None = None,
        now_ms: int | None = None,
        clock: Callable[[], int] | None = None,
        start_offset: int | None = None,
    ) -> PartitionLog:
        """``start_offset``: where DeleteRecords last moved the log start (checkpointed)."""
        config = config or LogConfig()
        clock = clock or wall_clock_ms
        now = clock() if now_ms is None else now_ms
        started = time.perf_counter()
        os.makedirs(path, exist_ok=True)
        marker = os.path.join(path, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        # A cleaner round the broker died in: dropped if uncommitted, finished if committed.
        segment_swap.recover(path, lambda base: _delete_segment_files(path, base))
        bases = _segment_bases(path)
        marks = VerifiedMarks.load(path)
        segments: list[Segment] = []
        if not bases:
            segments.append(Segment.create(path, 0, config, now))
        verified_bytes = 0
        for i, base in enumerate(bases):
            last = i == len(bases) - 1
            seg_path = os.path.join(path, f"{base:020d}{LOG_SUFFIX}")
            # Whatever the shutdown was, a segment nobody vouched for since it
            # was last written (no mark, or its size or mtime changed) has its
            # checksums checked; only the last one can have a torn tail to cut.
            trusted = marks.is_verified(base, seg_path)
            seg = Segment.load(
                path,
                base,
                config,
                now,
                recover=last and not (clean and trusted),
                verify=not trusted,
                end_offset=-1 if last else bases[i + 1],
            )
            if not trusted:
                verified_bytes += seg.size
            if not last:
                seg.seal()
                if seg.bad:
                    marks.forget(base)
                else:
                    marks.mark(base, seg.path)
            segments.append(seg)
        if bases:
            # Appended to from now on: vouched for again only by a clean close.
            marks.forget(bases[-1])
            segments[-1].activate(config.segment_bytes)
        marks.keep_only(bases)
        marks.save()
        if clean:
            # Gone, durably, before the first append, so a kill -9 from now on
            # is noticed at the next open.
            os.unlink(marker)
            fsync_dir(path)
        self = cls(path, config, segments, clock)
        self._marks = marks
        if start_offset is not None and self._start_offset < start_offset <= self._next_offset:
            self._start_offset = start_offset
        self._load_epochs()
        self._load_producers_and_txn_indexes(now)
        self._logger.info(
            "log.opened",
            clean_shutdown=clean or not bases,
            segments=len(segments),
            verified_bytes=verified_bytes,
            bad_batches=sum(len(s.bad) for s in segments),
            log_start_offset=self._start_offset,
            log_end_offset=self._next_offset,
            ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return self

    def _load_epochs(self) -> None:
        self._epochs = LeaderEpochs.load(self.path, self._start_offset, self._next_offset)
        self._epoch = self._epochs.latest_epoch or 0

    # ---------------------------------------------------------- leader epochs

    @property
    def leader_epoch(self) -> int:
        return self._epoch

    def become_leader(self, epoch: int) -> None:
        """A new leader epoch begins at the log end (a leader change among virtual brokers)."""
        if epoch <= self._epoch:
            return
        self._epochs.assign(epoch, self._next_offset)
        self._epoch = epoch
        self._logger.info("log.leader_epoch", epoch=epoch, start_offset=self._next_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, as Kafka's leader answers it."""
        return self._epochs.end_offset_for(epoch, self._next_offset)

    def _load_producers_and_txn_indexes(self, now: int) -> None:
        """Producer state from its snapshot and the log after it; on the way,
        the .txnindex entries of the aborted transactions whose markers that
        replay visits are restored if missing (Kafka rebuilds the indexes of
        the segments it recovers the same way, LogSegment.recover).

        A .txnindex that is missing or corrupt is rebuilt from scratch: the
        replay then starts at a snapshot no later than its segment (or at the
        log start). An entry whose marker was cut off with a torn tail is
        already gone (``TxnIndex.load``). After a kill -9 every entry below
        the snapshot was written, the ones after it are restored here.
        """
        stale = [s for s in self._segments if s.txn_index.stale]
        reasons = sorted({s.txn_index.stale for s in stale if s.txn_index.stale is not None})
        for seg in stale:
            seg.txn_index.reset()
        restored = [0]

        def restore(txn: CompletedTxn) -> None:
            if not txn.is_aborted:
                return
            seg = self._segments[bisect_right(self._bases, txn.last_offset) - 1]
            index = seg.txn_index
            if txn.last_offset <= index.last_offset:
                return  # written before the crash
            index.append(self._producers.open_transactions.aborted(
                txn.producer_id, txn.first_offset, txn.last_offset, self._start_offset))
            restored[0] += 1

        replayed_from = self._producers.load(
            self._segments,
            self._start_offset,
            self._next_offset,
            now,
            max_snapshot_offset=stale[0].base_offset if stale else None,
            on_completed=restore,
        )
        if stale or restored[0]:
            self._logger.info(
                "txn_index.rebuilt",
                segments=[s.base_offset for s in stale][:20],
                reasons=reasons,
                entries_restored=restored[0],
                replayed_from=replayed_from,
            )

    def _apply_config(self, config: LogConfig) -> None:
        self.config = config
        self._producers.expiration_ms = config.producer_id_expiration_ms
        self._segment_bytes = config.segment_bytes
        self._segment_ms = config.segment_ms
        self._sync_each = config.flush.mode == "always"
        self._flush_interval = config.flush.interval_ms if config.flush.mode == "interval" else -1
        self._flush_inline = not config.flush.background

    def reconfigure(self, config: LogConfig) -> None:
        """Apply new topic configs (AlterConfigs) to the open log."""
        self._apply_config(config)
        active = self._active
        if active.capacity:
            # A smaller segment.bytes rolls the active segment early; a larger
            # one waits for the next segment, whose file is mapped at that size.
            active.capacity = min(active.capacity, max(config.segment_bytes, active.size))

    # ------------------------------------------------------------ properties

    @property
    def log_start_offset(self) -> int:
        return self._start_offset

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def high_watermark(self) -> int:
        # A single replica: everything appended is replicated.
        return self._next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segments(self) -> tuple[Segment, ...]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> Segment:
        return self._active

    @property
    def producer_state(self) -> Mapping[int, ProducerStateEntry]:
        """Read-only view of the producers, id → entry (DescribeProducers)."""
        return self._producers.producers

    @property
    def producer_state_manager(self) -> ProducerStateManager:
        return self._producers

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction, None if none is open."""
        return self._producers.first_unstable_offset()

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: below it every transaction is decided, so READ_COMMITTED
        fetches stop there. The first offset of the oldest open transaction
        (no lower than the log start, UnifiedLog.maybeIncrementFirstUnstableOffset),
        or the high watermark when that is lower or nothing is open."""
        return self._lso_below(self._next_offset)

    def _lso_below(self, high_watermark: int) -> int:
        return self._producers.open_transactions.last_stable(high_watermark, self._start_offset)

    def aborted_transactions(self, fetch_offset: int, upper_offset: int) -> list[tuple[int, int]]:
        """``(producer_id, first_offset)`` of every aborted transaction that
        overlaps ``[fetch_offset, upper_offset)``: the AbortedTransactions a
        READ_COMMITTED fetch returning that range must carry (oldest marker
        first). ``upper_offset`` is the end of the data returned, or the LSO.

        Kafka's LocalLog.collectAbortedTransactions: an entry lives with its
        marker, which is at or after ``fetch_offset`` for any overlapping
        transaction, so the search starts at the segment holding
        ``fetch_offset`` and goes on until an entry's LSO reaches
        ``upper_offset``.
        """
        out: list[tuple[int, int]] = []
        if upper_offset <= fetch_offset:
            return out
        segments = self._segments
        i = bisect_right(self._bases, fetch_offset) - 1
        if i < 0:
            i = 0
        for j in range(i, len(segments)):
            index = segments[j].txn_index
            if index.entries and index.collect(fetch_offset, upper_offset, out):
                break
        return out

    def aborted_txns(self) -> list[AbortedTxn]:
        """Every entry of every .txnindex, oldest first (tools, tests)."""
        return [e for s in self._segments for e in s.txn_index.entries]

    def bad_batches(self) -> list[tuple[int, BadBatch]]:
        """``(segment base offset, bad region)`` of every batch known to be bad."""
        return [(s.base_offset, b) for s in self._segments
                for b in sorted(s.bad.values(), key=lambda b: b.position)]

    def mark_bad(self, base_offset: int, found: list[BadBatch]) -> list[BadBatch]:
        """Record what a scrub found in the sealed segment ``base_offset``: reads
        refuse those batches from now on and the next open checks it again.
        Returns the regions not known before ([] if the segment is gone)."""
        i = bisect_right(self._bases, base_offset) - 1
        if self._closed or i < 0 or self._bases[i] != base_offset or self._segments[i] is self._active:
            return []
        new = self._segments[i].mark_bad(found)
        if new:
            self._marks.forget(base_offset)
            self._marks.save()
        return new

    def expire_producers(self, now_ms: int | None = None, expiration_ms: int | None = None) -> list[int]:
        """Forget producers without an open transaction whose last batch is
        ``expiration_ms`` (default producer.id.expiration.ms) old; their ids."""
        now = self._clock() if now_ms is None else now_ms
        return self._producers.expire(now, expiration_ms)

    # ---------------------------------------------------------------- append

    def append(
        self,
        batch: bytes | bytearray | memoryview,
        header: BatchHeader | None = None,
        now_ms: int | None = None,
        origin: AppendOrigin = "client",
        transaction_version: int = 0,
    ) -> AppendInfo:
        """Append one validated RecordBatch v2, assigning its offsets.

        ``header`` is the batch's parsed header when the caller already has it
        (protocol.batch.validate_produce_records); the CRC is not re-checked.
        ``origin`` is "client" for Produce requests and "coordinator" for
        batches the broker writes itself (markers, __consumer_offsets), which
        skip the sequence checks but not the epoch checks.

        Raises a ``ProducerStateError`` (with the Kafka error code) when the
        producer state refuses the batch; returns ``duplicate=True`` and the
        original offsets, writing nothing, for a retry of a recent batch.
        ``transaction_version`` is a marker's (WriteTxnMarkers v2, KIP-1228): from 2 its
        epoch must be above the producer's, as ProducerStateManager checks it.
        """
        if header is None:
            header = _parse(batch)
        size = len(batch)
        if self._closed:
            raise LogClosed(f"{self.path} is closed")
        base = self._next_offset

        # Checks on the header that may refuse the batch, before a byte is
        # written: producer state (epoch fencing, sequence numbers, duplicates
        # answered with their original offsets) and transaction state.
        marker = None
        producers = self._producers
        idempotent = header.producer_id >= 0
        if idempotent:
            if origin != "client" and origin not in ORIGINS:
                raise ValueError(f"unknown append origin {origin!r}")
            if header.attributes & CONTROL_BIT:
                marker = read_control_marker(batch, header)
            try:
                dup = producers.check(header, marker, origin, transaction_version)
            except ProducerStateError as exc:
                exc.log_start_offset = self._start_offset
                raise
            if dup is not None:
                self._logger.info(
                    "produce.duplicate_dropped",
                    producer_id=header.producer_id,
                    epoch=header.producer_epoch,
                    first_sequence=dup.first_seq,
                    last_sequence=dup.last_seq,
                    original_base_offset=dup.first_offset,
                    original_last_offset=dup.last_offset,
                )
                return AppendInfo(dup.first_offset, dup.last_offset, -1, -1, True)

        seg = self._active
        last = base + header.last_offset_delta
        if seg.size + size > seg.capacity or last - seg.base_offset > INT32_MAX:
            seg = self._roll_for(size, now_ms)
        elif seg.size:
            first = seg.first_batch_timestamp
            if first >= 0:
                waited = header.max_timestamp - first
            else:
                if now_ms is None:
                    now_ms = self._clock()
                waited = now_ms - seg.created_ms
            if waited > self._segment_ms:
                seg = self._roll("segment.ms", now_ms, waited_ms=waited)

        position = seg.append(batch, base, last, header.max_timestamp, self._epoch)
        self._next_offset = last + 1

        # Bookkeeping of what was just written: producer state update and, for
        # control batches, the .txnindex entry and the LSO (``completed``).
        completed = None
        if idempotent:
            completed = producers.update(header, base, marker)
            if completed is not None and completed.is_aborted:
                # Kafka's UnifiedLog.append: the entry goes to the segment the
                # marker went to, with the LSO once the transaction is over.
                seg.txn_index.append(producers.open_transactions.aborted(
                    completed.producer_id, completed.first_offset, last, self._start_offset))

        if self._sync_each:
            seg.sync()
        elif self._flush_interval >= 0 and self._flush_inline:
            if now_ms is None:
                now_ms = self._clock()
            due = self.flush_due_ms(now_ms)
            # Interval mode (checked above) on an open log (append refuses a closed one).
            assert due is not None
            if due <= now_ms:
                self.flush(now_ms)
        # every field given: NamedTuple's own __new__ (for the defaults) is a Python call
        return _new_info(AppendInfo, (base, last, -1, position, False, completed))

    def _roll_for(self, size: int, now_ms: int | None) -> Segment:
        if self._closed:
            raise LogClosed(f"{self.path} is closed")
        if size > self._segment_bytes:
            raise RecordBatchTooLarge(
                f"batch of {size} bytes exceeds the segment size of {self._segment_bytes} bytes"
            )
        reason = "segment.bytes" if self._active.size + size > self._active.capacity else "offset range"
        return self._roll(reason, now_ms)

    def roll(self, now_ms: int | None = None) -> Segment:
        """Start a new segment now (a no-op on an empty active segment)."""
        if self._closed:
            raise LogClosed(f"{self.path} is closed")
        if self._active.size == 0:
            return self._active
        return self._roll("requested", now_ms)

    def _roll(self, reason: str, now_ms: int | None, **details: int) -> Segment:
        old = self._active
        now = self._clock() if now_ms is None else now_ms
        durable = self._sync_each
        old.seal(fsync=durable)
        if not durable:
            self._unflushed.append(old)
        new = Segment.create(self.path, self._next_offset, self.config, now)
        self._segments.append(new)
        self._bases.append(new.base_offset)
        self._active = new
        # The producer state after every batch below the new segment, so a
        # restart replays at most the active segment (Kafka's LocalLog.roll).
        self._producers.take_snapshot(new.base_offset)
        if durable:
            fsync_dir(self.path)
        else:
            self._dir_dirty = True
        self._logger.info(
            "segment.rolled",
            reason=reason,
            old_base_offset=old.base_offset,
            old_size=old.size,
            new_base_offset=new.base_offset,
            **details,
        )
        return new

    # ------------------------------------------------------------------ read

    def read(
        self,
        offset: int,
        max_bytes: int,
        upper_bound: int | None = None,
        min_one: bool = True,
    ) -> memoryview:
        """Whole batches from the one holding ``offset``, from a single segment.

        At most ``max_bytes``, except that with ``min_one`` the first batch
        comes whole however large (KIP-74); none holding an offset at or
        past ``upper_bound`` (high watermark, or last stable offset for
        READ_COMMITTED). The view points into the segment's map: send it, do
        not keep it.
        """
        return self.read_to(offset, max_bytes, upper_bound, min_one)[0]

    def read_to(
        self,
        offset: int,
        max_bytes: int,
        upper_bound: int | None = None,
        min_one: bool = True,
    ) -> tuple[memoryview, int]:
        """``read`` and the offset just after the batches returned (``offset``
        when none are): the upper bound of the aborted transactions a
        READ_COMMITTED fetch answer must list (Kafka's LocalLog.read ->
        collectAbortedTransactions stops at the fetched data's end too)."""
        if offset == self._next_offset and offset >= self._start_offset:
            return _EMPTY, offset
        if offset < self._start_offset or offset > self._next_offset:
            raise OffsetOutOfRange(offset, self._start_offset, self._next_offset)
        segments = self._segments
        i = bisect_right(self._bases, offset) - 1
        while i < len(segments):
            seg = segments[i]
            pos = seg.find(offset)
            if pos >= 0:
                view, after = seg.slice_to(pos, max_bytes, upper_bound, min_one)
                return view, (after if len(view) else offset)
            i += 1
        return _EMPTY, offset

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record whose timestamp is >=
        ``timestamp`` (ListOffsets with a timestamp), None if there is none."""
        for seg in self._segments:
            hit = seg.find_timestamp(timestamp)
            if hit is None:
                continue
            batch = seg.view(*hit)
            header = read_header(batch)
            records = _decode(batch)
            if records is None:
                # protocol.records is missing: answer at batch granularity.
                return header.base_offset, header.max_timestamp
            for record in records:
                if record.timestamp >= timestamp and record.offset >= self._start_offset:
                    return record.offset, record.timestamp
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the record with the largest timestamp
        (ListOffsets MAX_TIMESTAMP, KIP-734); the earliest one on ties."""
        best = None
        for seg in self._segments:
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return None
        max_ts, offset = best.max_timestamp, best.offset_of_max_timestamp
        pos = best.find(offset)
        if pos < 0:
            return offset, max_ts
        header = read_header(best.view(pos, pos + HEADER_SIZE))
        records = _decode(best.view(pos, pos + header.size))
        for record in records or ():
            if record.timestamp == max_ts:
                return record.offset, max_ts
        return offset, max_ts

    # ------------------------------------------------------------- retention

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete whole old segments past retention.ms or retention.bytes,
        oldest first and never the active one; returns how many went."""
        if not self.config.delete:
            return 0  # a compact-only topic keeps its segments (Kafka: cleanup.policy=compact)
        now = self._clock() if now_ms is None else now_ms
        deleted = 0
        retention_ms = self.config.retention_ms
        if retention_ms >= 0:
            while len(self._segments) > 1:
                age = now - self._segments[0].largest_timestamp()
                if age <= retention_ms:
                    break
                self._delete_oldest("retention.ms", age_ms=age, retention_ms=retention_ms)
                deleted += 1
        retention_bytes = self.config.retention_bytes
        if retention_bytes >= 0:
            excess = self.size_bytes - retention_bytes
            while len(self._segments) > 1 and excess >= self._segments[0].size:
                excess -= self._segments[0].size
                self._delete_oldest(
                    "retention.bytes", log_size=self.size_bytes, retention_bytes=retention_bytes
                )
                deleted += 1
        if deleted:
            # Kafka 2.x ProducerStateManager.truncateHead: producers whose last
            # batch went with the deleted segments are forgotten.
            self._producers.truncate_head(self._start_offset)
            self._epochs.truncate_from_start(self._start_offset)
            self._dir_dirty = True
        return deleted

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: the log starts at ``offset`` from now on (never moves back; at most the
        high watermark, which the caller checks); whole segments below it are deleted. Returns
        the new log start offset."""
        if offset > self._next_offset:
            raise OffsetOutOfRange(offset, self._start_offset, self._next_offset)
        if offset <= self._start_offset:
            return self._start_offset
        self._start_offset = offset
        deleted = 0
        while len(self._segments) > 1 and self._segments[0].next_offset <= offset:
            self._delete_oldest("delete_records", requested_start_offset=offset)
            deleted += 1
        self._producers.truncate_head(self._start_offset)
        self._epochs.truncate_from_start(self._start_offset)
        if deleted:
            self._dir_dirty = True
        self._logger.info("log.start_offset_advanced", log_start_offset=offset,
                          segments_deleted=deleted, reason="delete_records")
        return offset

    def _delete_oldest(self, reason: str, **details: int) -> None:
        seg = self._segments.pop(0)
        self._bases.pop(0)
        if seg in self._unflushed:
            self._unflushed.remove(seg)
        # DeleteRecords may have put the start inside the segment that is first now
        self._start_offset = max(self._start_offset, self._segments[0].base_offset)
        seg.delete()
        self._logger.info(
            "segment.deleted",
            reason=reason,
            base_offset=seg.base_offset,
            next_offset=seg.next_offset,
            size=seg.size,
            log_start_offset=self._start_offset,
            **details,
        )

    # ------------------------------------------------------------- compaction

    def replace_segments(self, old: list[Segment], now_ms: int) -> bool:
        """Put the cleaned segments staged by the log cleaner (storage/cleaner.py) in place
        of ``old``, consecutive sealed segments of this log; False, changing nothing, when
        they are no longer all here (retention or DeleteRecords removed some meanwhile)."""
        if not old:
            return False
        try:
            i = self._segments.index(old[0])
        except ValueError:
            return False
        if self._segments[i:i + len(old)] != old or self._segments[-1] in old:
            return False
        segment_swap.commit(self.path, [s.base_offset for s in old])
        by_base = {s.base_offset: s for s in old}

        def delete_old(base: int) -> None:
            seg = by_base[base]
            if seg in self._unflushed:
                self._unflushed.remove(seg)
            self._marks.forget(base)
            seg.delete()

        try:
            new_bases = segment_swap.finish(self.path, delete_old)
        except OSError as e:
            # Committed but not finished (a disk error): the next open finishes it.
            self._logger.error("cleaner.swap_failed", error=str(e), consequence=(
                "reads of the cleaned range fail until a restart finishes the swap"))
            raise
        end = self._segments[i + len(old)].base_offset
        ends = new_bases[1:] + [end]
        new = [Segment.load(self.path, b, self.config, now_ms, end_offset=e) for b, e in zip(new_bases, ends)]
        for seg in new:
            seg.seal()
            self._marks.mark(seg.base_offset, seg.path)
        self._segments[i:i + len(old)] = new
        self._bases[i:i + len(old)] = new_bases
        self._marks.save()
        return True

    # ------------------------------------------------------------ durability

    def flush(self, now_ms: int | None = None) -> None:
        """Make everything appended so far durable: ``add_flush``, waited for here."""
        job = SyncJob()
        self.add_flush(job, now_ms)
        job.wait()

    def add_flush(self, job: SyncJob, now_ms: int | None = None) -> None:
        """``flush`` for an owner that waits elsewhere: the writes happen now, the
        syncs when ``job`` runs (see storage/sync_job.py). A failed job puts the
        sealed segments and the directory back to be flushed next time."""
        if self._closed:
            return
        sealed, self._unflushed = self._unflushed, []
        for seg in sealed:
            seg.add_sync(job)
        self._active.add_sync(job)
        dir_dirty, self._dir_dirty = self._dir_dirty, False
        if dir_dirty:
            job.open(self.path)

        def retry() -> None:
            self._unflushed[:0] = [seg for seg in sealed if seg in self._segments]
            self._dir_dirty = self._dir_dirty or dir_dirty

        job.on_failure(retry)
        self._last_flush_ms = self._clock() if now_ms is None else now_ms

    def flush_due_ms(self, now_ms: int) -> int | None:
        """When flush.ms next falls due (interval mode), else None; never later than
        ``now_ms`` + flush.ms, should the clock have gone back since the last flush."""
        if self._flush_interval < 0 or self._closed:
            return None
        return min(self._last_flush_ms, now_ms) + self._flush_interval

    def close(self) -> None:
        """Flush, trim the active segment, write indexes, mark the shutdown clean."""
        if self._closed:
            return
        self.flush()
        for seg in self._segments:
            seg.close()
        self._closed = True
        # Everything here was verified at open or written by this broker from
        # batches whose CRC was checked, and is now trimmed and synced: a clean
        # restart need not read it again. Known-bad segments stay unmarked.
        for seg in self._segments:
            if seg.bad:
                self._marks.forget(seg.base_offset)
            else:
                self._marks.mark(seg.base_offset, seg.path)
        self._marks.keep_only(self._bases)
        self._marks.save()
        # Every clean stop of a non-empty log records producer state, so the next open
        # replays nothing (without it a log with no producers, such as an internal
        # topic's, replays its whole active segment at every start).
        if len(self._producers) or self._producers.snapshot_offsets or self._next_offset > self._start_offset:
            self._producers.take_snapshot(self._next_offset)
        fd = os.open(os.path.join(self.path, CLEAN_SHUTDOWN_FILE), os.O_WRONLY | os.O_CREAT, 0o644)
        os.fsync(fd)
        os.close(fd)
        fsync_dir(self.path)
        self._logger.info("log.closed", log_end_offset=self._next_offset)

    def release(self) -> None:
        """Drop every file handle and map without writing anything (the log
        is about to be deleted); the log is unusable afterwards."""
        for seg in self._segments:
            seg.release()
        self._closed = True

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        self.release()
        shutil.rmtree(self.path, ignore_errors=True)
        self._logger.info("log.deleted")

    @property
    def closed(self) -> bool:
        return self._closed


def _parse(batch) -> BatchHeader:
    if len(batch) < HEADER_SIZE:
        raise StorageError(f"a batch of {len(batch)} bytes is shorter than its header")
    header = read_header(batch, 0)
    if header.magic != 2 or header.batch_length < MIN_BATCH_LENGTH or header.size != len(batch):
        raise StorageError(
            f"not one magic-2 batch: magic {header.magic}, length {header.batch_length}, "
            f"{len(batch)} bytes"
        )
    if header.last_offset_delta < 0:
        raise StorageError(f"negative last offset delta {header.last_offset_delta}")
    return header


def _decode(batch):
    try:
        from minibroker_protocol.records import decode_batch
    except ImportError:
        return None
    return decode_batch(batch)


def _segment_bases(path: str) -> list[int]:
    """Base offsets of the segments in ``path``, after removing leftovers of an
    interrupted run: temporary files and indexes whose ``.log`` is gone."""
    names = os.listdir(path)
    bases = set()
    for name in names:
        stem, dot, suffix = name.partition(".")
        if suffix == "log" and len(stem) == 20 and stem.isdigit():
            bases.add(int(stem))
    for name in names:
        stem, _, suffix = name.partition(".")
        leftover = name.endswith(".tmp") or (
            "." + suffix in _SEGMENT_SUFFIXES[1:] and stem.isdigit() and int(stem) not in bases
        )
        if leftover:
            os.unlink(os.path.join(path, name))
            _log.info("log.leftover_removed", path=os.path.join(path, name))
    return sorted(bases)


def _delete_segment_files(path: str, base: int) -> None:
    for suffix in _SEGMENT_SUFFIXES:  # the .log first: an index without its log is a leftover
        try:
            os.unlink(os.path.join(path, f"{base:020d}{suffix}"))
        except FileNotFoundError:
            pass
