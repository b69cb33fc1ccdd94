"""Metadata, DescribeTopicPartitions and DescribeCluster: one broker that leads every partition
(or virtual brokers, minibroker/cluster.py)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.topics import is_internal, topic_name_error
from minibroker_storage.catalog import TopicInfo
from minibroker_storage.lazylog import get_logger
from minibroker_storage.manager import LogManager

from ..cluster import Cluster
from ..config.options import Config
from .api import Api, RequestContext
from .authz import OFF, Authz, Op, Res
from .common import (
    AUTHORIZED_OPERATIONS_OMITTED,
    ZERO,
    CreateTopic,
    Endpoint,
    advertised_endpoint,
    answers,
    response_cls,
)

log = get_logger("minibroker.metadata")

_ZERO_UUID = uuid.UUID(int=0)
# Kafka's max.request.partition.size.limit: the most partitions one DescribeTopicPartitions answers
_MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000

# READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (AclOperation codes)
_TOPIC_OPS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
# CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE
_CLUSTER_OPS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


class MetadataHandlers:
    def __init__(self, *, logs: LogManager, config: Config, cluster_id: str,
                 create_topic: CreateTopic, endpoint: Endpoint, cluster: Cluster | None = None,
                 node_endpoints: Callable[[], dict[int, tuple[str, int]]] | None = None,
                 authz: Authz = OFF) -> None:
        self.logs = logs
        self.authz = authz
        # virtual brokers: who leads what, and each node's advertised address
        self.cluster = cluster
        self.node_endpoints = node_endpoints
        self.config = config
        self.cluster_id = cluster_id
        # topics created on demand (auto.create.topics.enable)
        self.create_topic = create_topic
        self.endpoint = endpoint

    def apis(self) -> list[Api]:
        return [
            Api(ApiKey.Metadata, 0, 13, self.metadata),
            Api(ApiKey.DescribeTopicPartitions, 0, 0, self.describe_topic_partitions),
            Api(ApiKey.DescribeCluster, 0, 2, self.describe_cluster),
        ]

    @answers
    def metadata(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        Broker = nested(R, "MetadataResponseBroker")
        Topic = nested(R, "MetadataResponseTopic")
        Partition = nested(R, "MetadataResponsePartition")
        host, port = advertised_endpoint(ctx, self.endpoint)
        node = self.config.node_id
        include_ops = getattr(req, "include_topic_authorized_operations", False)
        authz = self.authz

        cluster = self.cluster

        def partition_entry(name, i):
            if cluster is None:
                return build(Partition, error_code=ErrorCode.none, partition_index=i, leader_id=node,
                             leader_epoch=0, replica_nodes=(node,), isr_nodes=(node,),
                             offline_replicas=())
            leader = cluster.leader(name, i)
            replicas = cluster.replicas(name, i)
            return build(Partition, partition_index=i,
                         error_code=ErrorCode.none if leader is not None else ErrorCode.leader_not_available,
                         leader_id=-1 if leader is None else leader,
                         leader_epoch=cluster.leader_epoch(name, i), replica_nodes=tuple(replicas),
                         isr_nodes=tuple(cluster.isr(name, i)),
                         offline_replicas=tuple(r for r in replicas if r not in cluster.up))

        def topic_entry(name, info=None, error=ErrorCode.none, topic_id=None):
            parts = ()
            if info is not None:
                parts = tuple(partition_entry(info.name, i) for i in range(info.partitions))
                topic_id = info.topic_id
            ops = AUTHORIZED_OPERATIONS_OMITTED
            if include_ops:
                ops = authz.operations(ctx, Res.TOPIC, name) if authz.on and name else _TOPIC_OPS
            return build(Topic, error_code=error, name=name, topic_id=topic_id,
                         is_internal=bool(name and is_internal(name)), partitions=parts,
                         topic_authorized_operations=ops)

        def refused(name, topic_id=None, internal=False):
            # KafkaApis.handleTopicMetadataRequest: no partitions, no authorized operations, and
            # the id only when asked by id (ids are not secret, names are)
            return build(Topic, error_code=ErrorCode.topic_authorization_failed, name=name,
                         topic_id=topic_id, is_internal=internal, partitions=(),
                         topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)

        # Kafka answers the topics it may describe, then those it could not create, then
        # those the caller may not describe (not even whether they exist).
        create_refused: list = []
        describe_refused: list = []
        topics = []
        info: TopicInfo | None
        requested = req.topics
        if requested is None or (ctx.api_version == 0 and not requested):
            visible = authz.names(ctx, Op.DESCRIBE, Res.TOPIC, (t.name for t in self.logs.topics()),
                                  log_if_denied=False) if authz.on else None
            for info in sorted(self.logs.topics(), key=lambda t: t.name):
                if visible is None or info.name in visible:
                    topics.append(topic_entry(info.name, info))
        else:
            allow_auto = getattr(req, "allow_auto_topic_creation", True)
            # KafkaApis: once one topic is asked for by id, the request is by id and topics
            # named without an id are not answered (checked against Kafka 4.4 by
            # tests/differential/test_current_versions.py).
            by_id = any(_has_id(getattr(t, "topic_id", None)) for t in requested)
            for t in requested:
                name = t.name
                tid = getattr(t, "topic_id", None)
                if by_id and not _has_id(tid):
                    continue
                if by_id or name is None:
                    info = self.logs.topic_by_id(tid) if tid is not None else None
                    if info is None:
                        topics.append(topic_entry(None, error=ErrorCode.unknown_topic_id, topic_id=tid))
                    elif not authz.allowed(ctx, Op.DESCRIBE, Res.TOPIC, info.name):
                        describe_refused.append(refused(None, topic_id=tid))
                    else:
                        topics.append(topic_entry(info.name, info))
                    continue
                if not authz.allowed(ctx, Op.DESCRIBE, Res.TOPIC, name):
                    describe_refused.append(refused(name))
                    continue
                info = self.logs.topic(name)
                if info is None:
                    if (allow_auto and self.config.auto_create_topics and authz.on
                            and not authz.cluster(ctx, Op.CREATE, log_if_denied=False)
                            and not authz.allowed(ctx, Op.CREATE, Res.TOPIC, name)):
                        # auto-creation needs CREATE (on the cluster or the topic), checked
                        # before the name is validated
                        create_refused.append(refused(name, internal=is_internal(name)))
                        continue
                    why = topic_name_error(name)
                    if why is not None:
                        topics.append(topic_entry(name, error=ErrorCode.invalid_topic_exception))
                        continue
                    rf = self.config.default_replication_factor
                    if (allow_auto and self.config.auto_create_topics and not is_internal(name)
                            and rf <= self.config.brokers):
                        info = self.create_topic(name, self.config.num_partitions, {}, reason="auto_create",
                                                 replication_factor=rf)
                    else:
                        # librdkafka turns this answer into "Subscribed topic not available"
                        # (rdkafka_cgrp.c, rd_kafka_cgrp_metadata_update_check): say which
                        # connection was told so, and why, for the day a client claims a topic
                        # that exists was reported unknown (issue 13, item 6).
                        log.debug("metadata.topic_unknown", topic=name, client_id=ctx.client_id,
                                  conn=getattr(ctx.connection, "conn_id", None),
                                  correlation_id=ctx.correlation_id, api_version=ctx.api_version,
                                  reason="not in the catalog; auto-create "
                                  + ("refused by the request" if not allow_auto
                                     else "off" if not self.config.auto_create_topics
                                     else "never for internal topics" if is_internal(name)
                                     else f"needs {rf} brokers (default.replication.factor), "
                                          f"there are {self.config.brokers}"))
                        topics.append(topic_entry(name, error=ErrorCode.unknown_topic_or_partition))
                        continue
                topics.append(topic_entry(name, info))
        return build(
            R,
            throttle_time=ZERO,
            error_code=ErrorCode.none,  # v13 (KIP-1102): a top-level error, only for rebootstrap
            brokers=tuple(build(Broker, node_id=n, host=h, port=pt, rack=self.config.rack_of(n))
                          for n, (h, pt) in self._brokers(host, port)),
            cluster_id=self.cluster_id,
            controller_id=node if cluster is None else cluster.controller(),
            topics=tuple(topics + create_refused + describe_refused),
            cluster_authorized_operations=self._cluster_ops(ctx) if getattr(
                req, "include_cluster_authorized_operations", False) else AUTHORIZED_OPERATIONS_OMITTED,
        )

    # -- DescribeTopicPartitions (KIP-966) ----------------------------------------------------
    @answers
    def describe_topic_partitions(self, ctx: RequestContext, req: Any) -> Any:
        """Kafka's DescribeTopicPartitionsRequestHandler and MetadataCache.describeTopicResponse:
        the topics asked (all when none) from the cursor on, in name order, until
        ``response_partition_limit`` partitions are answered; then ``next_cursor`` says where
        the next page starts. Eligible leader replicas are always empty: minibroker does not
        finalize eligible.leader.replicas.version, and Kafka without ELR reports them empty."""
        R = response_cls(ctx)
        Topic = nested(R, "DescribeTopicPartitionsResponseTopic")
        Partition = nested(R, "DescribeTopicPartitionsResponsePartition")
        Cursor = nested(R, "Cursor")
        cursor = req.cursor
        cursor_topic = cursor.topic_name if cursor is not None else ""
        fetch_all = not req.topics
        if fetch_all:
            names = {t.name for t in self.logs.topics() if t.name >= cursor_topic}
        else:
            names = {t.name for t in req.topics if t.name >= cursor_topic}
            if cursor is not None and cursor.topic_name not in names:
                return self._dtp_refused(R, Topic, req, "DescribeTopicPartitionsRequest topic list should "
                                         f"contain the cursor topic: {cursor.topic_name}")
        if cursor is not None and cursor.partition_index < 0:
            return self._dtp_refused(R, Topic, req, "DescribeTopicPartitionsRequest cursor partition must "
                                     f"be valid: Cursor(topicName={cursor.topic_name}, "
                                     f"partitionIndex={cursor.partition_index})")
        authz = self.authz
        refused = []
        allowed = []
        for name in sorted(names, key=_java_order):
            if authz.allowed(ctx, Op.DESCRIBE, Res.TOPIC, name):
                allowed.append(name)
            elif not fetch_all:
                # the id is not told to whom may not describe the topic
                refused.append(build(Topic, error_code=ErrorCode.topic_authorization_failed, name=name,
                                     topic_id=_ZERO_UUID, is_internal=False, partitions=()))
        cluster = self.cluster
        node = self.config.node_id

        def partition_entry(topic: str, i: int) -> Any:
            if cluster is None:
                return build(Partition, error_code=ErrorCode.none, partition_index=i, leader_id=node,
                             leader_epoch=0, replica_nodes=(node,), isr_nodes=(node,),
                             eligible_leader_replicas=(), last_known_elr=(), offline_replicas=())
            leader = cluster.leader(topic, i)
            replicas = cluster.replicas(topic, i)
            # no partition error here, unlike Metadata: a leaderless partition says leader -1
            return build(Partition, error_code=ErrorCode.none, partition_index=i,
                         leader_id=-1 if leader is None else leader,
                         leader_epoch=cluster.leader_epoch(topic, i), replica_nodes=tuple(replicas),
                         isr_nodes=tuple(cluster.isr(topic, i)), eligible_leader_replicas=(),
                         last_known_elr=(),
                         offline_replicas=tuple(r for r in replicas if r not in cluster.up))

        remaining = max(min(_MAX_REQUEST_PARTITION_SIZE_LIMIT, req.response_partition_limit), 1)
        topics = []
        next_cursor = None
        for name in allowed:
            if remaining == 0:
                # the previous topic filled the page to the last partition: the next page starts here
                next_cursor = build(Cursor, topic_name=name, partition_index=0)
                break
            ops = authz.operations(ctx, Res.TOPIC, name) if authz.on else _TOPIC_OPS
            info = self.logs.topic(name)
            if info is None:
                if fetch_all:
                    continue
                error = (ErrorCode.invalid_topic_exception if topic_name_error(name) is not None
                         else ErrorCode.unknown_topic_or_partition)
                topics.append(build(Topic, error_code=error, name=name, topic_id=_ZERO_UUID,
                                    is_internal=is_internal(name), partitions=(),
                                    topic_authorized_operations=ops))
                continue
            start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
            upper = min(info.partitions, start + remaining)
            parts = tuple(partition_entry(name, i) for i in range(start, upper))
            topics.append(build(Topic, error_code=ErrorCode.none, name=name, topic_id=info.topic_id,
                                is_internal=is_internal(name), partitions=parts,
                                topic_authorized_operations=ops))
            if upper < info.partitions:
                next_cursor = build(Cursor, topic_name=name, partition_index=upper)
                break
            remaining -= len(parts)
        return build(R, throttle_time=ZERO, topics=tuple(topics + refused), next_cursor=next_cursor)

    @staticmethod
    def _dtp_refused(R: Any, Topic: Any, req: Any, message: str) -> Any:
        """DescribeTopicPartitionsRequest.getErrorResponse for an InvalidRequestException: each
        topic asked, INVALID_REQUEST, nothing else (the message reaches only the broker's log)."""
        log.info("describe_topic_partitions.invalid_request", reason=message)
        return build(R, throttle_time=ZERO, next_cursor=None, topics=tuple(
            build(Topic, error_code=ErrorCode.invalid_request, name=t.name, topic_id=_ZERO_UUID,
                  is_internal=False, partitions=()) for t in req.topics))

    def _cluster_ops(self, ctx: RequestContext) -> int:
        """Metadata v8-10's cluster operations: 0 without DESCRIBE on the cluster."""
        if not self.authz.on:
            return _CLUSTER_OPS
        if not self.authz.cluster(ctx, Op.DESCRIBE):
            return 0
        return self.authz.operations(ctx, Res.CLUSTER, "kafka-cluster")

    @answers
    def describe_cluster(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        B = nested(R, "DescribeClusterBroker")
        host, port = advertised_endpoint(ctx, self.endpoint)
        endpoint_type = getattr(req, "endpoint_type", 1)
        if endpoint_type != 1:
            # KIP-919: a broker answers for brokers only; controllers are asked directly.
            return build(R, throttle_time=ZERO, error_code=ErrorCode.unsupported_endpoint_type,
                         error_message="The broker only handles endpoint type BROKERS",
                         endpoint_type=endpoint_type, cluster_id=self.cluster_id, controller_id=-1,
                         brokers=(), cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
        return build(
            R, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
            endpoint_type=1, cluster_id=self.cluster_id,
            controller_id=self.config.node_id if self.cluster is None else self.cluster.controller(),
            # v2's include_fenced_brokers changes nothing: a stopped virtual broker is not listed.
            brokers=tuple(build(B, broker_id=n, host=h, port=pt, rack=self.config.rack_of(n), is_fenced=False)
                          for n, (h, pt) in self._brokers(host, port)),
            cluster_authorized_operations=self._cluster_ops(ctx) if req.include_cluster_authorized_operations
            else AUTHORIZED_OPERATIONS_OMITTED,
        )


    def _brokers(self, host: str, port: int) -> list[tuple[int, tuple[str, int]]]:
        """The brokers up, each at its address on the asking client's listener."""
        if self.cluster is None or self.node_endpoints is None:
            return [(self.config.node_id, (host, port))]
        endpoints = self.node_endpoints()
        return [(n, endpoints[n]) for n in sorted(self.cluster.up) if n in endpoints]


def _java_order(name: str) -> bytes:
    """Java's String.compareTo order (UTF-16 code units), which sorts Kafka's topic set."""
    return name.encode("utf-16-be", "surrogatepass")


def _has_id(topic_id: Any) -> bool:
    return topic_id is not None and topic_id.int != 0
