"""Issue 32's reassignments and quorum with Kafka's own command-line tools, run from the cached
kafka-tools 4.4.0 jar against ``--brokers 3``.

``kafka-reassign-partitions.sh`` (ReassignPartitionsCommand) drives the Java Admin 4.4:
--generate reads the placement (Metadata, DescribeLogDirs), --execute sends
alterPartitionReassignments, --verify lists the reassignments in progress and clears the
replication throttles, --cancel cancels. ``kafka-metadata-quorum.sh describe`` (MetadataQuorumCommand)
reads DescribeQuorum. Where the tools print, the test reads what they print.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from minibroker.testing import requests_seen

from .clients import unique_topic

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"


def _unavailable(msg: str):
    if os.environ.get("MINIBROKER_TEST_REQUIRE_TOOLS"):
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture(scope="module")
def kafka_tool():
    from tests.reference.kafka import jars_present, libs_dir

    java, libs = shutil.which("java"), libs_dir()
    if not java:
        _unavailable("java not installed (tests/run.sh installs default-jdk-headless)")
    if not jars_present(libs):
        _unavailable(f"Kafka 4.4's jars not found in {libs} (python -m tests.reference.kafka fetch)")

    def run(main: str, *args: str, ok: bool = True) -> str:
        done = subprocess.run([java, "-Xmx256m", "-cp", f"{libs}/*", main, *args], capture_output=True,
                              text=True, timeout=120)
        if ok:
            assert done.returncode == 0, f"{main} {args}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stdout
    return run


def _replicas(boot: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr), from a fresh Metadata request."""
    md = AdminClient({"bootstrap.servers": boot}).list_topics(topic, timeout=15).topics[topic]
    return {p: (pm.leader, list(pm.replicas), list(pm.isrs)) for p, pm in md.partitions.items()}


def _wait(predicate, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    for _ in range(300):
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _json_after(text: str, heading: str) -> dict:
    return json.loads(text.split(heading, 1)[1].strip().splitlines()[0])


def test_kafka_reassign_partitions_generate_execute_verify(broker_factory, kafka_tool, tmp_path: Path):
    b = broker_factory(["--brokers", "3"], control=True)
    boot = ",".join(b.addresses)
    topic = unique_topic("reassign")
    admin = AdminClient({"bootstrap.servers": boot})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=2)])[topic].result(15)
    before = _wait(lambda: (r := _replicas(boot, topic)) and len(r) == 3 and r, "the topic's leaders")

    move = tmp_path / "move.json"
    move.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    out = kafka_tool(REASSIGN, "--bootstrap-server", boot, "--topics-to-move-json-file", str(move),
                     "--broker-list", "2,3", "--generate")
    current = _json_after(out, "Current partition replica assignment")
    assert {p["partition"]: p["replicas"] for p in current["partitions"]} == {
        p: r for p, (_l, r, _i) in before.items()}
    proposed = _json_after(out, "Proposed partition reassignment configuration")
    target = {p["partition"]: p["replicas"] for p in proposed["partitions"]}
    assert all(sorted(r) == [2, 3] for r in target.values()), target

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(proposed))
    out = kafka_tool(REASSIGN, "--bootstrap-server", boot, "--reassignment-json-file", str(plan), "--execute")
    assert "Successfully started partition reassignment" in out, out
    out = kafka_tool(REASSIGN, "--bootstrap-server", boot, "--reassignment-json-file", str(plan), "--verify")
    for p in range(3):
        assert f"Reassignment of partition {topic}-{p} is completed." in out, out
    after = _replicas(boot, topic)
    for p, (leader, replicas, isr) in after.items():
        assert replicas == target[p] and sorted(isr) == [2, 3], after
        # a kept leader stays; broker 1's partitions are led by the first new replica
        old_leader = before[p][0]
        assert leader == (old_leader if old_leader in target[p] else target[p][0]), (before, after)

    # A reassignment onto a stopped broker stays in progress until it starts. The tool refuses to
    # name a broker DescribeCluster does not list (as with Kafka, whose stopped brokers are
    # fenced), so the request is sent as the Admin sends it; the tool lists, verifies, cancels.
    b.control.stop_broker(1)
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1, target[0][0]], "log_dirs": ["any", "any"]}]}))
    assert _reassign(b.addresses[1], topic, 0, [1, target[0][0]]) == (0, None)
    out = kafka_tool(REASSIGN, "--bootstrap-server", boot, "--list")
    assert f"Current partition reassignments:\n{topic}-0: replicas: 1,{target[0][0]}," in out, out
    assert "adding: 1." in out, out
    out = kafka_tool(REASSIGN, "--bootstrap-server", boot, "--reassignment-json-file", str(plan), "--verify")
    assert f"Reassignment of partition {topic}-0 is still in progress." in out, out
    b.control.start_broker(1)
    out = kafka_tool(REASSIGN, "--bootstrap-server", boot, "--reassignment-json-file", str(plan), "--verify")
    assert f"Reassignment of partition {topic}-0 is completed." in out, out
    assert _replicas(boot, topic)[0][1] == [1, target[0][0]]

    # ...or is cancelled: the replicas go back
    b.control.stop_broker(1)
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 1, "replicas": [target[1][0], 1], "log_dirs": ["any", "any"]}]}))
    assert _reassign(b.addresses[1], topic, 1, [target[1][0], 1]) == (0, None)
    # (--preserve-throttles: clearing them asks every broker, and broker 1 is down)
    out = kafka_tool(REASSIGN, "--bootstrap-server", boot, "--reassignment-json-file", str(plan), "--cancel",
                     "--preserve-throttles")
    assert f"Successfully cancelled partition reassignment for: {topic}-1" in out, out
    assert _replicas(boot, topic)[1][1] == target[1]
    out = kafka_tool(REASSIGN, "--bootstrap-server", boot, "--list")
    assert "No partition reassignments found." in out, out
    # the tool is the Java Admin 4.4: its alterPartitionReassignments and listPartitionReassignments
    java = {(api, v) for api, v, client in requests_seen(b.log_text()) if client == "apache-kafka-java"}
    assert {("AlterPartitionReassignments", 1), ("ListPartitionReassignments", 0),
            ("DescribeLogDirs", 5)} <= java, java


def _reassign(address: str, topic: str, partition: int, replicas: list[int]) -> tuple[int, str | None]:
    """AlterPartitionReassignments v1 for one partition: its (error code, message)."""
    import datetime

    from tests.reference.client import Connection, part, req

    host, port = address.rsplit(":", 1)
    base = (45, 1)
    with Connection(host, int(port)) as conn:
        r = conn.call(req(45, 1, timeout_ms=datetime.timedelta(seconds=5), allow_replication_factor_change=True,
                          topics=(part(base, "ReassignableTopic", name=topic, partitions=(
                              part(base, "ReassignablePartition", partition_index=partition,
                                   replicas=tuple(replicas)),)),)))
    (p,) = r.responses[0].partitions
    return int(p.error_code), p.error_message


def _fields(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^(\w+):\s+(.*)$", text, re.M)}


def test_kafka_metadata_quorum_describe(broker_factory, kafka_tool):
    b = broker_factory(["--brokers", "3"], control=True)
    boot = ",".join(b.addresses)
    status = _fields(kafka_tool(QUORUM, "--bootstrap-server", boot, "describe", "--status"))
    assert status["LeaderId"] == "1" and status["LeaderEpoch"] == "1", status
    assert status["MaxFollowerLag"] == "0", status
    voters = json.loads(status["CurrentVoters"])
    assert [v["id"] for v in voters] == [1] and voters[0]["endpoints"][0].startswith("CONTROLLER://"), voters
    assert sorted(o["id"] for o in json.loads(status["CurrentObservers"])) == [2, 3], status
    rows = kafka_tool(QUORUM, "--bootstrap-server", boot, "describe", "--replication").strip().splitlines()
    assert rows[0].split()[:3] == ["NodeId", "DirectoryId", "LogEndOffset"], rows
    roles = {int(r.split()[0]): r.split()[-1] for r in rows[1:]}
    assert roles == {1: "Leader", 2: "Observer", 3: "Observer"}, rows

    # the controller stops: the next broker up leads the quorum, at the next epoch
    b.control.stop_broker(1)
    up = ",".join(b.addresses[1:])
    status = _fields(kafka_tool(QUORUM, "--bootstrap-server", up, "describe", "--status"))
    assert status["LeaderId"] == "2" and status["LeaderEpoch"] == "2", status
    assert [o["id"] for o in json.loads(status["CurrentObservers"])] == [3], status
    java = {(api, v) for api, v, client in requests_seen(b.log_text()) if client == "apache-kafka-java"}
    assert ("DescribeQuorum", 2) in java, java
