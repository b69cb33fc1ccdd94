"""Every Java client since exactly-once began (kafka-clients 0.11.0.3 to 4.4.0) runs the
idempotent, commit/abort, fencing and consume-transform-produce scenarios against one broker,
all releases at once (java_matrix/MatrixDriver.java). Apache Kafka 4 refuses clients older than
2.1 (KIP-896); minibroker serves them all."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from . import client_matrix
from .test_txn_support import READ_COMMITTED, READ_UNCOMMITTED, TXN_BROKER_ARGS, consumer, produce_sync

SCENARIO_TOPICS = ("idem", "txn", "fence", "in", "out")


def prefix(version: str) -> str:
    return "jm-" + version.replace(".", "_")


def read_many(bootstrap: str, topics: list[str], isolation: str, timeout: float = 30.0) -> dict[str, list[bytes]]:
    """Every value of partition 0 of each topic, one consumer for all (each transaction ended)."""
    from confluent_kafka import OFFSET_BEGINNING

    c = consumer(bootstrap, isolation)
    out: dict[str, list[bytes]] = {t: [] for t in topics}
    try:
        c.assign([TopicPartition(t, 0, OFFSET_BEGINNING) for t in topics])
        done: set[str] = set()
        deadline = time.monotonic() + timeout
        while len(done) < len(topics) and time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.2):
                if m.error() is not None:
                    if m.error().code() == -191:  # _PARTITION_EOF
                        done.add(m.topic())
                    continue
                out[m.topic()].append(m.value())
    finally:
        c.close()
    assert len(done) == len(topics), sorted(set(topics) - done)
    return out


@pytest.mark.timeout(600)
def test_every_java_client_since_0_11(broker_factory):
    from confluent_kafka import Producer

    java, classes = client_matrix.toolchain()
    b = broker_factory(TXN_BROKER_ARGS + ["--group-initial-rebalance-delay-ms", "0"])
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    names = [f"{prefix(v)}-{t}" for v in client_matrix.VERSIONS for t in SCENARIO_TOPICS]
    for f in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": b.bootstrap_servers})
    for v in client_matrix.VERSIONS:
        produce_sync(producer, f"{prefix(v)}-in", [(0, b"x|%d" % i) for i in range(100)])

    started = time.monotonic()
    procs = {v: subprocess.Popen(client_matrix.command(java, classes, v, b.bootstrap_servers, prefix(v), v),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 stdin=subprocess.DEVNULL)
             for v in client_matrix.VERSIONS}
    outputs, failed = {}, []
    try:
        for v, proc in procs.items():
            try:
                out, err = proc.communicate(timeout=max(1.0, 240 - (time.monotonic() - started)))
            except subprocess.TimeoutExpired:
                proc.kill()  # this JVM only
                out, err = proc.communicate(timeout=30)
            if proc.returncode != 0:
                failed.append(f"kafka-clients {v} ({proc.returncode}):\n{out[-2000:]}\n{err[-3000:]}")
            outputs[v] = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    finally:
        for proc in procs.values():  # none outlives the test, whatever failed
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
    assert not failed, "\n".join(failed)
    print(f"{len(procs)} Java client releases in {time.monotonic() - started:.1f} s")

    versions = client_matrix.VERSIONS
    plain = read_many(b.bootstrap_servers, [f"{prefix(v)}-idem" for v in versions], READ_UNCOMMITTED)
    committed = read_many(b.bootstrap_servers, [f"{prefix(v)}-{t}" for v in versions for t in ("txn", "fence", "out")],
                          READ_COMMITTED)
    for v in versions:
        p = prefix(v)
        scenario = {o["scenario"]: o for o in outputs[v]}
        assert sorted(plain[f"{p}-idem"]) == sorted(b"i-%d" % i for i in range(200)), v
        assert committed[f"{p}-txn"] == [b"%s-%d" % (k, i) for k in (b"c1", b"c2") for i in range(50)], v
        assert committed[f"{p}-fence"] == [b"next-%d" % i for i in range(10)], v
        assert scenario["fencing"]["zombie_commit"] != "none", (v, scenario)
        assert scenario["consume-transform-produce"]["moved"] == 100, (v, scenario)
        assert committed[f"{p}-out"] == [b"X|%d" % i for i in range(100)], v
        c = consumer(b.bootstrap_servers, READ_COMMITTED, **{"group.id": f"{p}-ctp"})
        try:
            offset = c.committed([TopicPartition(f"{p}-in", 0)], timeout=10)[0].offset
        finally:
            c.close()
        assert offset == 100, (v, offset)
        print(f"kafka-clients {v}: zombie commit -> {scenario['fencing']['zombie_commit']}")
