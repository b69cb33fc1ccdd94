"""Idempotent producers under network faults: every message exactly once, in send order.

A fault-injecting proxy (faultproxy.py) sits between the client and the broker
and, at random (seeded), drops Produce (and other) responses, delays them and
cuts connections. The broker advertises the proxy's port, so every connection
of the client goes through it. A dropped response means the client times out
and sends the batch again: without idempotence the log would hold it twice.

Each test sends 50,000 messages to a 4-partition topic with
enable.idempotence=true (acks=all, 5 requests in flight): message i goes to
partition i % 4 as that partition's message s = i // 4, key "p<partition>-<s>"
and a value that starts with the key (same format as java/IdempotentProduce.java).
Then the broker is restarted without the proxy (it must stop advertising the
proxy's port) and a confluent-kafka consumer reads every partition from the
beginning, directly from the broker: partition p must hold exactly its
messages 0, 1, 2, ... at offsets 0, 1, 2, ... — nothing twice, nothing
missing, nothing out of order. Every acknowledgement must name that offset
too. And the proxy must have dropped Produce responses (no vacuous pass).

- confluent-kafka (librdkafka) through the faults;
- the stock Java client (kafka-clients 4.3.0, java/IdempotentProduce.java);
- confluent-kafka, then the Java client, through the faults with a broker kill -9
  at ~40% of the stream, right after answers stopped reaching the client (so
  batches the broker appended come back as retries after the restart, and the
  restarted broker must recognise them from its rebuilt producer state); it is
  restarted on the same data dir and port while the producer retries.
"""

from __future__ import annotations

import collections
import json
import os
import re
import time
import zlib

import pytest

from . import java_client, wire
from .clients import consume_assigned, create_topic
from .faultproxy import FaultConfig, FaultProxy

PARTITIONS = 4
COUNT = 50_000
VALUE_SIZE = 100
INIT_PRODUCER_ID = 22
# Segments roll during the run (~2 MiB per partition), so producer state crosses segments.
BROKER_ARGS = ["--num-partitions", str(PARTITIONS), "--segment-bytes", str(1024 * 1024)]

# Each drop costs one request timeout (~2.5-3 s) of stall on the producer's one connection:
# a handful of them, at least 10 responses apart, keep every test well under a minute.
# drop_every: at the latest every 40th Produce response is dropped (up to max_drops), so
# short runs get their drops too.
FAULTS = dict(drop=0.03, cut=0.02, delay=0.06, delay_range=(0.02, 0.4), max_drops=5, max_cuts=5,
              max_delays=40, min_gap=10, drop_every=40)


# -- the messages --------------------------------------------------------------------------

def msg_id(p: int, s: int) -> str:
    return f"p{p}-{s}"


def expected_value(p: int, s: int, size: int = VALUE_SIZE) -> bytes:
    """Same bytes as IdempotentProduce.value(): "p<p>-<s>|" padded with letters."""
    prefix = f"p{p}-{s}|"
    pad = "".join(chr(ord("a") + (s * 31 + j) % 26) for j in range(len(prefix), size))
    return (prefix + pad).encode()


def partition_counts(count: int = COUNT, partitions: int = PARTITIONS) -> dict[int, int]:
    return {p: count // partitions + (1 if p < count % partitions else 0) for p in range(partitions)}


def parse_id(key: bytes) -> tuple[int, int]:
    p, s = key.decode()[1:].split("-")
    return int(p), int(s)


# -- set-up --------------------------------------------------------------------------------

def require_idempotence(port: int) -> None:
    apis = wire.api_versions(port)
    if INIT_PRODUCER_ID not in apis:
        pytest.fail(f"the broker does not offer InitProducerId (api key 22) in ApiVersions: {sorted(apis)}; "
                    f"idempotent producers cannot work")


@pytest.fixture
def proxied(broker_factory, request):
    """(proxy, broker): the broker advertises the proxy's port; faults are off until the test says."""
    # A fixed seed per test (MINIBROKER_TEST_PROXY_SEED overrides it to explore other schedules).
    seed = int(os.environ.get("MINIBROKER_TEST_PROXY_SEED") or zlib.crc32(request.node.name.encode()))
    print(f"fault proxy seed {seed}")
    proxy = FaultProxy(seed=seed, config=FaultConfig(**FAULTS))
    proxy.faults_enabled = False
    proxy.start()
    try:
        b = broker_factory(BROKER_ARGS + ["--advertised-port", str(proxy.port)])
        proxy.set_upstream(b.port)
        yield proxy, b
    finally:
        proxy.stop()
        print(f"fault proxy: {proxy.summary()}")
        events = proxy.events()
        if events:
            print("fault proxy events:\n  " + "\n  ".join(events[:60]))


def setup_topic(proxy: FaultProxy, b, topic: str) -> None:
    require_idempotence(b.port)
    create_topic(b.bootstrap_servers, topic, PARTITIONS)


# -- the checks ----------------------------------------------------------------------------

_LOG_LINE = re.compile(r"\[(debug|info|warning|error|critical)\s*\] (.+?)(?:\s{2,}|$)")


def broker_log_summary(b) -> str:
    """Counts of the broker's warning/error events and duplicate drops, for the test output."""
    counts: collections.Counter = collections.Counter()
    for line in b.log_text().splitlines():
        m = _LOG_LINE.search(line)
        if m and (m.group(1) in ("warning", "error", "critical") or "duplicate" in m.group(2)):
            counts[f"{m.group(1)}: {m.group(2).strip()}"] += 1
        elif "Traceback" in line:
            counts["Traceback"] += 1
    return ", ".join(f"{k} x{n}" for k, n in counts.most_common()) or "(no warnings)"


def read_back_directly(proxy: FaultProxy, b, topic: str):
    """Stop the proxy, restart the broker without --advertised-port, read every partition."""
    proxy.stop()
    args = [a for a in b.args]
    i = args.index("--advertised-port")
    del args[i:i + 2]
    b.restart(args=args)
    ends = wire.high_watermarks(b.port, topic, range(PARTITIONS))
    records, errors = consume_assigned(b, topic, range(PARTITIONS), ends=ends, timeout=90)
    print(f"broker log: {broker_log_summary(b)}")
    assert not errors, f"read-back errors: {errors[:5]}"
    return ends, records


def check_exactly_once_in_order(ends: dict[int, int], records, counts: dict[int, int], note: str = "") -> None:
    """Partition p holds exactly messages 0..counts[p]-1 of p, message s at offset s."""
    problems = []
    for p in range(PARTITIONS):
        recs = records[p]
        ids = []
        bad_values = []
        for off, key, value in recs:
            try:
                kp, s = parse_id(key)
            except Exception:
                bad_values.append((off, key, value[:30]))
                continue
            if kp != p or value != expected_value(p, s):
                bad_values.append((off, key, value[:30]))
            ids.append((off, s))
        seqs = [s for _, s in ids]
        dup = {s: n for s, n in collections.Counter(seqs).items() if n > 1}
        present = set(seqs)
        missing = [s for s in range(counts[p]) if s not in present]
        order_breaks = [(ids[k - 1], ids[k]) for k in range(1, len(ids)) if ids[k][1] <= ids[k - 1][1]]
        offsets_ok = [o for o, _ in ids] == list(range(len(ids)))
        if dup or missing or order_breaks or bad_values or ends[p] != counts[p] or not offsets_ok:
            first_dup = sorted(dup)[:5]
            dup_at = {s: [o for o, x in ids if x == s] for s in first_dup}
            problems.append(
                f"partition {p}: high watermark {ends[p]} (expected {counts[p]}), read {len(recs)}; "
                f"{len(dup)} messages duplicated ({sum(dup.values()) - len(dup)} extra copies), "
                f"e.g. message: offsets {dup_at}; {len(missing)} missing, e.g. {missing[:5]}; "
                f"{len(order_breaks)} order breaks, e.g. (offset, msg) {order_breaks[:3]}; "
                f"{len(bad_values)} foreign records {bad_values[:2]}; offsets contiguous: {offsets_ok}")
    assert not problems, (note + "\n" if note else "") + "\n".join(problems)


# -- confluent-kafka -----------------------------------------------------------------------

def produce_idempotent_confluent(bootstrap: str, topic: str, *, count: int = COUNT, timeout: float = 100.0,
                                 during=None):
    """Send the test's messages with an idempotent confluent-kafka Producer; wait for every report.

    ``during(producer, acked_count)`` is called between polls once everything is queued (the
    kill -9 test uses it). Returns (acked, errors, offset_mismatches, client_errors).
    """
    from confluent_kafka import Producer

    client_errors: list[str] = []

    def on_error(err):
        client_errors.append(f"{'FATAL ' if err.fatal() else ''}{err.name()}: {err.str()}")

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "max.in.flight.requests.per.connection": 5,
        "message.timeout.ms": int(timeout * 1000),
        "socket.timeout.ms": 2500,
        "request.timeout.ms": 2500,
        "socket.connection.setup.timeout.ms": 3000,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 500,
        "retry.backoff.ms": 50,
        "retry.backoff.max.ms": 500,
        "linger.ms": 2,
        "batch.num.messages": 200,
        "queue.buffering.max.messages": count + 1000,
        "queue.buffering.max.kbytes": 512 * 1024,
        "error_cb": on_error,
    })
    acked = [0]
    errors: list[str] = []
    mismatches: list[str] = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(f"{msg.key()!r}: {err.name()}: {err.str()}")
            return
        acked[0] += 1
        p, s = parse_id(msg.key())
        if msg.partition() != p or msg.offset() != s:
            mismatches.append(f"{msg_id(p, s)} acknowledged at partition {msg.partition()} offset {msg.offset()}")

    deadline = time.monotonic() + timeout
    for i in range(count):
        p, s = i % PARTITIONS, i // PARTITIONS
        producer.produce(topic, key=msg_id(p, s).encode(), value=expected_value(p, s), partition=p,
                         on_delivery=on_delivery)
        if i % 2000 == 0:
            producer.poll(0)
    for _ in range(100_000):
        if len(producer) == 0 or time.monotonic() > deadline:
            break
        if any(e.startswith("FATAL") for e in client_errors):
            break
        producer.poll(0.05)
        if during is not None:
            during(producer, acked[0])
    left = producer.flush(max(0.1, min(5.0, deadline - time.monotonic())))
    if left:
        errors.append(f"{left} messages without a delivery report after {timeout} s")
    return acked[0], errors, mismatches, client_errors


def _assert_produced(acked, errors, mismatches, client_errors, proxy):
    assert not errors and acked == COUNT, (
        f"{acked}/{COUNT} acknowledged; {len(errors)} failed, e.g. {errors[:5]}; "
        f"client errors {client_errors[:5]}; proxy {proxy.summary()}")
    assert not mismatches, (f"{len(mismatches)} acknowledgements at the wrong offset, e.g. {mismatches[:5]} "
                            f"(proxy {proxy.summary()})")


def _assert_faults(proxy, stats_at_end):
    drops = stats_at_end.get("drops.Produce", 0)
    assert drops > 0, f"the proxy dropped no Produce response: the test proved nothing ({proxy.summary()})"


@pytest.mark.timeout(180)
def test_confluent_idempotent_through_faults(proxied, topic):
    proxy, b = proxied
    setup_topic(proxy, b, topic)
    proxy.faults_enabled = True
    t0 = time.monotonic()
    acked, errors, mismatches, client_errors = produce_idempotent_confluent(proxy.bootstrap, topic)
    took = time.monotonic() - t0
    stats = proxy.stats()
    print(f"confluent-kafka: {acked} acknowledged in {took:.1f} s; client errors {client_errors[:10]}")
    _assert_produced(acked, errors, mismatches, client_errors, proxy)
    _assert_faults(proxy, stats)

    ends, records = read_back_directly(proxy, b, topic)
    check_exactly_once_in_order(ends, records, partition_counts(), note=f"proxy: {proxy.summary()}")


# -- the Java client -------------------------------------------------------------------------

JAVA_MAIN = "IdempotentProduce"


def java_args(proxy: FaultProxy, topic: str) -> list:
    return [proxy.bootstrap, topic, PARTITIONS, COUNT, VALUE_SIZE, "none", 2500]


def check_java_result(r, took: float, proxy: FaultProxy) -> dict:
    lines = r.stdout.strip().splitlines()
    print(f"java driver: exit {r.returncode} in {took:.1f} s\n{r.stdout[-3000:]}\n{r.stderr[-2000:]}")
    summary = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None
    assert summary is not None, f"no summary line from the driver (exit {r.returncode}):\n" \
                                f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    failures = [ln for ln in lines if ln.startswith("FAILED")]
    assert r.returncode == 0 and summary["acked"] == COUNT and summary["failed"] == 0, (
        f"Java producer: {summary}; failures e.g. {failures[:10]}; proxy {proxy.summary()}")
    assert summary["offset_mismatches"] == 0, f"Java acknowledgements at the wrong offset: {summary}"
    return summary


@pytest.mark.timeout(180)
def test_java_idempotent_through_faults(proxied, topic):
    tc = java_client.java_toolchain()
    classes = java_client.compile_drivers(tc)
    proxy, b = proxied
    setup_topic(proxy, b, topic)
    proxy.faults_enabled = True
    t0 = time.monotonic()
    r = java_client.run_driver(tc, classes, JAVA_MAIN, java_args(proxy, topic), timeout=150)
    took = time.monotonic() - t0
    stats = proxy.stats()
    check_java_result(r, took, proxy)
    _assert_faults(proxy, stats)

    ends, records = read_back_directly(proxy, b, topic)
    check_exactly_once_in_order(ends, records, partition_counts(), note=f"proxy: {proxy.summary()}")


# -- kill -9 in the middle ------------------------------------------------------------------

def duplicates_logged_since_last_start(b) -> int:
    """How many batches the broker reported as duplicates since its last (re)start
    (its info line "produce.duplicate_dropped ..."; any log line that says "duplicate" counts)."""
    text = b.log_text()
    last = text.rfind("===== start #")
    return sum(1 for line in text[last:].splitlines() if "duplicate" in line.lower())


def log_end_total(b, topic: str) -> int:
    return sum(wire.high_watermarks(b.port, topic, range(PARTITIONS)).values())


def kill9_with_unanswered_batches(proxy: FaultProxy, b, topic: str, wait, kill: dict) -> None:
    """Silence every proxied connection, let the broker append a few more batches whose
    answers never reach the client, kill -9 it, wait a second, restart it (same port and
    data dir). Those batches come back as retries, which the restarted broker must
    recognise as duplicates from the producer state it rebuilt (snapshot + log)."""
    before = log_end_total(b, topic)
    proxy.silence_all()
    for _ in range(40):
        wait(0.025)
        kill["unanswered"] = log_end_total(b, topic) - before
        if kill["unanswered"] > 0:
            break
    t = time.monotonic()
    b.kill9()
    for _ in range(20):  # the producer keeps retrying against the dead broker for a second
        wait(0.05)
    b.start()  # same port, same data dir: recovery runs now
    kill["down_s"] = round(time.monotonic() - t, 2)


def check_duplicates_after_restart(b, kill: dict) -> None:
    if kill.get("unanswered", 0) > 0:
        assert kill["dups_after_restart"] > 0, (
            f"{kill['unanswered']} records were appended but never answered before the kill, yet the "
            f"restarted broker logged no duplicate batch: their retries were not recognised")


@pytest.mark.timeout(180)
def test_confluent_idempotent_through_faults_and_kill9(proxied, topic):
    """kill -9 while Produce answers are lost, at ~40% of the stream; the producer retries."""
    proxy, b = proxied
    setup_topic(proxy, b, topic)
    proxy.faults_enabled = True
    kill = {"done": False, "in_flight": 0, "acked": 0, "unanswered": 0, "down_s": 0.0}

    def during(producer, acked):
        if kill["done"]:
            return
        kill["log_end"] = log_end_total(b, topic)  # progress by the log: delivery reports lag behind
        if kill["log_end"] < COUNT * 2 // 5:
            return
        kill["done"] = True
        kill["acked"] = acked
        kill["in_flight"] = len(producer)
        kill9_with_unanswered_batches(proxy, b, topic, producer.poll, kill)

    t0 = time.monotonic()
    acked, errors, mismatches, client_errors = produce_idempotent_confluent(proxy.bootstrap, topic, during=during)
    took = time.monotonic() - t0
    stats = proxy.stats()
    kill["dups_after_restart"] = duplicates_logged_since_last_start(b)
    print(f"confluent-kafka with kill -9: {acked} acknowledged in {took:.1f} s; kill {kill}; "
          f"client errors {client_errors[:10]}")
    assert kill["done"], f"the broker was never killed (acked {acked})"
    assert kill["in_flight"] > 0, "the kill did not land mid-stream: nothing was in flight"
    _assert_produced(acked, errors, mismatches, client_errors, proxy)
    _assert_faults(proxy, stats)

    ends, records = read_back_directly(proxy, b, topic)
    check_exactly_once_in_order(ends, records, partition_counts(), note=f"proxy: {proxy.summary()}; kill {kill}")
    check_duplicates_after_restart(b, kill)


@pytest.mark.timeout(180)
def test_java_idempotent_through_faults_and_kill9(proxied, topic):
    """The same with the stock Java client."""
    tc = java_client.java_toolchain()
    classes = java_client.compile_drivers(tc)
    proxy, b = proxied
    setup_topic(proxy, b, topic)
    proxy.faults_enabled = True
    kill = {"done": False, "unanswered": 0, "down_s": 0.0}
    t0 = time.monotonic()
    proc = java_client.start_driver(tc, classes, JAVA_MAIN, java_args(proxy, topic))
    try:
        for _ in range(6000):  # <= 150 s
            if proc.poll() is not None or time.monotonic() - t0 > 150:
                break
            kill["log_end"] = log_end_total(b, topic)
            if kill["log_end"] >= COUNT * 2 // 5:
                kill["done"] = True
                kill9_with_unanswered_batches(proxy, b, topic, time.sleep, kill)
                kill["driver_running"] = proc.poll() is None
                break
            time.sleep(0.025)
        r = java_client.finish_driver(proc, timeout=150 - (time.monotonic() - t0))
    finally:
        if proc.poll() is None:
            proc.kill()  # only the JVM this test started
            proc.wait(10)
    took = time.monotonic() - t0
    stats = proxy.stats()
    kill["dups_after_restart"] = duplicates_logged_since_last_start(b)
    print(f"java with kill -9: kill {kill}")
    assert kill["done"], f"the broker was never killed (driver exit {proc.returncode})"
    assert kill.get("driver_running"), "the kill did not land mid-stream: the driver had already finished"
    check_java_result(r, took, proxy)
    _assert_faults(proxy, stats)

    ends, records = read_back_directly(proxy, b, topic)
    check_exactly_once_in_order(ends, records, partition_counts(), note=f"proxy: {proxy.summary()}; kill {kill}")
    check_duplicates_after_restart(b, kill)
