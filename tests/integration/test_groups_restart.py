"""Committed offsets and group state survive broker restarts (SIGTERM and kill -9).

- A group consumes part of a topic and commits; after each restart the committed offsets come
  back unchanged (AdminClient), the group is listed with its state and protocol type, its
  generation carries on, and a new member resumes exactly at the committed offsets.
- A live group keeps consuming through a SIGTERM restart and a kill -9 restart while a producer
  writes: every record is consumed, none twice except those whose commit the restart cut off.
"""

from __future__ import annotations

import time
from collections import defaultdict

from .clients import create_topic
from .test_groups_clients import (
    GROUP_BROKER_ARGS,
    PARTITIONS,
    ContinuousProducer,
    ThreadMember,
    cgmd_generation,
    check_group_consumption,
    committed_offsets,
    drain,
    group_id,
    member_conf,
    produce_values,
    wait_until,
)
from .test_txn_support import log_events


def consume_some(bootstrap: str, group: str, topic: str, limit: int | None, ends: dict[int, int],
                 start: dict[int, int] | None = None, timeout: float = 30.0):
    """One member of ``group`` reads until ``limit`` records (None: from ``start`` to every
    partition's end), commits what it read after each batch and closes:
    ({partition: [(offset, value)]}, generations)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(member_conf(bootstrap, group))
    got: dict[int, list] = defaultdict(list)
    gens: set[int] = set()
    c.subscribe([topic])
    try:
        deadline = time.monotonic() + timeout
        for _ in range(100_000):
            total = sum(map(len, got.values()))
            if limit is not None and total >= limit:
                break
            if limit is None and all((got[p][-1][0] + 1 if got[p] else max(start[p], 0)) == ends[p]
                                     for p in ends):
                break
            assert time.monotonic() < deadline, f"read {total} records in {timeout} s"
            msgs = c.consume(num_messages=30, timeout=0.2)
            if not msgs:
                continue
            gens.add(cgmd_generation(c.consumer_group_metadata()))
            upto = {}
            for m in msgs:
                assert m.error() is None, m.error()
                got[m.partition()].append((m.offset(), m.value()))
                upto[m.partition()] = m.offset() + 1
            c.commit(offsets=[TopicPartition(topic, p, o) for p, o in upto.items()], asynchronous=False)
    finally:
        c.close()
    return got, gens


def listed_group(bootstrap: str, group: str):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = admin.list_consumer_groups(request_timeout=10).result(timeout=15)
    found = [g for g in res.valid if g.group_id == group]
    assert len(found) == 1, [g.group_id for g in res.valid]
    return found[0]


def test_committed_offsets_and_generation_survive_sigterm_and_kill9(broker_factory, topic):
    from confluent_kafka import ConsumerGroupState

    b = broker_factory(GROUP_BROKER_ARGS)
    parts = 4
    create_topic(b.bootstrap_servers, topic, parts)
    values = {p: [f"r-{p}-{i}".encode() for i in range(60)] for p in range(parts)}
    produce_values(b.bootstrap_servers, topic, values)
    ends = {p: 60 for p in range(parts)}
    group = group_id("restart")
    phases = []

    first, gens1 = consume_some(b.bootstrap_servers, group, topic, 70, ends)
    phases.append(first)
    c1 = committed_offsets(b.bootstrap_servers, group, topic, range(parts))
    assert c1 == {p: (first[p][-1][0] + 1 if first[p] else c1[p]) for p in range(parts)}
    assert sum(v for v in c1.values() if v > 0) >= 70

    for graceful, limit in ((True, 70), (False, None)):
        before = [e for e in log_events(b, "group.join_completed") if e.get("group_id") == group]
        b.restart(graceful=graceful)
        loaded = log_events(b, "group.coordinator_loaded")[-1]
        assert int(loaded["groups"]) >= 1
        assert committed_offsets(b.bootstrap_servers, group, topic, range(parts)) == c1, \
            f"offsets changed by a {'SIGTERM' if graceful else 'kill -9'} restart"
        lg = listed_group(b.bootstrap_servers, group)
        assert (lg.state, lg.is_simple_consumer_group) == (ConsumerGroupState.EMPTY, False)
        # a new member resumes at the committed offsets, in a later generation
        got, gens = consume_some(b.bootstrap_servers, group, topic, limit, ends, start=c1)
        for p, recs in got.items():
            if not recs:
                continue
            assert recs[0][0] == max(c1[p], 0), f"partition {p} resumed at {recs[0][0]}, committed {c1[p]}"
        assert min(gens) > max(int(e["generation"]) for e in before), (gens, before[-1]["_line"])
        phases.append(got)
        c1 = committed_offsets(b.bootstrap_servers, group, topic, range(parts))

    assert c1 == ends
    for p in range(parts):
        read = [r for phase in phases for r in phase.get(p, [])]
        assert read == list(enumerate(values[p])), f"partition {p}: {[o for o, _ in read]}"


def test_live_group_consumes_through_restarts(broker_factory, topic):
    b = broker_factory(GROUP_BROKER_ARGS)
    create_topic(b.bootstrap_servers, topic, PARTITIONS)
    group = group_id("live-restart")
    prod = ContinuousProducer(b.bootstrap_servers, topic, rate=600)
    m1 = ThreadMember("m1", member_conf(b.bootstrap_servers, group), topic)
    m2 = ThreadMember("m2", member_conf(b.bootstrap_servers, group), topic)
    try:
        wait_until(lambda: len(m1.assignment()) == len(m2.assignment()) == PARTITIONS // 2, 30,
                   "3 partitions for each member")
        for graceful in (True, False):
            wait_until(lambda: m1.records() and m2.records(), 15, "both members to consume")
            b.restart(graceful=graceful)
            t = time.monotonic()
            wait_until(lambda: all(any(ev["t"] > t for ev in m.records()) for m in (m1, m2)), 30,
                       "both members to consume again after the restart")
            wait_until(lambda: len(m1.assignment()) + len(m2.assignment()) == PARTITIONS, 30,
                       "every partition assigned again")
        acked = prod.stop()
        drain([m1, m2], acked, timeout=40)
    finally:
        prod.stop_flag.set()
        for m in (m1, m2):
            m.stop_flag.set()
            m.thread.join(20)
    assert not m1.thread.is_alive() and not m2.thread.is_alive()
    check_group_consumption([m1, m2], acked, commits_may_fail=True)
