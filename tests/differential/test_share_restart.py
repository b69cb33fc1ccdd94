"""Share-partition state across a kill -9 or a clean stop of the broker, Kafka 4.4 against minibroker
(docs/design/share-groups.md §9 case 12).

The session's shared reference Kafka cannot be restarted under the other differential tests, so
this test starts a private pair: its own Kafka (same settings, tests/reference/settings.py) and
its own minibroker, both stopped (SIGKILL, or SIGTERM) and started again on the same data. Compared
before and after: DescribeShareGroupOffsets (persisted start offset, Lag), then what a new
share session acquires: an acknowledged record is never delivered again, an archived one stays
archived, a record acquired but not acknowledged comes back with its last *persisted* delivery
count (acquisition writes nothing, SharePartition.java), a record never written about comes back
as new (count 1).
"""

from __future__ import annotations

import time

import pytest

from minibroker.testing.broker import MiniBroker
from tests.reference import settings
from tests.reference.client import Connection, part, req
from tests.reference.kafka import KafkaReference, KafkaUnavailable

from .pair import Pair
from .test_share_delivery import _fetch_collect, _opened
from .test_share_groups import DESCRIBE_OFFSETS, HEARTBEAT, TRACE, Script, _member, _uid

RETRIABLE = {"coordinator_load_in_progress", "coordinator_not_available", "not_coordinator",
             "not_leader_or_follower", "unknown_topic_or_partition"}


@pytest.fixture
def private_pair():
    kafka = KafkaReference(settings.kafka_properties(), classpath=settings.kafka_classpath())
    try:
        kafka.java()
    except KafkaUnavailable as e:
        pytest.skip(str(e))
    with kafka, MiniBroker(name="share-restart", **settings.minibroker_options()) as mb:
        pair = Pair(kafka.port, mb.port)
        _await_group_coordinator(pair)
        try:
            yield pair, kafka, mb
        finally:
            pair.close()


def _await_group_coordinator(pair: Pair) -> None:
    """A fresh Kafka answers COORDINATOR_LOAD_IN_PROGRESS until it has loaded __consumer_offsets:
    heartbeat a throwaway share group until it does not (bounded), then leave it."""
    group, member = _uid("warmup"), _member()
    pair.find_coordinators(group, [])  # makes __consumer_offsets
    deadline = time.monotonic() + 60
    for _ in range(600):
        r = pair.kafka.call(req(HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=0, rack_id=None,
                                subscribed_topic_names=("warmup",)))
        if r.error_code.name not in RETRIABLE:
            break
        assert time.monotonic() < deadline, r
        time.sleep(0.2)
    pair.kafka.call(req(HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=-1, rack_id=None,
                        subscribed_topic_names=None))


def _restart(pair: Pair, kafka: KafkaReference, mb: MiniBroker, kill: bool) -> None:
    # stopped with the connections open: a closed connection would release the member's
    # records first (ClientConnectionDisconnectListener), which is not what a crash does
    kafka.halt(kill=kill)
    mb.restart(graceful=not kill)
    pair.close()
    kafka.launch()
    kafka.wait_ready()
    pair.kafka.conn = Connection("127.0.0.1", kafka.port)
    pair.mini.conn = Connection("127.0.0.1", mb.port)


def _settled(s: Script, what: str, make, reduce, ok) -> object:
    """Ask each side until its answer is no longer a loading error (bounded), then compare."""
    answers = []
    for side in s.pair.sides:
        deadline = time.monotonic() + 60
        for _ in range(600):
            a = reduce(side, side.call(make(side)))
            if ok(a) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        answers.append(a)
    assert answers[0] == answers[1], f"{what}:\n  Kafka:      {answers[0]}\n  minibroker: {answers[1]}"
    if TRACE:
        print(f"{what}: {answers[0]}")
    return answers[0]


@pytest.mark.parametrize("kill", [True, False], ids=["kill-9", "sigterm"])
def test_restart_keeps_acknowledged_archived_and_persisted_counts(private_pair, kill):
    pair, kafka, mb = private_pair
    s = Script(pair)
    m = _member()
    epoch = _opened(s, m)
    s.produce(10)
    s.fetch("deliver 0-9", m, epoch, max_wait_ms=2000)
    s.ack("accept 0-2, release 3-4, reject 5-6", m, epoch + 1,
          {0: [(0, 6, [1, 1, 1, 2, 2, 3, 3])]})
    s.fetch("3-4 again (count 2, persisted as available with count 1); 7-9 still held", m, epoch + 2,
            max_wait_ms=2000)
    before = s.describe_offsets("before the restart")

    _restart(pair, kafka, mb, kill)

    def offsets_ok(a):
        return all(g[0] == "none" and all(p[3] not in RETRIABLE for p in g[1]) for g in a)

    def describe(side):
        base = (DESCRIBE_OFFSETS, 1)
        return req(DESCRIBE_OFFSETS, 1, groups=(part(
            base, "DescribeShareGroupOffsetsRequestGroup", group_id=s.group,
            topics=(part(base, "DescribeShareGroupOffsetsRequestTopic", topic_name=s.topic,
                         partitions=(0,)),)),))

    def reduce_offsets(side, r):
        return [(g.error_code.name, [(p.partition_index, p.start_offset, p.lag, p.error_code.name)
                                     for t in g.topics for p in t.partitions]) for g in r.groups]

    after = _settled(s, "DescribeShareGroupOffsets after the restart", describe, reduce_offsets, offsets_ok)
    assert after == before, (before, after)

    hb = _settled(s, "the member heartbeats after the restart",
                  lambda side: s.hb_request(m, s.epochs[side.name][m], names=None), s.hb_reduce,
                  lambda a: a[0] not in RETRIABLE)
    if hb[0] != "none":  # the member was forgotten: join again
        s.join_until_assigned(m, 1)
    got = _fetch_collect(s, m, (0, 1))
    # 3-4: persisted AVAILABLE with count 1, so acquired with 2; 7-9: never written, new
    assert got == [(3, 4, 2), (7, 9, 1)], got
    s.ack("accept what came back", m, 2, {0: [(3, 4, [1]), (7, 9, [1])]})
    s.fetch("nothing is left to deliver", m, 3)
    s.describe_offsets("all done after the restart")
