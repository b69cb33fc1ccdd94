"""Helpers shared by the transaction tests (test_txn_*.py); this module holds no tests.

- confluent-kafka transactional producers and bounded read-backs by assign() (no groups:
  minibroker has no group coordinator yet) with either isolation level;
- the broker's structured log, parsed into events (``txn.timed_out`` and friends);
- ``minibroker dump-log --print-data-log``, parsed into (producerId, epoch, what) entries;
- the Java driver (java/TxnDriver.java) run through java_client.py.

Record values written by these tests are ASCII ``<tag>|...``; helpers compare values exactly.
"""

from __future__ import annotations

import json
import re
import time
import uuid

from . import java_client, wire
from .conftest import MODULE_BROKER_ARGS
from .support import dump_log

# Transaction tests run with a fast abort check, so a timed-out transaction is aborted within
# ~200 ms of its deadline (Kafka's transaction.abort.timed.out.transaction.cleanup.interval.ms).
TXN_BROKER_ARGS = MODULE_BROKER_ARGS + ["--transaction-abort-check-interval-ms", "200"]

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"


def txn_id(name: str) -> str:
    return f"it-{name}-{uuid.uuid4().hex[:8]}"


# -- confluent-kafka --------------------------------------------------------------------------

def txn_producer(bootstrap: str, transactional_id: str, **extra):
    from confluent_kafka import Producer

    conf = {
        "bootstrap.servers": bootstrap,
        "transactional.id": transactional_id,
        "linger.ms": 5,
        "socket.timeout.ms": 10000,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 500,
        "retry.backoff.ms": 50,
    }
    conf.update(extra)
    return Producer(conf)


def open_transaction(bootstrap: str, transactional_id: str, topic: str, items,
                     init_timeout: float = 20, **extra):
    """A transactional producer, initialised, with a transaction begun holding ``items``
    ((partition, value) pairs, acknowledged): the start of most transaction tests."""
    p = txn_producer(bootstrap, transactional_id, **extra)
    p.init_transactions(init_timeout)
    p.begin_transaction()
    produce_sync(p, topic, items)
    return p


def produce_sync(producer, topic: str, items, timeout: float = 30.0) -> dict[bytes, tuple[int, int]]:
    """Produce (partition, value) pairs (key = value's tag) and flush: {value: (partition, offset)}.

    Raises AssertionError if a delivery fails or the flush does not finish in time.
    """
    acked: dict[bytes, tuple[int, int]] = {}
    errors: list[str] = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(f"{err.name()}: {err.str()}")
        else:
            acked[msg.value()] = (msg.partition(), msg.offset())

    for partition, value in items:
        producer.produce(topic, value=value, key=value.split(b"|", 1)[0], partition=partition,
                         on_delivery=on_delivery)
    left = producer.flush(timeout)
    assert left == 0, f"{left} messages undelivered after {timeout} s; errors: {errors[:5]}"
    assert not errors, errors[:5]
    return acked


def consumer(bootstrap: str, isolation: str, **extra):
    from confluent_kafka import Consumer

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": f"it-txn-{uuid.uuid4().hex[:8]}",  # required by librdkafka; only assign() is used
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "isolation.level": isolation,
        "fetch.wait.max.ms": 100,
        "socket.timeout.ms": 10000,
    }
    conf.update(extra)
    return Consumer(conf)


def read_all(broker, topic: str, partitions, isolation: str, timeout: float = 30.0):
    """Every record of ``partitions`` from the beginning to the end of the log, as librdkafka
    delivers it with ``isolation``: {partition: [(offset, key, value), ...]}.

    "The end" is the partition EOF at the high watermark (read_committed: librdkafka's EOF
    comes at the last stable offset, which equals the high watermark when no transaction is
    open — so use this only when every transaction has ended). Bounded in time.
    """
    from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

    partitions = list(partitions)
    ends = wire.high_watermarks(broker.port, topic, partitions)
    out: dict[int, list] = {p: [] for p in partitions}
    done = {p for p in partitions if ends[p] == 0}
    errors: list[str] = []
    c = consumer(broker.bootstrap_servers, isolation)
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        deadline = time.monotonic() + timeout
        for _ in range(100_000):
            if len(done) == len(partitions) or time.monotonic() > deadline:
                break
            for m in c.consume(num_messages=1000, timeout=0.2):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= ends[m.partition()]:
                            done.add(m.partition())
                        continue
                    errors.append(f"{err.name()}: {err.str()}")
                    continue
                out[m.partition()].append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    assert not errors, f"{isolation} consumer errors: {errors[:5]}"
    missing = sorted(set(partitions) - done)
    assert not missing, (f"{isolation}: partitions {missing} did not reach their end {ends} within "
                         f"{timeout} s; read so far: { {p: len(out[p]) for p in missing} }")
    return out


def values_by_partition(records) -> dict[int, list[tuple[int, bytes]]]:
    return {p: [(o, v) for o, _, v in recs] for p, recs in records.items()}


def check_in_offset_order(records) -> None:
    for p, recs in records.items():
        offsets = [o for o, _, _ in recs]
        assert offsets == sorted(set(offsets)), f"partition {p}: offsets not strictly increasing: {offsets}"


# -- the broker's structured log ----------------------------------------------------------------

_FIELD = re.compile(r"""(\w+)=('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|\S+)""")


def log_events(broker, event: str) -> list[dict[str, str]]:
    """Lines of the broker's log for ``event`` (structlog console format), as {field: text}."""
    out = []
    pat = re.compile(r"\]\s+" + re.escape(event) + r"\s")
    for line in broker.log_text().splitlines():
        if pat.search(line):
            fields = {k: v.strip("'\"") for k, v in _FIELD.findall(line.split(event, 1)[1])}
            fields["_line"] = line
            out.append(fields)
    return out


def wait_for_event(broker, event: str, timeout: float, **match) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    for _ in range(10_000):
        for e in log_events(broker, event):
            if all(e.get(k) == str(v) for k, v in match.items()):
                return e
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    raise AssertionError(f"no {event} {match} in the broker log within {timeout} s; tail:\n"
                         f"{broker.log_tail(30)}")


# -- dump-log ------------------------------------------------------------------------------------

_BATCH = re.compile(r"^baseOffset: (\d+) .*producerId: (-?\d+) producerEpoch: (-?\d+) .*"
                    r"isTransactional: (\w+) isControl: (\w+) ")
_RECORD = re.compile(r"^\| offset: (\d+) .*?(?:endTxnMarker: (\w+) coordinatorEpoch: (-?\d+)|payload: (.*))$")


def dump_entries(broker, topic: str, partition: int) -> list[tuple]:
    """``minibroker dump-log --print-data-log`` of every segment of one partition, parsed:
    [(offset, producerId, producerEpoch, isTransactional, "payload:<text>" | "ABORT" | "COMMIT"), ...]."""
    segs = sorted((broker.data_dir / f"{topic}-{partition}").glob("*.log"))
    assert segs, f"no segment for {topic}-{partition} in {broker.data_dir}"
    out = []
    for seg in segs:
        r = dump_log(seg, print_data=True, timeout=60)
        assert r.returncode == 0, f"dump-log {seg} exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
        batch = None
        for line in r.stdout.splitlines():
            m = _BATCH.match(line)
            if m:
                batch = (int(m[2]), int(m[3]), m[4] == "true", m[5] == "true")
                continue
            m = _RECORD.match(line)
            if m:
                assert batch is not None, f"record line before any batch line: {line}"
                pid, epoch, txnl, control = batch
                if m[2]:
                    assert control, f"endTxnMarker in a non-control batch: {line}"
                    what = m[2]
                else:
                    assert not control, f"payload in a control batch: {line}"
                    what = "payload:" + m[4]
                out.append((int(m[1]), pid, epoch, txnl, what))
    return out


# -- the Java client ------------------------------------------------------------------------------

def run_java_txn(mode: str, *args, timeout: float = 90.0) -> dict:
    """Run java/TxnDriver.java in ``mode``; its RESULT JSON (skips without java/javac/jars)."""
    tc = java_client.java_toolchain()
    classes = java_client.compile_drivers(tc)
    r = java_client.run_driver(tc, classes, "TxnDriver", [mode, *args], timeout=timeout)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert r.returncode == 0 and lines, (f"TxnDriver {mode} exit {r.returncode}\n--- stdout ---\n"
                                         f"{r.stdout[-4000:]}\n--- stderr ---\n{r.stderr[-4000:]}")
    return json.loads(lines[-1][len("RESULT "):])



def start_java_txn(mode: str, *args):
    """Start java/TxnDriver.java in ``mode`` in the background; finish with ``finish_java_txn``."""
    tc = java_client.java_toolchain()
    classes = java_client.compile_drivers(tc)
    return java_client.start_driver(tc, classes, "TxnDriver", [mode, *args])


def finish_java_txn(proc, timeout: float = 90.0) -> dict:
    r = java_client.finish_driver(proc, timeout)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert r.returncode == 0 and lines, (f"TxnDriver exit {r.returncode}\n--- stdout ---\n"
                                         f"{r.stdout[-4000:]}\n--- stderr ---\n{r.stderr[-4000:]}")
    return json.loads(lines[-1][len("RESULT "):])
