"""Schema Registry pipelines through real clients, given only a bootstrap and a registry URL.

The integration tests (test_schema_registry*.py) run them against a minibroker process;
tests/docker's compose test runs them against the one container's published Kafka and registry
ports, which is issue 34's "Done when". Each pipeline registers a schema, evolves it compatibly,
gets 409 on an incompatible change, produces through the broker and consumes back:

- ``confluent_pipeline``: confluent-kafka's Avro, JSON Schema or Protobuf serializer/deserializer;
- ``kafkajs_pipeline``: tests/js/schema_registry.js (KafkaJS + @kafkajs/confluent-schema-registry),
  after confluent-kafka wrote a v1 record, which for Avro and JSON confluent-kafka reads back with
  the KafkaJS records (the package's Protobuf encoding lacks Confluent's message indexes, so its
  Protobuf records are not for confluent-kafka's deserializer);
- ``java_pipeline``: tests/integration/registry_java/RegistryAvro.java (stock kafka-clients with
  Apache Avro and Confluent's wire format over plain HTTP), crossed with confluent-kafka's Avro.

Ids are global to a registry, so the pipelines check them relative to each other (the same
schema keeps its id across subjects and clients); the callers that own a fresh registry check
the absolute numbers. Clients use IPv4 only: a compose broker advertises ``localhost`` and
publishes on 127.0.0.1.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.differential import avro_java
from tests.integration.clients import run_node
from tests.integration.java_client import (
    JavaToolchain,
    _unavailable,
    compile_drivers,
    java_toolchain,
    run_driver,
)

V4 = {"broker.address.family": "v4"}
JAVA_SRC_DIR = Path(__file__).resolve().parent / "registry_java"

USER_V1 = json.dumps({"type": "record", "name": "User", "namespace": "test",
                      "fields": [{"name": "name", "type": "string"}]})
# adds a field with a default: BACKWARD compatible
USER_V2 = json.dumps({"type": "record", "name": "User", "namespace": "test",
                      "fields": [{"name": "name", "type": "string"},
                                 {"name": "age", "type": "int", "default": 0}]})
# adds a field without a default: a v2 reader cannot read v1 data
USER_BAD = json.dumps({"type": "record", "name": "User", "namespace": "test",
                       "fields": [{"name": "name", "type": "string"},
                                  {"name": "email", "type": "string"}]})

PERSON_V1 = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Person",
                        "type": "object", "properties": {"name": {"type": "string"}},
                        "required": ["name"], "additionalProperties": False})
# an optional property added to a closed content model: BACKWARD compatible in Confluent's rules
PERSON_V2 = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Person",
                        "type": "object", "properties": {"name": {"type": "string"},
                                                         "age": {"type": "integer"}},
                        "required": ["name"], "additionalProperties": False})
# name is now a number: neither way compatible
PERSON_BAD = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Person",
                         "type": "object", "properties": {"name": {"type": "integer"}},
                         "required": ["name"]})

PROTO_V1 = 'syntax = "proto3";\npackage acme;\n\nmessage User {\n  string name = 1;\n}\n'
PROTO_V2 = 'syntax = "proto3";\npackage acme;\n\nmessage User {\n  string name = 1;\n  int32 age = 2;\n}\n'
# name changes from string to int64: a wire-incompatible type change in Confluent's Protobuf rules
PROTO_BAD = 'syntax = "proto3";\npackage acme;\n\nmessage User {\n  int64 name = 1;\n  int32 age = 2;\n}\n'


def consume(bootstrap: str, topic: str, n: int, deserialize) -> list:
    """The first ``n`` records of ``topic``, each through ``deserialize``; bounded at 60 s."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, **V4})
    c.subscribe([topic])
    out = []
    try:
        deadline = time.monotonic() + 60
        while len(out) < n and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append(deserialize(msg.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        c.close()
    return out


def proto_user(*fields: tuple[str, int, str]):
    """A protoc-like message class acme.User with ``fields`` (name, number, scalar type), in a
    pool of its own so that two versions of the one message can live side by side."""
    from google.protobuf import descriptor_pb2, descriptor_pool
    from google.protobuf.message_factory import GetMessageClass

    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="acme/user.proto", package="acme", syntax="proto3")
    m = fdp.message_type.add(name="User")
    for name, number, kind in fields:
        m.field.add(name=name, number=number, type=getattr(F, f"TYPE_{kind.upper()}"),
                    label=F.LABEL_OPTIONAL, json_name=name)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return GetMessageClass(pool.FindMessageTypeByName("acme.User"))


def one_partition_topic(bootstrap: str, topic: str) -> None:
    """Create ``topic`` with one partition: a compose broker makes 4 by default, and every
    pipeline checks the order in which its records come back, whichever client wrote them."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **V4})
    fut = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)],
                              operation_timeout=30)[topic]
    fut.result(timeout=60)


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, **V4})
    for v in values:
        p.produce(topic, value=v)
    assert p.flush(30) == 0


def confluent_pipeline(bootstrap: str, url: str, topic: str, kind: str) -> list[int]:
    """confluent-kafka's serializers of ``kind`` (AVRO, JSON or PROTOBUF) register v1 and v2 of a
    schema under ``topic``-value as they produce, the deserializer with v2 reads both back,
    and an incompatible third schema gets 409 (error code 409). Returns the two schema ids."""
    one_partition_topic(bootstrap, topic)
    client = SchemaRegistryClient({"url": url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    subject = f"{topic}-value"
    if kind == "AVRO":
        from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

        values = [AvroSerializer(client, USER_V1)({"name": "ada"}, ctx),
                  AvroSerializer(client, USER_V2)({"name": "bob", "age": 41}, ctx)]
        de = AvroDeserializer(client, USER_V2)
        read = list
        # the reader's schema is the latest: v1 data gets the default
        expected: list = [{"name": "ada", "age": 0}, {"name": "bob", "age": 41}]

        def refuse() -> None:
            client.register_schema(subject, Schema(USER_BAD, "AVRO"))
    elif kind == "JSON":
        from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

        values = [JSONSerializer(PERSON_V1, client)({"name": "ada"}, ctx),
                  JSONSerializer(PERSON_V2, client)({"name": "bob", "age": 41}, ctx)]
        de = JSONDeserializer(PERSON_V2, schema_registry_client=client)
        read = list
        expected = [{"name": "ada"}, {"name": "bob", "age": 41}]

        def refuse() -> None:
            client.register_schema(subject, Schema(PERSON_BAD, "JSON"))
    elif kind == "PROTOBUF":
        from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

        conf = {"use.deprecated.format": False}
        v1 = proto_user(("name", 1, "string"))
        v2 = proto_user(("name", 1, "string"), ("age", 2, "int32"))  # a field added: compatible
        bad = proto_user(("name", 1, "int64"), ("age", 2, "int32"))  # string -> int64: not
        values = [ProtobufSerializer(v1, client, conf)(v1(name="ada"), ctx),
                  ProtobufSerializer(v2, client, conf)(v2(name="bob", age=41), ctx)]
        de = ProtobufDeserializer(v2, conf)

        def read(records: list) -> list:
            return [{"name": m.name, "age": m.age} for m in records]

        expected = [{"name": "ada", "age": 0}, {"name": "bob", "age": 41}]

        def refuse() -> None:
            # the serializer registers on first use (auto.register.schemas): that is the 409
            ProtobufSerializer(bad, client, conf)(bad(name=7), ctx)
    else:
        raise ValueError(kind)
    _produce(bootstrap, topic, values)
    assert client.get_versions(subject) == [1, 2]
    latest = client.get_latest_version(subject)
    assert latest.schema.schema_type == kind
    assert read(consume(bootstrap, topic, 2, de)) == expected
    with pytest.raises(SchemaRegistryError) as e:
        refuse()
    assert e.value.http_status_code == 409 and e.value.error_code == 409, e.value
    assert client.get_versions(subject) == [1, 2]
    ids = [client.get_version(subject, v).schema_id for v in (1, 2)]
    assert ids[0] != ids[1] and ids[1] == latest.schema_id
    return ids


# -- KafkaJS ----------------------------------------------------------------------------------------

KAFKAJS_SCHEMAS = {"AVRO": (USER_V1, USER_V2, USER_BAD), "JSON": (PERSON_V1, PERSON_V2, PERSON_BAD),
                   "PROTOBUF": (PROTO_V1, PROTO_V2, PROTO_BAD)}


def run_kafkajs(bootstrap: str, url: str, topic: str, kind: str, r1: dict, r2: dict, count: int) -> dict:
    """tests/js/schema_registry.js for ``kind``; its JSON answer."""
    v1, v2, bad = KAFKAJS_SCHEMAS[kind]
    r = run_node("schema_registry.js", "--broker", bootstrap, "--registry", url, "--topic", topic,
                 "--type", kind, "--v1", v1, "--v2", v2, "--bad", bad, "--r1", json.dumps(r1),
                 "--r2", json.dumps(r2), "--count", str(count), timeout=180)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr[-3000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def check_kafkajs_registry(url: str, subject: str, kind: str, out: dict) -> None:
    """What the KafkaJS run left in the registry, seen by confluent-kafka's client."""
    client = SchemaRegistryClient({"url": url})
    assert client.get_versions(subject) == [1, 2]
    latest = client.get_latest_version(subject)
    assert latest.schema_id == out["ids"][1] == out["latest"]
    assert latest.schema.schema_type == kind
    assert out["lookup"] == out["ids"][0]
    assert out["ids"][0] != out["ids"][1]
    assert out["bad"]["status"] == 409, out["bad"]
    # the package sets a first-registered subject's level to its default, BACKWARD
    assert client.get_compatibility(subject) == "BACKWARD"


def kafkajs_pipeline(bootstrap: str, url: str, topic: str, kind: str) -> dict:
    """confluent-kafka writes one v1 record (Avro, JSON), then KafkaJS registers v1 (the same id),
    evolves to v2, gets 409, writes two records and decodes all; confluent-kafka's deserializer
    reads the three. For PROTOBUF, KafkaJS alone (see the module's docstring). Returns
    schema_registry.js's answer."""
    one_partition_topic(bootstrap, topic)
    client = SchemaRegistryClient({"url": url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    subject = f"{topic}-value"
    js1, js2 = {"name": "js-1"}, {"name": "js-2", "age": 7}
    if kind == "PROTOBUF":
        out = run_kafkajs(bootstrap, url, topic, kind, js1, js2, 2)
        check_kafkajs_registry(url, subject, kind, out)
        assert out["decoded"] == [js1, js2]
        # Confluent's framing: magic byte 0 and the big-endian id of the schema each record was written with
        assert [h[:10] for h in out["hex"]] == [f"00{i:08x}" for i in out["ids"]]
        return out
    if kind == "AVRO":
        from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

        first = AvroSerializer(client, USER_V1)({"name": "py-1"}, ctx)
        de = AvroDeserializer(client, USER_V2)
        # the v2 reader gives v1 records age's default
        expected = [{"name": "py-1", "age": 0}, {"name": "js-1", "age": 0}, js2]
    else:
        from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

        first = JSONSerializer(PERSON_V1, client)({"name": "py-1"}, ctx)
        de = JSONDeserializer(PERSON_V2, schema_registry_client=client)
        expected = [{"name": "py-1"}, js1, js2]
    _produce(bootstrap, topic, [first])
    py_id = client.get_latest_version(subject).schema_id
    out = run_kafkajs(bootstrap, url, topic, kind, js1, js2, 3)
    # KafkaJS's v1 is the schema confluent-kafka registered: one id
    assert out["ids"][0] == py_id
    check_kafkajs_registry(url, subject, kind, out)
    # without a reader's schema the package decodes with each record's writer schema
    assert out["decoded"] == [{"name": "py-1"}, js1, js2]
    assert consume(bootstrap, topic, 3, de) == expected
    return out


# -- Java ---------------------------------------------------------------------------------------------

def java_registry_toolchain() -> JavaToolchain:
    """kafka-clients' jars (tests.integration.java_client) and Apache Avro's (tests.differential.avro_java)
    together; one slf4j-api is enough. Skips (fails under MINIBROKER_TEST_REQUIRE_TOOLS) without them."""
    kafka = java_toolchain()
    avro = avro_java.toolchain()
    if avro is None:
        _unavailable("Apache Avro's jars missing (python -m tests.differential.avro_java fetch)")
        raise AssertionError("unreachable")
    jars = list(kafka.jars) + [j for j in avro.jars if not j.name.startswith("slf4j-api-")]
    return JavaToolchain(kafka.java, kafka.javac, jars)


def java_pipeline(bootstrap: str, url: str, topic: str, tc: JavaToolchain | None = None,
                  classes: Path | None = None) -> dict:
    """confluent-kafka's AvroSerializer writes one v1 record; RegistryAvro.java registers v1 (the
    same id) and v2, writes two records, gets 409, and reads the three resolved against v2;
    confluent-kafka's AvroDeserializer reads what the Java side wrote. Returns the Java answer."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    if tc is None:
        tc = java_registry_toolchain()
    if classes is None:
        classes = compile_drivers(tc, src_dir=JAVA_SRC_DIR)
    one_partition_topic(bootstrap, topic)
    client = SchemaRegistryClient({"url": url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    _produce(bootstrap, topic, [AvroSerializer(client, USER_V1)({"name": "py-1"}, ctx)])
    subject = f"{topic}-value"
    py_id = client.get_latest_version(subject).schema_id
    r = run_driver(tc, classes, "RegistryAvro", [bootstrap, url, topic, USER_V1, USER_V2, USER_BAD, 3],
                   timeout=180)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr[-3000:]}"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    # the Java side's v1 is the schema confluent-kafka registered: the same id, then v2 another
    assert out["ids"][0] == py_id and out["ids"][1] != py_id
    assert out["bad"] == {"status": 409, "error_code": 409}
    # Java resolves each writer schema (fetched by id) against v2: py-1 and java-1 get age's default
    assert out["records"] == [{"name": "py-1", "age": 0}, {"name": "java-1", "age": 0},
                              {"name": "java-2", "age": 7}]
    assert out["writer_ids"] == [py_id, py_id, out["ids"][1]]
    assert client.get_versions(subject) == [1, 2]
    assert consume(bootstrap, topic, 3, AvroDeserializer(client, USER_V2)) == out["records"]
    return out

