"""kill -9 under load: every acknowledged message survives, exactly where it was reported.

The broker runs with --fsync always, so an acks=all answer means the batch is on
disk. A confluent-kafka producer writes continuously; the broker is SIGKILLed
mid-stream, then restarted on the same data dir. Checks: each acknowledged
message is at its reported offset with its key and value; the partitions read
from beginning to end without errors and hold nothing but whole messages of
ours; every segment passes `minibroker dump-log` with no `isvalid: false`.
"""

from __future__ import annotations

import time

from . import wire
from .clients import (
    check_contiguous,
    consume_assigned,
    create_topic,
    index_of,
    make_key,
    make_value,
    produce_confluent,
)
from .support import dump_log, log_files

PARTITIONS = 2
TAG = "k9"


def _produce_until_killed(b, topic: str, min_acked: int = 10_000, min_seconds: float = 1.0,
                          max_seconds: float = 60.0, rate: int = 25_000, first: int = 0):
    """Produce about ``rate`` messages/s; SIGKILL the broker once enough are acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": b.bootstrap_servers,
        "acks": "all",
        "linger.ms": 2,
        "batch.num.messages": 200,
        "compression.type": "lz4",
        "message.timeout.ms": 2500,
        "socket.timeout.ms": 3000,
        "reconnect.backoff.max.ms": 500,
        "queue.buffering.max.messages": 5000,
        "log_level": 2,  # the dead broker makes librdkafka log every reconnect attempt
    })
    acked: dict[tuple[int, int], int] = {}
    failed: list[str] = []

    def on_delivery(err, msg):
        if err is not None:
            failed.append(err.name())
        else:
            acked[(msg.partition(), msg.offset())] = index_of(msg.value())

    start = time.monotonic()
    killed_at = None
    in_flight_at_kill = 0
    sent = 0
    for i in range(first, first + 10_000_000):
        now = time.monotonic()
        # len(producer) is what is queued or awaiting an answer; a fast broker can drain it between two
        # produce() calls, and a kill then lands between batches, so wait for a moment when it is not empty.
        if (killed_at is None and len(acked) >= min_acked and now - start >= min_seconds
                and (in_flight := len(producer)) > 0):
            in_flight_at_kill = in_flight
            b.kill9()
            killed_at = now
        if killed_at is not None and now - killed_at > 1.0:
            break  # kept writing for a second against the dead broker
        if now - start > max_seconds:
            raise AssertionError(f"only {len(acked)} messages acknowledged in {max_seconds} s")
        if sent > (now - start) * rate:
            producer.poll(0.002)
            continue
        try:
            producer.produce(topic, value=make_value(i, TAG), key=make_key(i), on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    left = producer.flush(20)  # undelivered messages fail after message.timeout.ms
    assert left == 0, f"{left} messages without a delivery report"
    assert killed_at is not None
    assert in_flight_at_kill > 0, "the kill did not land mid-stream: nothing was in flight"
    return acked, failed, sent, in_flight_at_kill


def test_kill9_mid_stream_keeps_acknowledged(broker_factory, topic):
    b = broker_factory(["--fsync", "always", "--segment-bytes", str(2 * 1024 * 1024)])
    create_topic(b.bootstrap_servers, topic, PARTITIONS)
    all_acked: dict[tuple[int, int], int] = {}
    # Two rounds: the second crash hits a log that was itself recovered from the first.
    for round_ in range(2):
        acked, failed, sent, in_flight = _produce_until_killed(b, topic, first=round_ * 10_000_000)
        assert acked, "nothing was acknowledged before the kill"
        print(f"round {round_}: sent {sent}, acknowledged {len(acked)}, in flight at the kill "
              f"{in_flight}, failed {len(failed)} ({set(failed)})")
        all_acked.update(acked)

        b.start()  # same port, same data dir: recovery runs now
        _check_recovered(b, topic, all_acked)

    # The recovered log keeps taking writes after the old end.
    ends = wire.high_watermarks(b.port, topic, range(PARTITIONS))
    more, errs = produce_confluent(b.bootstrap_servers, topic, range(50_000_000, 50_000_100), tag=TAG, timeout=60)
    assert not errs, errs[:5]
    assert all(off >= ends[p] for p, off in more)

    assert b.stop() == 0
    logs = log_files(b.data_dir)
    assert logs, f"no .log segments under {b.data_dir}"
    for path in logs:
        r = dump_log(path, print_data=True)
        assert r.returncode == 0 and "isvalid: false" not in r.stdout, (
            f"dump-log {path}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")


def _check_recovered(b, topic: str, acked: dict[tuple[int, int], int]) -> None:
    ends = wire.high_watermarks(b.port, topic, range(PARTITIONS))
    for (p, off) in acked:
        assert off < ends[p], f"acknowledged p{p}@{off} is beyond the recovered high watermark {ends[p]}"

    records, errors = consume_assigned(b, topic, range(PARTITIONS), ends=ends, timeout=120)
    assert not errors, errors[:5]
    check_contiguous(records, ends)
    found = {}
    for p, recs in records.items():
        for off, key, value in recs:
            i = index_of(value)  # garbage would not parse
            assert value == make_value(i, TAG) and key == make_key(i), f"p{p}@{off}: not a message of ours"
            found[(p, off)] = i
    lost = {k: i for k, i in acked.items() if found.get(k) != i}
    assert not lost, (f"{len(lost)} acknowledged messages missing or moved after kill -9, e.g. "
                      f"{sorted(lost.items())[:5]} (found there: {[found.get(k) for k in sorted(lost)[:5]]})")
