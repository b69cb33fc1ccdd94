"""kafka-topics.sh (Kafka 4.4's TopicCommand) on ``--brokers 3``: --create with
--replica-assignment, --describe showing the replicas in the order given with the first as
leader, --alter adding an assigned partition, and the ISR shrinking in --describe (and
--under-replicated-partitions listing it) when a virtual broker stops. The output on one node is
compared with Kafka 4.4's in tests/differential/test_topic_command.py."""

from __future__ import annotations

import re

from tests.reference.kafka_tools import topic_command


def _rows(text: str) -> dict[int, tuple[str, str, str]]:
    """partition -> (leader, replicas, isr) from --describe's partition lines."""
    rows = {}
    for m in re.finditer(r"Partition: (\d+)\tLeader: (\S+)\tReplicas: (\S*)\tIsr: (\S*)", text):
        rows[int(m.group(1))] = (m.group(2), m.group(3), m.group(4))
    return rows


def test_topic_command_on_three_brokers(broker_factory, topic):
    b = broker_factory(["--brokers", "3"], control=True)
    boot = b.addresses[1]
    assert topic_command(boot, "--create", "--topic", topic, "--replica-assignment", "3:1,2:3,1:2") == (
        0, f"Created topic {topic}.")
    code, out = topic_command(boot, "--describe", "--topic", topic)
    assert code == 0 and "PartitionCount: 3\tReplicationFactor: 2" in out, out
    assert _rows(out) == {0: ("3", "3,1", "3,1"), 1: ("2", "2,3", "2,3"), 2: ("1", "1,2", "1,2")}, out
    assert topic_command(boot, "--alter", "--topic", topic, "--partitions", "4", "--replica-assignment",
                         "3:1,2:3,1:2,2:1")[0] == 0
    b.control.stop_broker(3)
    code, out = topic_command(boot, "--describe", "--topic", topic)
    assert _rows(out) == {0: ("1", "3,1", "1"), 1: ("2", "2,3", "2"), 2: ("1", "1,2", "1,2"),
                          3: ("2", "2,1", "2,1")}, out
    code, out = topic_command(boot, "--describe", "--under-replicated-partitions")
    assert code == 0 and set(_rows(out)) == {0, 1}, out
