"""KafkaJS 2.x transactions (commit / abort / commit across partitions, tests/js/txn_produce.js),
read back with confluent-kafka consumers (KafkaJS consumes only through groups, which
minibroker does not have yet)."""

from __future__ import annotations

import json
import subprocess

from . import wire
from .clients import create_topic, run_node
from .test_txn_support import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    check_in_offset_order,
    log_events,
    read_all,
    txn_id,
    values_by_partition,
)

PARTS = 3
PER_PART = 10
PLAN = ["commit", "abort", "commit"]


def js_value(k: int, p: int, i: int) -> bytes:
    return f"t{k}-p{p}-{i}|".encode() + b"z" * ((i * 29 + k * 7) % 500)


def _run_node(*args: str, timeout: float = 90.0) -> subprocess.CompletedProcess:
    return run_node("txn_produce.js", *args, timeout=timeout)


def test_kafkajs_commit_abort_commit(broker, topic):
    create_topic(broker.bootstrap_servers, topic, PARTS)
    tid = txn_id("kafkajs")
    r = _run_node("--broker", broker.bootstrap_servers, "--topic", topic, "--partitions", str(PARTS),
                  "--per-partition", str(PER_PART), "--transactional-id", tid, "--plan", ",".join(PLAN))
    assert r.returncode == 0, f"txn_produce.js exit {r.returncode}\nstderr:\n{r.stderr[-4000:]}"
    out = json.loads(r.stdout)
    assert out["ended"] == PLAN

    expected = {READ_COMMITTED: {p: [] for p in range(PARTS)}, READ_UNCOMMITTED: {p: [] for p in range(PARTS)}}
    acked = {(k, p, i): off for k, p, i, off in out["acked"]}
    assert len(acked) == len(PLAN) * PARTS * PER_PART
    for k, outcome in enumerate(PLAN):
        for p in range(PARTS):
            for i in range(PER_PART):
                want = k * (PER_PART + 1) + i  # one marker offset after each transaction
                assert acked[(k, p, i)] == want, f"t{k}-p{p}-{i} acknowledged at {acked[(k, p, i)]}, not {want}"
                expected[READ_UNCOMMITTED][p].append((want, js_value(k, p, i)))
                if outcome == "commit":
                    expected[READ_COMMITTED][p].append((want, js_value(k, p, i)))
    assert wire.high_watermarks(broker.port, topic, range(PARTS)) == {
        p: len(PLAN) * (PER_PART + 1) for p in range(PARTS)}

    for iso in (READ_COMMITTED, READ_UNCOMMITTED):
        recs = read_all(broker, topic, range(PARTS), iso)
        check_in_offset_order(recs)
        assert values_by_partition(recs) == expected[iso], f"{iso}: differs from the expected records"
        for p, rs in recs.items():
            for off, key, value in rs:
                assert key == value.split(b"|", 1)[0], (p, off, key)

    ends = [e["_line"] for e in log_events(broker, "txn.committed") + log_events(broker, "txn.aborted")
            if e.get("transactional_id") == tid]
    assert len(ends) == len(PLAN), ends
