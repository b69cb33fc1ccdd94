"""FindCoordinator v6's share-partition keys on virtual brokers: the coordinator is the leader of
the key's __share_group_state partition (ShareCoordinatorService.partitionFor), the partition
the share coordinator writes that share partition's state to."""

from __future__ import annotations

import base64
import uuid

from minibroker.cluster import Cluster
from minibroker.config.options import Config
from minibroker.coordinator.internal_topics import InternalTopics
from minibroker.coordinator.share.coordinator import state_partition_for
from minibroker_protocol.topics import SHARE_GROUP_STATE_TOPIC
from minibroker_storage import LogConfig, LogManager


def test_a_share_key_is_coordinated_by_its_state_partitions_leader(tmp_path):
    cluster = Cluster([1, 2, 3])
    logs = LogManager(tmp_path / "data", LogConfig())
    try:
        topics = InternalTopics(logs, Config(data_dir=tmp_path / "data", brokers=3), cluster, 1)
        leaders = set()
        for i in range(12):
            topic_id = uuid.uuid4()
            tid = base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()
            key = f"group-{i}:{tid}:{i % 3}"
            node = topics.coordinator_node(2, key)
            partition = state_partition_for(f"group-{i}", topic_id, i % 3)
            assert node == cluster.leader(SHARE_GROUP_STATE_TOPIC, partition)
            leaders.add(node)
        assert logs.topic(SHARE_GROUP_STATE_TOPIC) is not None  # made on first use, as Kafka does
        assert len(leaders) > 1  # spread over the brokers, as the state partitions are
    finally:
        logs.close_all()
