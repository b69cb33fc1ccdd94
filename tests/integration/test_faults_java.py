"""The bad days with the stock Java client (kafka-clients 4.4, java/TxnDriver.java, transactions
v2 at the broker's default level): a lost EndTxn answer, retriable coordinator errors, and the
seeds' timeout incident on the virtual clock — provoked over the control plane."""

from __future__ import annotations

import time

from .clients import create_topic
from .test_txn_support import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TXN_BROKER_ARGS,
    finish_java_txn,
    read_all,
    run_java_txn,
    start_java_txn,
    txn_id,
    values_by_partition,
)

PARTS, PER_PART = 2, 5


def _committed_values(b, topic):
    got = values_by_partition(read_all(b, topic, range(PARTS), READ_COMMITTED))
    return {p: [v.decode().split("|")[0] for _o, v in recs] for p, recs in got.items()}


def _expected():
    # commit-abort: transactions 0 and 2 commit, 1 aborts
    return {p: [f"t{k}-p{p}-{i}" for k in (0, 2) for i in range(PER_PART)] for p in range(PARTS)}


def test_java_end_txn_answer_lost(broker_factory, topic):
    """The first commit's answer is dropped: the Java client times EndTxn out after
    request.timeout.ms (10 s in the driver), reconnects, sends it again and is answered success."""
    b = broker_factory(TXN_BROKER_ARGS, control=True)
    create_topic(b.bootstrap_servers, topic, PARTS)
    tid = txn_id("java-gap")
    rule = b.control.add_fault(api="EndTxn", action="drop-response", transactional_id=tid)
    res = run_java_txn("commit-abort", b.bootstrap_servers, topic, PARTS, PER_PART, tid, timeout=120)
    assert not res["errors"], res["errors"]
    assert _committed_values(b, topic) == _expected()
    end_txns = b.control.requests(api="EndTxn", transactional_id=tid)
    assert end_txns[0]["fault"] == rule["id"] and end_txns[0]["outcome"] == "no_answer", end_txns
    assert end_txns[1]["connection"] != end_txns[0]["connection"], end_txns
    assert [r["outcome"] for r in end_txns[1:]] == ["answered"] * 3, end_txns
    assert {r["api_version"] for r in end_txns} == {5} and all(r["error_code"] == 0 for r in end_txns[1:])


def test_java_retriable_coordinator_errors(broker_factory, topic):
    b = broker_factory(TXN_BROKER_ARGS, control=True)
    create_topic(b.bootstrap_servers, topic, PARTS)
    tid = txn_id("java-retry")
    rules = b.control.add_faults([
        {"api": "FindCoordinator", "action": "error", "error": "COORDINATOR_NOT_AVAILABLE", "count": 3,
         "transactional_id": tid},
        {"api": "InitProducerId", "action": "error", "error": "COORDINATOR_LOAD_IN_PROGRESS", "count": 3},
        {"api": "EndTxn", "action": "error", "error": "CONCURRENT_TRANSACTIONS", "count": 3},
    ])
    res = run_java_txn("commit-abort", b.bootstrap_servers, topic, PARTS, PER_PART, tid, timeout=120)
    assert not res["errors"], res["errors"]
    assert [b.control.fault(r["id"])["fired"] for r in rules] == [3, 3, 3]
    assert _committed_values(b, topic) == _expected()


def test_java_virtual_clock_transaction_timeout(broker_factory, topic):
    """The seeds' incident without the wait: the producer's transaction is open, the clock moves
    61 s past its 60 s timeout, the coordinator aborts with an epoch bump, and the producer's
    commit fails (InvalidTxnStateException at transactions v2, as Kafka 4.4 answers); a new
    instance then commits."""
    b = broker_factory(TXN_BROKER_ARGS, control=True, clock="virtual")
    create_topic(b.bootstrap_servers, topic, 1)
    tid = txn_id("java-timeout")
    proc = start_java_txn("timeout", b.bootstrap_servers, topic, tid, 60000, 6000)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            sent = [r for r in b.control.requests(api="Produce", transactional_id=tid) if r["outcome"] == "answered"]
            if sent:
                break
            time.sleep(0.05)
        assert sent, "the Java producer's batch never arrived"
        out = b.control.advance("61s")
        assert out["ran"]["transactions_aborted"] == 1, out
    finally:
        res = finish_java_txn(proc, timeout=90)
    assert not res["errors"], res["errors"]
    assert res["a_commit_error"] and res["a_commit_error"].startswith(
        "org.apache.kafka.common.errors.InvalidTxnStateException:"), res
    assert res["b_committed"], res
    assert values_by_partition(read_all(b, topic, [0], READ_COMMITTED)) == {0: [(2, b"after-timeout-0")]}


def test_kafkajs_retriable_coordinator_errors(broker_factory, topic):
    """KafkaJS 2.2 (retry.retries 3 in the script) retries InitProducerId through
    COORDINATOR_LOAD_IN_PROGRESS and AddPartitionsToTxn through CONCURRENT_TRANSACTIONS, and every
    transaction ends as planned. EndTxn's CONCURRENT_TRANSACTIONS it does not retry (the Java
    client and librdkafka do): commit() rejects with it — measured in the second half."""
    import json

    from .clients import run_node

    b = broker_factory(TXN_BROKER_ARGS, control=True)
    create_topic(b.bootstrap_servers, topic, PARTS)
    tid = txn_id("kafkajs-retry")
    rules = b.control.add_faults([
        {"api": "InitProducerId", "action": "error", "error": "COORDINATOR_LOAD_IN_PROGRESS", "count": 2},
        {"api": "AddPartitionsToTxn", "action": "error", "error": "CONCURRENT_TRANSACTIONS", "count": 2},
    ])
    r = run_node("txn_produce.js", "--broker", b.bootstrap_servers, "--topic", topic, "--partitions",
                 str(PARTS), "--per-partition", str(PER_PART), "--transactional-id", tid,
                 "--plan", "commit,abort,commit", timeout=90)
    assert r.returncode == 0, f"txn_produce.js exit {r.returncode}\nstderr:\n{r.stderr[-4000:]}"
    assert json.loads(r.stdout)["ended"] == ["commit", "abort", "commit"]
    assert [b.control.fault(x["id"])["fired"] for x in rules] == [2, 2]
    software = {r["client_software_name"] for r in b.control.requests(transactional_id=tid)}
    assert software == {"unknown"} or "kafkajs" in " ".join(software).lower(), software
    got = values_by_partition(read_all(b, topic, range(PARTS), READ_COMMITTED))
    assert {p: [v.split(b"|")[0].decode() for _o, v in recs] for p, recs in got.items()} == _expected()

    b.control.add_fault(api="EndTxn", action="error", error="CONCURRENT_TRANSACTIONS")
    create_topic(b.bootstrap_servers, topic + "-2", 1)
    r = run_node("txn_produce.js", "--broker", b.bootstrap_servers, "--topic", topic + "-2",
                 "--partitions", "1", "--per-partition", "1", "--transactional-id", tid + "-2",
                 "--plan", "commit", timeout=90)
    assert r.returncode != 0 and "KafkaJSProtocolError" in r.stderr and "Object.commit" in r.stderr, r.stderr


def test_as_version_2_8_clients_fall_back_and_still_work(broker_factory, topic):
    """Against ``--as-version 2.8`` the Java client 4.4 and librdkafka take Kafka 2.8's paths
    (AddPartitionsToTxn, EndTxn <= v3, Produce <= v9: no transactions v2) and commit as before."""
    from .test_txn_support import produce_sync, txn_producer

    b = broker_factory([*TXN_BROKER_ARGS, "--as-version", "2.8"], control=True)
    create_topic(b.bootstrap_servers, topic, PARTS)
    tid = txn_id("java-2.8")
    res = run_java_txn("commit-abort", b.bootstrap_servers, topic, PARTS, PER_PART, tid, timeout=120)
    assert not res["errors"], res["errors"]
    assert _committed_values(b, topic) == _expected()

    lib_tid = txn_id("rdkafka-2.8")
    p = txn_producer(b.bootstrap_servers, lib_tid)
    p.init_transactions(20)
    p.begin_transaction()
    produce_sync(p, topic + "-lib", [(0, b"old|1")])
    p.commit_transaction(20)

    for who in (tid, lib_tid):
        used = {(r["api"], r["api_version"]) for r in b.control.requests(transactional_id=who)}
        apis = {api for api, _ in used}
        assert {"InitProducerId", "AddPartitionsToTxn", "EndTxn", "Produce"} <= apis, used
        assert max(v for api, v in used if api == "EndTxn") <= 3, used
        assert max(v for api, v in used if api == "Produce") <= 9, used
        assert max(v for api, v in used if api == "InitProducerId") <= 4, used


def test_java_produce_response_lost_then_the_retry_is_deduplicated(broker_factory, topic):
    """The Java client 4.4 as an idempotent producer (java/IdempotentProduce.java): the answer to
    its third Produce is dropped after the append; after request.timeout.ms (2.5 s) it closes the
    connection and sends the batch again with the same sequence numbers; the broker answers it
    from its producer state (duplicate) and every record is in the log once, in order."""
    import json

    from . import java_client

    tc = java_client.java_toolchain()
    classes = java_client.compile_drivers(tc)
    b = broker_factory(TXN_BROKER_ARGS, control=True)
    create_topic(b.bootstrap_servers, topic, 1)
    rule = b.control.add_fault(api="Produce", action="drop-response", topic=topic, nth=3)
    n = 3000
    r = java_client.run_driver(tc, classes, "IdempotentProduce",
                               [b.bootstrap_servers, topic, 1, n, 200, "none", 2500], timeout=150)
    lines = r.stdout.strip().splitlines()
    assert r.returncode == 0 and lines and lines[-1].startswith("{"), r.stdout[-3000:] + r.stderr[-3000:]
    summary = json.loads(lines[-1])
    assert summary["acked"] == n and summary["failed"] == 0 and summary["offset_mismatches"] == 0, summary
    produces = b.control.requests(api="Produce", topic=topic)
    lost = [p for p in produces if p["fault"] == rule["id"]]
    print(f"java lost Produce answer: {summary}; Produce (connection, outcome, error): "
          f"{[(r['connection'], r['outcome'], r['error_code']) for r in produces[:6]]}")
    assert len(lost) == 1 and lost[0]["outcome"] == "no_answer", produces
    assert b.control.fault(rule["id"])["fired"] == 1
    keys = [k for _o, k, _v in read_all(b, topic, [0], READ_UNCOMMITTED)[0]]
    assert keys == [b"p0-%d" % s for s in range(n)]
    assert "produce.duplicate_dropped" in b.log_text()
