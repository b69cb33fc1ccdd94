"""Dead-letter queues of share groups (KIP-1191, share.version 2) on Kafka 4.4 and minibroker:
the same real-client program (tests/integration/share_dlq_program.py — a confluent-kafka
ShareConsumer REJECTing records and RELEASEing others up to the delivery count limit, a plain
Consumer reading the DLQ topic) runs on both brokers of the pair; what each consumer received and
every DLQ record — partition, key, value, timestamp type, headers in order — are compared field
by field. Timestamps (the broker's clock) are checked to lie within the run on each side, and the
order in which two share partitions' writes interleave in one DLQ partition is a race on both,
so records compare sorted by their source partition and offset."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.integration import share_dlq_program as prog


def _bootstrap(side) -> str:
    host, port = side.conn.address
    return f"{host}:{port}"


@pytest.mark.parametrize("copy", [False, True], ids=["headers-only", "copy-record"])
def test_dlq_records_are_kafkas(differential_pair, copy):
    # the same names on both (other tests list every group with configs and compare)
    suffix = "dlqdiff-" + uuid.uuid4().hex[:8]
    kafka, mini = (prog.scenario(_bootstrap(s), copy=copy, suffix=suffix) for s in differential_pair.sides)
    assert mini["seen"] == kafka["seen"]
    assert len(kafka["dlq"]) == 9, kafka  # 3 partitions x (2 rejected + 1 at the limit)
    for k, m in zip(kafka["dlq"], mini["dlq"], strict=True):
        assert m == k, f"\n  Kafka:      {k}\n  minibroker: {m}"


def test_lock_expiry_at_the_limit_goes_to_the_dlq(differential_pair):
    """Raw ShareFetch requests that never acknowledge: the acquisition lock (15 s, the least the
    broker default group.share.min.record.lock.duration.ms allows) expires twice and the
    delivery count limit (2) sends the records through the DLQ on both brokers."""
    import time

    from .test_share_groups import Script, _fetch_request, _group_configs, _member

    s = Script(differential_pair)
    dlq = "dlq.exp-" + s.group
    for side in s.pair.sides:
        prog.create_topic(_bootstrap(side), dlq, 1, {"errors.deadletterqueue.group.enable": "true"})
    s.produce(2)
    _group_configs(s, share_delivery_count_limit="2", share_auto_offset_reset="earliest",
                   share_record_lock_duration_ms="15000", errors_deadletterqueue_topic_name=dlq)
    m = _member()
    s.join_until_assigned(m, 1)
    seen: dict[str, list[tuple[int, int, int]]] = {side.name: [] for side in s.pair.sides}
    epochs = {side.name: 0 for side in s.pair.sides}
    deadline = time.monotonic() + 60
    for _ in range(200):  # both sides in turn, until each delivered the records twice
        pending = [side for side in s.pair.sides if not any(c == 2 for _, _, c in seen[side.name])]
        if not pending or time.monotonic() > deadline:
            break
        for side in pending:
            r = side.call(_fetch_request(s, side, m, epochs[side.name], 500))
            assert r.error_code == 0, (side.name, r)
            epochs[side.name] += 1
            seen[side.name] += [(a.first_offset, a.last_offset, a.delivery_count)
                                for t in r.responses for p in t.partitions for a in p.acquired_records]
    assert seen["minibroker"] == seen["kafka"] == [(0, 1, 1), (0, 1, 2)], seen
    kafka, mini = (prog.read_dlq(_bootstrap(side), dlq, 2, 40) for side in s.pair.sides)
    for got in (kafka, mini):
        for r in got:
            r.pop("timestamp")
    assert mini == kafka
    assert [dict(r["headers"])["__dlq.errors.message"] for r in kafka] == [
        b"Offset delivery count exceeded the threshold."] * 2


@pytest.mark.parametrize("case", ["not-enabled", "no-prefix"])
def test_a_refused_dlq_topic_archives_regardless(differential_pair, case):
    """validateDlqTopic refuses a DLQ topic without errors.deadletterqueue.group.enable=true and
    one without the dlq. prefix: on both brokers the rejected records are archived anyway (a new
    member gets nothing) and the topic stays empty."""
    u = uuid.uuid4().hex[:8]
    src, group = f"src-ref-{u}", f"g-ref-{u}"
    dlq, configs = {"not-enabled": (f"dlq.plain-{u}", {}),
                    "no-prefix": (f"noprefix-{u}", {"errors.deadletterqueue.group.enable": "true"})}[case]

    def run(side):
        bs = _bootstrap(side)
        prog.create_topic(bs, src, 1)
        prog.create_topic(bs, dlq, 1, configs)
        prog.produce(bs, src, 2, 1)
        prog.group_configs(bs, group, {"share.auto.offset.reset": "earliest",
                                       "errors.deadletterqueue.topic.name": dlq})
        seen = prog.consume_rejecting(bs, group, src, 2, 60, reject=lambda m: True)
        return (seen, prog.consume_rejecting(bs, group, src, 1, 8), prog.read_dlq(bs, dlq, 1, 5))

    # Both brokers at once: each side's program waits out two quiet periods (nothing for a new
    # member, nothing in the DLQ topic) that need not queue behind the other side's.
    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(run, differential_pair.sides))
    for side, (seen, again, in_dlq) in zip(differential_pair.sides, outcomes, strict=True):
        assert seen == {(0, 0): ["REJECT"], (0, 1): ["REJECT"]}, (side.name, seen)
        assert again == {}, side.name
        assert in_dlq == [], side.name
