"""The client scenarios with confluent-kafka (librdkafka); the same steps as java/ClientScenarios.java.

    python -m tests.differential.clients.rdkafka_scenarios MODE ARGS...

Modes and their arguments are listed in ``MODES``; each prints one ``RESULT {json}`` line:
``steps`` maps a step label to the error the client raised (``None``: it succeeded),
``records`` the (partition, offset, value) each isolation level reads, ``committed`` the group's
committed offsets (ctp only), ``unexpected`` whatever went wrong outside the scenario's steps.
An error is named as librdkafka names it (``KafkaError.name()``), with ``fatal`` or ``abortable``
appended when the client says so: the message is free text and differs between brokers.
Every wait is bounded.
"""

from __future__ import annotations

import json
import sys
import time
import traceback

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

UNEXPECTED: list[str] = []
READ_TIMEOUT_S = 30.0
TXN_CALL_TIMEOUT_S = 30.0
# After printing PAUSE-ME: time for the harness to stop the broker before the next request.
PAUSE_GRACE_S = 0.5
SETTLE_S = 0.5


def error_name(e: BaseException | KafkaError | None) -> str | None:
    if e is None:
        return None
    err = e.args[0] if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError) else e
    if not isinstance(err, KafkaError):
        return type(e).__name__
    name = err.name()
    if err.fatal():
        name += "(fatal)"
    elif err.txn_requires_abort():
        name += "(abortable)"
    return name


def step(steps: dict, label: str, fn) -> object:
    """Run one step of the scenario; its error (or None) goes into ``steps[label]``."""
    try:
        out = fn()
    except KafkaException as e:
        steps[label] = error_name(e)
        return None
    steps[label] = None
    return out


def common(bootstrap: str) -> dict:
    return {"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000, "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500, "retry.backoff.ms": 50, "retry.backoff.max.ms": 500}


def producer(bootstrap: str, txn_id: str | None = None, **extra) -> Producer:
    conf = {**common(bootstrap), "acks": "all", "linger.ms": 5, "message.timeout.ms": 30000,
            "enable.idempotence": True}
    if txn_id:
        conf["transactional.id"] = txn_id
    conf.update(extra)
    return Producer(conf)


def send_sync(p: Producer, topic: str, partition: int, value: str, timeout: float = 30.0) -> str | None:
    """Produce one record and wait for its delivery report; the error name, None when it was written."""
    box: list = []
    try:
        p.produce(topic, value=value.encode(), key=b"k", partition=partition,
                  on_delivery=lambda err, msg: box.append(err))
    except KafkaException as e:  # refused at once, e.g. the producer is in a fatal state
        return "produce:" + str(error_name(e))
    deadline = time.monotonic() + timeout
    while not box and time.monotonic() < deadline:
        try:
            p.poll(0.1)
        except KafkaException as e:  # poll() raises a fatal error before the delivery report
            return "poll:" + str(error_name(e))
    if not box:
        return "no delivery report"
    return error_name(box[0])


def read(bootstrap: str, topic: str, partitions: int, isolation: str) -> list:
    """Every record of ``topic`` from the beginning to the end (the LSO under read_committed)."""
    c = Consumer({**common(bootstrap), "group.id": f"reader-{topic}", "enable.auto.commit": False,
                  "isolation.level": isolation, "enable.partition.eof": True, "fetch.wait.max.ms": 100})
    out = []
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        at_end: set[int] = set()
        deadline = time.monotonic() + READ_TIMEOUT_S
        for _ in range(2000):
            if len(at_end) == partitions:
                break
            if time.monotonic() > deadline:
                UNEXPECTED.append(f"{isolation}: not at the end of {sorted(set(range(partitions)) - at_end)} "
                                  f"within {READ_TIMEOUT_S} s")
                break
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                else:
                    UNEXPECTED.append(f"{isolation} consumer: {error_name(m.error())}")
                continue
            at_end.discard(m.partition())
            out.append([m.partition(), m.offset(), m.value().decode()])
    finally:
        c.close()
    return sorted(out)


def read_both(bootstrap: str, topic: str, partitions: int) -> dict:
    return {iso: read(bootstrap, topic, partitions, iso) for iso in ("read_committed", "read_uncommitted")}


# -- scenarios ---------------------------------------------------------------------------------

def idempotent(bootstrap: str, topic: str, partitions: str, per_partition: str, pace_ms: str,
               request_timeout_ms: str) -> dict:
    """One-record batches, five in flight, paced so that the broker can be paused mid-way.

    ``PRODUCING`` is printed once the first record is acknowledged; a broker paused for longer
    than ``request_timeout_ms`` then makes the client time out the batches in flight and send
    them again (the broker may have written them already: idempotence must drop the copies).
    """
    parts, n, pace = int(partitions), int(per_partition), int(pace_ms) / 1000
    timeout_ms = int(request_timeout_ms)
    stats: dict = {"retries": 0}

    def on_stats(blob: str) -> None:
        doc = json.loads(blob)
        # A request that timed out is sent again; it counts as a timeout, not always as a retry.
        brokers = doc.get("brokers", {}).values()
        stats["retries"] = max(stats["retries"], sum(b.get("txretries", 0) + b.get("req_timeouts", 0)
                                                     for b in brokers))

    p = producer(bootstrap, None, **{"max.in.flight.requests.per.connection": 5, "linger.ms": 0,
                                     "batch.num.messages": 1, "retries": 1000,
                                     "socket.timeout.ms": timeout_ms, "request.timeout.ms": timeout_ms,
                                     "statistics.interval.ms": 100, "stats_cb": on_stats})
    errors: list = []
    acked: list = []

    def on_delivery(err, msg) -> None:
        if err:
            errors.append(error_name(err))
        else:
            acked.append(1)

    announced = False
    for i in range(n):
        for part in range(parts):
            p.produce(topic, value=f"p{part}-{i}".encode(), partition=part, on_delivery=on_delivery)
        p.poll(pace)
        if acked and not announced:
            print("PRODUCING", flush=True)
            announced = True
    if not announced:  # the harness waits for it either way
        print("PRODUCING", flush=True)
    left = p.flush(60)
    p.poll(0.3)  # one more statistics callback after the last retry
    steps = {"deliveries": sorted(set(errors)) or None, "unflushed": left or None}
    return {"steps": steps, "retries": stats["retries"], "records": read_both(bootstrap, topic, parts)}


def commit_abort(bootstrap: str, topic: str, partitions: str, per_txn: str, txn_id: str) -> dict:
    """Four transactions over every partition: commit, abort, commit, abort."""
    parts, n = int(partitions), int(per_txn)
    p = producer(bootstrap, txn_id)
    steps: dict = {}
    step(steps, "init", lambda: p.init_transactions(TXN_CALL_TIMEOUT_S))
    for k in range(4):
        step(steps, f"begin-{k}", p.begin_transaction)
        for part in range(parts):
            for i in range(n):
                p.produce(topic, value=f"t{k}-p{part}-{i}".encode(), partition=part)
        # Both clients drop records still queued when a transaction aborts: flushed first, what
        # reaches the broker does not depend on timing.
        steps[f"flush-{k}"] = p.flush(30) or None
        end = p.commit_transaction if k % 2 == 0 else p.abort_transaction
        step(steps, f"{'commit' if k % 2 == 0 else 'abort'}-{k}", lambda: end(TXN_CALL_TIMEOUT_S))
    p.flush(10)
    return {"steps": steps, "records": read_both(bootstrap, topic, parts)}


def fence(bootstrap: str, topic: str, txn_id: str) -> dict:
    """A begins and writes; B (same transactional.id) inits; A's next send, commit and abort fail."""
    steps: dict = {}
    a = producer(bootstrap, txn_id)
    step(steps, "a-init", lambda: a.init_transactions(TXN_CALL_TIMEOUT_S))
    step(steps, "a-begin", a.begin_transaction)
    steps["a-send-0"] = send_sync(a, topic, 0, "a-0")
    steps["a-send-1"] = send_sync(a, topic, 1, "a-1")
    b = producer(bootstrap, txn_id)
    step(steps, "b-init", lambda: b.init_transactions(TXN_CALL_TIMEOUT_S))
    steps["a-send-after-fence"] = send_sync(a, topic, 0, "a-2")
    step(steps, "a-commit", lambda: a.commit_transaction(TXN_CALL_TIMEOUT_S))
    step(steps, "a-abort", lambda: a.abort_transaction(TXN_CALL_TIMEOUT_S))
    step(steps, "b-begin", b.begin_transaction)
    steps["b-send"] = send_sync(b, topic, 0, "b-0")
    step(steps, "b-commit", lambda: b.commit_transaction(TXN_CALL_TIMEOUT_S))
    b.flush(5)
    return {"steps": steps, "records": read_both(bootstrap, topic, 2)}


def fence_timed_out(bootstrap: str, topic: str, txn_id: str, delivery_timeout_ms: str) -> dict:
    """A writes; B (same transactional.id) inits; A's next batch times out in the client (the
    broker is paused after ``PAUSE-ME``): an abortable error, not the fatal one a refused batch
    gives; then A commits and aborts (EndTxn with its old epoch) and B commits.
    """
    steps: dict = {}
    t = int(delivery_timeout_ms)
    a = producer(bootstrap, txn_id, **{"message.timeout.ms": t, "socket.timeout.ms": t, "request.timeout.ms": t})
    step(steps, "a-init", lambda: a.init_transactions(TXN_CALL_TIMEOUT_S))
    step(steps, "a-begin", a.begin_transaction)
    steps["a-send-0"] = send_sync(a, topic, 0, "a-0")
    b = producer(bootstrap, txn_id)
    step(steps, "b-init", lambda: b.init_transactions(TXN_CALL_TIMEOUT_S))
    print("PAUSE-ME", flush=True)
    time.sleep(PAUSE_GRACE_S)  # the harness stops the broker now
    steps["a-send-paused"] = send_sync(a, topic, 0, "a-1")
    time.sleep(SETTLE_S)  # as the Java program, which needs it to raise one exception, not either of two
    step(steps, "a-commit", lambda: a.commit_transaction(TXN_CALL_TIMEOUT_S))
    step(steps, "a-abort", lambda: a.abort_transaction(TXN_CALL_TIMEOUT_S))
    step(steps, "b-begin", b.begin_transaction)
    steps["b-send"] = send_sync(b, topic, 0, "b-0")
    step(steps, "b-commit", lambda: b.commit_transaction(TXN_CALL_TIMEOUT_S))
    b.flush(5)
    return {"steps": steps, "records": read_both(bootstrap, topic, 1)}


def timeout(bootstrap: str, topic: str, txn_id: str, timeout_ms: str, idle_ms: str) -> dict:
    """A (short transaction.timeout.ms) writes, idles past the timeout, commits; then B commits."""
    steps: dict = {}
    t = int(timeout_ms)
    a = producer(bootstrap, txn_id, **{"transaction.timeout.ms": t, "message.timeout.ms": t, "socket.timeout.ms": t})
    step(steps, "a-init", lambda: a.init_transactions(TXN_CALL_TIMEOUT_S))
    step(steps, "a-begin", a.begin_transaction)
    steps["a-send"] = send_sync(a, topic, 0, "a-0")
    time.sleep(int(idle_ms) / 1000)
    step(steps, "a-commit", lambda: a.commit_transaction(TXN_CALL_TIMEOUT_S))
    step(steps, "a-abort", lambda: a.abort_transaction(TXN_CALL_TIMEOUT_S))
    b = producer(bootstrap, txn_id)
    step(steps, "b-init", lambda: b.init_transactions(TXN_CALL_TIMEOUT_S))
    step(steps, "b-begin", b.begin_transaction)
    steps["b-send"] = send_sync(b, topic, 0, "b-0")
    step(steps, "b-commit", lambda: b.commit_transaction(TXN_CALL_TIMEOUT_S))
    b.flush(5)
    return {"steps": steps, "records": read_both(bootstrap, topic, 1)}


def ctp(bootstrap: str, in_topic: str, out_topic: str, partitions: str, group: str, txn_id: str,
        instance_id: str, crash_after: str) -> dict:
    """Consume-transform-produce, one transaction per polled batch, offsets sent to the transaction.

    With ``crash_after`` >= 0: once that many input records are committed, the next batch's
    transaction is written with its offsets (TxnOffsetCommit) but not ended, ``CRASHPOINT`` is
    printed and the process waits to be SIGKILLed. Otherwise it runs until its positions reach the input's end.
    """
    parts, crash_at = int(partitions), int(crash_after)
    steps: dict = {}
    p = producer(bootstrap, txn_id)
    # Before the consumer fetches its offsets: InitProducerId ends the killed run's transaction,
    # whose offsets would otherwise keep the fetch unstable.
    step(steps, "init", lambda: p.init_transactions(TXN_CALL_TIMEOUT_S))
    c = Consumer({**common(bootstrap), "group.id": group, "group.instance.id": instance_id,
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 10000, "fetch.wait.max.ms": 100,
                  "enable.partition.eof": True})
    c.subscribe([in_topic])
    done = 0
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        for _ in range(3000):
            if len(at_end) == parts or time.monotonic() > deadline:
                break
            batch = [m for m in c.consume(20, 0.2)]
            for m in batch:  # in order: a partition's EOF comes after its last record
                if not m.error():
                    at_end.discard(m.partition())
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                else:
                    UNEXPECTED.append(f"consumer: {error_name(m.error())}")
            batch = [m for m in batch if not m.error()]
            if not batch:
                continue
            p.begin_transaction()
            for m in batch:
                p.produce(out_topic, value=b"out-" + m.value(), partition=m.partition())
            p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(),
                                          TXN_CALL_TIMEOUT_S)
            if 0 <= crash_at <= done:
                p.flush(30)
                print("CRASHPOINT", flush=True)
                time.sleep(120)
                UNEXPECTED.append("not killed at the crash point")
                break
            p.commit_transaction(TXN_CALL_TIMEOUT_S)
            done += len(batch)
        else:
            UNEXPECTED.append("ctp: loop bound reached")
        if len(at_end) != parts:
            UNEXPECTED.append(f"ctp: input end not reached, at end: {sorted(at_end)}")
        committed = c.committed([TopicPartition(in_topic, i) for i in range(parts)], timeout=20)
    except KafkaException as e:
        UNEXPECTED.append(f"ctp: {error_name(e)}: {e}")
        committed = []
    finally:
        c.close()
    return {"steps": steps, "processed": done,
            "committed": sorted([tp.partition, tp.offset] for tp in committed),
            "records": read_both(bootstrap, out_topic, parts)}


MODES = {"idempotent": idempotent, "commit-abort": commit_abort, "fence": fence,
         "fence-timed-out": fence_timed_out, "timeout": timeout,
         "ctp": ctp}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in MODES:
        print(f"usage: rdkafka_scenarios {'|'.join(MODES)} ARGS...", file=sys.stderr)
        return 2
    try:
        out = MODES[argv[0]](*argv[1:])
    except Exception as e:  # the scenario's own steps catch what they expect; this is the rest
        UNEXPECTED.append(f"{type(e).__name__}: {e}")
        traceback.print_exc()
        out = {}
    out["unexpected"] = UNEXPECTED
    print("RESULT " + json.dumps(out, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
