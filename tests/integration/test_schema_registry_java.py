"""The built-in Schema Registry with the Java side (issue 34): tests/integration/registry_java/
RegistryAvro.java, the stock kafka-clients producer/consumer with Apache Avro and Confluent's wire
format over java.net.http (no Confluent-compatible serde is on Maven Central here), registers and
evolves a schema, gets 409 on an incompatible one, and reads what confluent-kafka's AvroSerializer
wrote; confluent-kafka's AvroDeserializer reads what the Java side wrote. The pipeline is
tests/integration/registry_pipelines.py's, which tests/docker's compose test runs too."""
from __future__ import annotations

import pytest

from tests.integration.registry_pipelines import java_pipeline


@pytest.fixture
def registry_broker(broker_factory):
    return broker_factory(name="registry-java", schema_registry=True)


def test_java_and_confluent_kafka_read_each_other(registry_broker, topic):
    out = java_pipeline(registry_broker.bootstrap_servers, registry_broker.schema_registry_url, topic)
    # a fresh registry: confluent-kafka's v1 is id 1, the Java side's v2 id 2
    assert out["ids"] == [1, 2]
    assert out["writer_ids"] == [1, 1, 2]
