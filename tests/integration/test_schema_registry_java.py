"""The built-in Schema Registry with the Java side (issue 34): tests/integration/registry_java/
RegistryAvro.java, the stock kafka-clients producer/consumer with Apache Avro and Confluent's wire
format over java.net.http (no Confluent-compatible serde is on Maven Central here), registers and
evolves a schema, gets 409 on an incompatible one, and reads what confluent-kafka's AvroSerializer
wrote; confluent-kafka's AvroDeserializer reads what the Java side wrote."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.differential import avro_java
from tests.integration.java_client import (
    JavaToolchain,
    _unavailable,
    compile_drivers,
    java_toolchain,
    run_driver,
)
from tests.integration.test_schema_registry import USER_BAD, USER_V1, USER_V2, _consume

SRC_DIR = Path(__file__).resolve().parent / "registry_java"


def _toolchain() -> JavaToolchain:
    """kafka-clients' jars (tests.integration.java_client) and Apache Avro's (tests.differential.avro_java)
    together; one slf4j-api is enough."""
    kafka = java_toolchain()
    avro = avro_java.toolchain()
    if avro is None:
        _unavailable("Apache Avro's jars missing (python -m tests.differential.avro_java fetch)")
        raise AssertionError("unreachable")
    jars = list(kafka.jars) + [j for j in avro.jars if not j.name.startswith("slf4j-api-")]
    return JavaToolchain(kafka.java, kafka.javac, jars)


@pytest.fixture
def registry_broker(broker_factory):
    return broker_factory(name="registry-java", schema_registry=True)


def test_java_and_confluent_kafka_read_each_other(registry_broker, topic):
    tc = _toolchain()
    classes = compile_drivers(tc, src_dir=SRC_DIR)
    url = registry_broker.schema_registry_url
    client = SchemaRegistryClient({"url": url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    p = Producer({"bootstrap.servers": registry_broker.bootstrap_servers})
    p.produce(topic, value=AvroSerializer(client, USER_V1)({"name": "py-1"}, ctx))
    assert p.flush(30) == 0

    r = run_driver(tc, classes, "RegistryAvro",
                   [registry_broker.bootstrap_servers, url, topic, USER_V1, USER_V2, USER_BAD, 3], timeout=180)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr[-3000:]}"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    # the Java side's v1 is the schema confluent-kafka registered: the same id, then v2 gets the next
    assert out["ids"] == [1, 2]
    assert out["bad"] == {"status": 409, "error_code": 409}
    # Java resolves each writer schema (fetched by id) against v2: py-1 and java-1 get age's default
    assert out["records"] == [{"name": "py-1", "age": 0}, {"name": "java-1", "age": 0},
                              {"name": "java-2", "age": 7}]
    assert out["writer_ids"] == [1, 1, 2]

    subject = f"{topic}-value"
    assert client.get_versions(subject) == [1, 2]
    de = AvroDeserializer(client, USER_V2)
    assert _consume(registry_broker.bootstrap_servers, topic, 3, de) == out["records"]
