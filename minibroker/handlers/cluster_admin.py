"""The cluster's own administration: partition reassignments, the KRaft quorum, broker
unregistration and replica log dirs, as kafka-reassign-partitions.sh, kafka-metadata-quorum.sh,
kafka-cluster.sh and kafka-reassign-partitions.sh --reassignment-json-file with log dirs send them.

Kafka: ReplicationControlManager (alterPartitionReassignment, listPartitionReassignments,
validateManualPartitionAssignment), KafkaRaftClient.handleDescribeQuorumRequest and
DescribeQuorumRequest.getPartitionLevelErrorResponse, ClusterControlManager.unregisterBroker,
ReplicaManager.alterReplicaLogDirs. Reassignments work on virtual brokers (``--brokers N``, the
Cluster); one broker is its own cluster of one node, whose only valid replica list is itself.

The quorum is a one-voter KRaft quorum, as a combined Kafka node's: the voter is the cluster's
controller, the other virtual brokers up are its observers (brokers fetch the metadata log).
minibroker keeps no metadata log: its end offset is reported as the finalized features' epoch,
which Kafka also takes from that log's offsets, so a client comparing ApiVersions' feature epoch
with the quorum's high watermark sees them ordered as on Kafka.
"""

from __future__ import annotations

from typing import Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode
from minibroker_storage.lazylog import get_logger
from minibroker_storage.manager import LogManager

from ..cluster import Cluster
from ..config.features import Features
from ..config.options import Config
from ..core.clock import Clock
from .api import Api, RequestContext
from .authz import OFF, Authz, Op
from .common import ZERO, Endpoint, advertised_endpoint, answers, response_cls

log = get_logger("minibroker.handlers.cluster_admin")

METADATA_TOPIC = "__cluster_metadata"  # the KRaft metadata log's topic-partition, 0
NOT_HOSTED = "This server does not host this topic-partition."
# What Kafka's voter endpoint is named: its controller.listener.names (the reference's is this)
CONTROLLER_LISTENER = "CONTROLLER"


class ClusterAdminHandlers:
    def __init__(self, *, logs: LogManager, config: Config, cluster: Cluster | None, features: Features,
                 clock: Clock, endpoint: Endpoint, authz: Authz = OFF) -> None:
        self.logs = logs
        self.config = config
        self.cluster = cluster
        self.features = features
        self.clock = clock
        self.endpoint = endpoint
        self.authz = authz

    def apis(self) -> list[Api]:
        return [Api(ApiKey.AlterReplicaLogDirs, 1, 2, self.alter_replica_log_dirs),
                Api(ApiKey.AlterPartitionReassignments, 0, 1, self.alter_partition_reassignments),
                Api(ApiKey.ListPartitionReassignments, 0, 0, self.list_partition_reassignments),
                Api(ApiKey.DescribeQuorum, 0, 2, self.describe_quorum),
                Api(ApiKey.UnregisterBroker, 0, 0, self.unregister_broker)]

    def _node_ids(self) -> list[int]:
        return self.cluster.node_ids if self.cluster is not None else [self.config.node_id]

    def _replicas(self, topic: str, partition: int) -> list[int]:
        if self.cluster is not None:
            return self.cluster.replicas(topic, partition)
        return [self.config.node_id]

    def _partition_exists(self, topic: str, partition: int) -> bool:
        return self.logs.get_log(topic, partition) is not None

    # -- AlterPartitionReassignments -------------------------------------------------------
    @answers
    def alter_partition_reassignments(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        Topic = nested(R, "ReassignableTopicResponse")
        Part = nested(R, "ReassignablePartitionResponse")
        allow = getattr(req, "allow_replication_factor_change", True)
        if not self.authz.cluster(ctx, Op.ALTER):
            # ControllerApis.handleAlterPartitionReassignments: ALTER on the cluster, else the
            # whole request is refused
            return build(R, throttle_time=ZERO, allow_replication_factor_change=allow,
                         error_code=ErrorCode.cluster_authorization_failed,
                         error_message=None, responses=())
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                error, message = self._reassign(t.name, p.partition_index, p.replicas, allow)
                parts.append(build(Part, partition_index=p.partition_index, error_code=error,
                                   error_message=message))
            topics.append(build(Topic, name=t.name, partitions=tuple(parts)))
        # an empty request never reaches the controller's result, whose message is null
        return build(R, throttle_time=ZERO, allow_replication_factor_change=allow, error_code=ErrorCode.none,
                     error_message=None if req.topics else "", responses=tuple(topics))

    def _reassign(self, topic: str, partition: int, replicas: Any,
                  allow: bool) -> tuple[ErrorCode, str | None]:
        info = self.logs.topic(topic)
        if info is None:
            return ErrorCode.unknown_topic_or_partition, f"Unable to find a topic named {topic}."
        if not 0 <= partition < info.partitions:
            return ErrorCode.unknown_topic_or_partition, f"Unable to find partition {topic}:{partition}."
        if replicas is None:  # a cancellation
            if self.cluster is not None and self.cluster.cancel_reassignment(topic, partition):
                return ErrorCode.none, None
            return ErrorCode.no_reassignment_in_progress, None
        target = [int(n) for n in replicas]
        if self.cluster is None:
            error = Cluster([self.config.node_id]).reassignment_error(topic, partition, target, allow)
        else:
            error = self.cluster.reassignment_error(topic, partition, target, allow)
        if error is not None:
            return ErrorCode[error[0]], error[1]
        if self.cluster is not None:
            self.cluster.reassign(topic, partition, target)
        return ErrorCode.none, None

    # -- ListPartitionReassignments --------------------------------------------------------
    @answers
    def list_partition_reassignments(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        Topic = nested(R, "OngoingTopicReassignment")
        Part = nested(R, "OngoingPartitionReassignment")
        if not self.authz.cluster(ctx, Op.DESCRIBE):
            return build(R, throttle_time=ZERO, error_code=ErrorCode.cluster_authorization_failed,
                         error_message=None, topics=())
        ongoing = self.cluster.ongoing() if self.cluster is not None else {}
        if req.topics is None:
            wanted = sorted(ongoing)
        else:  # partitions asked for that are not being reassigned (or do not exist) are left out
            wanted = [(t.name, p) for t in req.topics for p in t.partition_indexes if (t.name, p) in ongoing]
        by_topic: dict[str, list[Any]] = {}
        for tp in dict.fromkeys(wanted):
            replicas, adding, removing = ongoing[tp]
            by_topic.setdefault(tp[0], []).append(build(
                Part, partition_index=tp[1], replicas=tuple(replicas), adding_replicas=tuple(adding),
                removing_replicas=tuple(removing)))
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None, topics=tuple(
            build(Topic, name=name, partitions=tuple(parts)) for name, parts in by_topic.items()))

    # -- DescribeQuorum ----------------------------------------------------------------------
    @answers
    def describe_quorum(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        TopicData = nested(R, "TopicData")
        PartitionData = nested(R, "PartitionData")
        if not self.authz.cluster(ctx, Op.DESCRIBE):
            # KafkaApis.handleDescribeQuorumRequest: DESCRIBE on the cluster
            return build(R, error_code=ErrorCode.cluster_authorization_failed,
                         error_message=None, topics=(), nodes=())
        asked = [(t.topic_name, [p.partition_index for p in t.partitions]) for t in req.topics]
        if asked != [(METADATA_TOPIC, [0])]:
            # DescribeQuorumRequest.getPartitionLevelErrorResponse: anything but exactly the
            # metadata partition gets every partition answered UNKNOWN_TOPIC_OR_PARTITION
            return build(R, error_code=ErrorCode.none, error_message="", nodes=(), topics=tuple(
                build(TopicData, topic_name=name, partitions=tuple(
                    build(PartitionData, partition_index=p, error_code=ErrorCode.unknown_topic_or_partition,
                          error_message=NOT_HOSTED, leader_id=0, leader_epoch=0, high_watermark=0,
                          current_voters=(), observers=()) for p in parts))
                for name, parts in asked))
        ReplicaState = nested(R, "ReplicaState")
        leader = self.cluster.controller() if self.cluster is not None else self.config.node_id
        epoch = self.cluster.quorum_epoch if self.cluster is not None else 1
        end = self.features.epoch
        now = self.clock.wall_ms()

        def replica(node: int) -> Any:
            # every replica is this process: each has fetched, and caught up, just now
            return build(ReplicaState, replica_id=node, replica_directory_id=None, log_end_offset=end,
                         last_fetch_timestamp=now, last_caught_up_timestamp=now)
        observers = [n for n in sorted(self.cluster.up) if n != leader] if self.cluster is not None else []
        partition = build(PartitionData, partition_index=0, error_code=ErrorCode.none, error_message="",
                          leader_id=leader, leader_epoch=epoch, high_watermark=end,
                          current_voters=(replica(leader),), observers=tuple(replica(n) for n in observers))
        nodes: tuple[Any, ...] = ()
        if ctx.api_version >= 2:
            Node, Listener = nested(R, "Node"), nested(R, "Listener")
            host, port = advertised_endpoint(ctx, self.endpoint)
            nodes = (build(Node, node_id=leader, listeners=(
                build(Listener, name=CONTROLLER_LISTENER, host=host, port=port),)),)
        return build(R, error_code=ErrorCode.none, error_message="", nodes=nodes, topics=(
            build(TopicData, topic_name=METADATA_TOPIC, partitions=(partition,)),))

    # -- UnregisterBroker --------------------------------------------------------------------
    @answers
    def unregister_broker(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        if not self.authz.cluster(ctx, Op.ALTER):
            return build(R, throttle_time=ZERO, error_code=ErrorCode.cluster_authorization_failed,
                         error_message=None)
        if req.broker_id not in self._node_ids():
            # ClusterControlManager.unregisterBroker
            return build(R, throttle_time=ZERO, error_code=ErrorCode.broker_id_not_registered,
                         error_message=f"Broker ID {req.broker_id} is not currently registered")
        # Kafka removes the registration; a broker still running is then refused by the
        # controller until it restarts. A virtual broker is part of this process and stays: the
        # answer is Kafka's, the node is not dropped (divergences.py, UNREGISTER_BROKER).
        log.warning("cluster.broker_unregister_ignored", broker=req.broker_id,
                    reason="a virtual broker is part of this process; it stays registered")
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none, error_message="")

    # -- AlterReplicaLogDirs -----------------------------------------------------------------
    @answers
    def alter_replica_log_dirs(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        Topic = nested(R, "AlterReplicaLogDirTopicResult")
        Part = nested(R, "AlterReplicaLogDirPartitionResult")
        allowed = self.authz.cluster(ctx, Op.ALTER)
        home = str(self.logs.data_dir)
        # ReplicaManager.alterReplicaLogDirs: one answer per partition (the last dir named for a
        # partition wins, as the map Kafka builds keeps it), grouped by topic
        errors: dict[str, dict[int, ErrorCode]] = {}
        for d in req.dirs:
            for t in d.topics:
                for p in t.partitions:
                    errors.setdefault(t.name, {})[p] = self._log_dir_error(allowed, home, d.path, t.name, p)
        return build(R, throttle_time=ZERO, results=tuple(
            build(Topic, topic_name=name, partitions=tuple(
                build(Part, partition_index=p, error_code=e) for p, e in parts.items()))
            for name, parts in errors.items()))

    def _log_dir_error(self, allowed: bool, home: str, path: str, topic: str, partition: int) -> ErrorCode:
        if not allowed:
            return ErrorCode.cluster_authorization_failed
        # this broker has one log dir, the data dir: a partition already lives there, any other
        # path is not one of its log dirs
        if path.rstrip("/") != home.rstrip("/"):
            return ErrorCode.log_dir_not_found
        if not self._partition_exists(topic, partition):
            return ErrorCode.unknown_topic_or_partition
        return ErrorCode.none
