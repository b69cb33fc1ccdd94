"""The dead-letter-queue program (KIP-1191) that tests/integration/test_share_dlq.py runs on
minibroker and tests/differential/test_share_dlq.py runs on the reference Kafka 4.4 and
minibroker: a share group with a DLQ topic, a confluent-kafka ShareConsumer that REJECTs some
records and RELEASEs others until the delivery count limit archives them, and a plain consumer
reading the DLQ topic. Every loop is bounded in passes and time."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

HEADERS = ("__dlq.errors.topic", "__dlq.errors.partition", "__dlq.errors.offset",
           "__dlq.errors.group", "__dlq.errors.delivery.count", "__dlq.errors.message")


def group_configs(bs: str, group: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    res = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    admin.incremental_alter_configs([res])[res].result(timeout=15)


def create_topic(bs: str, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bs})  # kept alive until the answer
    admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})])[name].result(timeout=15)


def produce(bs: str, topic: str, n: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bs})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions,
                  headers=[("h", b"x%d" % i)], timestamp=1_700_000_000_000 + i)
    assert p.flush(15) == 0


def consume_rejecting(bs: str, group: str, topic: str, want_done: int, timeout: float,
                      reject=lambda m: m.offset() % 3 == 0,
                      release=lambda m: m.offset() % 3 == 1) -> dict[tuple[int, int], list[str]]:
    """Explicit acknowledgement: REJECT what ``reject`` picks, RELEASE what ``release`` picks
    (every delivery, so the delivery count limit archives it), ACCEPT the rest; until
    ``want_done`` records were accepted, rejected or released for the last time. What each
    (partition, offset) got, delivery by delivery."""
    def make() -> ShareConsumer:
        c = ShareConsumer({"bootstrap.servers": bs, "group.id": group,
                           "share.acknowledgement.mode": "explicit"})
        c.subscribe([topic])
        return c

    c = make()
    seen: dict[tuple[int, int], list[str]] = {}
    done: set[tuple[int, int]] = set()
    start = time.monotonic()
    deadline = start + timeout
    fresh = 2  # replacements of a consumer that never got a record
    try:
        for _ in range(2000):
            if len(done) >= want_done or time.monotonic() > deadline:
                break
            # librdkafka 2.16's ShareConsumer (a preview) sometimes never receives anything
            # from a broker (seen with Kafka 4.4 too); a new member of the group does
            if not seen and fresh and time.monotonic() - start > min(20.0, timeout / 3):
                c.close()
                c = make()
                fresh -= 1
                start = time.monotonic()
            for m in c.poll(0.5):
                if m.error() is not None:
                    continue
                k = (m.partition(), m.offset())
                if reject(m):
                    c.acknowledge(m, AcknowledgeType.REJECT)
                    seen.setdefault(k, []).append("REJECT")
                    done.add(k)
                elif release(m):
                    c.acknowledge(m, AcknowledgeType.RELEASE)
                    seen.setdefault(k, []).append("RELEASE")
                    if m.delivery_count() >= 2:
                        done.add(k)
                else:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                    seen.setdefault(k, []).append("ACCEPT")
                    done.add(k)
            c.commit_sync(15)
    finally:
        c.close()
    return seen


def read_dlq(bs: str, topic: str, want: int, timeout: float) -> list[dict]:
    """The DLQ topic's records, from the start, as a plain consumer reads them."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "dlq-reader-" + uuid.uuid4().hex[:8],
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    out: list[dict] = []
    deadline = time.monotonic() + timeout
    try:
        for _ in range(1000):
            if len(out) >= want or time.monotonic() > deadline:
                break
            m = c.poll(0.5)
            if m is None or m.error() is not None:
                continue
            ts_type, ts = m.timestamp()
            out.append({"partition": m.partition(), "offset": m.offset(), "key": m.key(),
                        "value": m.value(), "timestamp_type": ts_type, "timestamp": ts,
                        "headers": [(k, v) for k, v in (m.headers() or [])]})
    finally:
        c.close()
    return out


def scenario(bs: str, *, copy: bool, source_partitions: int = 3, dlq_partitions: int = 2,
             records: int = 12, timeout: float = 90, suffix: str | None = None) -> dict:
    """The whole program on one broker: a source topic of ``records`` keyed records, a DLQ topic
    (``errors.deadletterqueue.group.enable=true``, the ``dlq.`` prefix), a group with
    ``share.delivery.count.limit=2`` that REJECTs offsets 0 and 3 of each partition, RELEASEs
    offset 1 until the limit archives it and ACCEPTs the rest; then the DLQ read back.
    Names are replaced by SRC and G so two brokers' answers compare; each record's timestamp
    is checked to lie within the run and dropped."""
    u = suffix or uuid.uuid4().hex[:8]  # the same on two brokers compared (group listings)
    src, dlq, group = "src-" + u, "dlq.q-" + u, "g-" + u
    create_topic(bs, src, source_partitions)
    create_topic(bs, dlq, dlq_partitions, {"errors.deadletterqueue.group.enable": "true"})
    produce(bs, src, records, source_partitions)
    group_configs(bs, group, {"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "2",
                              "errors.deadletterqueue.topic.name": dlq,
                              "errors.deadletterqueue.copy.record.enable": str(copy).lower()})
    before = int(time.time() * 1000)
    seen = consume_rejecting(bs, group, src, records, timeout)
    rejected = sum(1 for v in seen.values() if v[-1] == "REJECT")
    exhausted = sum(1 for v in seen.values() if v == ["RELEASE", "RELEASE"])
    got = read_dlq(bs, dlq, rejected + exhausted, timeout / 2)
    after = int(time.time() * 1000)
    names = {src.encode(): b"SRC", group.encode(): b"G"}
    out = []
    for r in got:
        assert before - 1000 <= r.pop("timestamp") <= after + 1000, r
        r.pop("offset")  # the order two share partitions' writes interleave in is a race
        r["headers"] = [(k, names.get(v, v)) for k, v in r["headers"]]
        out.append(r)
    out.sort(key=lambda r: (r["partition"], int(dict(r["headers"])["__dlq.errors.partition"]),
                            int(dict(r["headers"])["__dlq.errors.offset"])))
    return {"seen": {f"{p}:{o}": v for (p, o), v in sorted(seen.items())}, "dlq": out}
