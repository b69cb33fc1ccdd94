"""franz-go scenarios (tests/go/mbgo) run against one broker; each returns what the client observed,
with what legitimately differs between two brokers taken out (producer ids, absolute epochs).

Used by tests/differential/test_franz_go_scenarios.py, which runs each on Apache Kafka and on
minibroker at once and compares the outcomes.
"""

from __future__ import annotations

import random
import signal
import time
from collections import Counter, defaultdict

from tests.integration import franz_go

READ_COMMITTED, READ_UNCOMMITTED = "read_committed", "read_uncommitted"


def _records(bootstrap: str, topic: str, isolation: str, count: int) -> list[list]:
    ev = franz_go.run("consume", "-brokers", bootstrap, "-topic", topic, "-isolation", isolation,
                      "-count", count, "-settle", "1s", "-timeout", "60s", "-log-level", "warn", timeout=90)
    return sorted([r["partition"], r["offset"], r["key"], r["value"]] for r in franz_go.events_of(ev, "record"))


def commit_abort(bootstrap: str, topic: str, parts: int, txns: int, per_txn: int, txn_id: str) -> dict:
    """``txns`` transactions of ``per_txn`` records, commit and abort alternating; then both
    isolation levels read the topic."""
    ev = franz_go.run("txn-produce", "-brokers", bootstrap, "-topic", topic, "-partitions", parts,
                      "-txn-id", txn_id, "-txns", txns, "-records", per_txn, "-outcome", "alternate",
                      "-timeout", "60s", timeout=90)
    done = franz_go.events_of(ev, "txn")
    first_epoch = done[0]["producer_epoch"] if done else 0
    n_committed = sum(per_txn for e in done if e["commit"])
    return {
        "txns": [{"n": e["n"], "commit": e["commit"], "offsets": sorted(e["offsets"]),
                  "epoch_delta": e["producer_epoch"] - first_epoch} for e in done],
        "records": {READ_COMMITTED: _records(bootstrap, topic, READ_COMMITTED, n_committed),
                    READ_UNCOMMITTED: _records(bootstrap, topic, READ_UNCOMMITTED, txns * per_txn)},
    }


def idempotent(bootstrap: str, topic: str, parts: int, n: int) -> dict:
    ev = franz_go.run("idempotent-produce", "-brokers", bootstrap, "-topic", topic, "-partitions", parts,
                      "-n", n, "-timeout", "60s", timeout=90)
    produced = sorted([e["partition"], e["offset"], e["value"]] for e in franz_go.events_of(ev, "produced"))
    return {"produced": produced, "idempotent": all(e["producer_id"] >= 0 for e in franz_go.events_of(ev, "produced")),
            "records": _records(bootstrap, topic, READ_UNCOMMITTED, n)}


def keyed_input(n: int, keys: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    seq: Counter = Counter()
    out = []
    for i in range(n):
        key = f"k{rng.randrange(keys):02d}"
        out.append((key, f"{key}|{seq[key]:05d}|record {i}"))
        seq[key] += 1
    return out


def produce_keyed(bootstrap: str, topic: str, records: list[tuple[str, str]]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                  "batch.num.messages": 20})
    for key, value in records:
        p.produce(topic, key=key.encode(), value=value.encode())
    assert p.flush(60) == 0, f"{bootstrap}: input not delivered within 60 s"


# Answers while a group's coordinator is elected or loads: the callers poll, so "not yet".
COORDINATOR_NOT_READY = (16, 14, 15)  # NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE


def committed_offsets(bootstrap: str, group: str, topic: str, parts: int) -> dict[int, int] | None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": "read_uncommitted"})
    try:
        tps = c.committed(
            [TopicPartition(topic, p) for p in range(parts)], timeout=15)
    except KafkaException as e:
        # Kafka answers NOT_COORDINATOR while it creates __consumer_offsets for the session's first group.
        if e.args and e.args[0].code() in COORDINATOR_NOT_READY:
            return None
        raise
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in tps}


def eos(bootstrap: str, src: str, dst: str, group: str, parts: int, records: list[tuple[str, str]],
        timeout: float = 90.0) -> dict:
    """``mbgo eos`` from ``src`` (already holding ``records``) to ``dst`` until the group's offsets
    reach the end of ``src``, then SIGTERM. What a read_committed reader sees of ``dst``: the values
    of each key in order, and the partition each key went to."""
    produce_keyed(bootstrap, src, records)
    end = Counter()
    ev = _records(bootstrap, src, READ_UNCOMMITTED, len(records))
    for p, off, _k, _v in ev:
        end[p] = max(end[p], off + 1)
    proc = franz_go.start("eos", "-brokers", bootstrap, "-in", src, "-out", dst, "-group", group,
                          "-txn-id", group, "-timeout", f"{int(timeout) + 30}s", "-max-partition-bytes", 2048)
    try:
        deadline = time.monotonic() + timeout
        while committed_offsets(bootstrap, group, src, parts) != {p: end[p] for p in range(parts)}:
            assert proc.poll() is None, f"{bootstrap}: eos exited {proc.returncode}: {proc.communicate()}"
            assert time.monotonic() < deadline, f"{bootstrap}: eos did not finish within {timeout} s"
            time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        r = franz_go.finish(proc, 30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert r.returncode == 0, f"{bootstrap}: eos exited {r.returncode}\n{r.stderr[-3000:]}"
    out = _records(bootstrap, dst, READ_COMMITTED, len(records))
    by_key: dict[str, list[str]] = defaultdict(list)
    part_of: dict[str, set[int]] = defaultdict(set)
    for p, _off, key, value in sorted(out, key=lambda r: (r[0], r[1])):
        by_key[key].append(value)
        part_of[key].add(p)
    return {"count": len(out), "values": dict(by_key), "partitions": {k: sorted(v) for k, v in part_of.items()}}
