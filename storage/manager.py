"""Every partition log under one data directory, and the topic registry.

``<data>/.lock`` is held with an exclusive flock for the manager's lifetime,
so a second broker on the same directory fails at start instead of
interleaving appends. Partition directories are ``<topic>-<partition>``
(Kafka's layout); a deleted topic's directories are first renamed to
``...-delete`` so a crash mid-delete never leaves data under a live name.
"""

from __future__ import annotations

import base64
import fcntl
import os
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from . import start_offsets
from .catalog import Catalog, TopicInfo, validate_topic_name
from .config import LogConfig
from .errors import DataDirLocked, InvalidTopic, UnknownTopic
from .lazylog import get_logger
from .log import PartitionLog, wall_clock_ms
from .sync_job import SyncJob

if TYPE_CHECKING:
    from .cleaner import LogCleaner

log = get_logger(__name__)

LOCK_FILE = ".lock"
PARTITION_METADATA = "partition.metadata"
_DELETE_SUFFIX = "-delete"
_STRAY_SUFFIX = "-stray"


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def kafka_uuid(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


class LogManager:
    def __init__(
        self,
        data_dir: str | os.PathLike,
        default_config: LogConfig | None = None,
        *,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.data_dir = os.fspath(data_dir)
        self.default_config = default_config or LogConfig()
        self._clock = clock or wall_clock_ms
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._cleaner: LogCleaner | None = None
        os.makedirs(self.data_dir, exist_ok=True)
        self._lock_fd = _lock(self.data_dir)
        try:
            started = time.perf_counter()
            self.catalog = Catalog.load(self.data_dir)
            try:
                self._start_offsets = start_offsets.load(self.data_dir)
            except start_offsets.StartOffsetsError as e:
                # lost: the logs start at their first segments (records DeleteRecords removed
                # from inside one are visible again), never a failed start
                log.warning("logs.start_offsets_unreadable", reason=str(e))
                self._start_offsets = {}
            self._sweep()
            for info in self.catalog.list():
                self._open_partitions(info, range(info.partitions))
            self.load_seconds = time.perf_counter() - started
        except BaseException:
            self._close_logs(clean=True)
            _unlock(self._lock_fd)
            raise
        log.info(
            "logs.loaded",
            data_dir=self.data_dir,
            topics=len(self.catalog),
            partitions=len(self._logs),
            seconds=round(self.load_seconds, 3),
        )

    # ---------------------------------------------------------------- topics

    def topic(self, name: str) -> TopicInfo | None:
        return self.catalog.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self.catalog.by_id(topic_id)

    def topics(self) -> list[TopicInfo]:
        return self.catalog.list()

    def config_for(self, topic: str) -> LogConfig:
        info = self.catalog.get(topic)
        return self.default_config.with_overrides(info.configs if info else None)

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, object] | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> TopicInfo:
        validate_topic_name(name)
        self.default_config.with_overrides(configs)  # InvalidConfig before anything is written
        collisions = [t.name for t in self.catalog.list()
                      if t.name != name and _metric_name(t.name) == _metric_name(name)]
        if collisions:
            # Kafka refuses these: '.' and '_' map to the same metric names.
            raise InvalidTopic(f"topic {name!r} collides with existing topic {collisions[0]!r}")
        info = self.catalog.create(name, partitions, configs, topic_id)
        self._open_partitions(info, range(partitions))
        log.info("topic.created", topic=name, topic_id=str(info.topic_id), partitions=partitions)
        return info

    def delete_topic(self, name: str) -> TopicInfo:
        info = self.catalog.get(name)
        if info is None:
            raise UnknownTopic(f"topic {name!r} does not exist")
        doomed = []
        # a topic made again under this name is all dirty: its checkpoints go
        forget = self._cleaner is not None or os.path.exists(
            os.path.join(self.data_dir, start_offsets.CLEANER_FILE))
        for partition in range(info.partitions):
            plog = self._logs.pop((name, partition), None)
            if plog is not None:
                plog.release()
            if forget:
                self.cleaner.forget((name, partition))
            path = os.path.join(self.data_dir, partition_dir_name(name, partition))
            if os.path.isdir(path):
                target = f"{path}.{uuid.uuid4().hex}{_DELETE_SUFFIX}"
                os.rename(path, target)
                doomed.append(target)
        self.catalog.delete(name)
        if any(tp[0] == name for tp in self._start_offsets):
            self._save_start_offsets()  # a topic made again under this name starts at 0
        for path in doomed:
            shutil.rmtree(path, ignore_errors=True)
        log.info("topic.deleted", topic=name, topic_id=str(info.topic_id))
        return info

    def add_partitions(self, name: str, partitions: int) -> TopicInfo:
        """Grow a topic to ``partitions`` partitions (CreatePartitions)."""
        old = self.catalog.get(name)
        if old is None:
            raise UnknownTopic(f"topic {name!r} does not exist")
        info = self.catalog.set_partitions(name, partitions)
        self._open_partitions(info, range(old.partitions, partitions))
        return info

    def delete_records(self, targets: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """Move partitions' log starts (DeleteRecords: {(topic, partition): offset}), durably,
        with one checkpoint write for them all; the new starts."""
        starts, moved = {}, False
        for tp, offset in targets.items():
            plog = self._logs[tp]
            before = plog.log_start_offset
            starts[tp] = plog.delete_records_before(offset)
            moved = moved or starts[tp] != before
        if moved:
            self._save_start_offsets()
        return starts

    def _save_start_offsets(self) -> None:
        self._start_offsets = {tp: plog.log_start_offset for tp, plog in self._logs.items()
                               if plog.log_start_offset != plog.segments[0].base_offset}
        start_offsets.save(self.data_dir, self._start_offsets)

    def alter_topic_configs(self, name: str, configs: Mapping[str, object]) -> TopicInfo:
        """Replace a topic's overrides; open logs pick them up at once."""
        config = self.default_config.with_overrides(configs)
        info = self.catalog.update_configs(name, configs)
        for partition in range(info.partitions):
            plog = self._logs.get((name, partition))
            if plog is not None:
                plog.reconfigure(config)
        return info

    # ------------------------------------------------------------------ logs

    @property
    def cleaner(self) -> LogCleaner:
        """The log cleaner (storage/cleaner.py), made on first use: not on the start-up path."""
        if self._cleaner is None:
            from .cleaner import LogCleaner

            self._cleaner = LogCleaner(self.data_dir, lambda: self._logs, self._clock)
        return self._cleaner

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def logs(self) -> dict[tuple[str, int], PartitionLog]:
        return dict(self._logs)

    def apply_retention(self, now_ms: int | None = None) -> int:
        now = self._clock() if now_ms is None else now_ms
        return sum(plog.apply_retention(now) for plog in self._logs.values())

    def expire_producers(self, now_ms: int | None = None) -> int:
        """For the broker's periodic task: forget producers idle longer than
        producer.id.expiration.ms in every partition; how many went."""
        now = self._clock() if now_ms is None else now_ms
        return sum(len(plog.expire_producers(now)) for plog in self._logs.values())

    def flush_all(self) -> None:
        for plog in self._logs.values():
            plog.flush()

    def add_due_flushes(self, job: SyncJob, now_ms: int | None = None) -> int | None:
        """Put every log whose flush.ms has passed into ``job`` (``PartitionLog.add_flush``);
        returns the ms until the next one falls due, None if no log flushes on an interval."""
        now = self._clock() if now_ms is None else now_ms
        next_due = None
        for plog in self._logs.values():
            due = plog.flush_due_ms(now)
            if due is None:
                continue
            if due <= now:
                plog.add_flush(job, now)
                due = plog.flush_due_ms(now)
                assert due is not None  # add_flush neither closes the log nor leaves interval mode
            next_due = due if next_due is None else min(next_due, due)
        return None if next_due is None else next_due - now


    def close_all(self) -> None:
        if self._lock_fd < 0:
            return
        self._close_logs(clean=True)
        _unlock(self._lock_fd)
        self._lock_fd = -1
        log.info("logs.closed", data_dir=self.data_dir)

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc) -> None:
        self.close_all()

    # -------------------------------------------------------------- internal

    def _open_partitions(self, info: TopicInfo, partitions: range) -> None:
        config = self.default_config.with_overrides(info.configs)
        now = self._clock()
        for partition in partitions:
            path = os.path.join(self.data_dir, partition_dir_name(info.name, partition))
            os.makedirs(path, exist_ok=True)
            _write_partition_metadata(path, info.topic_id)
            self._logs[(info.name, partition)] = PartitionLog.open(
                path, config, now, self._clock, start_offset=self._start_offsets.get((info.name, partition)))

    def _close_logs(self, clean: bool) -> None:
        while self._logs:
            _, plog = self._logs.popitem()
            if clean:
                plog.close()
            else:
                plog.release()

    def _sweep(self) -> None:
        """Finish interrupted deletions; set aside directories no topic owns."""
        for name in os.listdir(self.data_dir):
            path = os.path.join(self.data_dir, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(_DELETE_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)
                log.info("topic.directory_removed", path=path)
                continue
            parsed = parse_partition_dir(name)
            if parsed is None or name.endswith(_STRAY_SUFFIX):
                continue
            topic, partition = parsed
            info = self.catalog.get(topic)
            owned = info is not None and partition < info.partitions
            stored_id = _read_partition_metadata(path)
            if owned and info is not None and stored_id not in (None, kafka_uuid(info.topic_id)):
                owned = False
            if not owned:
                # Kafka's stray-log handling: keep the data, out of the way of
                # a topic created later under the same name.
                target = f"{path}.{uuid.uuid4().hex}{_STRAY_SUFFIX}"
                os.rename(path, target)
                log.warning("partition.stray_directory_set_aside", path=path, moved_to=target)


def _metric_name(topic: str) -> str:
    return topic.replace(".", "_")


def _write_partition_metadata(path: str, topic_id: uuid.UUID) -> None:
    # Kafka's PartitionMetadataFile, so Kafka's tools see the topic id.
    target = os.path.join(path, PARTITION_METADATA)
    if os.path.exists(target):
        return
    tmp = target + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(f"version: 0\ntopic_id: {kafka_uuid(topic_id)}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)


def _read_partition_metadata(path: str) -> str | None:
    try:
        with open(os.path.join(path, PARTITION_METADATA), encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "topic_id":
                    return value.strip()
    except FileNotFoundError:
        return None
    return None


def _lock(data_dir: str) -> int:
    path = os.path.join(data_dir, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise DataDirLocked(
            f"data directory {data_dir} is in use by another broker (pid {holder}); "
            f"stop it or choose another directory"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _unlock(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
