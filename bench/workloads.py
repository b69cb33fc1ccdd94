"""Load generators for bench/run.py.  Each runs in its own process and prints one JSON line.

    python bench/workloads.py produce  --bootstrap H:P --topic T --size 1024 --seconds 3
    python bench/workloads.py latency  --bootstrap H:P --topic T --size 1024 --rate 2000 --seconds 3
    python bench/workloads.py txn      --bootstrap H:P --topic T --partition 0 --seconds 3
    python bench/workloads.py load     --bootstrap H:P --topic T --mib 64
    python bench/workloads.py consume  --bootstrap H:P --topic T --isolation read_committed --count N
    python bench/workloads.py fill     --bootstrap H:P --topic T --count N --size 100 --partitions 4
    python bench/workloads.py share    --bootstrap H:P --topic T --group G --seconds 3

Every workload uses the same client settings against every broker (CLIENT_COMMON below).
Reported times are wall-clock (time.time) so the harness can merge several processes,
and CPU is this process's user+system time (librdkafka's threads included).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, ShareConsumer, TopicPartition

CLIENT_COMMON = {
    "socket.nagle.disable": True,
}

PRODUCE_CONF = {
    **CLIENT_COMMON,
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 5,
    "batch.size": 1024 * 1024,          # batches of up to 1 MiB
    "batch.num.messages": 100000,
    "message.max.bytes": 2 * 1024 * 1024,
    "queue.buffering.max.messages": 1000000,
    "queue.buffering.max.kbytes": 256 * 1024,
    "compression.type": "none",
}


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


class Errors:
    def __init__(self) -> None:
        self.count = 0
        self.first: str | None = None

    def __call__(self, err, msg=None) -> None:  # error_cb(err) and on_delivery(err, msg)
        if err is None:
            return
        self.count += 1
        if self.first is None:
            self.first = str(err)


def emit(**kw) -> None:
    print(json.dumps(kw), flush=True)


def produce(a) -> None:
    errors = Errors()
    conf = {**PRODUCE_CONF, "bootstrap.servers": a.bootstrap, "error_cb": errors,
            "delivery.report.only.error": True, "on_delivery": errors}
    p = Producer(conf)
    # Warm up: metadata + producer id, outside the timed window.
    p.produce(a.topic, b"w" * a.size, partition=0)
    if p.flush(10) != 0:
        emit(error="warm-up flush timed out: " + str(errors.first))
        return
    value = os.urandom(a.size)
    n = 0
    f0, c0, t0 = minor_faults(), cpu_seconds(), time.time()
    deadline = t0 + a.seconds
    produce_ = p.produce
    topic = a.topic
    nparts = a.partitions or 1
    batch = 0
    while True:
        part = batch % nparts
        batch += 1
        for _ in range(1000):
            try:
                produce_(topic, value, partition=part)
            except BufferError:
                p.poll(0.001)
                continue
            n += 1
        p.poll(0)
        if time.time() >= deadline:
            break
    left = p.flush(60)
    t1, c1 = time.time(), cpu_seconds()
    emit(records=n - left - errors.count, bytes=(n - left - errors.count) * a.size,
         start=t0, end=t1, cpu=c1 - c0, minflt=minor_faults() - f0, errors=errors.count, first_error=errors.first,
         unflushed=left)


def latency(a) -> None:
    errors = Errors()
    conf = {**PRODUCE_CONF, "bootstrap.servers": a.bootstrap, "error_cb": errors, "linger.ms": 0}
    p = Producer(conf)
    p.produce(a.topic, b"w" * a.size, partition=0)
    p.flush(10)
    nparts = a.partitions or 1
    value = os.urandom(a.size)
    lat: list[float] = []

    def done(err, msg, t=None):
        if err is not None:
            errors(err)

    total = int(a.rate * a.seconds)
    t0 = time.perf_counter()
    c0 = cpu_seconds()
    for i in range(total):
        due = t0 + i / a.rate
        while True:
            now = time.perf_counter()
            if now >= due:
                break
            p.poll(min(due - now, 0.0005))
        sent = time.perf_counter()

        def cb(err, msg, sent=sent):
            if err is None:
                lat.append(time.perf_counter() - sent)
            else:
                errors(err)
        p.produce(a.topic, value, partition=i % nparts, on_delivery=cb)
        p.poll(0)
    p.flush(30)
    elapsed = time.perf_counter() - t0
    lat.sort()

    def pct(q):
        return lat[min(len(lat) - 1, int(q * len(lat)))] * 1000 if lat else None
    emit(records=len(lat), achieved_rate=len(lat) / elapsed, p50_ms=pct(0.50), p99_ms=pct(0.99),
         max_ms=lat[-1] * 1000 if lat else None, cpu=cpu_seconds() - c0, errors=errors.count,
         first_error=errors.first)


def txn(a) -> None:
    errors = Errors()
    p = Producer({**PRODUCE_CONF, "bootstrap.servers": a.bootstrap, "error_cb": errors,
                  "transactional.id": f"bench-{a.topic}-{a.partition}-{os.getpid()}"})
    p.init_transactions(30)
    value = os.urandom(a.size)
    n = 0
    c0, t0 = cpu_seconds(), time.time()
    deadline = t0 + a.seconds
    while time.time() < deadline:
        p.begin_transaction()
        for _ in range(a.per_txn):
            p.produce(a.topic, value, partition=a.partition)
        p.commit_transaction(30)
        n += 1
    t1 = time.time()
    emit(transactions=n, records=n * a.per_txn, start=t0, end=t1, cpu=cpu_seconds() - c0,
         errors=errors.count, first_error=errors.first)


def load(a) -> None:
    """Fill a topic with ~a.mib MiB: committed transactions of 1,000 records, plus one aborted
    transaction every 10, so read_committed has something to filter."""
    errors = Errors()
    p = Producer({**PRODUCE_CONF, "bootstrap.servers": a.bootstrap, "error_cb": errors,
                  "transactional.id": f"bench-load-{a.topic}-{os.getpid()}"})
    p.init_transactions(30)
    value = os.urandom(a.size)
    total = a.mib * 1024 * 1024 // a.size
    committed = aborted = 0
    t0 = time.time()
    i = 0
    while committed < total:
        p.begin_transaction()
        for _ in range(1000):
            while True:
                try:
                    p.produce(a.topic, value, partition=i % 3)
                    break
                except BufferError:
                    p.poll(0.01)
        i += 1
        if i % 10 == 0:
            # abort_transaction() purges records not yet sent; flush first so that every aborted
            # record reaches the broker's log and read_uncommitted has an exact count to expect.
            if p.flush(60) != 0:
                raise KafkaException("flush before abort timed out")
            p.abort_transaction(60)
            aborted += 1000
        else:
            p.commit_transaction(60)
            committed += 1000
    emit(committed=committed, aborted=aborted, seconds=time.time() - t0, errors=errors.count,
         first_error=errors.first)


def consume(a) -> None:
    errors = Errors()
    c = Consumer({**CLIENT_COMMON, "bootstrap.servers": a.bootstrap, "group.id": f"bench-{os.getpid()}",
                  "enable.auto.commit": False, "isolation.level": a.isolation, "error_cb": errors,
                  "fetch.max.bytes": 50 * 1024 * 1024, "max.partition.fetch.bytes": 8 * 1024 * 1024,
                  "fetch.wait.max.ms": 100, "queued.max.messages.kbytes": 256 * 1024,
                  # Past queued.min.messages (100,000 per partition: ~100 MiB of 1 KiB records,
                  # three 8 MiB fetches ahead of this loop) librdkafka stops fetching that
                  # partition for fetch.queue.backoff.ms, 1 s by default: reads of the 1 GiB log
                  # then alternated between ~650 and ~320 MB/s, the consumer idle half the time.
                  "fetch.queue.backoff.ms": 10})
    md = c.list_topics(a.topic, timeout=10)
    parts = sorted(md.topics[a.topic].partitions)
    tps = [TopicPartition(a.topic, p) for p in parts]
    # Read to the end of the log, not just until --count records arrived: a broker that
    # leaks aborted records to read_committed would otherwise look faster, not wrong.
    ends = {tp.partition: c.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
    c.assign([TopicPartition(a.topic, p, -2) for p in parts])  # OFFSET_BEGINNING
    n = nbytes = 0
    c0, t0 = cpu_seconds(), time.time()
    deadline = t0 + a.timeout
    done = False
    while not done and time.time() < deadline:
        for m in c.consume(10000, 0.5):
            if m.error() is None:
                n += 1
                nbytes += len(m)  # the value's length, without copying it into a bytes
        if n >= a.count:
            done = all(tp.offset >= ends[tp.partition] for tp in c.position(tps))
    t1 = time.time()
    c.close()
    emit(records=n, bytes=nbytes, start=t0, end=t1, cpu=cpu_seconds() - c0, complete=n >= a.count,
         exact=n == a.count, reached_end=done, errors=errors.count, first_error=errors.first)


def fill(a) -> None:
    """Exactly ``a.count`` records of ``a.size`` bytes, round-robin to partitions 0..N-1."""
    errors = Errors()
    p = Producer({**PRODUCE_CONF, "bootstrap.servers": a.bootstrap, "error_cb": errors})
    value = os.urandom(a.size)
    t0 = time.time()
    for i in range(a.count):
        while True:
            try:
                p.produce(a.topic, value, partition=i % max(1, a.partitions), on_delivery=errors)
                break
            except BufferError:
                p.poll(0.01)
    left = p.flush(120)
    emit(records=a.count - left, seconds=time.time() - t0, errors=errors.count + left,
         first_error=errors.first)


def share(a) -> None:
    """One member of share group ``a.group`` (confluent-kafka's ShareConsumer, implicit
    acknowledgement: each poll ACCEPTs the records of the one before, piggybacked on the next
    ShareFetch) for ``a.seconds`` from its first record; the records it was given and had
    acknowledged in that window (the last poll's by a final commit_sync)."""
    errors = Errors()
    c = ShareConsumer({**CLIENT_COMMON, "bootstrap.servers": a.bootstrap, "group.id": a.group,
                       "error_cb": errors})
    c.subscribe([a.topic])
    n = acked = 0
    t0 = t1 = None
    c0 = cpu_seconds()
    deadline = time.time() + a.timeout
    while time.time() < deadline:
        got = sum(1 for m in c.poll(0.5) if m.error() is None)
        now = time.time()
        if got and t0 is None:
            t0, c0 = now, cpu_seconds()
        if t0 is not None:
            n += got
            if now - t0 >= a.seconds:
                t1 = now
                break
    failed = 0
    if n:
        results = c.commit_sync(30)  # the last poll's records; the earlier ones went with each poll
        failed = sum(1 for err in results.values() if err is not None)
    acked = n if not failed else 0
    end = t1 or time.time()
    cpu = cpu_seconds() - c0
    c.close()
    emit(records=acked, delivered=n, start=t0 or end, end=end, cpu=cpu, errors=errors.count + failed,
         first_error=errors.first)


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("produce", "latency", "txn", "load", "consume", "fill", "share"):
        s = sub.add_parser(name)
        s.add_argument("--bootstrap", required=True)
        s.add_argument("--topic", required=True)
        s.add_argument("--size", type=int, default=1024)
        s.add_argument("--seconds", type=float, default=3.0)
        s.add_argument("--rate", type=float, default=2000)
        s.add_argument("--partition", type=int, default=0)
        s.add_argument("--partitions", type=int, default=0,
                       help="produce round-robin to partitions 0..N-1 explicitly (0: default partitioner)")
        s.add_argument("--per-txn", type=int, default=10)
        s.add_argument("--mib", type=int, default=64)
        s.add_argument("--isolation", default="read_uncommitted")
        s.add_argument("--count", type=int, default=0)
        s.add_argument("--timeout", type=float, default=60)
        s.add_argument("--group", default="bench-share")
    a = ap.parse_args()
    try:
        globals()[a.cmd](a)
    except KafkaException as e:
        emit(error=f"KafkaException: {e}")
        sys.exit(1)


if __name__ == "__main__":
    main()
