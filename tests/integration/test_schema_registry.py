"""The built-in Schema Registry with real clients: confluent-kafka's SchemaRegistryClient and its
Avro serializer/deserializer produce through minibroker and consume back, evolve a schema, get
409 on an incompatible one; the state (ids, versions, soft-deleted subjects, configs, modes)
comes back after a restart and after kill -9; ``_schemas`` holds Confluent's JSON."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import (
    Schema,
    SchemaRegistryClient,
    dual_schema_id_deserializer,
    header_schema_id_serializer,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

# the schemas and the consume helper are shared with the KafkaJS, Java and compose tests
from tests.integration.registry_pipelines import (
    USER_BAD,
    USER_V1,
    USER_V2,
    confluent_pipeline,
)


def _get(url: str, path: str):
    with urllib.request.urlopen(url + path, timeout=10) as resp:
        return resp.status, json.loads(resp.read())


@pytest.fixture
def registry_broker(broker_factory):
    return broker_factory(name="registry", schema_registry=True, fsync="always")


def test_avro_pipeline_evolution_and_409(registry_broker, topic):
    url = registry_broker.schema_registry_url
    ids = confluent_pipeline(registry_broker.bootstrap_servers, url, topic, "AVRO")
    assert ids == [1, 2]
    client = SchemaRegistryClient({"url": url})
    subject = f"{topic}-value"
    assert client.get_subjects() == [subject]
    latest = client.get_latest_version(subject)
    assert latest.version == 2 and latest.schema_id == 2
    assert client.test_compatibility(subject, Schema(USER_BAD, "AVRO")) is False
    # the same schema under another subject keeps its id
    assert client.register_schema("other-value", Schema(USER_V1, "AVRO")) == 1
    found = client.lookup_schema(subject, Schema(USER_V1, "AVRO"))
    assert (found.schema_id, found.version) == (1, 1)
    with pytest.raises(SchemaRegistryError) as e:
        client.get_version(subject, 9)
    assert e.value.error_code == 40402


def test_register_answers_version_and_guid_and_serdes_use_the_guid(registry_broker, topic):
    """Confluent 8's register answer carries the version and the guid; confluent-kafka's
    serializer with the header id strategy writes that guid in a header and a fresh client's
    deserializer fetches the writer's schema by it (GET /schemas/guids/{guid})."""
    url = registry_broker.schema_registry_url
    client = SchemaRegistryClient({"url": url})
    got = client.register_schema_full_response(f"{topic}-value", Schema(USER_V1, "AVRO"))
    assert got.schema_id == 1 and got.version == 1 and got.subject == f"{topic}-value"
    assert got.guid is not None and len(str(got.guid)) == 36
    assert client.get_contexts() == ["."]
    ser = AvroSerializer(client, USER_V1, conf={"auto.register.schemas": False, "use.latest.version": True,
                                                "schema.id.serializer": header_schema_id_serializer})
    headers: list = []
    ctx = SerializationContext(topic, MessageField.VALUE, headers)
    value = ser({"name": "ada lovelace"}, ctx)  # the deserializer wants 6+ bytes
    assert headers and headers[0][0] == "__value_schema_id" and value[:1] != b"\x00"
    p = Producer({"bootstrap.servers": registry_broker.bootstrap_servers})
    p.produce(topic, value=value, headers=headers)
    assert p.flush(30) == 0
    fresh = SchemaRegistryClient({"url": url})
    assert fresh.get_schema_by_guid(str(got.guid)).schema_str == client.get_schema(1).schema_str
    de = AvroDeserializer(fresh, conf={"schema.id.deserializer": dual_schema_id_deserializer})
    c = Consumer({"bootstrap.servers": registry_broker.bootstrap_servers, "group.id": f"g-{topic}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    out = []
    try:
        deadline = time.monotonic() + 60
        while not out and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and not msg.error():
                out.append(de(msg.value(), SerializationContext(topic, MessageField.VALUE, msg.headers())))
    finally:
        c.close()
    assert out == [{"name": "ada lovelace"}]


def _state(url: str) -> dict:
    def safe(path):
        try:
            return _get(url, path)[1]
        except urllib.error.HTTPError as e:
            return json.loads(e.read())
    return {p: safe(p) for p in (
        "/subjects", "/subjects?deleted=true", "/subjects/a-value/versions?deleted=true",
        "/subjects/a-value/versions/2", "/schemas/ids/1", "/schemas/ids/2/versions",
        "/config", "/config/a-value", "/mode/b-value", "/subjects/b-value/versions")}


@pytest.mark.parametrize("graceful", [True, False], ids=["restart", "kill9"])
def test_state_comes_back(registry_broker, graceful):
    url = registry_broker.schema_registry_url
    client = SchemaRegistryClient({"url": url})
    assert client.register_schema("a-value", Schema(USER_V1, "AVRO")) == 1
    assert client.register_schema("a-value", Schema(USER_V2, "AVRO")) == 2
    client.delete_version("a-value", 1)
    client.register_schema("b-value", Schema(USER_BAD, "AVRO"))
    client.delete_subject("b-value")
    assert client.set_compatibility("a-value", "FULL") == {"compatibility": "FULL"}  # as Confluent echoes it
    client.set_compatibility(None, "NONE")
    assert client.get_compatibility("a-value") == "FULL"
    req = urllib.request.Request(url + "/mode/b-value", data=b'{"mode": "READONLY"}', method="PUT",
                                 headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    urllib.request.urlopen(req, timeout=10).close()
    before = _state(url)
    assert before["/subjects"] == ["a-value"]
    assert before["/subjects?deleted=true"] == ["a-value", "b-value"]
    assert before["/config/a-value"] == {"compatibilityLevel": "FULL"}
    registry_broker.restart(graceful=graceful)
    after = _state(url)
    assert after == before
    # ids go on after the highest, versions after the subject's last
    assert client.register_schema("c-value", Schema(json.dumps(
        {"type": "record", "name": "C", "fields": []}), "AVRO")) == 4


def test_schemas_topic_holds_confluents_json(registry_broker):
    url = registry_broker.schema_registry_url
    client = SchemaRegistryClient({"url": url})
    client.register_schema("k-value", Schema(USER_V1, "AVRO"))
    client.set_compatibility("k-value", "FORWARD")
    c = Consumer({"bootstrap.servers": registry_broker.bootstrap_servers, "group.id": "schemas-reader",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["_schemas"])
    records = []
    try:
        deadline = time.monotonic() + 60
        while len(records) < 2 and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and not msg.error():
                records.append((msg.key(), msg.value()))
    finally:
        c.close()
    assert records[0][0] == b'{"keytype":"SCHEMA","subject":"k-value","version":1,"magic":1}'
    value = json.loads(records[0][1])
    assert value["subject"] == "k-value" and value["version"] == 1 and value["id"] == 1
    assert value["schemaType"] == "AVRO" and value["deleted"] is False
    assert json.loads(value["schema"]) == json.loads(USER_V1)
    assert records[1] == (b'{"keytype":"CONFIG","subject":"k-value","magic":0}',
                          b'{"subject":"k-value","compatibilityLevel":"FORWARD"}')


def test_https_and_basic_auth_with_the_sasl_users(broker_factory, tmp_path, topic):
    """The registry on https with the broker's certificates, asking for the --sasl-users users'
    passwords: confluent-kafka's client with basic.auth.user.info registers and serializes; a
    wrong password is a 401 it reports."""
    import subprocess
    import sys

    from minibroker.testing.broker import _free_port

    subprocess.run([sys.executable, "-m", "minibroker", "certs", str(tmp_path)], check=True,
                   capture_output=True, timeout=60)
    users = tmp_path / "users"
    users.write_text("alice:alice-secret\n")
    port = _free_port("127.0.0.1")
    b = broker_factory(name="registry-tls", ssl_certfile=tmp_path / "broker.crt",
                       ssl_keyfile=tmp_path / "broker.key", sasl_users=users,
                       schema_registry_auth="basic",
                       extra_args=["--schema-registry-listener", f"https://127.0.0.1:{port}"])
    url = f"https://127.0.0.1:{port}"
    tls = {"url": url, "ssl.ca.location": str(tmp_path / "ca.crt")}
    good = SchemaRegistryClient({**tls,
                                 "basic.auth.user.info": "alice:alice-secret"})
    ser = AvroSerializer(good, USER_V1)
    p = Producer({"bootstrap.servers": b.bootstrap_servers})
    p.produce(topic, value=ser({"name": "ada"}, SerializationContext(topic, MessageField.VALUE)))
    assert p.flush(30) == 0
    assert good.get_subjects() == [f"{topic}-value"]
    bad = SchemaRegistryClient({**tls,
                                "basic.auth.user.info": "alice:wrong"})
    with pytest.raises(SchemaRegistryError) as e:
        bad.get_subjects()
    assert e.value.http_status_code == 401


def test_json_schema_pipeline_evolution_and_409(registry_broker, topic):
    ids = confluent_pipeline(registry_broker.bootstrap_servers, registry_broker.schema_registry_url,
                             topic, "JSON")
    assert ids == [1, 2]


def test_answers_while_replaying(broker_factory):
    """A long _schemas (records appended by another writer while this registry was not looking:
    NOOPs, as Confluent's registry writes them) is replayed on the loop after a restart: the
    registry answers meanwhile (the state, or 50002 while it is still loading), never refuses
    or hangs, and then serves the state the log holds; a record it cannot read is skipped and
    logged."""
    b = broker_factory(name="registry-replay", schema_registry=True)
    url = b.schema_registry_url
    client = SchemaRegistryClient({"url": url})
    assert client.register_schema("r-value", Schema(USER_V1, "AVRO")) == 1
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 50})
    for _ in range(60_000):
        p.produce("_schemas", key=b'{"keytype":"NOOP","magic":0}', value=None)
        p.poll(0)
    # and a record no registry wrote: skipped with its reason, the rest replayed
    p.produce("_schemas", key=b"not json", value=b"{}")
    assert p.flush(60) == 0
    client.close() if hasattr(client, "close") else None
    b.restart()
    answers = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            status, body = _get(url, "/subjects")
        except urllib.error.HTTPError as e:
            status, body = e.code, json.loads(e.read())
        answers.append((status, body))
        if status == 200:
            break
    assert answers[-1] == (200, ["r-value"])
    assert all(a == (200, ["r-value"]) or (a[0] == 500 and a[1]["error_code"] == 50002) for a in answers)
    assert "registry.loaded" in b.log_text()
    assert "registry.record_skipped" in b.log_text() and "key is not JSON" in b.log_text()


def test_protobuf_pipeline_evolution_and_409(registry_broker, topic):
    ids = confluent_pipeline(registry_broker.bootstrap_servers, registry_broker.schema_registry_url,
                             topic, "PROTOBUF")
    assert ids == [1, 2]


def test_compacted_by_the_cleaner_and_replayed_the_same(broker_factory):
    """_schemas is a compacted topic the broker's cleaner cleans: config rewrites and a
    permanently deleted version's records go, and a restart rebuilds the same answers."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    from .test_compaction import _wait, cleaned_to, stored_records

    b = broker_factory(name="registry-compact", schema_registry=True, log_cleaner_backoff_ms=100)
    url = b.schema_registry_url
    client = SchemaRegistryClient({"url": url})
    client.register_schema("keep-value", Schema(USER_V1, "AVRO"))  # creates _schemas
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    res = ConfigResource(ConfigResource.Type.TOPIC, "_schemas", incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in {"segment.ms": "400", "min.cleanable.dirty.ratio": "0.01",
                     "delete.retention.ms": "300"}.items()])
    admin.incremental_alter_configs([res])[res].result(15)
    client.register_schema("gone-value", Schema(USER_BAD, "AVRO"))
    client.delete_subject("gone-value")
    client.delete_subject("gone-value", permanent=True)
    written = 4
    for _round in range(5):
        for level in ("FULL", "FORWARD", "NONE", "BACKWARD_TRANSITIVE"):
            client.set_compatibility("keep-value", level)
            written += 1
        time.sleep(0.45)  # the next write rolls the segment: the cleaner gets work
    client.register_schema("keep-value", Schema(USER_V2, "AVRO"))
    written += 1
    before = {p: _get(url, p)[1] for p in ("/subjects?deleted=true", "/config/keep-value",
                                            "/subjects/keep-value/versions", "/schemas/ids/3")}
    assert before["/config/keep-value"] == {"compatibilityLevel": "BACKWARD_TRANSITIVE"}
    _wait(lambda: cleaned_to(b.data_dir, "_schemas") > 0
          and stored_records(b.data_dir, "_schemas") < written - 10, 60, "_schemas cleaned")
    b.restart()
    after = {p: _get(url, p)[1] for p in before}
    assert after == before
    assert after["/subjects?deleted=true"] == ["keep-value"]


def test_registry_port_taken_is_one_line(tmp_path):
    """A taken registry port stops the start with one line naming the option, no traceback,
    before the data dir is made (bound with the Kafka listeners, as the CLI binds them)."""
    import socket
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "minibroker", "--port", "0", "--data-dir",
                            str(tmp_path / "data"), "--schema-registry-listener",
                            f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    out = r.stdout + r.stderr
    assert f"cannot listen on --schema-registry-listener http://127.0.0.1:{port}" in out
    assert "Traceback" not in out
    assert not (tmp_path / "data").exists()  # refused before the data dir was made


def test_avro_references(registry_broker):
    """A record that uses a type registered under another subject: registered with its
    reference, looked up, listed in referencedby, and the referenced version cannot go."""
    from confluent_kafka.schema_registry import SchemaReference

    client = SchemaRegistryClient({"url": registry_broker.schema_registry_url})
    address = json.dumps({"type": "record", "name": "Address", "namespace": "test",
                          "fields": [{"name": "city", "type": "string"}]})
    person = json.dumps({"type": "record", "name": "Person", "namespace": "test",
                         "fields": [{"name": "home", "type": "test.Address"}]})
    assert client.register_schema("address", Schema(address, "AVRO")) == 1
    refs = [SchemaReference("test.Address", "address", 1)]
    pid = client.register_schema("person-value", Schema(person, "AVRO", refs))
    assert pid == 2
    found = client.lookup_schema("person-value", Schema(person, "AVRO", refs))
    assert (found.schema_id, found.version) == (2, 1)
    assert [r.name for r in found.schema.references] == ["test.Address"]
    assert _get(registry_broker.schema_registry_url, "/subjects/address/versions/1/referencedby")[1] == [2]
    with pytest.raises(SchemaRegistryError) as e:
        client.delete_subject("address")
    assert e.value.error_code == 42206
    # without the reference, the same text is not a schema
    with pytest.raises(SchemaRegistryError) as e:
        client.register_schema("other-value", Schema(person, "AVRO"))
    assert e.value.error_code == 42201
