"""Transactional workloads for the Spark tests, with every record's fate recorded.

``write_txn_mix`` leaves a topic holding committed, aborted and still-open transactions,
plain (idempotent, non-transactional) records, and a fenced zombie's aborted transaction;
``TxnMix`` knows which offsets a read_committed and a read_uncommitted reader must return.
All waits are bounded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from confluent_kafka import Producer

COMMITTED, ABORTED, OPEN, PLAIN = "committed", "aborted", "open", "plain"
_TIMEOUT = 30.0


@dataclass
class TxnMix:
    topic: str
    partitions: int
    # (partition, offset) -> (key, value, headers, fate)
    records: dict[tuple[int, int], tuple] = field(default_factory=dict)
    open_producer: Producer | None = None

    def first_open_offset(self, partition: int) -> int | None:
        offs = [o for (p, o), r in self.records.items() if p == partition and r[3] == OPEN]
        return min(offs) if offs else None

    def read_committed(self) -> dict[tuple[int, int], tuple]:
        """What a read_committed reader sees: committed and plain records below the LSO."""
        out = {}
        for (p, o), r in self.records.items():
            lso = self.first_open_offset(p)
            if r[3] in (COMMITTED, PLAIN) and (lso is None or o < lso):
                out[(p, o)] = r
        return out

    def read_uncommitted(self) -> dict[tuple[int, int], tuple]:
        return dict(self.records)

    def close_open(self) -> None:
        if self.open_producer is not None:
            self.open_producer.abort_transaction(_TIMEOUT)
            self.open_producer = None


class _Tracker:
    def __init__(self, mix: TxnMix) -> None:
        self.mix = mix
        self.pending: dict[bytes, tuple] = {}
        self.errors: list[str] = []

    def produce(self, producer: Producer, partition: int, key: bytes, value: bytes, fate: str,
                headers=None) -> None:
        self.pending[value] = (key, value, headers or [], fate)

        def delivered(err, msg):
            if err is not None:
                self.errors.append(f"{err.name()}: {err.str()}")
                return
            k, v, h, f = self.pending.pop(msg.value())
            self.mix.records[(msg.partition(), msg.offset())] = (k, v, h, f)

        producer.produce(self.mix.topic, key=key, value=value, partition=partition, headers=headers,
                         on_delivery=delivered)

    def settle(self, producer: Producer) -> None:
        left = producer.flush(_TIMEOUT)
        assert left == 0 and not self.errors, f"{left} undelivered; errors {self.errors[:3]}"


def txn_producer(bootstrap: str, tid: str, **extra) -> Producer:
    conf = {"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 2,
            "transaction.timeout.ms": 300000}
    conf.update(extra)
    p = Producer(conf)
    p.init_transactions(_TIMEOUT)
    return p


def write_txn_mix(bootstrap: str, topic: str, partitions: int = 2, *, leave_open: bool = True,
                  tag: str = "") -> TxnMix:
    mix = TxnMix(topic, partitions)
    t = _Tracker(mix)
    n = 0

    def value(kind: str) -> bytes:
        nonlocal n
        n += 1
        return f"{kind}-{n}{tag}".encode()

    a = txn_producer(bootstrap, f"{topic}-a")
    for txn in range(5):
        a.begin_transaction()
        for p in range(partitions):
            for _ in range(20):
                v = value("c")
                t.produce(a, p, b"k" + v, v, COMMITTED, headers=[("txn", str(txn).encode()), ("n", None)])
        a.commit_transaction(_TIMEOUT)
        t.settle(a)
        if txn == 2:
            # An aborted transaction whose records reached the log (flushed before the abort).
            a.begin_transaction()
            for p in range(partitions):
                for _ in range(15):
                    v = value("a")
                    t.produce(a, p, b"k" + v, v, ABORTED)
            t.settle(a)
            a.abort_transaction(_TIMEOUT)

    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2})
    for p in range(partitions):
        for _ in range(10):
            v = value("p")
            t.produce(plain, p, None, v, PLAIN)
    t.settle(plain)

    # A zombie: instance 1 writes, instance 2 of the same transactional.id fences it, and
    # the coordinator aborts instance 1's transaction with the bumped epoch.
    z1 = txn_producer(bootstrap, f"{topic}-z")
    z1.begin_transaction()
    for p in range(partitions):
        for _ in range(5):
            v = value("z")
            t.produce(z1, p, b"k" + v, v, ABORTED)
    t.settle(z1)
    z2 = txn_producer(bootstrap, f"{topic}-z")
    z2.begin_transaction()
    for p in range(partitions):
        for _ in range(5):
            v = value("y")
            t.produce(z2, p, b"k" + v, v, COMMITTED)
    z2.commit_transaction(_TIMEOUT)
    t.settle(z2)

    if leave_open:
        o = txn_producer(bootstrap, f"{topic}-open")
        o.begin_transaction()
        for p in range(partitions):
            for _ in range(7):
                v = value("o")
                t.produce(o, p, b"k" + v, v, OPEN)
        t.settle(o)
        mix.open_producer = o
        # Committed after the open transaction began: beyond the LSO until it ends.
        a.begin_transaction()
        for p in range(partitions):
            for _ in range(10):
                v = value("l")
                t.produce(a, p, b"k" + v, v, COMMITTED)
        a.commit_transaction(_TIMEOUT)
        t.settle(a)
    deadline = time.monotonic() + _TIMEOUT
    while t.pending and time.monotonic() < deadline:
        a.poll(0.1)
    assert not t.pending, f"{len(t.pending)} records without a delivery report"
    return mix
