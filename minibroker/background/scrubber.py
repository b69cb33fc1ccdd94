"""The background scrub (--scrub-bytes-per-sec): re-read sealed segments, find bit rot.

A segment's checksums are checked when it is opened without a valid mark;
what rots on disk afterwards (same size, same mtime) is only found by reading
it again. This loop does that, one sealed segment at a time, on a worker
thread with its own file descriptor (the event loop never waits for the disk),
at no more than the configured rate. Bad batches it finds are handed to the
partition log on the loop: Fetch answers CORRUPT_MESSAGE for them from then on.
The active segment is left out: every batch in it was checked on its way in.
"""

from __future__ import annotations

import asyncio
import threading
import time

from minibroker_storage.lazylog import get_logger
from minibroker_storage.scrub import scrub_segment

log = get_logger("minibroker.scrubber")


class _Stopped(Exception):
    pass


class RateLimit:
    """Sleep so that the bytes read never run ahead of ``bytes_per_sec``; raise
    ``_Stopped`` as soon as ``stop`` is set (checked before every window)."""

    def __init__(self, bytes_per_sec: int, stop: threading.Event) -> None:
        self.rate = bytes_per_sec
        self.stop = stop
        self._start = time.monotonic()
        self._bytes = 0

    def __call__(self, nbytes: int) -> None:
        if self.stop.is_set():
            raise _Stopped
        due = self._start + self._bytes / self.rate
        now = time.monotonic()
        if due > now:
            if self.stop.wait(due - now):
                raise _Stopped
        elif now - due > 1.0:
            # Idle time between segments is not credit for a burst later.
            self._start, self._bytes = now, 0
        self._bytes += nbytes


class Scrubber:
    def __init__(self, logs, bytes_per_sec: int, *, pass_interval_s: float = 60.0,
                 window: int = 1 << 20) -> None:
        self.logs = logs
        self.bytes_per_sec = bytes_per_sec
        self.pass_interval_s = pass_interval_s
        self.window = min(window, max(4096, bytes_per_sec))  # a window never takes > ~1 s
        self._stop = threading.Event()
        self.passes = 0
        self.found = 0

    async def run(self) -> None:
        """Scrub forever; the broker cancels the task at shutdown."""
        if self.bytes_per_sec <= 0:
            return
        limit = RateLimit(self.bytes_per_sec, self._stop)
        log.info("scrub.started", bytes_per_sec=self.bytes_per_sec)
        try:
            while True:
                await self.scrub_pass(limit)
                await asyncio.sleep(self.pass_interval_s)
        except _Stopped:
            pass
        finally:
            self._stop.set()  # a window being read on the worker thread ends there

    async def scrub_pass(self, limit: RateLimit) -> None:
        started = time.monotonic()
        scrubbed = segments = found = 0
        for (topic, partition), plog in sorted(self.logs.logs().items()):
            segs = plog.segments
            for i, seg in enumerate(segs[:-1]):
                if plog.closed:
                    break
                result = await asyncio.to_thread(
                    scrub_segment, seg.path, seg.base_offset, end_offset=segs[i + 1].base_offset,
                    throttle=limit, chunk=self.window)
                segments += 1
                scrubbed += result.size
                if not result.bad:
                    continue
                for bad in plog.mark_bad(seg.base_offset, result.bad):
                    found += 1
                    log.error("scrub.corrupt_batch", topic=topic, partition=partition,
                              segment=seg.path, offset=bad.first_offset, next_offset=bad.next_offset,
                              position=bad.position, bytes=bad.end - bad.position, reason=bad.reason)
        seconds = time.monotonic() - started
        self.passes += 1
        self.found += found
        log.info("scrub.pass_done", segments=segments, bytes=scrubbed, bad_batches=found,
                 seconds=round(seconds, 2),
                 mb_per_sec=round(scrubbed / seconds / 1e6, 1) if seconds > 0 else None)
