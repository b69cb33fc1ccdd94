"""Group commit for logs in flush.messages=1 mode (``--fsync always``).

Kafka with flush.messages=1 flushes inside each append, on one of its request handler
threads, so appends to different partitions sync in parallel. A broker with one event loop
that synced inline would serve one fdatasync at a time and nothing else meanwhile. Here a
Produce append is written at once (``defer_sync``), its answer waits for
:meth:`GroupCommit.wait`, and one task syncs, on a worker thread, every log someone waits
on: appends arriving while a sync runs are covered by the next one, so N waiting producers
share one fdatasync instead of queueing for N. Nothing is acknowledged before it is on disk.
"""

from __future__ import annotations

import asyncio

import structlog

from storage.sync_job import SyncJob

log = structlog.get_logger("minibroker.durability")


class GroupCommit:
    def __init__(self) -> None:
        self._waiting: dict[object, list[asyncio.Future]] = {}
        self._task: asyncio.Task | None = None
        self.syncs = 0  # jobs run, for tests and logs

    def wait(self, plog) -> asyncio.Future:
        """A future for "everything appended to ``plog`` so far is durable": its result is
        None, or the OSError that made the sync fail."""
        fut = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(plog, []).append(fut)
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())
        return fut

    async def _run(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, {}
                job = SyncJob()
                error: OSError | None = None
                try:
                    for plog in batch:
                        plog.add_flush(job)
                    if len(job):
                        await asyncio.to_thread(job.run)
                    error = job.finish()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a log closed under us, a failed dup
                    job.abandon()
                    error = exc if isinstance(exc, OSError) else OSError(str(exc))
                self.syncs += 1
                if error is not None:
                    log.error("sync.failed", error=str(error),
                              logs=sorted(str(getattr(p, "path", p)) for p in batch)[:10])
                for futs in batch.values():
                    for fut in futs:
                        if not fut.done():
                            fut.set_result(error)
        finally:
            self._task = None
