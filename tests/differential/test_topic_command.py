"""Kafka's own kafka-topics.sh (org.apache.kafka.tools.TopicCommand from the cached kafka-tools
4.4 jars) against minibroker and Kafka 4.4, output compared line by line modulo topic ids and node
ids: --create with --replica-assignment and --config, --describe of that topic (through
DescribeTopicPartitions and DescribeConfigs), --alter adding an assigned partition, --describe
again, and the refusals (a topic that exists, an unregistered broker in the assignment). Three
virtual brokers, where the order of the replicas shows, are in
tests/integration/test_topic_command.py.
"""

from __future__ import annotations

import re
import uuid

from tests.reference.client import Connection, part, req
from tests.reference.kafka_tools import topic_command

METADATA, DESCRIBE_CONFIGS = 3, 32
TOPIC_RESOURCE, DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 2, 1, 5


def _node(port: int) -> int:
    with Connection("127.0.0.1", port) as conn:
        md = conn.call(req(METADATA, 12, topics=(), allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False))
    return md.brokers[0].node_id


def _broker_level_configs(port: int, topic: str) -> set[str]:
    """The topic's configs that come from the broker's own settings (not the topic's, not the
    default): kafka-topics prints every non-default one, and the reference Kafka sets a few."""
    base = (DESCRIBE_CONFIGS, 4)
    with Connection("127.0.0.1", port) as conn:
        r = conn.call(req(DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=False, resources=(
            part(base, "DescribeConfigsResource", resource_type=TOPIC_RESOURCE, resource_name=topic,
                 configuration_keys=None),)))
    return {c.name for c in r.results[0].configs if c.config_source not in (DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG)}


def _normal(text: str, node: int, drop: set[str]) -> list[str]:
    out = []
    for line in text.splitlines():
        line = re.sub(r"^\d{4}-\d\d-\d\dT\S+ ", "", line)  # the time of a logged error
        line = re.sub(r"TopicId: \S+", "TopicId: ID", line)
        line = re.sub(rf"(?<![\d.]){node}(?![\d.])", "N", line) if "Partition" in line or "broker" in line else line
        if "Configs:" in line:
            head, _, configs = line.partition("Configs:")
            kept = [c for c in configs.strip().split(",") if c and c.split("=", 1)[0] not in drop]
            line = head + "Configs: " + ",".join(sorted(kept))
        out.append(line.rstrip())
    return out


def test_create_describe_alter_like_kafka(differential_pair, kafka_reference):
    mini = differential_pair.mini.conn.address
    sides = {"kafka": kafka_reference.port, "minibroker": mini[1]}
    topic = f"tc-{uuid.uuid4().hex[:6]}"
    outputs: dict[str, list[list[str]]] = {}
    for name, port in sides.items():
        boot, node = f"127.0.0.1:{port}", _node(port)
        steps = [
            ("--create", "--topic", topic, "--replica-assignment", f"{node},{node}", "--config", "retention.ms=100000",
             "--config", "cleanup.policy=compact"),
            ("--describe", "--topic", topic),
            ("--alter", "--topic", topic, "--partitions", "3", "--replica-assignment", f"{node},{node},{node}"),
            ("--describe", "--topic", topic),
            ("--create", "--topic", topic, "--partitions", "1"),
            ("--create", "--topic", topic + "-x", "--replica-assignment", f"{node},4242"),
            ("--describe", "--topic", topic + "-nope"),
        ]
        results = [topic_command(boot, *s) for s in steps]
        drop = _broker_level_configs(port, topic)
        outputs[name] = [[str(code)] + _normal(text, node, drop) for code, text in results]
    for i, (k, m) in enumerate(zip(outputs["kafka"], outputs["minibroker"])):
        assert k == m, f"step {i}:\n  kafka      {k}\n  minibroker {m}"
    assert outputs["kafka"][0] == ["0", f"Created topic {topic}."]
    assert sum("Replicas: N" in line for line in outputs["kafka"][3]) == 3, outputs["kafka"][3]
    assert outputs["kafka"][5][0] == "1" and any("4242" in line for line in outputs["kafka"][5]), outputs["kafka"][5]
