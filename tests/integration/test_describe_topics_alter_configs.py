"""Issue 32's DescribeTopicPartitions and AlterConfigs with real clients.

The stock Java Admin 4.4 (tests/integration/java/DescribeTopics.java) describes topics with
DescribeTopicPartitions, paging through a topic with more partitions than one answer holds, on
one broker and on ``--brokers 3`` with a virtual broker stopped; confluent-kafka's (deprecated)
``AdminClient.alter_configs``, librdkafka's AlterConfigs, replaces a topic's whole config set.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from minibroker.testing import MiniBroker, requests_seen

from . import java_client
from .clients import create_topic, unique_topic

DYNAMIC_TOPIC_CONFIG = 1


@pytest.fixture(scope="module")
def describe_topics():
    return java_client.json_driver("DescribeTopics")


def test_java_admin_describe_topics_pages_through_describe_topic_partitions(describe_topics):
    with MiniBroker(name="describe-topics") as b:
        big, small = unique_topic("dtp-big"), unique_topic("dtp-small")
        create_topic(b.bootstrap_servers, big, 7)
        create_topic(b.bootstrap_servers, small, 2)
        # 3 partitions a page: the big topic takes three requests, resumed from the cursor
        got = describe_topics(b.bootstrap_servers, "3", big, small, "dtp-missing")
        assert [p[0] for p in got["topics"][big]["partitions"]] == list(range(7)), got
        assert got["topics"][big]["partitions"][0] == [0, 1, [1], [1], [], []], got
        assert [p[0] for p in got["topics"][small]["partitions"]] == [0, 1], got
        assert got["topics"][big]["internal"] is False
        assert got["errors"]["dtp-missing"].startswith("UnknownTopicOrPartitionException"), got
        # every topic (listTopics, then describeTopics of them all), 2000 partitions a page
        every = describe_topics(b.bootstrap_servers, "2000")
        assert {big, small} <= set(every["topics"]), every
        assert every["topics"][big] == got["topics"][big]
        dtp = [v for api, v, client in requests_seen(b.log_text())
               if api == "DescribeTopicPartitions" and client == "apache-kafka-java"]
        assert dtp and set(dtp) == {0}, requests_seen(b.log_text())


def test_java_admin_describe_topics_on_virtual_brokers(describe_topics, broker_factory):
    b = broker_factory(["--brokers", "3"], control=True)
    boot = ",".join(b.addresses)
    topic = unique_topic("dtp-rf3")
    admin = AdminClient({"bootstrap.servers": boot})
    admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=3)])[topic].result(15)
    before = describe_topics(boot, "2", topic)["topics"][topic]["partitions"]
    assert [p[0] for p in before] == [0, 1, 2, 3]
    assert all(sorted(p[2]) == [1, 2, 3] and sorted(p[3]) == [1, 2, 3] and p[1] == p[2][0] for p in before), before
    stopped = before[0][1]
    b.control.stop_broker(stopped)
    up = ",".join(a for n, a in zip((1, 2, 3), b.addresses, strict=True) if n != stopped)
    after = describe_topics(up, "2", topic)["topics"][topic]["partitions"]
    for p, q in zip(before, after, strict=True):
        assert q[2] == p[2]  # replicas stay
        assert stopped not in q[3] and q[1] != stopped and q[1] in q[3], (before, after)
        assert q[4] == q[5] == []


def _topic_configs(admin: AdminClient, topic: str) -> dict[str, str]:
    res = ConfigResource(ResourceType.TOPIC, topic)
    got = admin.describe_configs([res])[res].result(timeout=20)
    return {k: e.value for k, e in got.items() if e.source == DYNAMIC_TOPIC_CONFIG}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_confluent_kafka_alter_configs_replaces_the_whole_set():
    with MiniBroker(name="alter-configs") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        topic = unique_topic("alter-configs")
        create_topic(b.bootstrap_servers, topic, 1)

        def alter(configs: dict[str, str], validate_only: bool = False) -> None:
            res = ConfigResource(ResourceType.TOPIC, topic, set_config=configs)
            admin.alter_configs([res], validate_only=validate_only)[res].result(timeout=20)

        alter({"retention.ms": "86400000", "cleanup.policy": "compact"})
        assert _topic_configs(admin, topic) == {"retention.ms": "86400000", "cleanup.policy": "compact"}
        alter({"segment.ms": "3600000"})  # the two others are deleted
        assert _topic_configs(admin, topic) == {"segment.ms": "3600000"}
        alter({"retention.ms": "1000"}, validate_only=True)
        assert _topic_configs(admin, topic) == {"segment.ms": "3600000"}
        with pytest.raises(KafkaException, match="Invalid value soon for configuration retention.ms"):
            alter({"retention.ms": "soon"})
        assert _topic_configs(admin, topic) == {"segment.ms": "3600000"}
        res = ConfigResource(ResourceType.BROKER, "1", set_config={"log.cleaner.threads": "2"})
        with pytest.raises(KafkaException, match="minibroker does not change broker configs at runtime"):
            admin.alter_configs([res])[res].result(timeout=20)
        sent = {(v, c) for a, v, c in requests_seen(b.log_text()) if a == "AlterConfigs"}
        assert sent and all(c == "confluent-kafka-python" for _v, c in sent), sent
        b.restart(graceful=False)  # kill -9: the configs were on disk before the answer
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        assert _topic_configs(admin, topic) == {"segment.ms": "3600000"}
