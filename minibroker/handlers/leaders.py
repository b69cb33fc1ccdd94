"""OffsetForLeaderEpoch and ElectLeaders: leader epochs and leadership, as the Java consumer
(after a leader change, to check its position is still on the log) and kafka-leader-election.sh
use them.

Kafka: Partition.lastOffsetForLeaderEpoch (the current_leader_epoch check: older is
FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH; then LeaderEpochFileCache.endOffsetFor), and the
controller's electLeaders (preferred: back to the first replica if it is up; unclean: only for
a partition with no leader).
"""

from __future__ import annotations

from typing import Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode
from minibroker_storage.manager import LogManager

from ..cluster import Cluster, connection_node
from .api import Api, RequestContext
from .authz import OFF, Authz, Op
from .common import ZERO, answers, by_partition, response_cls

PREFERRED, UNCLEAN = 0, 1
_ELECTION = {
    "elected": (ErrorCode.none, None),
    "not_needed": (ErrorCode.election_not_needed, "Leader election not needed for topic partition."),
    "preferred_unavailable": (ErrorCode.preferred_leader_not_available,
                              "Failed to elect leader for partition {tp} under strategy "
                              "PreferredReplicaPartitionLeaderElectionStrategy"),
    "no_eligible_leader": (ErrorCode.eligible_leaders_not_available,
                           "Failed to elect leader for partition {tp} under strategy "
                           "UncleanLeaderElectionStrategy"),
}


class LeaderHandlers:
    def __init__(self, *, logs: LogManager, cluster: Cluster | None, authz: Authz = OFF) -> None:
        self.logs = logs
        self.authz = authz
        self.cluster = cluster

    def apis(self) -> list[Api]:
        return [Api(ApiKey.OffsetForLeaderEpoch, 2, 4, self.offset_for_leader_epoch),
                Api(ApiKey.ElectLeaders, 0, 2, self.elect_leaders)]

    # -- OffsetForLeaderEpoch -----------------------------------------------------------
    @answers
    def offset_for_leader_epoch(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        Topic = nested(R, "OffsetForLeaderTopicResult")
        Part = nested(R, "EpochEndOffset")
        # KafkaApis.handleOffsetForLeaderEpochRequest: CLUSTER_ACTION (a follower) or DESCRIBE on
        # each topic (a consumer checking for truncation, KIP-320)
        described: set[str] | None = None
        if self.authz.on and not self.authz.cluster(ctx, Op.CLUSTER_ACTION, log_if_denied=False):
            described = self.authz.topics(ctx, Op.DESCRIBE, (t.topic for t in req.topics))

        def answer(topic: str, p: Any) -> Any:
            if described is not None and topic not in described:
                return build(Part, error_code=ErrorCode.topic_authorization_failed, partition=p.partition,
                             leader_epoch=-1, end_offset=-1)
            error, epoch, offset = self._end_offset(ctx, topic, p.partition, p.current_leader_epoch,
                                                    p.leader_epoch)
            return build(Part, error_code=error, partition=p.partition, leader_epoch=epoch, end_offset=offset)
        topics = by_partition(req.topics, lambda t: t.topic, answer,
                              lambda name, parts: build(Topic, topic=name, partitions=parts))
        return build(R, throttle_time=ZERO, topics=topics)

    def _end_offset(self, ctx: RequestContext, topic: str, partition: int, current: int,
                    asked: int) -> tuple[ErrorCode, int, int]:
        plog = self.logs.get_log(topic, partition)  # None: no such topic or partition
        if plog is None:
            return ErrorCode.unknown_topic_or_partition, -1, -1
        if self.cluster is not None and self.cluster.not_leader(connection_node(ctx), topic, partition):
            return ErrorCode.not_leader_or_follower, -1, -1
        epoch = plog.leader_epoch  # the cluster's, kept in step (Broker._leader_epoch)
        if current != -1 and current < epoch:
            return ErrorCode.fenced_leader_epoch, -1, -1
        if current != -1 and current > epoch:
            return ErrorCode.unknown_leader_epoch, -1, -1
        found_epoch, end = plog.end_offset_for_epoch(asked)
        return ErrorCode.none, found_epoch, end

    # -- ElectLeaders -------------------------------------------------------------------
    @answers
    def elect_leaders(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        Topic = nested(R, "ReplicaElectionResult")
        Part = nested(R, "PartitionResult")
        preferred = getattr(req, "election_type", PREFERRED) == PREFERRED
        every = req.topic_partitions is None
        extra = {"error_code": ErrorCode.none} if ctx.api_version >= 1 else {}
        if not self.authz.cluster(ctx, Op.ALTER):
            # KafkaApis.handleElectLeaders: ALTER on the cluster; every partition asked refused
            refused = ErrorCode.cluster_authorization_failed
            if ctx.api_version >= 1:
                extra["error_code"] = refused
            return build(R, throttle_time=ZERO, **extra, replica_election_results=tuple(
                build(Topic, topic=t.topic, partition_result=tuple(
                    build(Part, partition_id=p, error_code=refused, error_message=None)
                    for p in t.partitions))
                for t in req.topic_partitions or ()))
        if every:
            asked = [(t.name, list(range(t.partitions))) for t in self.logs.topics()]
        else:
            asked = [(t.topic, list(t.partitions)) for t in req.topic_partitions]
        results = []
        for topic, partitions in asked:
            parts = []
            for p in partitions:
                message: str | None
                if self.logs.get_log(topic, p) is None:
                    error, message = ErrorCode.unknown_topic_or_partition, "The partition does not exist."
                else:
                    outcome = "not_needed" if self.cluster is None else self.cluster.elect(topic, p,
                                                                                           preferred)
                    if every and outcome == "not_needed":
                        continue
                    error, template = _ELECTION[outcome]
                    message = None if template is None else template.format(tp=f"{topic}-{p}")
                parts.append(build(Part, partition_id=p, error_code=error, error_message=message))
            # asked for all: every topic is listed, with only the partitions an election concerned
            results.append(build(Topic, topic=topic, partition_result=tuple(parts)))
        return build(R, throttle_time=ZERO, replica_election_results=tuple(results), **extra)
