"""Explicit replica assignments on ``--brokers 3``, through confluent-kafka's AdminClient: the
replicas of CreateTopics and CreatePartitions are stored as given, in their order (the first is
the preferred leader), reported by Metadata and DescribeTopicPartitions, kept across a restart, and
followed when a virtual broker stops. A partition assigned only to stopped brokers is refused as
Kafka's controller refuses it. The checks against Kafka 4.4 itself are in
tests/differential/test_replica_assignments.py."""

from __future__ import annotations

import pytest

from tests.reference.client import Connection, part, req

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # noqa: E402

DTP = 75


def _boot(b) -> str:
    return ",".join(b.addresses)


def _metadata(b, topic: str) -> dict[int, tuple[int, list[int]]]:
    md = AdminClient({"bootstrap.servers": _boot(b)}).list_topics(topic, timeout=10)
    return {p.id: (p.leader, list(p.replicas)) for p in md.topics[topic].partitions.values()}


def _described(b, topic: str) -> dict[int, tuple[int, list[int]]]:
    host, port = b.addresses[0].rsplit(":", 1)
    conn = Connection(host, int(port))
    try:
        base = (DTP, 0)
        r = conn.call(req(DTP, 0, topics=(part(base, "TopicRequest", name=topic),), response_partition_limit=100,
                          cursor=None))
        return {p.partition_index: (p.leader_id, list(p.replica_nodes)) for p in r.topics[0].partitions}
    finally:
        conn.close()


def test_assignments_stored_and_reported(broker_factory, topic):
    b = broker_factory(["--brokers", "3"], control=True)
    admin = AdminClient({"bootstrap.servers": _boot(b)})
    given = [[3, 1], [2, 3], [1, 2]]
    admin.create_topics([NewTopic(topic, num_partitions=len(given), replica_assignment=given)])[topic].result(timeout=30)
    expected = {i: (ids[0], ids) for i, ids in enumerate(given)}
    assert _metadata(b, topic) == expected
    assert _described(b, topic) == expected

    admin.create_partitions([NewPartitions(topic, 4, replica_assignment=[[2, 1]])])[topic].result(timeout=30)
    expected[3] = (2, [2, 1])
    assert _metadata(b, topic) == expected

    # a factor unlike the topic's, an unregistered broker: INVALID_REPLICA_ASSIGNMENT
    for bad in ([[1]], [[1, 7]]):
        with pytest.raises(KafkaException) as refused:
            admin.create_partitions([NewPartitions(topic, 5, replica_assignment=bad)])[topic].result(timeout=30)
        assert refused.value.args[0].code() == confluent_kafka.KafkaError.INVALID_REPLICA_ASSIGNMENT, bad

    b.restart()
    assert _metadata(b, topic) == expected, "the assignment did not survive a restart"

    # broker 3 stops: partition 0 ([3, 1]) is led by 1, partition 1 ([2, 3]) keeps 2
    b.control.stop_broker(3)
    md = _metadata(b, topic)
    assert md[0] == (1, [3, 1]) and md[1] == (2, [2, 3]), md
    fenced = topic + "-fenced"
    admin = AdminClient({"bootstrap.servers": _boot(b)})
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic(fenced, num_partitions=1, replica_assignment=[[3]])])[fenced].result(timeout=30)
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.INVALID_REPLICA_ASSIGNMENT
