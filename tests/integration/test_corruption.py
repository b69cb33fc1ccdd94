"""Damage on disk between two runs of a real broker (issue 13, defects 1 and 4).

- A byte flipped in a closed segment of a stopped broker: ``minibroker scrub``
  reports its offset and position, and after a restart a confluent-kafka
  consumer (librdkafka's default check.crcs=false) gets CORRUPT_MESSAGE at that
  batch, never the changed value; past it, it reads on.
- Garbage over the tail of ``__transaction_state`` after a clean stop: the
  broker starts (the tail is cut and logged) and transactions go on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

from minibroker_storage.offline import segments, walk_segment

from . import wire
from .clients import create_topic

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def scrub(data_dir) -> tuple[int, dict]:
    res = subprocess.run([sys.executable, "-m", "minibroker.cli.scrub", "--data-dir", str(data_dir), "--json"],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode in (0, 1), res.stderr
    return res.returncode, json.loads(res.stdout)


def produce(bootstrap: str, topic: str, n: int) -> dict[int, bytes]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                  "batch.num.messages": 5, "compression.type": "none", "message.timeout.ms": 60000})
    acked: dict[int, bytes] = {}
    errors: list[str] = []

    def done(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked[msg.offset()] = msg.value()

    for i in range(n):
        p.produce(topic, value=f"value-{i:06d}-".encode() + b"v" * 400, partition=0, on_delivery=done)
        if i % 50 == 0:
            p.flush(30)
    assert p.flush(60) == 0 and not errors, errors[:5]
    return acked


def consume_from(bootstrap: str, topic: str, start: int, until: int, timeout: float = 30.0):
    """(offset -> value, [error codes]) reading partition 0 from ``start`` until
    offset ``until`` is reached or an error came back three times."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"it-corrupt-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100, "fetch.error.backoff.ms": 100,
                  "socket.timeout.ms": 10000})
    got: dict[int, bytes] = {}
    errors: list[int] = []
    try:
        c.assign([TopicPartition(topic, 0, start)])
        deadline = time.monotonic() + timeout
        for _ in range(10_000):
            if time.monotonic() > deadline or len(errors) >= 3 or (got and max(got) + 1 >= until):
                break
            for m in c.consume(num_messages=1000, timeout=0.3):
                if m.error() is not None:
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        errors.append(m.error().code())
                    continue
                got[m.offset()] = m.value()
    finally:
        c.close()
    return got, errors


def test_flipped_byte_in_closed_segment_is_reported_and_never_served(broker_factory):
    from confluent_kafka import KafkaError

    b = broker_factory(["--segment-bytes", str(64 * 1024)])
    topic = f"corrupt-{uuid.uuid4().hex[:8]}"
    create_topic(b.bootstrap_servers, topic, 1)
    acked = produce(b.bootstrap_servers, topic, 600)
    assert b.stop() == 0

    part = b.data_dir / f"{topic}-0"
    segs = segments(str(part))
    assert len(segs) >= 3
    batches = list(walk_segment(segs[1], check_crc=True, position=0))
    header, _ = batches[len(batches) // 2]
    # A byte of the last record's value: with check.crcs=false the client would
    # see the changed value without a word.
    with open(segs[1].log, "r+b") as f:
        f.seek(header.end - 5)
        byte = f.read(1)
        f.seek(header.end - 5)
        f.write(bytes([byte[0] ^ 0x20]))

    code, report = scrub(b.data_dir)
    assert code == 1
    [bad] = report["bad_batches"]
    assert (bad["topic"], bad["partition"], bad["offset"], bad["position"]) == (
        topic, 0, header.base_offset, header.position)
    assert "crc" in bad["reason"]

    b.start()
    end = wire.high_watermarks(b.port, topic, [0])[0]
    assert end == 600
    got, errors = consume_from(b.bootstrap_servers, topic, 0, end)
    assert errors and set(errors) == {KafkaError.INVALID_MSG}, errors  # CORRUPT_MESSAGE (2)
    assert max(got) == header.base_offset - 1  # everything before the bad batch, nothing of it
    assert all(got[o] == acked[o] for o in got)
    # A consumer that skips the batch reads on.
    after, errors = consume_from(b.bootstrap_servers, topic, header.last_offset + 1, end)
    assert not errors and sorted(after) == list(range(header.last_offset + 1, end))
    assert all(after[o] == acked[o] for o in after)
    assert "fetch.corrupt_batch" in b.log_text() and "segment.corrupt_batch" in b.log_text()


def test_garbage_over_transaction_state_tail_after_clean_stop(broker_factory):
    from confluent_kafka import Producer

    b = broker_factory([])
    topic = f"txn-tail-{uuid.uuid4().hex[:8]}"
    create_topic(b.bootstrap_servers, topic, 1)
    conf = {"bootstrap.servers": b.bootstrap_servers, "transactional.id": f"tid-{topic}",
            "transaction.timeout.ms": 60000, "socket.timeout.ms": 10000}
    p = Producer(conf)
    p.init_transactions(30)
    for i in range(3):
        p.begin_transaction()
        p.produce(topic, value=f"t{i}".encode(), partition=0)
        p.commit_transaction(30)
    del p
    assert b.stop() == 0

    logs = [f for f in b.data_dir.glob("__transaction_state-*/*.log") if f.stat().st_size > 0]
    assert logs, "no transaction state written"
    victim = max(logs, key=lambda f: f.stat().st_size)
    size = victim.stat().st_size
    with open(victim, "r+b") as f:
        f.seek(size - 20)
        f.write(os.urandom(20))

    b.start()  # before: the coordinator's replay died on "malformed records"
    assert "segment.truncated" in b.log_text()
    p = Producer(conf)
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"after", partition=0)
    p.commit_transaction(30)


def test_background_scrub_finds_rot_the_open_trusted(broker_factory):
    """Rot that keeps the file's size and mtime passes the open (the segment is
    marked verified); --scrub-bytes-per-sec finds it, and from then on the
    consumer gets CORRUPT_MESSAGE instead of the changed value."""
    from confluent_kafka import KafkaError

    b = broker_factory(["--segment-bytes", str(64 * 1024), "--scrub-bytes-per-sec", str(32 << 20)])
    topic = f"rot-{uuid.uuid4().hex[:8]}"
    create_topic(b.bootstrap_servers, topic, 1)
    acked = produce(b.bootstrap_servers, topic, 600)
    assert b.stop() == 0
    segs = segments(str(b.data_dir / f"{topic}-0"))
    header, _ = list(walk_segment(segs[0], check_crc=True, position=0))[3]
    st = os.stat(segs[0].log)
    with open(segs[0].log, "r+b") as f:
        f.seek(header.end - 5)
        byte = f.read(1)
        f.seek(header.end - 5)
        f.write(bytes([byte[0] ^ 0x20]))
    os.utime(segs[0].log, ns=(st.st_atime_ns, st.st_mtime_ns))

    b.start()
    deadline = time.monotonic() + 30
    while "scrub.corrupt_batch" not in b.log_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "scrub.corrupt_batch" in b.log_text(), b.log_tail()
    got, errors = consume_from(b.bootstrap_servers, topic, 0, 600)
    assert errors and set(errors) == {KafkaError.INVALID_MSG}, errors
    assert max(got) == header.base_offset - 1
    assert all(got[o] == acked[o] for o in got)
