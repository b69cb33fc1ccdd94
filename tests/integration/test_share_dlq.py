"""Dead-letter queues of share groups (KIP-1191, share.version 2) with real clients: a
confluent-kafka ShareConsumer REJECTs and RELEASEs records until they are archived, a plain
Consumer reads the group's DLQ topic (tests/integration/share_dlq_program.py; the same program
runs against Kafka 4.4 in tests/differential/test_share_dlq.py). Each test runs a real broker
process; every loop is bounded in passes and time."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest

from minibroker.testing import MiniBroker
from tests.reference.kafka import jars_present, libs_dir

from . import share_dlq_program as prog

pytestmark = pytest.mark.integration

REJECT_MESSAGE = b"Offset rejected by client."
LIMIT_MESSAGE = b"Offset delivery count exceeded the threshold."


@pytest.fixture
def broker():
    with MiniBroker(name="share-dlq", control=True) as b:
        yield b


def _dlq_metrics(b) -> dict[tuple[str, str], float]:
    """(metric, group) -> value of the DLQ counters on /metrics."""
    from tests.integration.test_metrics import scrape

    return {(name, dict(labels)["group"]): v for (name, labels), v in scrape(b.control.address).items()
            if name.startswith("minibroker_share_dlq_")}


def _expected(copy: bool) -> list[dict]:
    """What the scenario must leave in the DLQ: 12 records over 3 source partitions (record i
    at partition i % 3, offset i // 3); offsets 0 and 3 rejected once, offset 1 released twice
    (the limit of 2); each DLQ record in partition source % 2, as Kafka 4.4 writes it."""
    out = []
    for p in range(3):
        for o, count, message in ((0, b"1", REJECT_MESSAGE), (1, b"2", LIMIT_MESSAGE),
                                  (3, b"1", REJECT_MESSAGE)):
            i = p + 3 * o
            out.append({"partition": p % 2, "key": b"k%d" % i if copy else None,
                        "value": b"v%d" % i if copy else None, "timestamp_type": 1, "headers": [
                            ("__dlq.errors.topic", b"SRC"), ("__dlq.errors.partition", str(p).encode()),
                            ("__dlq.errors.offset", str(o).encode()), ("__dlq.errors.group", b"G"),
                            ("__dlq.errors.delivery.count", count), ("__dlq.errors.message", message)]})
    out.sort(key=lambda r: (r["partition"], int(dict(r["headers"])["__dlq.errors.partition"]),
                            int(dict(r["headers"])["__dlq.errors.offset"])))
    return out


@pytest.mark.parametrize("copy", [False, True], ids=["headers-only", "copy-record"])
def test_rejected_and_exhausted_records_are_written_to_the_dlq_topic(broker, copy):
    got = prog.scenario(broker.bootstrap_servers, copy=copy)
    assert all(v[-1] in ("REJECT", "ACCEPT") or v == ["RELEASE", "RELEASE"] for v in got["seen"].values()), got
    assert got["dlq"] == _expected(copy)
    [(metric, group)] = [k for k, v in _dlq_metrics(broker).items() if v == 9]
    assert metric == "minibroker_share_dlq_records_total", _dlq_metrics(broker)
    # `share explain` (the control plane's view of it) tells where offset 0 went
    from urllib.parse import quote

    from minibroker.testing.control import call

    src = "src-" + group[2:]  # the program names them g-<suffix> and src-<suffix>
    told = call(broker.control.address, "GET", f"/v1/share/{quote(group, safe='')}/{quote(src, safe='')}/0?offset=0")
    assert "written to the dead-letter queue dlq.q-" in told["text"], told["text"]


def _archive_everything(bs: str, dlq_name: str, topic_configs: dict[str, str] | None) -> tuple[str, str]:
    u = uuid.uuid4().hex[:8]
    src, group = "src-" + u, "g-" + u
    prog.create_topic(bs, src, 1)
    if topic_configs is not None:
        prog.create_topic(bs, dlq_name, 1, topic_configs)
    prog.produce(bs, src, 3, 1)
    prog.group_configs(bs, group, {"share.auto.offset.reset": "earliest",
                                   "errors.deadletterqueue.topic.name": dlq_name})
    seen = prog.consume_rejecting(bs, group, src, 3, 60, reject=lambda m: True)
    assert seen == {(0, o): ["REJECT"] for o in range(3)}, seen
    return src, group


@pytest.mark.parametrize("case", ["missing", "not-enabled", "no-prefix"])
def test_a_dlq_topic_kafka_refuses_leaves_the_records_archived(case):
    """validateDlqTopic's refusals: logged with Kafka's message, the records archived all the
    same (never delivered again), nothing written anywhere."""
    dlq = {"missing": "dlq.nothing-here", "not-enabled": "dlq.plain", "no-prefix": "noprefix"}[case]
    configs = {"missing": None, "not-enabled": {},
               "no-prefix": {"errors.deadletterqueue.group.enable": "true"}}[case]
    with MiniBroker(name="share-dlq-refused", control=True) as b:
        src, group = _archive_everything(b.bootstrap_servers, dlq, configs)
        assert _dlq_metrics(b) == {("minibroker_share_dlq_failed_records_total", group): 3.0}
        again = prog.consume_rejecting(b.bootstrap_servers, group, src, 1, 8)
        assert again == {}, again  # archived: a new member gets nothing
        if configs is not None:
            assert prog.read_dlq(b.bootstrap_servers, dlq, 1, 5) == []
        text = b.log_text()
    expected = {
        "missing": f"DLQ topic does not exist and auto create is disabled on cluster for share group: "
                   f"{group}, topic: {dlq}.",
        "not-enabled": f"DLQ is not enabled on configured DLQ topic for share group: {group}, topic: {dlq}.",
        "no-prefix": f"Configured DLQ topic name does not comply with the DLQ topic prefix in share group: "
                     f"{group}, topic: {dlq}, prefix: dlq..",
    }[case]
    assert "share.dlq_write_failed" in text and expected in text, text[-3000:]


def test_share_version_1_keeps_the_dlq_configs_inert():
    """Below share.version 2 Kafka does not start its DLQ manager: the same group config
    archives rejected records without writing them anywhere."""
    libs = libs_dir()
    java = shutil.which("java")
    if java is None or not jars_present(libs):
        why = f"java or Kafka's jars ({libs}) missing: tests/run.sh fetches them"
        if os.environ.get("MINIBROKER_TEST_REQUIRE_TOOLS"):
            pytest.fail(why)
        pytest.skip(why)
    with MiniBroker(name="share-dlq-sv1") as b:
        bs = b.bootstrap_servers
        down = subprocess.run([java, "-cp", f"{libs}/*", "org.apache.kafka.tools.FeatureCommand",
                               "--bootstrap-server", bs, "downgrade", "--feature", "share.version=1"],
                              capture_output=True, text=True, timeout=120)
        assert down.returncode == 0, (down.stdout, down.stderr)
        dlq = "dlq.sv1-" + uuid.uuid4().hex[:6]
        _archive_everything(bs, dlq, {"errors.deadletterqueue.group.enable": "true"})
        assert prog.read_dlq(bs, dlq, 1, 5) == []
        assert "share.dlq_written" not in b.log_text()


def test_auto_creation_and_the_prefix_are_the_brokers_settings():
    """errors.deadletterqueue.auto.create.topics.enable makes the missing topic as Kafka's
    createTopicBuilder asks (default partitions, errors.deadletterqueue.group.enable=true,
    CreateTime); errors.deadletterqueue.topic.name.prefix "" lifts the dlq. rule."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    with MiniBroker(name="share-dlq-auto", args=[
            "--errors-deadletterqueue-auto-create-topics-enable", "true",
            "--errors-deadletterqueue-topic-name-prefix", "", "--num-partitions", "2"]) as b:
        bs = b.bootstrap_servers
        dlq = "made-" + uuid.uuid4().hex[:6]  # no dlq. prefix: allowed with an empty prefix
        src, group = _archive_everything(bs, dlq, None)
        got = prog.read_dlq(bs, dlq, 3, 20)
        assert sorted((r["partition"], dict(r["headers"])["__dlq.errors.offset"]) for r in got) == [
            (0, b"0"), (0, b"1"), (0, b"2")], got
        assert all(dict(r["headers"])["__dlq.errors.message"] == REJECT_MESSAGE for r in got)
        admin = AdminClient({"bootstrap.servers": bs})
        res = ConfigResource(ConfigResource.Type.TOPIC, dlq)
        configs = admin.describe_configs([res])[res].result(timeout=15)
        assert configs["errors.deadletterqueue.group.enable"].value == "true"
        meta = admin.list_topics(dlq, timeout=15)
        assert len(meta.topics[dlq].partitions) == 2
        assert "share.dlq_topic_created" in b.log_text()
