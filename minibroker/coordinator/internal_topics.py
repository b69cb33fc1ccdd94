"""Where the coordinators keep their state: ``__consumer_offsets``, ``__transaction_state`` and
``__share_group_state``,
created on first use with Kafka's settings for them, and which partition (and, with virtual
brokers, which node) holds a group's or a transactional id's state (Kafka's partitionFor)."""

from __future__ import annotations

from minibroker_protocol.topics import (
    GROUP_METADATA_TOPIC,
    SHARE_GROUP_STATE_TOPIC,
    TRANSACTION_STATE_TOPIC,
)
from minibroker_storage.manager import LogManager

from ..cluster import Cluster
from ..config.options import Config
from ..core.java_hash import java_string_hash

# Kafka's share.coordinator.state.topic.num.partitions and .segment.bytes defaults
SHARE_STATE_PARTITIONS = 50
SHARE_STATE_SEGMENT_BYTES = 100 * 1024 * 1024


class InternalTopics:
    def __init__(self, logs: LogManager, config: Config, cluster: Cluster | None, node_id: int) -> None:
        self.logs = logs
        self.config = config
        self.cluster = cluster  # None with one broker: that broker coordinates everything
        self.node_id = node_id

    def log(self, topic: str, partition: int):
        """A partition of __transaction_state / __consumer_offsets / __share_group_state,
        created on first use."""
        if self.logs.topic(topic) is None:
            groups = topic == GROUP_METADATA_TOPIC
            count = (self.config.offsets_topic_partitions if groups
                     else self.config.transaction_state_partitions)
            # Kafka's offsets.topic.segment.bytes / transaction.state.log.segment.bytes
            # (100 MiB, not log.segment.bytes): segments roll, each roll's producer snapshot
            # bounds what storage replays at start-up, and the cleaner compacts what it sealed.
            segment_bytes = (self.config.offsets_topic_segment_bytes if groups
                             else self.config.transaction_state_log_segment_bytes)
            configs = {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes)}
            if topic == SHARE_GROUP_STATE_TOPIC:
                # Not compacted: Kafka 4.4's ShareCoordinatorService.shareGroupStateTopicConfigs
                # (the share coordinator prunes it with DeleteRecords instead, see share/coordinator.py).
                count = SHARE_STATE_PARTITIONS
                # Its min.insync.replicas (share.coordinator.state.topic.min.isr, 2) is left
                # out as for the other internal topics: the coordinators' appends are local.
                configs = {"cleanup.policy": "delete", "retention.ms": "-1",
                           "compression.type": "producer",
                           "segment.bytes": str(SHARE_STATE_SEGMENT_BYTES)}
            self.logs.create_topic(topic, count, configs)
            if self.cluster is not None:
                # Kafka's offsets.topic.replication.factor / transaction.state.log.replication.factor
                # (3), as far as there are brokers: a coordinator moves when its broker stops.
                self.cluster.set_replication(topic, min(3, self.cluster.size))
                self.cluster.observe(topic, count)
        return self.logs.get_log(topic, partition)

    def coordinator_topic(self, key_type: int) -> None:
        """The internal topic behind a coordinator key type (0 group, 1 transaction), created
        when missing: Kafka creates __consumer_offsets / __transaction_state at the first
        FindCoordinator (KafkaApis.getOrCreateInternalTopic), so Metadata lists it from then on;
        2 (a share partition, FindCoordinator v6) is __share_group_state's."""
        topics = {0: GROUP_METADATA_TOPIC, 2: SHARE_GROUP_STATE_TOPIC}
        self.log(topics.get(key_type, TRANSACTION_STATE_TOPIC), 0)

    def transaction_partition_for(self, transactional_id: str) -> int:
        """Kafka's TransactionStateManager.partitionFor, for placing the coordinator."""
        self.log(TRANSACTION_STATE_TOPIC, 0)
        return (java_string_hash(transactional_id) & 0x7FFFFFFF) % self.config.transaction_state_partitions

    def offsets_partition_for(self, group_id: str) -> int:
        """Kafka's GroupCoordinator.partitionFor: abs(groupId.hashCode) % partitions."""
        info = self.logs.topic(GROUP_METADATA_TOPIC)
        if info is None:
            self.log(GROUP_METADATA_TOPIC, 0)
            info = self.logs.topic(GROUP_METADATA_TOPIC)
            assert info is not None  # just created
        return (java_string_hash(group_id) & 0x7FFFFFFF) % info.partitions

    def coordinator_node(self, key_type: int, key: str) -> int | None:
        """The node coordinating a group (0) or transactional id (1); None while its
        partition has no leader. With one broker, that broker."""
        if self.cluster is None:
            return self.node_id
        if key_type == 2:
            # ShareCoordinatorService.partitionFor: the key is "group:topicId:partition" already
            self.log(SHARE_GROUP_STATE_TOPIC, 0)
            return self.cluster.leader(SHARE_GROUP_STATE_TOPIC,
                                       (java_string_hash(key) & 0x7FFFFFFF) % SHARE_STATE_PARTITIONS)
        if key_type == 1:
            return self.cluster.leader(TRANSACTION_STATE_TOPIC, self.transaction_partition_for(key))
        return self.cluster.leader(GROUP_METADATA_TOPIC, self.offsets_partition_for(key))
