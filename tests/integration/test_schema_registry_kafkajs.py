"""The built-in Schema Registry with KafkaJS and @kafkajs/confluent-schema-registry (pinned in
tests/js/package.json; tests/js/schema_registry.js): for Avro, JSON Schema and Protobuf the package
registers, evolves, gets 409 on an incompatible change, encodes and produces through minibroker,
consumes and decodes. Avro and JSON records cross between KafkaJS and confluent-kafka both ways.
(The package's Protobuf encoding leaves out Confluent's message-index bytes, so its Protobuf
records are not for confluent-kafka's deserializer: a client's own format, not checked across.)"""
from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.integration.clients import run_node
from tests.integration.test_schema_registry import (
    PERSON_BAD,
    PERSON_V1,
    PERSON_V2,
    USER_BAD,
    USER_V1,
    USER_V2,
    _consume,
)

PROTO_V1 = 'syntax = "proto3";\npackage acme;\n\nmessage User {\n  string name = 1;\n}\n'
PROTO_V2 = 'syntax = "proto3";\npackage acme;\n\nmessage User {\n  string name = 1;\n  int32 age = 2;\n}\n'
# name changes from string to int64: a wire-incompatible type change in Confluent's Protobuf rules
PROTO_BAD = 'syntax = "proto3";\npackage acme;\n\nmessage User {\n  int64 name = 1;\n  int32 age = 2;\n}\n'


@pytest.fixture
def registry_broker(broker_factory):
    return broker_factory(name="registry-kafkajs", schema_registry=True)


def _run(broker, topic: str, kind: str, v1: str, v2: str, bad: str, r1: dict, r2: dict, count: int) -> dict:
    r = run_node("schema_registry.js", "--broker", broker.bootstrap_servers,
                 "--registry", broker.schema_registry_url, "--topic", topic, "--type", kind,
                 "--v1", v1, "--v2", v2, "--bad", bad, "--r1", json.dumps(r1), "--r2", json.dumps(r2),
                 "--count", str(count), timeout=180)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr[-3000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def _check_registry(url: str, subject: str, kind: str, out: dict) -> None:
    client = SchemaRegistryClient({"url": url})
    assert client.get_versions(subject) == [1, 2]
    latest = client.get_latest_version(subject)
    assert latest.schema_id == out["ids"][1] == out["latest"]
    assert latest.schema.schema_type == kind
    assert out["lookup"] == out["ids"][0]
    assert out["bad"]["status"] == 409, out["bad"]
    # the package sets a first-registered subject's level to its default, BACKWARD
    assert client.get_compatibility(subject) == "BACKWARD"


def test_avro(registry_broker, topic):
    url = registry_broker.schema_registry_url
    client = SchemaRegistryClient({"url": url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    p = Producer({"bootstrap.servers": registry_broker.bootstrap_servers})
    p.produce(topic, value=AvroSerializer(client, USER_V1)({"name": "py-1"}, ctx))
    assert p.flush(30) == 0
    out = _run(registry_broker, topic, "AVRO", USER_V1, USER_V2, USER_BAD,
               {"name": "js-1"}, {"name": "js-2", "age": 7}, 3)
    # KafkaJS's v1 is the schema confluent-kafka registered: one id
    assert out["ids"] == [1, 2]
    _check_registry(url, f"{topic}-value", "AVRO", out)
    # without a reader's schema the package decodes with each record's writer schema
    assert out["decoded"] == [{"name": "py-1"}, {"name": "js-1"}, {"name": "js-2", "age": 7}]
    got = _consume(registry_broker.bootstrap_servers, topic, 3, AvroDeserializer(client, USER_V2))
    assert got == [{"name": "py-1", "age": 0}, {"name": "js-1", "age": 0}, {"name": "js-2", "age": 7}]


def test_json_schema(registry_broker, topic):
    url = registry_broker.schema_registry_url
    client = SchemaRegistryClient({"url": url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    p = Producer({"bootstrap.servers": registry_broker.bootstrap_servers})
    p.produce(topic, value=JSONSerializer(PERSON_V1, client)({"name": "py-1"}, ctx))
    assert p.flush(30) == 0
    out = _run(registry_broker, topic, "JSON", PERSON_V1, PERSON_V2, PERSON_BAD,
               {"name": "js-1"}, {"name": "js-2", "age": 7}, 3)
    assert out["ids"] == [1, 2]
    _check_registry(url, f"{topic}-value", "JSON", out)
    expected = [{"name": "py-1"}, {"name": "js-1"}, {"name": "js-2", "age": 7}]
    assert out["decoded"] == expected
    de = JSONDeserializer(PERSON_V2, schema_registry_client=client)
    assert _consume(registry_broker.bootstrap_servers, topic, 3, de) == expected


def test_protobuf(registry_broker, topic):
    url = registry_broker.schema_registry_url
    out = _run(registry_broker, topic, "PROTOBUF", PROTO_V1, PROTO_V2, PROTO_BAD,
               {"name": "js-1"}, {"name": "js-2", "age": 7}, 2)
    assert out["ids"] == [1, 2]
    _check_registry(url, f"{topic}-value", "PROTOBUF", out)
    assert out["decoded"] == [{"name": "js-1"}, {"name": "js-2", "age": 7}]
    # Confluent's framing: magic byte 0 and the big-endian id of the schema each record was written with
    assert [h[:10] for h in out["hex"]] == ["0000000001", "0000000002"]
