"""The bad days on purpose: fault rules, the virtual clock and the request log, driven over the
control plane (``MiniBroker(control=True)``) against librdkafka (confluent-kafka).

Each test provokes one failure exactly-once exists for and checks both what the client did
(its error, its retry) and the outcome (each committed record once, nothing else), reading the
broker's request log to prove the failure really happened on the wire.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from minibroker.testing.control import ControlError

from .test_txn_support import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TXN_BROKER_ARGS,
    open_transaction,
    produce_sync,
    read_all,
    txn_id,
    txn_producer,
)


def _values(records, partition=0):
    return [v for _o, _k, v in records[partition]]


def _commit_with_retries(p, attempts: int = 6, timeout: float = 20.0) -> list[str]:
    """commit_transaction until it succeeds, retrying what librdkafka calls retriable."""
    outcomes = []
    for _ in range(attempts):
        try:
            p.commit_transaction(timeout)
        except KafkaException as e:
            err = e.args[0]
            outcomes.append(err.name())
            assert err.retriable() and not err.fatal() and not err.txn_requires_abort(), (
                f"commit failed for good: {err.name()}: {err.str()}")
            continue
        outcomes.append("OK")
        return outcomes
    raise AssertionError(f"no successful commit in {attempts} attempts: {outcomes}")


def test_end_txn_response_lost_then_the_retry_commits_once(broker_factory, topic):
    """The commit gap: the broker commits, the answer never reaches the client. The client's
    EndTxn times out, it retries on a new connection, the coordinator answers the retry of a
    completed commit with success, and the records are there once."""
    b = broker_factory(TXN_BROKER_ARGS, control=True)
    tid = txn_id("gap")
    p = open_transaction(b.bootstrap_servers, tid, topic, [(0, b"gap|1"), (0, b"gap|2")],
                         **{"socket.timeout.ms": 1500})
    rule = b.control.add_fault(api="EndTxn", action="drop-response", transactional_id=tid)
    # librdkafka times the EndTxn out after socket.timeout.ms and retries it by itself (older
    # versions hand the application a retriable error first: both are retried here).
    outcomes = _commit_with_retries(p)
    assert outcomes[-1] == "OK", outcomes

    end_txns = b.control.requests(api="EndTxn", transactional_id=tid)
    assert end_txns[0]["outcome"] == "no_answer" and end_txns[0]["fault"] == rule["id"], end_txns
    assert end_txns[-1]["outcome"] == "answered" and end_txns[-1]["error_code"] == 0, end_txns
    assert end_txns[-1]["connection"] != end_txns[0]["connection"], "the retry came on a new connection"
    assert b.control.fault(rule["id"])["fired"] == 1
    # Still usable: the next transaction commits normally.
    p.begin_transaction()
    produce_sync(p, topic, [(0, b"gap|3")])
    p.commit_transaction(20)
    assert _values(read_all(b, topic, [0], READ_COMMITTED)) == [b"gap|1", b"gap|2", b"gap|3"]


@pytest.mark.parametrize("api, error", [
    ("InitProducerId", "COORDINATOR_LOAD_IN_PROGRESS"),
    ("AddPartitionsToTxn", "CONCURRENT_TRANSACTIONS"),
    ("FindCoordinator", "COORDINATOR_NOT_AVAILABLE"),
    ("EndTxn", "CONCURRENT_TRANSACTIONS"),
])
def test_retriable_errors_a_few_times_then_success(broker_factory, topic, api, error):
    b = broker_factory(TXN_BROKER_ARGS, control=True)
    tid = txn_id("retry")
    rule = b.control.add_fault(api=api, action="error", error=error, count=3,
                               **({} if api == "FindCoordinator" else {"transactional_id": tid}))
    p = open_transaction(b.bootstrap_servers, tid, topic, [(0, b"r|1")], init_timeout=30)
    p.commit_transaction(30)
    assert b.control.fault(rule["id"])["fired"] == 3
    seen = b.control.requests(api=api)
    codes = [r["error_code"] for r in seen if r["outcome"] == "answered"]
    injected = [r for r in seen if r["fault"] == rule["id"]]
    assert len(injected) == 3 and all(r["error_code"] == injected[0]["error_code"] != 0 for r in injected)
    assert codes[-1] == 0, seen  # the client went on after the errors and was answered
    assert _values(read_all(b, topic, [0], READ_COMMITTED)) == [b"r|1"]


def test_virtual_clock_past_the_transaction_timeout_fences_the_producer(broker_factory, topic):
    """The seeds' incident in milliseconds: a transaction left open past transaction.timeout.ms
    is aborted by the coordinator (epoch bump), and the producer that comes back is fenced."""
    b = broker_factory(TXN_BROKER_ARGS, control=True, clock="virtual")
    tid = txn_id("timeout")
    p = open_transaction(b.bootstrap_servers, tid, topic, [(0, b"late|1")],
                         **{"transaction.timeout.ms": 60000})
    t0 = time.monotonic()
    out = b.control.advance("61s")
    assert out["ran"]["transactions_aborted"] == 1, out
    with pytest.raises(KafkaException) as info:
        p.commit_transaction(20)
    elapsed = time.monotonic() - t0
    err = info.value.args[0]
    assert err.fatal() and err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                          KafkaError.INVALID_PRODUCER_EPOCH), err
    assert elapsed < 10.0, f"fenced {elapsed:.2f} s after the clock moved"
    print(f"fenced {elapsed * 1000:.0f} ms after advancing the clock by 61 s")
    assert _values(read_all(b, topic, [0], READ_COMMITTED)) == []
    assert _values(read_all(b, topic, [0], READ_UNCOMMITTED)) == [b"late|1"]
    assert "txn.timed_out" in b.log_text()


def test_produce_response_lost_then_the_retry_is_deduplicated(broker_factory, topic):
    b = broker_factory(TXN_BROKER_ARGS, control=True)
    rule = b.control.add_fault(api="Produce", action="drop-response", topic=topic)
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "enable.idempotence": True,
                  "linger.ms": 20, "socket.timeout.ms": 1500, "request.timeout.ms": 1500,
                  "message.timeout.ms": 60000, "retry.backoff.ms": 50})
    produce_sync(p, topic, [(0, b"idem|%d" % i) for i in range(20)], timeout=60)
    produces = b.control.requests(api="Produce", topic=topic)
    assert produces[0]["fault"] == rule["id"] and produces[0]["outcome"] == "no_answer", produces
    assert any(r["outcome"] == "answered" and r["error_code"] == 0 for r in produces[1:]), produces
    assert _values(read_all(b, topic, [0], READ_UNCOMMITTED)) == [b"idem|%d" % i for i in range(20)]
    assert "produce.duplicate_dropped" in b.log_text()


def test_hold_keeps_a_commit_until_released(broker_factory, topic):
    b = broker_factory(TXN_BROKER_ARGS, control=True)
    tid = txn_id("hold")
    p = open_transaction(b.bootstrap_servers, tid, topic, [(0, b"held|1")])
    rule = b.control.add_fault(api="EndTxn", action="hold", transactional_id=tid)
    import threading
    done = threading.Event()
    t = threading.Thread(target=lambda: (p.commit_transaction(30), done.set()), daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while b.control.fault(rule["id"])["held"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert b.control.fault(rule["id"])["held"] == 1
    time.sleep(0.3)
    assert not done.is_set()
    assert b.control.release(rule["id"]) == 1
    t.join(30)
    assert done.is_set()
    assert _values(read_all(b, topic, [0], READ_COMMITTED)) == [b"held|1"]


@pytest.mark.parametrize("point", ["txn.after_prepare", "txn.after_first_marker", "txn.before_complete"])
def test_crash_at_a_named_point_then_restart_completes_the_commit(broker_factory, topic, point):
    b = broker_factory(TXN_BROKER_ARGS, control=True)
    tid = txn_id("crash")
    p = open_transaction(b.bootstrap_servers, tid, topic, [(0, b"c|1"), (1, b"c|2")],
                         **{"socket.timeout.ms": 3000})
    b.control.add_fault(action="crash", point=point, transactional_id=tid)
    with pytest.raises(KafkaException):
        p.commit_transaction(3)
    assert b.proc.wait(10) == -9
    assert "fault.crash" in b.log_text()
    b.start()
    # PrepareCommit was logged before each point: the restarted coordinator rolls it forward.
    got = read_all(b, topic, [0, 1], READ_COMMITTED)
    assert (_values(got, 0), _values(got, 1)) == ([b"c|1"], [b"c|2"])
    outcomes = _commit_with_retries(p)  # the client's retry of the commit is answered success
    assert outcomes[-1] == "OK"


def test_bad_rules_are_refused_with_one_line(broker_factory):
    b = broker_factory(TXN_BROKER_ARGS, control=True)
    for rule, words in [
        ({"api": "EndTxn", "action": "explode"}, "action must be one of"),
        ({"api": "NoSuchApi", "action": "error", "error": "NOT_COORDINATOR"}, "unknown API"),
        ({"api": "EndTxn", "action": "error"}, "needs an error"),
        ({"api": "EndTxn", "action": "error", "error": "NO_SUCH"}, "unknown error"),
        ({"api": "Fetch", "action": "delay"}, "needs delay_ms"),
        ({"action": "crash", "point": "txn.nowhere"}, "unknown crash point"),
        ({"api": "EndTxn", "action": "hold", "count": 0}, "count must be"),
        ({"api": "EndTxn", "action": "hold", "colour": "red"}, "unknown field"),
    ]:
        with pytest.raises(ControlError) as info:
            b.control.add_fault(**rule)
        assert words in str(info.value) and "\n" not in str(info.value), info.value
    assert b.control.faults() == []


def _scenario_run(broker_factory, topic: str, faults_file) -> tuple[list, list]:
    b = broker_factory([*TXN_BROKER_ARGS, "--faults", str(faults_file)], control=True)
    tid = "scenario-txn"
    p = txn_producer(b.bootstrap_servers, tid)
    p.init_transactions(30)
    for n in range(2):
        p.begin_transaction()
        produce_sync(p, topic, [(0, b"s|%d" % n)])
        _commit_with_retries(p)
    trace = [(r["api"], r["api_version"], r["error_code"], r["fault"], r["outcome"])
             for r in b.control.requests(transactional_id=tid)
             if r["api"] in ("InitProducerId", "AddPartitionsToTxn", "EndTxn")]
    fired = [(r["id"], r["fired"]) for r in b.control.faults()]
    data = read_all(b, topic, [0], READ_COMMITTED)
    b.close()
    return trace + fired, [(o, v) for o, _k, v in data[0]]


def test_a_scenario_file_replays_identically(broker_factory, tmp_path):
    scenario = tmp_path / "faults.json"
    scenario.write_text(json.dumps({"rules": [
        {"api": "InitProducerId", "action": "error", "error": "COORDINATOR_LOAD_IN_PROGRESS", "count": 2},
        {"api": "AddPartitionsToTxn", "action": "error", "error": "CONCURRENT_TRANSACTIONS", "count": 2},
        {"api": "EndTxn", "action": "error-after-apply", "error": "NOT_COORDINATOR", "nth": 2},
    ]}))
    first = _scenario_run(broker_factory, "scenario-topic", scenario)
    second = _scenario_run(broker_factory, "scenario-topic", scenario)
    assert first == second
    trace, data = first
    assert [v for _o, v in data] == [b"s|0", b"s|1"]
    assert trace[-3:] == [(1, 2), (2, 2), (3, 1)], trace  # every rule fired as written
    assert any(t[0] == "EndTxn" and t[2:4] == (16, 3) for t in trace[:-3]), trace


def test_crash_after_append_before_the_ack_then_the_retry_is_deduplicated(broker_factory, topic):
    """The broker dies with the batch in its log and the answer not sent: after the restart the
    idempotent producer's retry of the same batch is recognised and not written twice."""
    b = broker_factory(TXN_BROKER_ARGS, control=True)
    b.control.add_fault(action="crash", point="produce.after_append", topic=topic, partition=0)
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "enable.idempotence": True,
                  "linger.ms": 20, "socket.timeout.ms": 3000, "message.timeout.ms": 60000,
                  "retry.backoff.ms": 50, "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500})
    acked, errors = [], []
    for i in range(10):
        p.produce(topic, value=b"a|%d" % i, partition=0,
                  on_delivery=lambda err, msg: (errors if err else acked).append(msg.value()))
    p.poll(0)
    assert b.proc.wait(15) == -9
    b.start()
    assert p.flush(60) == 0 and not errors, errors
    assert sorted(acked) == sorted(b"a|%d" % i for i in range(10))
    assert _values(read_all(b, topic, [0], READ_UNCOMMITTED)) == [b"a|%d" % i for i in range(10)]


def test_max_api_versions_caps_one_api(broker_factory, topic):
    """``--max-api-versions Produce=7,Fetch=10``: librdkafka produces with Produce v7 and reads
    with Fetch v10, and its transaction commits as before."""
    b = broker_factory([*TXN_BROKER_ARGS, "--max-api-versions", "Produce=7,Fetch=10"], control=True)
    tid = txn_id("capped")
    p = open_transaction(b.bootstrap_servers, tid, topic, [(0, b"cap|1")])
    p.commit_transaction(20)
    assert _values(read_all(b, topic, [0], READ_COMMITTED)) == [b"cap|1"]
    used = {(r["api"], r["api_version"]) for r in b.control.requests()}
    assert {v for api, v in used if api == "Produce"} == {7}, used
    assert {v for api, v in used if api == "Fetch"} == {10}, used
