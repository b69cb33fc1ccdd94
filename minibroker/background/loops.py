"""The broker's background loops: retention, log compaction, producer-id expiration, log flushing,
coordinator snapshots, the transaction timeout and transactional-id expiry checks, and
the scrubber. Each loop survives its own failures (logged, retried next interval); all
are cancelled by :meth:`Background.stop`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from minibroker_storage.lazylog import get_logger
from minibroker_storage.manager import LogManager
from minibroker_storage.sync_job import SyncJob

from ..config.options import Config
from ..coordinator import snapshot
from ..core.clock import SYSTEM_CLOCK, Clock

log = get_logger("minibroker.broker")


class Snapshotting(Protocol):
    @property
    def snapshots(self) -> snapshot.Schedule: ...

    def capture_snapshot(self): ...


class Background:
    def __init__(self, config: Config, logs: LogManager, *,
                 coordinators: Sequence[tuple[str, Snapshotting]],
                 abort_timed_out: Callable[..., int], expire_ids: Callable[..., int],
                 poll_groups: Callable[[], object] | None = None,
                 snapshot_writer: snapshot.Writer, clock: Clock = SYSTEM_CLOCK,
                 expire_tokens: Callable[..., int] | None = None) -> None:
        self.config = config
        self.logs = logs
        # the broker's own list, not a copy: a coordinator built after start-up joins it
        self.coordinators = coordinators
        self.abort_timed_out = abort_timed_out
        self.expire_ids = expire_ids
        self.poll_groups = poll_groups
        self.snapshot_writer = snapshot_writer
        self.clock = clock
        # the delegation-token sweep (Kafka's delegation.token.expiry.check.interval.ms task)
        self.expire_tokens = expire_tokens
        self.tasks: list[asyncio.Task] = []
        self._cleaner_wake: asyncio.Event | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        cfg = self.config
        self.tasks.append(loop.create_task(self._retention_loop()))
        if cfg.log_cleaner_enable:
            self.tasks.append(loop.create_task(self._cleaner_loop()))
        self.tasks.append(loop.create_task(self._producer_expiration_loop()))
        self.tasks.append(loop.create_task(self._every(
            cfg.transaction_abort_check_interval_ms, self.abort_timed_out, "txn_timeout_check")))
        self.tasks.append(loop.create_task(self._every(
            cfg.transactional_id_expiration_check_interval_ms, self.expire_ids,
            "txn_id_expiration")))
        if self.expire_tokens is not None and cfg.delegation_token_secret_key is not None:
            self.tasks.append(loop.create_task(self._every(
                cfg.delegation_token_expiry_check_interval_ms, self.expire_tokens,
                "token_expiration")))
        # Always: a topic's flush.ms may put it on an interval whatever --fsync says.
        self.tasks.append(loop.create_task(self._flush_loop()))
        self.tasks.append(loop.create_task(self._snapshot_loop()))
        if cfg.scrub_bytes_per_sec > 0:
            # Off by default: the scrub and the offline reader it walks with stay out of start-up.
            from .scrubber import Scrubber
            self.tasks.append(loop.create_task(
                Scrubber(self.logs, cfg.scrub_bytes_per_sec).run()))

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass

    # -- coordinator snapshots -------------------------------------------------------
    async def _snapshot_loop(self) -> None:
        """Periodic coordinator snapshots, so restart time (and a kill -9's replay) does
        not grow with the internal topics' history. Captured on the loop, written on a
        worker thread."""
        while True:
            await asyncio.sleep(1.0)
            for name, coord in self.coordinators:
                try:
                    if not coord.snapshots.due():
                        continue
                    captured = coord.capture_snapshot()
                    if captured is not None:
                        ticket = self.snapshot_writer.ticket()
                        await asyncio.to_thread(self.snapshot_writer.write, name, ticket,
                                                captured, "periodic")
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("snapshot.failed", coordinator=name)

    def final_snapshots(self) -> list:
        out = []
        for name, coord in self.coordinators:
            try:
                captured = coord.capture_snapshot()
            except Exception:
                log.exception("snapshot.failed", coordinator=name)
                continue
            if captured is not None:
                out.append((name, self.snapshot_writer.ticket(), captured))
        return out

    # -- storage housekeeping --------------------------------------------------------
    async def _retention_loop(self) -> None:
        interval = self.config.retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.logs.apply_retention(self.clock.wall_ms())
            except Exception:
                log.exception("retention.failed")

    async def _cleaner_loop(self) -> None:
        """Kafka's log cleaner thread: rounds are planned and installed on the loop, and
        their work (reading, filtering, writing segments) runs on a thread of its own."""
        loop = asyncio.get_running_loop()
        wake = self._cleaner_wake = asyncio.Event()
        pool = ThreadPoolExecutor(1, thread_name_prefix="log-cleaner")
        backoff = self.config.log_cleaner_backoff_ms / 1000

        async def pause() -> None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(wake.wait(), backoff)
            wake.clear()

        try:
            # One backoff first: start-up (and the coordinators' replay) is not slowed by a
            # round over internal topics that have never been cleaned.
            await pause()
            # Made after that backoff: its import (storage/cleaner.py) is not on the way to
            # the first requests of a start (issue 33).
            cleaner = self.logs.cleaner
            while True:
                task = None
                try:
                    task = cleaner.plan(self.clock.wall_ms())
                    if task is None:
                        await pause()
                        continue
                    work = loop.run_in_executor(pool, cleaner.run, task)
                    try:
                        result = await asyncio.shield(work)
                    except asyncio.CancelledError:
                        cleaner.stopping.set()  # the round stops at its next batch
                        with contextlib.suppress(Exception):
                            await work
                        raise
                    cleaner.install(task, result)
                except asyncio.CancelledError:
                    if task is not None:
                        from minibroker_storage.cleaner import CleaningAborted
                        cleaner.failed(task, CleaningAborted("the broker is stopping"))
                    raise
                except Exception as e:
                    if task is not None:
                        cleaner.failed(task, e)
                    else:
                        log.exception("cleaner.failed")
                    await asyncio.sleep(backoff)
        finally:
            pool.shutdown(wait=False)

    def catch_up(self) -> dict[str, int]:
        """The clock jumped: run now what these loops would have run had that time passed
        (group session and rebalance deadlines, transaction timeouts, transactional-id and
        producer-id expiration, retention), so a test need not wait for their intervals."""
        now = self.clock.wall_ms()
        if self.poll_groups is not None:
            self.poll_groups()
        aborted = self.abort_timed_out(now)
        expired_ids = self.expire_ids(now)
        expired_producers = self.logs.expire_producers(now)
        deleted = self.logs.apply_retention(now)
        tokens = self.expire_tokens(now) if self.expire_tokens is not None else 0
        self.wake_cleaner()
        return {"transactions_aborted": aborted, "transactional_ids_expired": expired_ids,
                "producers_expired": expired_producers,
                "segments_deleted": deleted, "delegation_tokens_expired": tokens}

    def wake_cleaner(self) -> None:
        """Look for a log to clean now (the clock jumped: horizons and lags may have passed)."""
        if self._cleaner_wake is not None:
            self._cleaner_wake.set()

    async def _every(self, interval_ms: int, fn, name: str) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                fn()
            except Exception:
                log.exception("background.failed", task=name)

    async def _producer_expiration_loop(self) -> None:
        interval = self.config.producer_id_expiration_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.logs.expire_producers(self.clock.wall_ms())
            except Exception:
                log.exception("producer_expiration.failed")

    async def _flush_loop(self) -> None:
        """Kafka's log flusher: each log on a flush.ms interval is flushed when it falls
        due, and the wait for the disk happens on a worker thread, so produce requests
        are served meanwhile instead of stalling behind fdatasync."""
        while True:
            job = SyncJob()
            wait_ms: float | None = None
            started = time.monotonic()
            try:
                wait_ms = self.logs.add_due_flushes(job)
                files = len(job)
                if files:
                    await asyncio.to_thread(job.run)
                error = job.finish()
                if error is not None:
                    log.error("flush.failed", error=str(error), files=files)
            except Exception:
                job.abandon()
                log.exception("flush.failed")
            if wait_ms is not None:
                wait_ms -= (time.monotonic() - started) * 1000  # the sync took some of it
            # Look again at least every second: logs created or reconfigured since.
            await asyncio.sleep(min(1000 if wait_ms is None else max(wait_ms, 1), 1000) / 1000)
