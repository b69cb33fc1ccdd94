"""Kafka's own ``kafka-streams-groups.sh`` (org.apache.kafka.tools.streams.StreamsGroupCommand from
the kafka-tools 4.4.0 jar, through the Java Admin's listStreamsGroups/describeStreamsGroups) run
against minibroker and against Kafka 4.4, on a streams group driven the same way on both: one
member with a two-subtopology topology (a changelog and a repartition topic the broker creates),
heartbeated until it holds all its tasks. The tool's output must be the same on both, member and
process ids being the test's own."""

from __future__ import annotations

import datetime
import re
import shutil
import subprocess
import time
import uuid

import pytest

from minibroker_protocol.build import build, nested
from minibroker_protocol.codec import request_type
from tests.reference.client import Connection, req
from tests.reference.kafka import jars_present, libs_dir

HEARTBEAT = 88


def _n(cls_name: str, /, **kw):
    return build(nested(request_type(HEARTBEAT, 1), cls_name), **kw)


def _topology(app: str):
    return _n("Topology", epoch=0, subtopologies=(
        _n("Subtopology", subtopology_id="0", source_topics=(f"{app}-in",), source_topic_regex=(),
           state_changelog_topics=(_n("TopicInfo", name=f"{app}-store-changelog", partitions=0,
                                      replication_factor=0, topic_configs=()),),
           repartition_sink_topics=(f"{app}-rep",), repartition_source_topics=(),
           copartition_groups=()),
        _n("Subtopology", subtopology_id="1", source_topics=(), source_topic_regex=(),
           state_changelog_topics=(), repartition_sink_topics=(), copartition_groups=(),
           repartition_source_topics=(_n("TopicInfo", name=f"{app}-rep", partitions=0,
                                         replication_factor=0, topic_configs=()),)),
    ))


def _drive(bootstrap: str, app: str, member: str, process: str) -> None:
    """Create the source topic, join, heartbeat until the member holds its 4 tasks (bounded)."""
    host, port = bootstrap.rsplit(":", 1)
    with Connection(host, int(port)) as c:
        # the internal topics too: Kafka may bump the group epoch once per topic it creates,
        # as its metadata image sees them (tests/differential/divergences.py)
        CT = request_type(19, 7)
        c.call(build(CT, topics=tuple(
            build(nested(CT, "CreatableTopic"), name=f"{app}-{suffix}", num_partitions=2,
                  replication_factor=1, assignments=(), configs=())
            for suffix in ("in", "store-changelog", "rep")),
            timeout=datetime.timedelta(seconds=10), validate_only=False))
        # and known with their leaders before the join (else Kafka's coordinator sees them
        # after it and moves the epoch once more)
        names = {f"{app}-{suffix}" for suffix in ("in", "store-changelog", "rep")}
        deadline = time.monotonic() + 30
        while True:
            md = c.call(req(3, 12, topics=None, allow_auto_topic_creation=False,
                            include_topic_authorized_operations=False))
            ready = {t.name for t in md.topics if t.name in names and len(t.partitions) == 2
                     and all(p.leader_id >= 0 for p in t.partitions)}
            if ready == names:
                break
            assert time.monotonic() < deadline, f"{bootstrap}: topics not ready: {ready}"
            time.sleep(0.2)
        time.sleep(1)  # the coordinator's metadata image follows the broker's
        # Kafka makes __consumer_offsets on the first FindCoordinator
        c.call(req(10, 4, key_type=0, coordinator_keys=(app,)))
        epoch, owned = 0, None
        deadline = time.monotonic() + 60
        for _ in range(120):
            join = epoch == 0
            r = c.call(req(HEARTBEAT, 1, group_id=app, member_id=member, member_epoch=epoch,
                           endpoint_information_epoch=0, instance_id=None, rack_id=None,
                           rebalance_timeout=datetime.timedelta(seconds=30 if join else -0.001),
                           topology=_topology(app) if join else None,
                           active_tasks=() if join else owned,
                           standby_tasks=() if join or owned is not None else None,
                           warmup_tasks=() if join or owned is not None else None,
                           process_id=process if join else None, user_endpoint=None,
                           client_tags=() if join else None, task_offsets=None,
                           task_end_offsets=None, shutdown_application=False))
            if r.error_code.name in ("coordinator_load_in_progress", "coordinator_not_available",
                                     "not_coordinator"):
                assert time.monotonic() < deadline, f"{bootstrap}: no coordinator within 60 s"
                time.sleep(0.5)
                continue
            assert r.error_code == 0, (bootstrap, r)
            epoch = r.member_epoch
            if r.active_tasks is not None:
                owned = r.active_tasks
                if sum(len(t.partitions) for t in owned) == 4:
                    return
            assert time.monotonic() < deadline, f"{bootstrap}: no tasks within 60 s"
            time.sleep(0.5)
        raise AssertionError(f"{bootstrap}: no tasks")


def _tool(bootstrap: str, *args: str) -> str:
    java = shutil.which("java")
    if java is None or not jars_present(libs_dir()):
        pytest.skip("java or Kafka 4.4's jars missing (python -m tests.reference.kafka fetch)")
    p = subprocess.run([java, "-cp", f"{libs_dir()}/*", "org.apache.kafka.tools.streams.StreamsGroupCommand",
                        "--bootstrap-server", bootstrap, *args],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, (bootstrap, args, p.stdout, p.stderr[-2000:])
    return re.sub(r"[ \t]+", " ", p.stdout).strip()


@pytest.mark.timeout(300)
def test_kafka_streams_groups_tool_describes_the_same_on_both(broker_factory, kafka_reference):
    b = broker_factory([])
    app = f"sgtool-{uuid.uuid4().hex[:8]}"
    member, process = str(uuid.uuid4()), str(uuid.uuid4())
    sides = {"minibroker": b.bootstrap_servers, "kafka": kafka_reference.bootstrap_servers}
    for bootstrap in sides.values():
        _drive(bootstrap, app, member, process)
    outputs = {}
    for name, bootstrap in sides.items():
        listed = _tool(bootstrap, "--list")
        assert app in listed.split(), (name, listed)
        # the coordinator column names each broker's own address
        outputs[name] = [_tool(bootstrap, "--describe", "--group", app, *extra).replace(bootstrap, "BROKER")
                         for extra in (["--members", "--verbose"], ["--state", "--verbose"],
                                       ["--members"])]
    assert outputs["minibroker"] == outputs["kafka"], outputs
    members = outputs["minibroker"][0]
    assert member in members and process in members and "ACTIVE: 0:[0,1]; 1:[0,1];" in members, members
