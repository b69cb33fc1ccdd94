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
from confluent_kafka import AcknowledgeType, Producer

from minibroker.testing import MiniBroker
from tests.minibroker.test_dump_log import share_state_segment
from tests.reference.kafka import jars_present, libs_dir

from .support import REPO_ROOT
from .test_share_groups import _consumer, _group_configs, _poll_until, _produce, _topic

pytestmark = pytest.mark.integration

RECORD_SPLIT = " headerKeys: [] "


@pytest.fixture(scope="module")
def kafka_dump_log():
    """Run Kafka 4.4's DumpLogSegments on one file with the share state decoder; its stdout."""
    libs = libs_dir()
    java = shutil.which("java")
    if java is None or not jars_present(libs):
        why = f"java or Kafka's jars ({libs}) missing: tests/run.sh fetches them"
        if os.environ.get("MINIBROKER_TEST_REQUIRE_TOOLS"):
            pytest.fail(why)
        pytest.skip(why)

    def run(path: Path) -> str:
        r = subprocess.run([java, "-cp", f"{libs}/*", "org.apache.kafka.tools.DumpLogSegments",
                            "--files", str(path), "--share-group-state-decoder"],
                           capture_output=True, text=True, timeout=120)
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
