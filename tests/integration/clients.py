"""Client-side helpers shared by the integration tests: deterministic payloads,
topic creation and a bounded confluent-kafka read-back by assignment."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from . import wire

# -- deterministic payloads -----------------------------------------------------------------

# Text-like bytes: compressible, but not trivially so.
_POOL = bytes(random.Random(20261122).choices(b"abcdefghijklmnopqrstuvwxyz 0123456789\n", k=256 * 1024))
MAX_VALUE = 20 * 1024


def value_size(i: int) -> int:
    """10 B .. 20 KiB: ~90% small (10 B-1 KiB), ~9% 1-4 KiB, ~1% 4-20 KiB."""
    r = (i * 2654435761) % 1000
    if r < 900:
        return 10 + (i * 37) % 1015
    if r < 990:
        return 1024 + (i * 131) % 3072
    return 4096 + (i * 7919) % (MAX_VALUE - 4096 + 1)


def make_value(i: int, tag: str = "") -> bytes:
    prefix = f"{i}|{tag}|".encode()
    size = max(value_size(i), len(prefix))
    off = (i * 97) % (len(_POOL) - MAX_VALUE)
    return prefix + _POOL[off:off + size - len(prefix)]


def make_key(i: int) -> bytes | None:
    return None if i % 50 == 49 else f"key-{i}".encode()


def index_of(value: bytes) -> int:
    return int(value.split(b"|", 1)[0])


def unique_topic(prefix: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in prefix)[:120]
    return f"{safe}-{uuid.uuid4().hex[:8]}"


# -- admin --------------------------------------------------------------------------------

def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                                  operation_timeout=timeout, request_timeout=timeout)
    futures[topic].result(timeout=timeout)  # raises KafkaException on error
    md = admin.list_topics(topic=topic, timeout=timeout)
    got = len(md.topics[topic].partitions)
    assert got == partitions, f"{topic} has {got} partitions after CreateTopics({partitions})"


# -- confluent-kafka read-back ------------------------------------------------------------

def consume_assigned(broker, topic: str, partitions, *, timeout: float = 180.0,
                     ends: dict[int, int] | None = None, extra: dict | None = None):
    """Read ``partitions`` of ``topic`` from the beginning up to their high watermarks.

    Uses a confluent-kafka Consumer with a group.id but no subscription
    (assign() with explicit OFFSET_BEGINNING, no commits). Returns
    ({partition: [(offset, key, value), ...]}, [errors]). Bounded in time and in
    the number of consume() calls.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    partitions = list(partitions)
    if ends is None:
        ends = wire.high_watermarks(broker.port, topic, partitions)
    conf = {
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": f"it-readback-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
        "socket.timeout.ms": 10000,
    }
    conf.update(extra or {})
    consumer = Consumer(conf)
    out: dict[int, list] = {p: [] for p in partitions}
    errors: list[str] = []
    done = {p for p in partitions if ends[p] == 0}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        deadline = time.monotonic() + timeout
        for _ in range(1_000_000):
            if len(done) == len(partitions) or time.monotonic() > deadline:
                break
            for m in consumer.consume(num_messages=5000, timeout=0.5):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= ends.get(m.partition(), 0):
                            done.add(m.partition())
                        continue
                    errors.append(f"{err.name()}: {err.str()}")
                    continue
                p = m.partition()
                out[p].append((m.offset(), m.key(), m.value()))
                if m.offset() + 1 >= ends[p]:
                    done.add(p)
        missing = {p: (len(out[p]), ends[p]) for p in partitions if p not in done}
        if missing:
            errors.append(f"timed out after {timeout} s; partition: (read, high watermark) = {missing}")
    finally:
        consumer.close()
    return out, errors


def check_contiguous(records_by_partition, ends: dict[int, int]) -> None:
    """Offsets 0..end-1, each exactly once, in order."""
    for p, recs in records_by_partition.items():
        offsets = [o for o, _, _ in recs]
        assert offsets == list(range(ends[p])), (
            f"partition {p}: offsets are not 0..{ends[p] - 1} in order "
            f"(got {len(offsets)} offsets, first {offsets[:5]}, last {offsets[-5:]})")


# -- external tools ------------------------------------------------------------------------

def _missing(msg: str):
    if os.environ.get("MINIBROKER_TEST_REQUIRE_TOOLS"):
        pytest.fail(msg)
    pytest.skip(msg)


def require_tool(name: str) -> str:
    """Path of an external tool; skip without it, unless run.sh asked for every tool."""
    path = shutil.which(name)
    if path is None:
        _missing(f"{name} is not installed (tests/run.sh installs it)")
    return path


JS_DIR = Path(__file__).resolve().parents[1] / "js"


def require_kafkajs() -> str:
    """Path of node once tests/js has KafkaJS; skip (or fail, under run.sh) without them."""
    node = require_tool("node")
    if not (JS_DIR / "node_modules" / "kafkajs").is_dir():
        _missing(f"kafkajs is not installed in {JS_DIR}/node_modules (tests/run.sh runs npm ci there)")
    return node


def run_node(script: str, *args: str, timeout: float) -> subprocess.CompletedProcess:
    """Run one of tests/js's KafkaJS drivers to its end."""
    node = require_kafkajs()
    return subprocess.run([node, str(JS_DIR / script), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=str(JS_DIR))


# -- confluent-kafka produce --------------------------------------------------------------

def produce_confluent(bootstrap: str, topic: str, indices, *, codec: str = "none", tag: str = "",
                      partition: int | None = None, extra: dict | None = None,
                      timeout: float = 180.0):
    """Produce make_key(i)/make_value(i, tag) for every i (acks=all) and wait for every report.

    Returns ({(partition, offset): i}, [delivery errors]). Bounded in time.
    """
    from confluent_kafka import Producer

    conf = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "compression.type": codec,
        "linger.ms": 5,
        "batch.num.messages": 10000,
        "queue.buffering.max.messages": 200000,
        "queue.buffering.max.kbytes": 512 * 1024,
        "message.timeout.ms": int(timeout * 1000),
        "socket.timeout.ms": 10000,
    }
    conf.update(extra or {})
    producer = Producer(conf)
    acked: dict[tuple[int, int], int] = {}
    errors: list[str] = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(f"{err.name()}: {err.str()}")
        else:
            acked[(msg.partition(), msg.offset())] = index_of(msg.value())

    deadline = time.monotonic() + timeout
    kwargs = {} if partition is None else {"partition": partition}
    for n, i in enumerate(indices):
        for _ in range(100_000):
            try:
                producer.produce(topic, value=make_value(i, tag), key=make_key(i),
                                 on_delivery=on_delivery, **kwargs)
                break
            except BufferError:
                producer.poll(0.05)
                if time.monotonic() > deadline:
                    raise AssertionError(f"producer queue still full after {timeout} s (at message {n})")
        if n % 1000 == 0:
            producer.poll(0)
    left = producer.flush(max(1.0, deadline - time.monotonic()))
    assert left == 0, f"{left} messages still undelivered after {timeout} s; errors so far: {errors[:5]}"
    return acked, errors


def check_readback(records_by_partition, acked: dict[tuple[int, int], int], tag: str = "") -> None:
    """Every record read back is exactly the acknowledged one at its offset, keys and values
    included, and per partition the producer's order is kept."""
    read = 0
    for p, recs in records_by_partition.items():
        last_i = -1
        for off, key, value in recs:
            i = acked.get((p, off))
            assert i is not None, f"partition {p} offset {off}: a record nobody acknowledged: {value[:40]!r}"
            assert key == make_key(i), f"p{p}@{off}: key {key!r} != {make_key(i)!r}"
            expected = make_value(i, tag)
            if value != expected:
                raise AssertionError(f"p{p}@{off}: value of message {i} differs "
                                     f"(len {len(value)} vs {len(expected)}; {value[:40]!r})")
            assert i > last_i, f"partition {p}: message {i} at offset {off} after message {last_i}"
            last_i = i
            read += 1
    assert read == len(acked), f"read {read} records, {len(acked)} were acknowledged"
