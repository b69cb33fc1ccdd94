"""The built-in Schema Registry with KafkaJS and @kafkajs/confluent-schema-registry (pinned in
tests/js/package.json; tests/js/schema_registry.js): for Avro, JSON Schema and Protobuf the package
registers, evolves, gets 409 on an incompatible change, encodes and produces through minibroker,
consumes and decodes. Avro and JSON records cross between KafkaJS and confluent-kafka both ways.
(The package's Protobuf encoding leaves out Confluent's message-index bytes, so its Protobuf
records are not for confluent-kafka's deserializer: a client's own format, not checked across.)
The pipelines are tests/integration/registry_pipelines.py's, which tests/docker's compose test
runs against the container too."""
from __future__ import annotations

import pytest

from tests.integration.registry_pipelines import kafkajs_pipeline


@pytest.fixture
def registry_broker(broker_factory):
    return broker_factory(name="registry-kafkajs", schema_registry=True)


@pytest.mark.parametrize("kind", ["AVRO", "JSON", "PROTOBUF"])
def test_kafkajs(registry_broker, topic, kind):
    out = kafkajs_pipeline(registry_broker.bootstrap_servers, registry_broker.schema_registry_url,
                           topic, kind)
    # a fresh registry: KafkaJS's v1 is the first schema (for Avro and JSON confluent-kafka's), v2 the next
    assert out["ids"] == [1, 2]
