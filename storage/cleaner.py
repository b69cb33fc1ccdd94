"""The log cleaner: compaction of the logs whose ``cleanup.policy`` includes ``compact``.

Theory of operation (Kafka's LogCleaner, LogCleanerManager and Cleaner):

- **Which log.** Each compacted log has a first dirty offset: where the last cleaning
  ended (Kafka's own ``cleaner-offset-checkpoint`` file in the data dir), or the log
  start. Its cleanable range ends at the first uncleanable offset: the base of the active
  segment, of the segment holding the last stable offset (nothing at or past an open
  transaction is cleaned), or of the first segment newer than ``min.compaction.lag.ms``.
  A round takes the log whose dirty bytes are the largest share of its cleanable bytes,
  if above ``min.cleanable.dirty.ratio`` (or if its oldest dirty record is older than
  ``max.compaction.lag.ms``). As in Kafka 4 (LogCleanerManager.grabFilthiestCompactedLog),
  a log with no new dirty data is not cleaned again: tombstones and markers whose delete
  horizon has passed go at the next round new writes bring about.
- **A round** (``plan``, then ``run``, then ``install``). ``plan`` runs on the broker's
  event loop and copies what the round needs: the sealed segments, the producers' last
  offsets and epochs, the aborted transactions. ``run`` does the work in the cleaner's
  thread, off the event loop: it builds the offset map of the dirty range and rewrites
  the log from its start to the end of that range, in groups of segments of at most
  ``segment.bytes``, into new segment files in a staging directory (storage/compaction.py
  decides what each batch becomes; segment_swap.py how files are replaced). ``install``,
  back on the event loop, swaps the new segments in if the old ones are all still there
  (retention or DeleteRecords may have removed some meanwhile: the round is then thrown
  away), and moves the checkpoint.
- Offsets never change: a consumer reading a compacted log sees gaps, as with Kafka.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import segment_swap, start_offsets
from .config import INT32_MAX, LONG_MAX
from .lazylog import get_logger
from .log import PartitionLog
from .segment import Segment
from .segment_files import LOG_SUFFIX, SegmentFiles, file_stem, walk_segment
from .txn_index import TXN_INDEX_SUFFIX, AbortedTxn, TxnIndex

if TYPE_CHECKING:  # the filter decodes records: imported by the first round, not at start-up
    from .compaction import BatchFilter, CleanStats, OffsetMap, TxnTracker

log = get_logger("minibroker_storage.cleaner")

CHECKPOINT_FILE = start_offsets.CLEANER_FILE

Key = tuple[str, int]


class CorruptSegment(Exception):
    """A segment did not read whole: the partition is left alone until restart."""


class CleaningAborted(Exception):
    """The broker is stopping (or the log went): the round's staged files are dropped."""


@dataclass
class Task:
    """One round for one log, as ``plan`` captured it on the event loop."""
    key: Key
    log: PartitionLog
    first_dirty: int
    first_uncleanable: int
    dirty_ratio: float
    reason: str  # "dirty_ratio" or "max_compaction_lag"
    segments: list[Segment]  # sealed, from the log start, all below first_uncleanable
    producers: dict[int, tuple[int, int]]  # id -> (last data offset or -1, epoch)
    aborted: list[AbortedTxn]
    now_ms: int


@dataclass
class Result:
    end_offset: int  # the next round's first dirty offset
    stats: CleanStats
    groups: list[list[Segment]] = field(default_factory=list)
    seconds: float = 0.0


class LogCleaner:
    """Kafka's LogCleaner for one data dir, with one cleaning thread (log.cleaner.threads=1).
    ``plan`` and ``install`` belong to the owner's thread, ``run`` to the cleaner's."""

    def __init__(self, data_dir: str, logs: Callable[[], Mapping[Key, PartitionLog]],
                 clock: Callable[[], int], max_map_keys: int | None = None) -> None:
        self.data_dir = data_dir
        self._logs = logs
        self._clock = clock
        self._max_map_keys = max_map_keys
        try:
            self.checkpoints = start_offsets.load(data_dir, CHECKPOINT_FILE)
        except start_offsets.StartOffsetsError as e:
            log.warning("cleaner.checkpoint_unreadable", reason=str(e))
            self.checkpoints = {}
        self._uncleanable: set[Key] = set()  # a round failed: left alone until restart
        self.stopping = threading.Event()

    # ----------------------------------------------------------------- plan

    def plan(self, now_ms: int | None = None, only: Key | None = None) -> Task | None:
        """The filthiest log worth a round now, or None."""
        now = self._clock() if now_ms is None else now_ms
        best: Task | None = None
        for key, plog in self._logs().items():
            if (only is not None and key != only) or key in self._uncleanable:
                continue
            if plog.closed or not plog.config.compact or any(s.bad for s in plog.segments):
                continue
            task = self._task(key, plog, now)
            if task is None:
                continue
            if best is None or task.dirty_ratio > best.dirty_ratio:
                best = task
        return best

    def _task(self, key: Key, plog: PartitionLog, now: int) -> Task | None:
        config = plog.config
        segments = plog.segments
        start = plog.log_start_offset
        first_dirty = self.checkpoints.get(key, start)
        if not start <= first_dirty <= plog.log_end_offset:
            first_dirty = start  # the log was truncated or restarted below the checkpoint
        bound = min(plog.last_stable_offset, plog.active_segment.base_offset)
        lag = config.min_compaction_lag_ms
        cleanable: list[Segment] = []
        for seg, nxt in zip(segments, segments[1:]):
            if nxt.base_offset > bound:
                break
            if lag > 0 and seg.next_offset > first_dirty and seg.largest_timestamp() > now - lag:
                break
            cleanable.append(seg)
        if not cleanable:
            return None
        first_uncleanable = segments[len(cleanable)].base_offset
        clean_bytes = sum(s.size for s in cleanable if s.next_offset <= first_dirty)
        dirty = [s for s in cleanable if s.next_offset > first_dirty]
        dirty_bytes = sum(s.size for s in dirty)
        total = clean_bytes + dirty_bytes
        ratio = dirty_bytes / total if total else 0.0
        if dirty_bytes and ratio > config.min_cleanable_dirty_ratio:
            reason = "dirty_ratio"
        elif dirty_bytes and _oldest_ms(dirty) < now - config.max_compaction_lag_ms:
            reason = "max_compaction_lag"
        else:
            return None
        producers = {pid: (e.last_data_offset, e.epoch) for pid, e in plog.producer_state.items()}
        aborted = [t for s in segments for t in s.txn_index.entries if t.first_offset < first_uncleanable]
        return Task(key, plog, first_dirty, first_uncleanable, ratio, reason, cleanable,
                    producers, aborted, now)

    # ------------------------------------------------------------------ run

    def run(self, task: Task) -> Result:
        """The round's work, in the cleaner's thread: map the dirty range, write the
        cleaned groups into the partition's staging directory."""
        from .compaction import BatchFilter, CleanStats, OffsetMap, TxnTracker

        started = time.perf_counter()
        omap = OffsetMap(self._max_map_keys) if self._max_map_keys else OffsetMap()
        # Kafka's buildOffsetMap collects the aborted transactions of [first dirty, end) only:
        # one whose marker lies below is never closed by the map's walk, which starts there
        txns = TxnTracker(t for t in task.aborted if t.last_offset >= task.first_dirty)
        end = self._build_map(task, omap, txns)
        result = Result(end, CleanStats())
        config = task.log.config
        filt = BatchFilter(omap, TxnTracker(task.aborted), now_ms=task.now_ms,
                           delete_retention_ms=config.delete_retention_ms,
                           last_of_producers=task.producers, upper_bound=task.first_uncleanable,
                           stats=result.stats)
        staging = segment_swap.staging_dir(task.log.path)
        result.groups = _groups([s for s in task.segments if s.base_offset < end], config.segment_bytes)
        for i, group in enumerate(result.groups):
            nxt = (result.groups[i + 1][0].base_offset if i + 1 < len(result.groups)
                   else task.first_uncleanable)
            self._write_group(staging, group, filt, nxt, task)
        segment_swap.sync_staged(task.log.path)
        result.seconds = time.perf_counter() - started
        return result

    def _build_map(self, task: Task, omap: OffsetMap, txns: TxnTracker) -> int:
        from .compaction import map_batch

        start = task.first_dirty
        omap.update_latest(start - 1)
        segments = task.segments
        for i, seg in enumerate(segments):
            if seg.next_offset <= start:
                continue
            nxt = segments[i + 1].base_offset if i + 1 < len(segments) else task.first_uncleanable
            for h, batch in self._batches(seg):
                if not map_batch(h, batch, start, omap, txns):
                    log.info("cleaner.map_full", log=task.log.path, keys=len(omap),
                             ends_at=omap.latest_offset + 1)
                    return omap.latest_offset + 1
            omap.update_latest(nxt - 1)
        return max(omap.latest_offset + 1, start)

    def _write_group(self, staging: str, group: list[Segment], filt: BatchFilter, nxt: int,
                     task: Task) -> None:
        base = group[0].base_offset
        stem = file_stem(staging, base)
        filt.txns.index = []
        with open(stem + LOG_SUFFIX, "wb", buffering=1 << 20) as out:
            for seg in group:
                for h, batch in self._batches(seg):
                    data = filt.apply(h, batch)
                    if data is not None:
                        out.write(data)
        index = TxnIndex(stem + TXN_INDEX_SUFFIX, base)
        index.create()
        for entry in filt.txns.index:
            index.append(entry)
        seg = Segment.load(staging, base, task.log.config, task.now_ms, verify=True, end_offset=nxt)
        seg.seal()
        seg.release()
        if seg.bad:
            raise CorruptSegment(f"{stem + LOG_SUFFIX}: the cleaned segment does not verify")
        # Kafka keeps the last cleaned segment's modification time (retention of an emptied one)
        mtime = os.stat(group[-1].path).st_mtime_ns
        os.utime(stem + LOG_SUFFIX, ns=(mtime, mtime))

    def _batches(self, seg: Segment):
        """The sealed segment's batches, read with pread (never through the log's map), each
        CRC-checked; a segment that does not read whole to its end fails the round (Kafka's
        cleaner throws CorruptRecordException): a bad batch is never compacted away."""
        end = 0
        for h, batch in walk_segment(SegmentFiles(seg.base_offset, seg.path), check_crc=True,
                                     position=0):
            if self.stopping.is_set():
                raise CleaningAborted("the broker is stopping")
            end = h.end
            yield h, batch
        if end != seg.size:
            raise CorruptSegment(f"{seg.path}: batches read to byte {end} of {seg.size}")

    # -------------------------------------------------------------- install

    def install(self, task: Task, result: Result) -> bool:
        """Swap the cleaned segments in (on the owner's thread); False when the log changed
        under the round and it was thrown away."""
        plog = task.log
        old = [s for g in result.groups for s in g]
        # a scrub may have found a bad batch in them meanwhile: the round read it (and failed)
        # or read it before it went bad; either way the old segments stay
        if plog.closed or any(s.bad for s in old) or not plog.replace_segments(old, task.now_ms):
            segment_swap.discard(plog.path)
            log.info("cleaner.round_dropped", log=plog.path, reason="the log changed meanwhile")
            return False
        self.checkpoints[task.key] = result.end_offset
        self._save_checkpoints()
        stats = result.stats
        topic, partition = task.key
        log.info("cleaner.cleaned", topic=topic, partition=partition, reason=task.reason,
                 dirty_ratio=round(task.dirty_ratio, 3), first_dirty=task.first_dirty,
                 end_offset=result.end_offset, first_uncleanable=task.first_uncleanable,
                 segments_before=len(old), segments_after=len(result.groups),
                 bytes_read=stats.bytes_read, bytes_written=stats.bytes_written,
                 records_read=stats.records_read, records_kept=stats.records_kept,
                 tombstones_removed=stats.tombstones_removed,
                 aborted_batches_removed=stats.aborted_batches_removed,
                 markers_removed=stats.markers_removed, ms=round(result.seconds * 1000, 1))
        return True

    def failed(self, task: Task, error: BaseException) -> None:
        """A round raised: the log is left as it was and not cleaned again until restart
        (Kafka marks the partition uncleanable)."""
        segment_swap.discard(task.log.path)
        if isinstance(error, CleaningAborted) or task.log.closed:
            return
        self._uncleanable.add(task.key)
        log.error("cleaner.failed", log=task.log.path, error=repr(error),
                  consequence="partition not cleaned until restart")

    def clean(self, now_ms: int | None = None, only: Key | None = None,
              max_rounds: int = 100) -> list[Result]:
        """Rounds until no log needs one, in the caller's thread (tools, tests, and the
        control plane's clock jumps)."""
        done = []
        for _ in range(max_rounds):
            task = self.plan(now_ms, only)
            if task is None:
                break
            try:
                result = self.run(task)
            except Exception as e:
                self.failed(task, e)
                continue
            if self.install(task, result):
                done.append(result)
        return done

    def forget(self, key: Key) -> None:
        """The partition was deleted."""
        self._uncleanable.discard(key)
        if self.checkpoints.pop(key, None) is not None:
            self._save_checkpoints()

    def _save_checkpoints(self) -> None:
        start_offsets.save(self.data_dir, self.checkpoints, CHECKPOINT_FILE)


def _oldest_ms(segments: list[Segment]) -> int:
    """The earliest first-batch timestamp of the dirty segments (Kafka's maxCompactionDelay
    ignores segments without one)."""
    stamps = [s.first_batch_timestamp for s in segments if s.first_batch_timestamp > 0]
    return min(stamps) if stamps else LONG_MAX


def _groups(segments: list[Segment], max_bytes: int) -> list[list[Segment]]:
    """Consecutive segments whose sizes add up to at most ``segment.bytes`` and whose
    offsets fit one index (Kafka's groupSegmentsBySize)."""
    groups: list[list[Segment]] = []
    for seg in segments:
        if groups:
            group = groups[-1]
            size = sum(s.size for s in group)
            if size + seg.size <= max_bytes and seg.next_offset - 1 - group[0].base_offset <= INT32_MAX:
                group.append(seg)
                continue
        groups.append([seg])
    return groups
