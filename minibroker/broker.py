"""The broker: owns the partition logs and the waiting fetches; handlers call into it."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

import structlog

from minibroker_storage import meta
from minibroker_storage.config import FlushPolicy, LogConfig
from minibroker_storage.manager import LogManager
from minibroker_storage.producer_ids import ProducerIdAllocator
from minibroker_storage.sync_job import SyncJob

from minibroker_protocol.topics import GROUP_METADATA_TOPIC

from .config import Config
from .coordinator import snapshot
from .coordinator.group import GroupCoordinator
from .coordinator.transaction import TransactionCoordinator
from .scrubber import Scrubber

log = structlog.get_logger("minibroker.broker")

INTERNAL_SEGMENT_BYTES = 100 * 1024 * 1024


class Broker:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.node_id = config.node_id
        self.host, self.port = config.advertised(config.port)
        config.data_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        self.meta = meta.load_or_create(config.data_dir, config.node_id)
        self.cluster_id = self.meta["cluster.id"]
        self.default_log_config = LogConfig(
            segment_bytes=config.segment_bytes,
            segment_ms=config.segment_ms,
            retention_ms=config.retention_ms,
            retention_bytes=config.retention_bytes,
            producer_id_expiration_ms=config.producer_id_expiration_ms,
            flush=FlushPolicy(config.fsync.mode, config.fsync.interval_ms, background=True),
        )
        self.logs = LogManager(config.data_dir, self.default_log_config)
        self.producer_ids = ProducerIdAllocator(config.data_dir)
        self.txn_coordinator = TransactionCoordinator(
            self, max_timeout_ms=config.transaction_max_timeout_ms,
            id_expiration_ms=config.transactional_id_expiration_ms)
        self._waiters: dict[tuple[str, int], set[asyncio.Future]] = defaultdict(set)
        self._tasks: list[asyncio.Task] = []
        self._snapshot_writer = snapshot.Writer()
        self.group_coordinator = GroupCoordinator(
            self, initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms)
        # Offsets first: rolling a prepared transaction forward may complete
        # transactional offset commits.
        self.group_coordinator.load()
        self.txn_coordinator.load()
        log.info("broker.storage_opened", data_dir=str(config.data_dir),
                 topics=len(self.logs.topics()),
                 ms=round((time.perf_counter() - t0) * 1000, 1))

        self.bound_port = config.port

    def set_bound_port(self, port: int) -> None:
        self.bound_port = port
        self.host, self.port = self.config.advertised(port)

    # -- topics ----------------------------------------------------------------
    def topic(self, name: str):
        return self.logs.topic(name)

    def topics(self):
        return self.logs.topics()

    def topic_by_id(self, topic_id):
        return self.logs.topic_by_id(topic_id)

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None,
                     reason: str = "create_topics"):
        # storage logs the creation with the topic id; the reason is only worth a debug line
        log.debug("topic.create", topic=name, reason=reason)
        return self.logs.create_topic(name, partitions, configs or {})

    # -- internal topics -------------------------------------------------------------
    def existing_log(self, topic: str, partition: int):
        return self.get_log(topic, partition) if self.topic(topic) is not None else None

    def internal_log(self, topic: str, partition: int):
        """A partition of __transaction_state / __consumer_offsets, created on first use."""
        if self.topic(topic) is None:
            count = (self.config.offsets_topic_partitions if topic == GROUP_METADATA_TOPIC
                     else self.config.transaction_state_partitions)
            # Kafka's offsets.topic.segment.bytes / transaction.state.log.segment.bytes
            # (100 MiB, not log.segment.bytes): segments roll, and each roll's producer
            # snapshot bounds what storage replays of the history at start-up.
            self.logs.create_topic(topic, count, {"cleanup.policy": "compact",
                                                  "segment.bytes": str(INTERNAL_SEGMENT_BYTES)})
        return self.get_log(topic, partition)

    def offsets_partition_for(self, group_id: str) -> int:
        """Kafka's GroupCoordinator.partitionFor: abs(groupId.hashCode) % partitions."""
        info = self.topic(GROUP_METADATA_TOPIC)
        if info is None:
            self.internal_log(GROUP_METADATA_TOPIC, 0)
            info = self.topic(GROUP_METADATA_TOPIC)
        return (java_string_hash(group_id) & 0x7FFFFFFF) % info.partitions

    def max_message_bytes(self, info) -> int:
        value = info.configs.get("max.message.bytes")
        return int(value) if value is not None else self.config.message_max_bytes

    def last_stable_offset(self, topic: str, partition: int) -> int:
        return self.get_log(topic, partition).last_stable_offset

    def delete_topic(self, name: str) -> None:
        self.logs.delete_topic(name)
        for (topic, p), futs in list(self._waiters.items()):
            if topic == name:
                self._wake(futs)

    def get_log(self, topic: str, partition: int):
        return self.logs.get_log(topic, partition)

    # -- fetch waiters -----------------------------------------------------------
    def notify_append(self, topic: str, partition: int) -> None:
        futs = self._waiters.get((topic, partition))
        if futs:
            self._wake(futs)

    @staticmethod
    def _wake(futs: set[asyncio.Future]) -> None:
        for fut in futs:
            if not fut.done():
                fut.set_result(None)

    async def wait_for_append(self, partitions: list[tuple[str, int]], timeout: float) -> None:
        """Return when any of ``partitions`` gets data, or after ``timeout`` seconds."""
        fut = asyncio.get_running_loop().create_future()
        for tp in partitions:
            self._waiters[tp].add(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            for tp in partitions:
                s = self._waiters.get(tp)
                if s is not None:
                    s.discard(fut)
                    if not s:
                        del self._waiters[tp]

    # -- background work ---------------------------------------------------------
    def start_background(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._retention_loop()))
        self._tasks.append(loop.create_task(self._producer_expiration_loop()))
        self._tasks.append(loop.create_task(self._every(
            self.config.transaction_abort_check_interval_ms, self.txn_coordinator.abort_timed_out,
            "txn_timeout_check")))
        self._tasks.append(loop.create_task(self._every(
            self.config.transactional_id_expiration_check_interval_ms,
            self.txn_coordinator.expire_ids, "txn_id_expiration")))
        # Always: a topic's flush.ms may put it on an interval whatever --fsync says.
        self._tasks.append(loop.create_task(self._flush_loop()))
        self._tasks.append(loop.create_task(self._snapshot_loop()))
        if self.config.scrub_bytes_per_sec > 0:
            self._tasks.append(loop.create_task(
                Scrubber(self.logs, self.config.scrub_bytes_per_sec).run()))

    # -- coordinator snapshots -------------------------------------------------------
    def _coordinators(self):
        return (("txn", self.txn_coordinator), ("group", self.group_coordinator))

    async def _snapshot_loop(self) -> None:
        """Periodic coordinator snapshots, so restart time (and a kill -9's replay) does
        not grow with the internal topics' history. Captured on the loop, written on a
        worker thread."""
        while True:
            await asyncio.sleep(1.0)
            for name, coord in self._coordinators():
                try:
                    if not coord.snapshots.due():
                        continue
                    captured = coord.capture_snapshot()
                    if captured is not None:
                        ticket = self._snapshot_writer.ticket()
                        await asyncio.to_thread(self._snapshot_writer.write, name, ticket,
                                                captured, "periodic")
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("snapshot.failed", coordinator=name)

    def _final_snapshots(self) -> list:
        out = []
        for name, coord in self._coordinators():
            try:
                captured = coord.capture_snapshot()
            except Exception:
                log.exception("snapshot.failed", coordinator=name)
                continue
            if captured is not None:
                out.append((name, self._snapshot_writer.ticket(), captured))
        return out

    async def _retention_loop(self) -> None:
        interval = self.config.retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.logs.apply_retention(int(time.time() * 1000))
            except Exception:
                log.exception("retention.failed")

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
                self.logs.expire_producers(int(time.time() * 1000))
            except Exception:
                log.exception("producer_expiration.failed")

    async def _flush_loop(self) -> None:
        """Kafka's log flusher: each log on a flush.ms interval is flushed when it falls
        due, and the wait for the disk happens on a worker thread, so produce requests
        are served meanwhile instead of stalling behind fdatasync."""
        while True:
            job = SyncJob()
            wait_ms = None
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

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        t0 = time.perf_counter()
        # Captured before the logs close, written after: by then the logs they cover
        # are flushed, so a snapshot never claims offsets the disk does not hold.
        final = self._final_snapshots()
        self.logs.close_all()
        for name, ticket, captured in final:
            self._snapshot_writer.write(name, ticket, captured, "shutdown")
        log.info("broker.storage_closed", ms=round((time.perf_counter() - t0) * 1000, 1))


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (UTF-16 code units), as Kafka hashes group ids."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h
