"""CreatePartitions, DeleteRecords and DescribeLogDirs: what admin tools, Kafka Streams (which
purges its repartition topics with DeleteRecords) and kafka-log-dirs.sh ask of the logs.

Kafka: ReplicationControlManager.createPartitions (checks and messages), ReplicaManager
.deleteRecords (offset -1 = high watermark; past it OFFSET_OUT_OF_RANGE), ReplicaManager
.describeLogDirs (one entry per log dir, sizes per partition).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode
from minibroker_storage.manager import LogManager

from ..cluster import Cluster, all_fenced, manual_assignment_error
from ..config.options import Config
from .api import Api, RequestContext
from .authz import OFF, Authz, Op
from .common import ZERO, answers, by_partition, response_cls

HIGH_WATERMARK = -1  # DeleteRecordsRequest.HIGH_WATERMARK


class LogAdminHandlers:
    def __init__(self, *, logs: LogManager, config: Config,
                 add_partitions: Callable[..., None], notify_append: Callable[[str, int], None],
                 not_leader: Callable[[RequestContext, str, int], bool] | None = None,
                 authz: Authz = OFF, cluster: Cluster | None = None) -> None:
        self.logs = logs
        self.cluster = cluster  # virtual brokers: the replicas there are, up or stopped
        self.authz = authz
        self.config = config
        self.add_partitions = add_partitions
        self.notify = notify_append
        self.not_leader = not_leader

    def apis(self) -> list[Api]:
        return [Api(ApiKey.CreatePartitions, 0, 3, self.create_partitions),
                Api(ApiKey.DeleteRecords, 0, 2, self.delete_records),
                Api(ApiKey.DescribeLogDirs, 1, 5, self.describe_log_dirs)]

    # -- CreatePartitions ---------------------------------------------------------------
    @answers
    def create_partitions(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        Result = nested(R, "CreatePartitionsTopicResult")
        names = [t.name for t in req.topics]
        results = []
        answered = set()
        # ControllerApis.createPartitions: ALTER on each topic (once, duplicates excepted)
        alterable = self.authz.topics(ctx, Op.ALTER, (n for n in names if names.count(n) == 1))
        for t in req.topics:
            if t.name in answered:  # a duplicate is answered once (ControllerApis.createPartitions)
                continue
            answered.add(t.name)
            if names.count(t.name) == 1 and t.name not in alterable:
                results.append(build(Result, name=t.name, error_code=ErrorCode.topic_authorization_failed,
                                     error_message=None))
                continue
            error, message = self._check_partitions(t, names)
            if error == ErrorCode.none and not req.validate_only:
                info = self.logs.topic(t.name)
                first = info.partitions if info is not None else 0
                given = {first + i: list(a.broker_ids) for i, a in enumerate(t.assignments or ())}
                self.add_partitions(t.name, t.count, given)
            results.append(build(Result, name=t.name, error_code=error, error_message=message))
        return build(R, throttle_time=ZERO, results=tuple(results))

    def _check_partitions(self, t: Any, names: list[str]) -> tuple[ErrorCode, str | None]:
        if names.count(t.name) > 1:
            return ErrorCode.invalid_request, "Duplicate topic name."
        info = self.logs.topic(t.name)
        if info is None:
            return ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition."
        if t.count < info.partitions:
            return (ErrorCode.invalid_partitions, f"The topic {t.name} currently has {info.partitions} "
                                                  f"partition(s); {t.count} would not be an increase.")
        if t.count == info.partitions:
            return ErrorCode.invalid_partitions, f"Topic already has {info.partitions} partition(s)."
        if t.assignments is not None:
            added = t.count - info.partitions
            if len(t.assignments) != added:
                return (ErrorCode.invalid_replica_assignment,
                        f"Attempted to add {added} additional partition(s), but only "
                        f"{len(t.assignments)} assignment(s) were specified.")
            # ReplicationControlManager.createPartitions: as many replicas as partition 0 has
            nodes = set(self.config.node_ids)
            factor = len(self.cluster.replicas(t.name, 0)) if self.cluster is not None else 1
            for i, a in enumerate(t.assignments):
                ids = list(a.broker_ids)
                why = manual_assignment_error(ids, nodes, factor)
                if why is None and self.cluster is not None and not set(ids) & self.cluster.up:
                    why = all_fenced(info.partitions + i)
                if why is not None:
                    return ErrorCode.invalid_replica_assignment, why
        return ErrorCode.none, None

    # -- DeleteRecords ------------------------------------------------------------------
    @answers
    def delete_records(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        Topic = nested(R, "DeleteRecordsTopicResult")
        Part = nested(R, "DeleteRecordsPartitionResult")

        refused: dict[tuple[str, int], ErrorCode] = {}
        targets: dict[tuple[str, int], int] = {}
        # KafkaApis.handleDeleteRecordsRequest: DELETE on the topic, before its existence
        deletable = self.authz.topics(ctx, Op.DELETE, (t.name for t in req.topics))
        for t in req.topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if t.name not in deletable:
                    refused[tp] = ErrorCode.topic_authorization_failed
                    continue
                checked = self._target(ctx, *tp, p.offset)
                if isinstance(checked, ErrorCode):
                    refused[tp] = checked
                else:  # a partition named twice: the log never moves back, so the larger wins
                    targets[tp] = max(targets.get(tp, checked), checked)
        starts = self.logs.delete_records(targets)  # one checkpoint write for the request
        for tp in starts:
            self.notify(*tp)  # a fetch waiting below the new start is answered now

        def answer(topic: str, p: Any) -> Any:
            tp = (topic, p.partition_index)
            return build(Part, partition_index=p.partition_index, low_watermark=starts.get(tp, -1),
                         error_code=refused.get(tp, ErrorCode.none))
        topics = by_partition(req.topics, lambda t: t.name, answer,
                              lambda name, parts: build(Topic, name=name, partitions=parts))
        return build(R, throttle_time=ZERO, topics=topics)

    def _target(self, ctx: RequestContext, topic: str, partition: int, offset: int) -> int | ErrorCode:
        """The offset a partition's log is to start at, or why it cannot."""
        plog = self.logs.get_log(topic, partition)  # None: no such topic or partition
        if plog is None:
            return ErrorCode.unknown_topic_or_partition
        if self.not_leader is not None and self.not_leader(ctx, topic, partition):
            return ErrorCode.not_leader_or_follower
        if not plog.config.delete:
            # Kafka's Partition.deleteRecordsOnLeader: only the delete policy lets records go
            return ErrorCode.policy_violation
        target = plog.high_watermark if offset == HIGH_WATERMARK else offset
        if target < 0 or target > plog.high_watermark:
            return ErrorCode.offset_out_of_range
        return target

    # -- DescribeLogDirs ----------------------------------------------------------------
    @answers
    def describe_log_dirs(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        Result = nested(R, "DescribeLogDirsResult")
        Topic = nested(R, "DescribeLogDirsTopic")
        Part = nested(R, "DescribeLogDirsPartition")
        if not self.authz.cluster(ctx, Op.DESCRIBE):
            # KafkaApis.handleDescribeLogDirsRequest: DESCRIBE on the cluster
            return build(R, throttle_time=ZERO, error_code=ErrorCode.cluster_authorization_failed, results=())
        if req.topics is None:
            wanted = {t.name: set(range(t.partitions)) for t in self.logs.topics()}
        else:
            wanted = {}
            for t in req.topics:
                wanted.setdefault(t.topic, set()).update(t.partitions)
        topics = []
        for name in sorted(wanted):
            parts = []
            for p in sorted(wanted[name]):
                plog = self.logs.get_log(name, p)  # None: no such topic or partition
                if plog is not None:
                    parts.append(build(Part, partition_index=p, partition_size=plog.size_bytes, offset_lag=0,
                                       is_future_key=False))
            if parts:
                topics.append(build(Topic, name=name, partitions=tuple(parts)))
        disk = shutil.disk_usage(self.logs.data_dir)
        result = build(Result, error_code=ErrorCode.none, log_dir=self.logs.data_dir, topics=tuple(topics),
                       total_bytes=disk.total, usable_bytes=disk.free)
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none, results=(result,))
