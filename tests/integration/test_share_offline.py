"""Share state read offline: ``minibroker dump-log --share-group-state-decoder`` and Kafka 4.4's own
``kafka-dump-log.sh --share-group-state-decoder`` (org.apache.kafka.tools.DumpLogSegments) print the
same keys and values of a ``__share_group_state`` segment minibroker wrote, which proves the bytes on
disk are Kafka's; and ``txn ... --data-dir`` on a data dir holding share state answers as without it.

Without java or Kafka's jars the Kafka half skips (fails under MINIBROKER_TEST_REQUIRE_TOOLS=1).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from minibroker.testing import MiniBroker
from tests.minibroker.test_dump_log import share_state_segment
from tests.reference.kafka import jars_present, libs_dir

from .support import REPO_ROOT
from .test_share_groups import _consumer, _group_configs, _poll_until, _produce, _topic

pytestmark = pytest.mark.integration

RECORD_SPLIT = " headerKeys: [] "


@pytest.fixture(scope="module")
def kafka_tool():
    """Run one of Kafka 4.4's command-line tools (a class of kafka-tools) with ``args``."""
    libs = libs_dir()
    java = shutil.which("java")
    if java is None or not jars_present(libs):
        why = f"java or Kafka's jars ({libs}) missing: tests/run.sh fetches them"
        if os.environ.get("MINIBROKER_TEST_REQUIRE_TOOLS"):
            pytest.fail(why)
        pytest.skip(why)

    def run(tool: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([java, "-cp", f"{libs}/*", f"org.apache.kafka.tools.{tool}", *args],
                              capture_output=True, text=True, timeout=120)
    return run


@pytest.fixture(scope="module")
def kafka_dump_log(kafka_tool):
    """Kafka 4.4's DumpLogSegments on one file with the share state decoder; its stdout."""
    def run(path: Path) -> str:
        r = kafka_tool("DumpLogSegments", "--files", str(path), "--share-group-state-decoder")
        assert r.returncode == 0, r.stderr
        return r.stdout
    return run


def _ours(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minibroker", "dump-log", "--share-group-state-decoder",
                           *map(str, paths)], cwd=str(REPO_ROOT), capture_output=True, text=True,
                          timeout=120)


def _records(stdout: str) -> list[str]:
    """Each record's key and payload as printed: what the decoder decides (the batch and record
    headers before it are compared by tests/minibroker/test_dump_log.py)."""
    return [line.split(RECORD_SPLIT, 1)[1] for line in stdout.splitlines() if line.startswith("| offset: ")]


def test_kafkas_tool_and_ours_decode_each_kind_of_record_alike(tmp_path, kafka_dump_log):
    path = share_state_segment(tmp_path)
    kafka, ours = _records(kafka_dump_log(path)), _records(_ours(path).stdout)
    assert len(kafka) == len(ours) == 5
    # snapshot, update (both with their tagged field), tombstone, a record of another coordinator
    assert ours[:4] == kafka[:4], (ours, kafka)
    # the value that does not parse: the same verdict, each tool with its own reason
    assert ours[4].startswith("key: Error at offset 4, skipping. ")
    assert kafka[4].startswith("key: Error at offset 4, skipping. ")


def test_share_state_a_broker_wrote_is_kafkas_and_txn_offline_is_not_confused(tmp_path, kafka_dump_log):
    data = tmp_path / "data"
    with MiniBroker(name="share-offline", data_dir=data) as b:
        bs = b.bootstrap_servers
        topic = _topic(bs, partitions=1)
        _group_configs(bs, "g-offline", share_auto_offset_reset="earliest",
                       share_isolation_level="read_committed")
        _produce(bs, topic, 4, partitions=1)
        p = Producer({"bootstrap.servers": bs, "transactional.id": "txn-offline"})
        p.init_transactions(15)
        p.begin_transaction()
        p.produce(topic, value=b"in-txn", partition=0)
        p.commit_transaction(15)
        del p
        c = _consumer(bs, "g-offline", topic, explicit=True)

        def release_first_once(consumer, m):
            again = m.offset() == 0 and m.delivery_count() == 1
            consumer.acknowledge(m, AcknowledgeType.RELEASE if again else AcknowledgeType.ACCEPT)

        try:
            got = _poll_until([c], 6, 30, on_message=release_first_once)
            c.commit_sync(15)
        finally:
            c.close()
        assert sorted(m.value() for _, m in got) == sorted([b"v0", b"v0", b"v1", b"v2", b"v3", b"in-txn"])
        b.kill9()
        # A start after the crash replays the state; the clean stop that follows trims the
        # segments' preallocated space, which Kafka's tool (unlike ours) stops at.
        b.start()

    files = sorted(data.glob("__share_group_state-*/*.log"))
    assert len(files) == 50  # Kafka's share.coordinator.state.topic.num.partitions
    r = _ours(*files)
    assert r.returncode == 0 and r.stderr == "", r
    per_file = r.stdout.split("Dumping ")[1:]
    assert len(per_file) == 50
    used = {Path(d.split("\n", 1)[0]): _records(d) for d in per_file if _records(d)}
    assert len(used) == 1, used  # one share partition: one coordinator partition holds it
    [(segment, ours)] = used.items()
    assert ours == _records(kafka_dump_log(segment))
    last = json.loads(ours[-1].split(" payload: ", 1)[1])["data"]
    # offsets 0-3 and the transaction's record (4) all ACCEPTed (state 2), 0 on its second
    # delivery; the commit marker at offset 5 is no record to deliver
    done = {o: (sb["deliveryState"], sb["deliveryCount"]) for sb in last["stateBatches"]
            for o in range(sb["firstOffset"], sb["lastOffset"] + 1) if o >= last["startOffset"]}
    assert {o: st for o, (st, _) in done.items() if o < 5} == {o: 2 for o in range(last["startOffset"], 5)}, last
    assert done.get(0, (2, 2)) == (2, 2), last

    def txn(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "minibroker", "txn", *args, "--data-dir", str(data)],
                              cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=120)

    listed = txn("list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)["transactions"]
    assert [(t["transactional_id"], t["state"]) for t in rows] == [("txn-offline", "CompleteCommit")], rows
    hanging = txn("hanging", "--json")
    assert hanging.returncode == 0 and json.loads(hanging.stdout) == {"hanging": []}, hanging
    story = txn("explain", "txn-offline")
    assert story.returncode == 0 and "commit" in story.stdout.lower(), story
    unknown = txn("explain", "g-offline")  # a share group's id is no transactional id
    assert unknown.returncode == 1 and "no transactional id 'g-offline'" in unknown.stderr, unknown


def _state_offsets(bs: str) -> dict[int, tuple[int, int]]:
    """(log start, log end) of each __share_group_state partition holding records."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    admin = AdminClient({"bootstrap.servers": bs})
    tps = [TopicPartition("__share_group_state", p) for p in range(50)]
    first = admin.list_offsets({tp: OffsetSpec.earliest() for tp in tps})
    last = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps})
    out = {}
    for tp in tps:
        lo, hi = first[tp].result(timeout=15).offset, last[tp].result(timeout=15).offset
        if hi > 0:
            out[tp.partition] = (lo, hi)
    return out


def test_share_state_is_kafkas_delete_topic_pruned_and_replayed_after_the_prune(broker_factory):
    """__share_group_state has Kafka's configs (delete, retention.ms -1, not compacted); the
    share coordinator's prune (every 5 min of the broker's clock) deletes the records below the
    newest snapshot of each share partition; a kill -9 after it replays from there: accepted
    records never come again, released ones do with their delivery count kept."""
    b = broker_factory(control=True)
    bs = b.bootstrap_servers
    topic = _topic(bs, partitions=1)
    _group_configs(bs, "g-prune", share_auto_offset_reset="earliest")
    _produce(bs, topic, 10, partitions=1)
    c = _consumer(bs, "g-prune", topic, explicit=True)

    def accept_below_5(consumer, m):
        consumer.acknowledge(m, AcknowledgeType.ACCEPT if m.offset() < 5 else AcknowledgeType.RELEASE)
        consumer.commit_sync(15)  # one write, one snapshot, per record

    try:
        assert len(_poll_until([c], 10, 30, on_message=accept_below_5)) >= 10
    finally:
        c.close()
    # created at the group's first heartbeat, with Kafka's configs
    admin = AdminClient({"bootstrap.servers": bs})
    res = ConfigResource(ConfigResource.Type.TOPIC, "__share_group_state")
    configs = admin.describe_configs([res])[res].result(timeout=15)
    assert {k: configs[k].value for k in ("cleanup.policy", "retention.ms", "compression.type",
                                          "segment.bytes")} == {
        "cleanup.policy": "delete", "retention.ms": "-1", "compression.type": "producer",
        "segment.bytes": str(100 * 1024 * 1024)}
    [(p, (start, end))] = _state_offsets(bs).items()
    assert start == 0 and end >= 10, (start, end)
    b.control.advance("301s")  # past share.coordinator.state.topic.prune.interval.ms
    [(p2, (pruned, end2))] = _state_offsets(bs).items()
    # everything below the newest snapshot is gone: the newest is the last record but the
    # records a consumer's close released after it, if any
    assert p2 == p and end2 >= end and end2 - 3 <= pruned < end2, (pruned, end2)
    assert "share_state.pruned" in b.log_text()
    b.kill9()
    b.start()
    bs = b.bootstrap_servers
    assert _state_offsets(bs)[p][0] == pruned  # the log start is kept across the crash
    again = _consumer(bs, "g-prune", topic)
    try:
        got = _poll_until([again], 5, 40)
        again.commit_sync(15)
        assert _poll_until([again], 1, 3) == []
    finally:
        again.close()
    assert sorted(m.offset() for _, m in got) == [5, 6, 7, 8, 9]
    assert all(m.delivery_count() >= 2 for _, m in got), [m.delivery_count() for _, m in got]


def _share_level(kafka_tool, bs: str) -> str:
    r = kafka_tool("FeatureCommand", "--bootstrap-server", bs, "describe")
    assert r.returncode == 0, r.stderr
    [line] = [x for x in r.stdout.splitlines() if x.split()[:2] == ["Feature:", "share.version"]]
    return line.split("FinalizedVersionLevel: ")[1].split()[0]


def test_a_data_dir_from_before_share_groups_gets_them_with_kafka_features_upgrade(tmp_path, kafka_tool):
    """A data dir an older minibroker made (meta.properties, topics, no levels file) keeps the
    levels it ran at: share.version 0, share groups off, until Kafka's own kafka-features.sh
    upgrade raises it, as on a Kafka cluster upgraded to 4.4; the level then outlives a restart."""
    data = tmp_path / "data"
    with MiniBroker(name="share-older", data_dir=data) as b:
        topic = _topic(b.bootstrap_servers, partitions=1)
    # what an older minibroker left: no levels written, no share history
    (data / "feature-levels").unlink()
    (data / "share-history.jsonl").unlink(missing_ok=True)  # made only once share groups are used
    with MiniBroker(name="share-older", data_dir=data) as b:
        bs = b.bootstrap_servers
        assert _share_level(kafka_tool, bs) == "0"
        _produce(bs, topic, 5, partitions=1)
        _group_configs(bs, "g-older", share_auto_offset_reset="earliest")
        c = _consumer(bs, "g-older", topic)
        try:
            with pytest.raises(KafkaException, match="UNSUPPORTED_VERSION"):
                _poll_until([c], 1, 20)  # librdkafka: "ShareGroupHeartbeat fatal error"
        finally:
            c.close()
        up = kafka_tool("FeatureCommand", "--bootstrap-server", bs, "upgrade", "--feature", "share.version=2")
        assert up.returncode == 0, (up.stdout, up.stderr)
        assert _share_level(kafka_tool, bs) == "2"
        c = _consumer(bs, "g-older", topic)
        try:
            got = _poll_until([c], 5, 40)
            c.commit_sync(15)
        finally:
            c.close()
        assert sorted(m.offset() for _, m in got) == list(range(5))
    with MiniBroker(name="share-older", data_dir=data) as b:
        assert _share_level(kafka_tool, b.bootstrap_servers) == "2"
