"""One log segment: ``<base:020d>.log`` plus its ``.index``, ``.timeindex`` and ``.txnindex``.

The active segment's file is preallocated (sparse) to ``segment.bytes`` and
mapped read/write, so an append is one slice assignment into the map. Reads
hand out ``memoryview`` slices of the map without copying; such a slice keeps
the map exported, so a map is never resized and closing one that is still
exported just drops our reference (the last view frees it). Sealed segments
are trimmed to their data and mapped read-only, lazily, at their exact size.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
from collections.abc import Iterator

from minibroker_protocol.batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, iter_headers

from .config import LogConfig
from .errors import StorageError
from .index import IndexCorrupt, OffsetIndex, TimeIndex
from .lazylog import get_logger
from .segment_files import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    SegmentFiles,
    base_offset_of,
    file_stem,
    topic_partition,
    walk_segment,
)
from .sync_job import SyncJob
from .txn_index import TXN_INDEX_SUFFIX, TxnIndex
from .verify import BadBatch, CorruptBatch, GoodBatch, verify_batches

log = get_logger(__name__)

# Blocks are reserved ahead of the write position with fallocate: fewer, larger
# allocations made appends of 16 KiB batches 5-15% faster here (ext4, 2 shared
# cores, noisy) than writing into the sparse file; 1 KiB batches saw no difference.
# The reservation grows with the segment (as much again as is written, from 64 KiB up
# to 4 MiB), so an idle partition holds 64 KiB of disk, not 4 MiB; when even that does
# not fit, only the batch's own bytes are asked for.
_RESERVE_MIN = 64 << 10
_RESERVE_AHEAD = 4 << 20
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")


_WALK = struct.Struct(">qi11xi")  # baseOffset, batchLength, lastOffsetDelta
_WALK_TS = struct.Struct(">qi11xi8xq")  # ... and maxTimestamp
_EMPTY = memoryview(b"")


def scan(buf, start: int, end: int, check_crc: bool = False, expect_base: int | None = None,
         end_offset: int = -1):
    """Yield ``(position, base_offset, last_offset, max_timestamp, end)`` of the
    consecutive well-formed batches in ``buf[start:end]``.

    Stops at the first batch that is incomplete, zeroed, not magic 2, (with
    ``check_crc``) corrupt, or whose base offset breaks the offset sequence:
    a batch copied but not yet given its offset when the broker died still
    carries the producer's base offset.
    """
    for h in iter_headers(buf, start, end, check_crc, sequential=True, expect_base=expect_base,
                          end_offset=end_offset):
        yield h.position, h.base_offset, h.last_offset, h.max_timestamp, h.end


def iter_file_batches(path: str, check_crc: bool = False) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Read-only walk of a ``.log`` file for tools: ``(header, whole batch)``.

    Stops at the first incomplete or zeroed batch (preallocated space of a
    segment that was not closed cleanly); compare the last header's ``end``
    with the file size to see what was left. Read with ``pread``, not mapped:
    a broker running on the same directory trims an active segment when it
    rolls, and a mapped reader touching the cut pages would die of SIGBUS.
    """
    yield from walk_segment(SegmentFiles(base_offset_of(path) or 0, path), check_crc=check_crc, position=0)


class Segment:
    __slots__ = (
        "directory",
        "base_offset",
        "path",
        "index",
        "time_index",
        "txn_index",
        "size",
        "next_offset",
        "max_timestamp",
        "offset_of_max_timestamp",
        "first_batch_timestamp",
        "created_ms",
        "capacity",
        "_interval",
        "_since_index",
        "_fd",
        "_mm",
        "_view",
        "_reserved",
        "_synced",
        "_dirty",
        "bad",
    )

    def __init__(self, directory: str, base_offset: int, index_interval: int, now_ms: int) -> None:
        stem = file_stem(directory, base_offset)
        self.directory = directory
        self.base_offset = base_offset
        self.path = stem + LOG_SUFFIX
        self.index = OffsetIndex(stem + INDEX_SUFFIX, base_offset)
        self.time_index = TimeIndex(stem + TIME_INDEX_SUFFIX, base_offset)
        # Aborted transactions whose marker is here; the partition log fills
        # it (and rebuilds it when ``txn_index.stale`` after loading).
        self.txn_index = TxnIndex(stem + TXN_INDEX_SUFFIX, base_offset)
        self.size = 0
        self.next_offset = base_offset
        # Kafka's maxTimestampSoFar and the (last) offset of the batch holding it.
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        # segment.ms counts from the first batch's timestamp, as Kafka's
        # rollingBasedTimestamp does, or from creation when it has none.
        self.first_batch_timestamp = -1
        self.created_ms = now_ms
        self.capacity = 0  # bytes appendable; 0 once sealed
        self._interval = index_interval
        self._since_index = 0
        self._fd = -1
        self._mm: mmap.mmap | None = None
        self._view: memoryview | None = None
        self._reserved = 0
        self._synced = 0
        self._dirty = False  # written since the last fsync
        # Known-bad regions by file position (only ever in sealed segments:
        # the active one's bad tail is cut at open). Reads refuse them.
        self.bad: dict[int, BadBatch] = {}

    def __repr__(self) -> str:
        return f"Segment({self.path!r}, offsets {self.base_offset}..{self.next_offset}, {self.size} bytes)"

    # ------------------------------------------------------------------ open

    @classmethod
    def create(cls, directory: str, base_offset: int, config: LogConfig, now_ms: int) -> Segment:
        seg = cls(directory, base_offset, config.index_interval_bytes, now_ms)
        # O_EXCL: a new segment must never adopt a file that holds data.
        fd = os.open(seg.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        seg.index.rewrite()
        seg.time_index.rewrite()
        seg.txn_index.create()
        seg._activate(fd, config.segment_bytes)
        return seg

    @classmethod
    def load(
        cls,
        directory: str,
        base_offset: int,
        config: LogConfig,
        now_ms: int,
        *,
        recover: bool = False,
        check_crc: bool = False,
        verify: bool = False,
        end_offset: int = -1,
    ) -> Segment:
        """Open an existing segment.

        With ``recover`` (the last segment of an unclean or unverified log)
        every batch is checked (structure, offsets, CRC) and the file cut at
        the first bad one, as Kafka's LogSegment.recover does, then the
        indexes are rebuilt. With ``verify`` (a sealed segment without a valid
        "verified" mark) every batch is checked too, but bad ones are kept and
        recorded in ``bad``: cutting a sealed segment would leave a hole in the
        offsets before the next one. ``end_offset`` is the next segment's
        base. Otherwise the indexes are trusted if they are consistent and
        only the batches after the last index entry are walked.
        """
        seg = cls(directory, base_offset, config.index_interval_bytes, now_ms)
        seg.size = os.path.getsize(seg.path)
        if recover:
            seg._verify(cut_tail=True, end_offset=-1,
                        reason="unclean shutdown" if not verify else "not verified")
        elif verify:
            seg._verify(cut_tail=False, end_offset=end_offset, reason="not verified")
        else:
            try:
                seg._load_indexes(check_crc, end_offset)
            except IndexCorrupt as exc:
                # Checked batch by batch; a sealed segment is never cut on a guess.
                seg._verify(cut_tail=end_offset < 0, end_offset=end_offset, reason=str(exc))
        # Entries for markers in a torn tail that recovery cut off go too.
        seg.txn_index = TxnIndex.load(seg.txn_index.path, base_offset, seg.next_offset)
        return seg

    def activate(self, capacity: int) -> None:
        """Make a loaded segment the one appended to."""
        self._activate(os.open(self.path, os.O_RDWR), capacity)

    def _activate(self, fd: int, capacity: int) -> None:
        capacity = max(capacity, self.size)
        self._release_map()
        os.ftruncate(fd, capacity)
        self._fd = fd
        self._mm = mmap.mmap(fd, capacity)
        self._view = memoryview(self._mm)
        self.capacity = capacity
        self._reserved = self.size
        self._synced = self.size

    def _load_indexes(self, check_crc: bool, end_offset: int = -1) -> None:
        may_cut = end_offset < 0
        index = OffsetIndex.load(self.index.path, self.base_offset, self.size)
        if index is None:
            raise IndexCorrupt(f"{self.index.path} is missing")
        start = 0
        last_entry = index.last()
        if last_entry is not None:
            offset, start = last_entry
            if start + HEADER_SIZE > self.size:
                raise IndexCorrupt(f"{index.path}: last entry points past the log")
            base, _, delta = _WALK.unpack_from(self._buffer(), start)
            if base + delta != offset:
                raise IndexCorrupt(
                    f"{index.path}: last entry says offset {offset} at {start}, "
                    f"the log has {base}..{base + delta} there"
                )
        expect = self.base_offset if start == 0 else None
        tail = (list(scan(self._buffer(), start, self.size, check_crc, expect, end_offset))
                if self.size else [])
        if start and not tail:
            raise IndexCorrupt(f"{index.path}: last entry points at an invalid batch")
        self.next_offset = tail[-1][2] + 1 if tail else self.base_offset
        time_index = TimeIndex.load(self.time_index.path, self.base_offset, self.next_offset)
        if time_index is None:
            raise IndexCorrupt(f"{self.time_index.path} is missing")
        self.index, self.time_index = index, time_index
        last_time = time_index.last()
        if last_time is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last_time
        for _, _, last, max_ts, _ in tail:
            if max_ts > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = max_ts, last
        self._since_index = (tail[-1][4] - start) if tail else 0
        self._read_first_timestamp()
        valid_end = tail[-1][4] if tail else start
        if valid_end != self.size:
            if not may_cut:
                raise IndexCorrupt(f"{self.path}: the batches end at {valid_end}, the file at {self.size}")
            self._truncate(valid_end, self.size)

    def _verify(self, cut_tail: bool, end_offset: int, reason: str) -> None:
        """Check every batch and rebuild the indexes from the sound ones."""
        try:
            old = OffsetIndex.load(self.index.path, self.base_offset, self.size)
        except IndexCorrupt:
            old = None
        resync = [pos for _, pos in old.entries()] if old is not None else []
        self.index = OffsetIndex(self.index.path, self.base_offset)
        self.time_index = TimeIndex(self.time_index.path, self.base_offset)
        self.max_timestamp = self.offset_of_max_timestamp = -1
        self._since_index = 0
        self.bad = {}
        self.next_offset = self.base_offset
        file_size = self.size
        valid_end = 0
        cut: BadBatch | None = None
        if file_size:
            view = self._buffer()
            for item in verify_batches(
                lambda p, n: view[p : p + n], file_size, self.base_offset, resync=resync,
                end_offset=end_offset,
            ):
                if isinstance(item, GoodBatch):
                    self._note(item.position, item.last_offset, item.max_timestamp, item.end - item.position)
                    self.next_offset = item.last_offset + 1
                    valid_end = item.end
                    continue
                if cut_tail or (item.tail and item.first_offset == end_offset):
                    # The last segment's torn tail, or bytes after a sealed
                    # segment's last offset (a roll that died before its trim):
                    # no offset is lost by cutting them.
                    cut = item
                    break
                self.bad[item.position] = item
                if item.next_offset >= 0:
                    self.next_offset = max(self.next_offset, item.next_offset)
                valid_end = item.end
                self._log_bad(item, "open")
        self.size = valid_end if cut is not None else file_size
        self._read_first_timestamp()
        if cut is not None:
            self._truncate(valid_end, file_size, reason=cut.reason, zeroed=cut.zeroed and cut.tail)
        self.index.rewrite()
        self.time_index.rewrite()
        log.info(
            "segment.verified",
            segment=self.path,
            reason=reason,
            bytes=file_size,
            bad_batches=len(self.bad),
            next_offset=self.next_offset,
        )

    def mark_bad(self, found: list[BadBatch]) -> list[BadBatch]:
        """Record bad regions a scrub found; returns the ones not known before."""
        new = [b for b in found if self.bad.get(b.position) != b]
        for b in new:
            self.bad[b.position] = b
        return new

    def good_spans(self, start: int = 0) -> list[tuple[int, int]]:
        """Byte ranges ``[a, b)`` from ``start`` to the end that hold no known-bad
        region: what a walk over the batches (producer-state replay) may read."""
        spans, pos = [], start
        for b in sorted(self.bad.values(), key=lambda b: b.position):
            if b.end <= pos:
                continue
            if b.position > pos:
                spans.append((pos, b.position))
            pos = b.end
        if pos < self.size:
            spans.append((pos, self.size))
        return spans

    def _bad_region(self, pos: int) -> BadBatch | None:
        for b in self.bad.values():
            if b.position <= pos < b.end:
                return b
        return None

    def _log_bad(self, bad: BadBatch, found_by: str) -> None:
        topic, partition = topic_partition(self.directory)
        log.error(
            "segment.corrupt_batch",
            topic=topic,
            partition=partition,
            segment=self.path,
            position=bad.position,
            bytes=bad.end - bad.position,
            first_offset=bad.first_offset,
            next_offset=bad.next_offset,
            reason=bad.reason,
            found_by=found_by,
        )

    def _read_first_timestamp(self) -> None:
        if self.size >= HEADER_SIZE:
            self.first_batch_timestamp = _WALK_TS.unpack_from(self._buffer(), 0)[3]

    def _truncate(self, valid_end: int, file_size: int, reason: str = "", zeroed: bool | None = None) -> None:
        dropped = file_size - valid_end
        self._release_map()
        if zeroed is None:
            self.size = file_size
            probe = bytes(self._buffer()[valid_end : valid_end + min(dropped, 1 << 20)])
            # A tail of zeros is preallocated space the last run never trimmed;
            # anything else is a torn or corrupt batch, and data is being dropped.
            zeroed = probe.count(0) == len(probe)
            self._release_map()
        os.truncate(self.path, valid_end)
        self.size = valid_end
        topic, partition = topic_partition(self.directory)
        (log.info if zeroed else log.warning)(
            "segment.truncated",
            topic=topic,
            partition=partition,
            segment=self.path,
            position=valid_end,
            bytes_removed=dropped,
            reason="preallocated space never written" if zeroed else (reason or "invalid batch"),
            zeroed_tail=zeroed,
            next_offset=self.next_offset,
        )

    # ---------------------------------------------------------------- append

    def append(self, batch, base_offset: int, last_offset: int, max_timestamp: int,
               leader_epoch: int = 0) -> int:
        """Copy one batch in and give it ``base_offset`` and the partition's ``leader_epoch``
        (as Kafka's leader stamps partitionLeaderEpoch; outside the CRC); returns its position.

        The caller has checked that it fits (``size + len(batch) <= capacity``).
        """
        pos = self.size
        end = pos + len(batch)
        if end > self._reserved:
            self._reserve(end)
        # One pwritev rather than a store through the map: a store faults in
        # each fresh page of the shared map (and zero-fills it) before copying,
        # which made this copy the broker's largest cost at ~1 GB/s; pwritev
        # copies into the page cache at ~4 GB/s here. The map sees the same
        # pages, so reads are unchanged. The new base offset goes in as the
        # first 8 bytes and the leader epoch as bytes 12-15, so the batch is never on disk
        # with the producer's.
        view = memoryview(batch)
        try:
            written = os.pwritev(self._fd, (_I64.pack(base_offset), view[8:12], _I32.pack(leader_epoch),
                                            view[16:]), pos)
        except OSError as exc:
            raise StorageError(f"{self.path}: append failed: {exc}") from exc
        if written != end - pos:
            # Only a full disk or a signal cuts a regular-file write short; the
            # partial batch is past ``size`` and is overwritten by the next one.
            raise StorageError(f"{self.path}: short write ({written} of {end - pos} bytes)")
        self._note(pos, last_offset, max_timestamp, written)
        self.next_offset = last_offset + 1
        self._dirty = True
        return pos

    def _note(self, pos: int, last_offset: int, max_timestamp: int, size: int) -> None:
        # Kafka's LogSegment.append: the index entry is keyed by the batch's
        # last offset and points at its start; the first batch is never indexed.
        if pos == 0:
            self.first_batch_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self._since_index > self._interval:
            self.index.append(last_offset, pos)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._since_index = 0
        self._since_index += size
        self.size = pos + size

    def _reserve(self, end: int) -> None:
        ahead = min(_RESERVE_AHEAD, max(_RESERVE_MIN, self._reserved))
        want = min(self.capacity, max(end, self._reserved + ahead))
        try:
            os.posix_fallocate(self._fd, self._reserved, want - self._reserved)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                # This filesystem cannot preallocate; write into the sparse file.
                want = self.capacity
            elif want > end:
                # Reserving ahead only saves allocations; with too little room
                # for that, the batch still fits in what it needs itself.
                try:
                    os.posix_fallocate(self._fd, self._reserved, end - self._reserved)
                except OSError as exc2:
                    raise StorageError(f"{self.path}: no space left to append: {exc2}") from exc2
                want = end
            else:
                raise StorageError(f"{self.path}: no space left to append: {exc}") from exc
        self._reserved = want

    def sync(self) -> None:
        """Write what was appended since the last sync to disk (data only)."""
        if self._fd >= 0 and self.capacity and self._synced < self.size:
            # Appends go through pwritev, not the map, so msync would have
            # nothing of ours to write: fdatasync writes the dirty pages of
            # the file (and the allocation of its blocks, not the mtime).
            os.fdatasync(self._fd)
            self._synced = self.size

    def add_sync(self, job: SyncJob) -> None:
        """Put into ``job`` what makes the segment durable: the appended data of the active
        one (what ``sync`` waits for), or a sealed one's file and indexes; the bookkeeping
        follows when the job finishes."""
        if self.capacity:
            if self._fd >= 0 and self._synced < self.size:
                mark = self.size
                job.add(os.dup(self._fd), data_only=True)
                job.on_done(lambda: self._synced_to(mark))
            return
        # Sealed: nothing is appended any more, so "clean" stays true once synced. Pages
        # written through a map that is gone are still in the page cache; fsync on any
        # descriptor of the file writes them.
        if self._dirty and job.open(self.path):
            job.on_done(self._clean)
        self.index.add_sync(job)
        self.time_index.add_sync(job)
        self.txn_index.add_sync(job)

    def _synced_to(self, mark: int) -> None:
        self._synced = max(self._synced, mark)

    def _clean(self) -> None:
        self._dirty = False

    def seal(self, fsync: bool = False) -> None:
        """No more appends: final time index entry, file trimmed, indexes written."""
        # Kafka's onBecomeInactiveSegment: the time index ends with the
        # segment's largest timestamp, so it can be read back on load.
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        if self.capacity:
            if fsync:
                self.sync()
            # Views handed out only cover written bytes, so trimming under them is safe.
            os.ftruncate(self._fd, self.size)
            if fsync:
                os.fsync(self._fd)
                self._dirty = False
            os.close(self._fd)
            self._fd = -1
            self.capacity = 0
            self._release_map()
        if fsync:
            job = SyncJob()
            self.add_sync(job)
            job.wait()
        else:
            self.index.persist()
            self.time_index.persist()

    def close(self) -> None:
        self.seal(fsync=True)
        self._release_map()

    def release(self) -> None:
        """Drop the file handle and the map without writing anything."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.capacity = 0
        self._release_map()

    def delete(self) -> None:
        self.release()
        # The .log goes first: an index without its log is cleaned up on open.
        for path in (self.path, self.index.path, self.time_index.path, self.txn_index.path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self.index.delete()
        self.time_index.delete()
        self.txn_index.delete()

    # ------------------------------------------------------------------ read

    def _buffer(self) -> memoryview:
        if self._view is None:
            if self.size == 0:
                return _EMPTY
            with open(self.path, "rb") as f:
                self._mm = mmap.mmap(f.fileno(), self.size, access=mmap.ACCESS_READ)
            self._view = memoryview(self._mm)
        return self._view

    def _release_map(self) -> None:
        if self._view is not None:
            try:
                self._view.release()
            except BufferError:
                pass
            self._view = None
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                pass  # fetch responses still hold slices; the last one frees the map
            self._mm = None

    def view(self, start: int, end: int) -> memoryview:
        return self._buffer()[start:end]

    def find(self, offset: int) -> int:
        """Position of the batch holding ``offset``, or -1 if it is past this segment.

        Raises CorruptBatch when that batch is known to be bad."""
        if offset >= self.next_offset:
            return -1
        if self.bad:
            return self._find_around_bad(offset)
        view = self._buffer()
        pos = self.index.lookup(offset)
        size = self.size
        while pos < size:
            base, length, delta = _WALK.unpack_from(view, pos)
            if base + delta >= offset:
                return pos
            pos += length + LOG_OVERHEAD
        return -1

    def _find_around_bad(self, offset: int) -> int:
        for b in self.bad.values():
            if b.holds(offset):
                raise CorruptBatch(self.path, b)
        view = self._buffer()
        pos = self.index.lookup(offset)
        size = self.size
        while pos < size:
            region = self._bad_region(pos)
            if region is not None:
                pos = region.end
                continue
            base, length, delta = _WALK.unpack_from(view, pos)
            if base + delta >= offset:
                return pos
            pos += length + LOG_OVERHEAD
        return -1

    def slice(self, pos: int, max_bytes: int, upper_bound: int | None, min_one: bool) -> memoryview:
        """Whole batches from ``pos``: at most ``max_bytes`` (the first one
        whole anyway with ``min_one``), none holding an offset >= ``upper_bound``
        (a batch straddling the bound stays out: it is above the LSO)."""
        return self.slice_to(pos, max_bytes, upper_bound, min_one)[0]

    def slice_to(
        self, pos: int, max_bytes: int, upper_bound: int | None, min_one: bool
    ) -> tuple[memoryview, int]:
        """``slice`` and the offset just after it: the base offset of the first
        batch left out, or the segment's next offset when it reaches the end."""
        view = self._buffer()
        size = self.size
        stop_at_bad = None
        if self.bad:
            # A read ends before the next bad region; the one after it starts
            # there and is refused (``find``).
            ahead = [b for b in self.bad.values() if b.position >= pos]
            if ahead:
                stop_at_bad = min(ahead, key=lambda b: b.position)
                size = stop_at_bad.position
        limit = pos + max_bytes
        # Jump over the batches the index already shows to be inside both
        # limits, so a large read walks only the last index interval.
        end = self.index.floor_position(limit)
        if upper_bound is not None:
            end = min(end, self.index.lookup(upper_bound - 1))
        if end <= pos or end > size:
            end = pos
        while end < size:
            base, length, delta = _WALK.unpack_from(view, end)
            if upper_bound is not None and base + delta >= upper_bound:
                break
            stop = end + length + LOG_OVERHEAD
            if stop > limit and (end > pos or not min_one):
                break
            end = stop
        if end < size:
            after = _I64.unpack_from(view, end)[0]
        else:
            after = stop_at_bad.first_offset if stop_at_bad is not None else self.next_offset
        return view[pos:end], after

    def find_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """``(position, end)`` of the first batch whose max timestamp >= ``timestamp``."""
        if self.max_timestamp < timestamp:
            return None
        view = self._buffer()
        pos = self.index.lookup(self.time_index.lookup(timestamp))
        size = self.size
        while pos < size:
            if self.bad:
                b = self._bad_region(pos)
                if b is not None:
                    pos = b.end
                    continue
            _, length, _, max_ts = _WALK_TS.unpack_from(view, pos)
            end = pos + length + LOG_OVERHEAD
            if max_ts >= timestamp:
                return pos, end
            pos = end
        return None

    def largest_timestamp(self) -> int:
        """Kafka's LogSegment.largestTimestamp: the max record timestamp, or
        the file's modification time when no batch carries one."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        try:
            return os.stat(self.path).st_mtime_ns // 1_000_000
        except FileNotFoundError:
            return 0
