"""Broker kill -9 at each step of the transactional protocol (librdkafka).

Every scenario runs on its own broker and a 2-partition topic:

1. a baseline written before the crash by another transactional id: one committed and one
   aborted transaction over both partitions (after the restart, the aborted one must stay
   invisible: the transaction index and producer state are rebuilt from disk);
2. the step under test, with producer P (transactional id T), then the broker dies:
   - ``before_txn``: P has run initTransactions and nothing else; kill -9;
   - ``mid_txn``: P has begun a transaction and its records are acknowledged; kill -9;
   - ``after_prepare`` / ``after_first_marker`` / ``before_complete``: P commits and the broker
     SIGKILLs itself at that step of EndTxn (MINIBROKER_CRASH_AT); PREPARE_COMMIT is already in
     ``__transaction_state``, so the restart must roll the commit forward (Kafka's guarantee);
3. restart on the same data dir and port (without MINIBROKER_CRASH_AT);
4. every transaction is either fully visible or fully invisible to read_committed — never
   partial — and exactly the expected ones are visible; producers carry on: P (where it is
   still the current instance) commits another transaction, then a new instance with the same
   transactional id inits (fencing P, aborting anything P left open) and commits one.

The three EndTxn crash points are run with the Java client as P too (java/TxnDriver.java
``crash-commit``): its commitTransaction() spans the crash and the restart.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import KafkaException, TopicPartition

from . import wire
from .clients import create_topic
from .test_txn_support import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TXN_BROKER_ARGS,
    consumer,
    finish_java_txn,
    log_events,
    produce_sync,
    read_all,
    start_java_txn,
    txn_id,
    txn_producer,
    wait_for_event,
)

PARTS = 2
PER_PART = 3
CRASH_POINTS = ["after_prepare", "after_first_marker", "before_complete"]


def txn_items(tag: str):
    return [(q, f"{tag}-p{q}-{i}|".encode()) for q in range(PARTS) for i in range(PER_PART)]


def run_txn(producer, topic: str, tag: str, commit: bool = True) -> None:
    producer.begin_transaction()
    produce_sync(producer, topic, txn_items(tag))
    (producer.commit_transaction if commit else producer.abort_transaction)(20)


def visible(records_by_partition) -> dict[str, int]:
    """{transaction tag: number of its records seen}."""
    seen: dict[str, int] = {}
    for recs in records_by_partition.values():
        for _, _, value in recs:
            tag = value.split(b"|", 1)[0].decode().rsplit("-p", 1)[0]
            seen[tag] = seen.get(tag, 0) + 1
    return seen


def check_all_or_nothing(seen: dict[str, int], committed: list[str], invisible: list[str], where: str) -> None:
    full = PARTS * PER_PART
    partial = {t: n for t, n in seen.items() if n != full}
    assert not partial, f"{where}: transactions partially visible to read_committed: {partial} (of {full})"
    assert sorted(seen) == sorted(committed), (
        f"{where}: read_committed sees {sorted(seen)}, expected exactly {sorted(committed)} "
        f"(and never {invisible})")


def wait_crashed(b, point: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    for _ in range(1000):
        if not b.running or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not b.running, f"the broker did not crash at {point} within {timeout} s"
    assert b.proc.returncode == -9, f"broker exit code {b.proc.returncode}, expected -9 (SIGKILL)"
    assert any(e.get("point") == point for e in log_events(b, "fault.crash")), b.log_tail(20)


def start_with_baseline(broker_factory, topic: str, crash_at: str | None):
    """A broker with the baseline transactions written; then restarted to crash at ``crash_at``."""
    b = broker_factory(TXN_BROKER_ARGS)
    create_topic(b.bootstrap_servers, topic, PARTS)
    base = txn_producer(b.bootstrap_servers, txn_id("base"))
    base.init_transactions(20)
    run_txn(base, topic, "base-committed", commit=True)
    run_txn(base, topic, "base-aborted", commit=False)
    base.flush(5)
    del base
    if crash_at is not None:
        b.restart(crash_at=crash_at)  # the fault injection applies from here on
    return b


def check_after_restart(b, topic: str, committed: list[str], invisible: list[str], where: str) -> None:
    rc = read_all(b, topic, range(PARTS), READ_COMMITTED)
    check_all_or_nothing(visible(rc), committed, invisible, where)
    ru = visible(read_all(b, topic, range(PARTS), READ_UNCOMMITTED))
    assert ru == {t: PARTS * PER_PART for t in committed + invisible}, f"{where}: read_uncommitted sees {ru}"
    for q_, recs in rc.items():
        offsets = [o for o, _, _ in recs]
        assert offsets == sorted(set(offsets)), f"{where}: partition {q_}: {offsets}"


def _commit_with_retries(producer, out: dict) -> None:
    """commit_transaction, retried while librdkafka says it may be (bounded: 4 tries)."""
    for attempt in range(4):
        try:
            producer.commit_transaction(15)
            out["result"] = "committed"
            out["attempts"] = attempt + 1
            return
        except KafkaException as e:
            err = e.args[0]
            out.setdefault("errors", []).append(f"{err.name()} (retriable={err.retriable()}, "
                                                f"fatal={err.fatal()}, abortable={err.txn_requires_abort()}): "
                                                f"{err.str()}")
            if not err.retriable():
                out["result"] = "failed"
                return
    out["result"] = "failed"


@pytest.mark.parametrize("step", ["before_txn", "mid_txn"] + CRASH_POINTS)
def test_kill9_at_each_step(broker_factory, topic, step):
    crash_at = f"txn.{step}" if step in CRASH_POINTS else None
    b = start_with_baseline(broker_factory, topic, crash_at)

    tid = txn_id(f"crash-{step}")
    p = txn_producer(b.bootstrap_servers, tid, **{"log_level": 2})  # quiet while the broker is down
    p.init_transactions(20)
    committed = ["base-committed"]
    invisible = ["base-aborted"]
    p_current = True  # P is still the current instance of tid after the restart
    commit_out: dict = {}

    if step == "before_txn":
        b.kill9()
        b.restart(graceful=False)
    elif step == "mid_txn":
        p.begin_transaction()
        produce_sync(p, topic, txn_items("open"))
        b.kill9()
        b.restart(graceful=False)
        invisible.append("open")
        # The open transaction survives the restart (its partitions hold the LSO back) until
        # the new instance below fences P and aborts it.
        hw = wire.high_watermarks(b.port, topic, range(PARTS))
        assert hw == {q: 2 * (PER_PART + 1) + PER_PART for q in range(PARTS)}, hw
        c = consumer(b.bootstrap_servers, READ_COMMITTED)
        try:
            lso = {q: c.get_watermark_offsets(TopicPartition(topic, q), timeout=10)[1] for q in range(PARTS)}
        finally:
            c.close()
        assert lso == {q: 2 * (PER_PART + 1) for q in range(PARTS)}, f"last stable offsets {lso}"
        p_current = False
    else:
        p.begin_transaction()
        produce_sync(p, topic, txn_items("crashing"))
        t = threading.Thread(target=_commit_with_retries, args=(p, commit_out), daemon=True)
        t.start()
        wait_crashed(b, f"txn.{step}")
        b.restart(graceful=False, crash_at=None)
        rolled = wait_for_event(b, "txn.roll_forward", 5, transactional_id=tid)
        assert rolled["state"] == "PrepareCommit", rolled["_line"]
        t.join(70)
        assert not t.is_alive(), "commit_transaction still running 70 s after the restart"
        # PREPARE_COMMIT was written before the crash: the commit is decided and rolled forward.
        committed.append("crashing")
        p_current = commit_out.get("result") == "committed"

    # Producers carry on: P (if still current), then a new instance of the same transactional id.
    if p_current:
        run_txn(p, topic, "p-after")
        committed.append("p-after")
    q = txn_producer(b.bootstrap_servers, tid)
    q.init_transactions(20)
    run_txn(q, topic, "q-after")
    committed.append("q-after")
    if step == "mid_txn":
        fence = wait_for_event(b, "txn.fencing_abort", 5, transactional_id=tid)
        assert fence["partitions"] == str(PARTS), fence["_line"]

    check_after_restart(b, topic, committed, invisible, f"after kill -9 at {step}")
    if step in CRASH_POINTS:
        assert commit_out.get("result") == "committed", (
            f"P's commit_transaction across the crash at {step} did not succeed: {commit_out}")


@pytest.mark.parametrize("step", CRASH_POINTS)
def test_java_commit_across_crash(broker_factory, topic, step):
    b = start_with_baseline(broker_factory, topic, f"txn.{step}")
    tid = txn_id(f"java-crash-{step}")
    proc = start_java_txn("crash-commit", b.bootstrap_servers, topic, PARTS, PER_PART, tid)
    try:
        wait_crashed(b, f"txn.{step}", timeout=30)
        b.restart(graceful=False, crash_at=None)
    except BaseException:
        proc.kill()  # this JVM only
        proc.communicate(timeout=30)
        raise
    res = finish_java_txn(proc, timeout=90)
    rolled = wait_for_event(b, "txn.roll_forward", 5, transactional_id=tid)
    assert rolled["state"] == "PrepareCommit", rolled["_line"]
    assert not res["errors"], res
    assert res["committed"] and res["after_committed"], (
        f"the Java producer could not carry on across the crash at {step}: {res}")

    q = txn_producer(b.bootstrap_servers, tid)  # a new instance (librdkafka) of the same transactional id
    q.init_transactions(20)
    run_txn(q, topic, "q-after")
    check_after_restart(b, topic, ["base-committed", "java-crashing", "java-after", "q-after"],
                        ["base-aborted"], f"Java commit across a crash at {step}")
