"""Every assignor over the broker's classic group protocol: range, round-robin and
cooperative-sticky (KIP-429).

Incremental rebalancing is the clients' business: members rejoin with the
partitions they own in their subscription metadata, which the broker relays
untouched. With librdkafka's cooperative-sticky strategy the assign/revoke
callbacks carry only the partitions that move.
"""

from __future__ import annotations

import time

import pytest

from .clients import create_topic
from .test_groups_clients import (  # noqa: F401  (gbroker is a fixture)
    PARTITIONS,
    ContinuousProducer,
    ThreadMember,
    check_group_consumption,
    drain,
    gbroker,
    group_id,
    member_conf,
    wait_until,
)


def owned(member: ThreadMember) -> set[int]:
    parts: set[int] = set()
    for ev in member.snapshot():
        if ev["ev"] == "assign":
            parts |= set(ev["parts"])  # incremental under the cooperative protocol
        elif ev["ev"] == "revoke":
            parts -= set(ev["parts"])
        elif ev["ev"] == "closed":
            parts = set()
    return parts


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_assignors_share_and_hand_over(gbroker, topic, strategy):
    b = gbroker
    create_topic(b.bootstrap_servers, topic, PARTITIONS)
    group = group_id(strategy)
    conf = {"partition.assignment.strategy": strategy}
    prod = ContinuousProducer(b.bootstrap_servers, topic)
    members = [ThreadMember(f"k{i}", member_conf(b.bootstrap_servers, group, **conf), topic) for i in range(3)]
    try:
        wait_until(lambda: [len(owned(m)) for m in members] == [2, 2, 2], 30,
                   "2 partitions for each of 3 cooperative members")
        assert set().union(*(owned(m) for m in members)) == set(range(PARTITIONS))
        before = {m.name: owned(m) for m in members[:2]}
        members[2].stop()
        wait_until(lambda: sorted(len(owned(m)) for m in members[:2]) == [3, 3], 30,
                   "the two remaining members to own 3 partitions each")
        if strategy == "cooperative-sticky":
            for m in members[:2]:
                # sticky: nobody gave up a partition it owned, it only gained the leaver's
                assert before[m.name] <= owned(m), (m.name, before[m.name], owned(m))
        time.sleep(0.5)
        acked = prod.stop()
        drain(members, acked)
    finally:
        prod.stop_flag.set()
        for m in members:
            m.stop_flag.set()
            m.thread.join(20)
    assert len(acked) > 500
    check_group_consumption(members, acked, crashed=[])
