"""The virtual-broker model without I/O: placement, leaders through stops and moves, which
coordinator a request needs."""

from __future__ import annotations

import pytest

from minibroker.cluster import Cluster, ClusterError, coordinator_key
from minibroker_protocol.api_keys import ApiKey


def test_replicas_round_robin_and_leaders_spread():
    c = Cluster([1, 2, 3])
    c.set_replication("t", 3)
    replicas = [c.replicas("t", p) for p in range(3)]
    assert all(sorted(r) == [1, 2, 3] for r in replicas)
    assert {r[0] for r in replicas} == {1, 2, 3}
    assert c.replicas("t1", 0) == c.replicas("t1", 0)[:1]  # replication factor 1 by default


def test_stop_moves_leadership_and_start_does_not_move_it_back():
    c = Cluster([1, 2, 3])
    c.set_replication("t", 3)
    c.observe("t", 3)
    leader = c.leader("t", 0)
    moved = c.stop(leader)
    new = c.leader("t", 0)
    assert new != leader and moved and c.leader_epoch("t", 0) == 1
    assert leader not in c.isr("t", 0)
    c.start(leader)
    assert c.leader("t", 0) == new and leader in c.isr("t", 0)
    c.move_leader("t", 0, leader)
    assert c.leader("t", 0) == leader and c.leader_epoch("t", 0) == 2


def test_a_partition_without_replicas_up_has_no_leader():
    c = Cluster([1, 2])
    c.observe("solo", 2)
    node = c.leader("solo", 0)
    c.stop(node)
    assert c.leader("solo", 0) is None and c.not_leader(node, "solo", 0)


@pytest.mark.parametrize("op, words", [
    (lambda c: c.stop(9), "no broker 9"),
    (lambda c: c.start(1), "already up"),
    (lambda c: (c.stop(1), c.stop(1)), "already stopped"),
    (lambda c: (c.stop(1), c.stop(2)), "last one up"),
    (lambda c: c.move_leader("t", 0, 2) if c.replicas("t", 0) != [2] else c.move_leader("t", 0, 1),
     "is not a replica"),
])
def test_refusals_are_one_line(op, words):
    c = Cluster([1, 2])
    with pytest.raises(ClusterError) as info:
        op(c)
    assert words in str(info.value)


def test_replication_factors_survive_a_restart(tmp_path):
    Cluster([1, 2, 3], tmp_path).set_replication("t", 3)
    assert Cluster([1, 2, 3], tmp_path).replicas("t", 0).__len__() == 3


def test_which_coordinator_a_request_needs():
    class R:
        def __init__(self, **kw):
            self.__dict__.update(kw)
    assert coordinator_key(ApiKey.EndTxn, R(transactional_id="t")) == (1, "t")
    assert coordinator_key(ApiKey.AddPartitionsToTxn, R(v3_and_below_transactional_id="t")) == (1, "t")
    assert coordinator_key(ApiKey.InitProducerId, R(transactional_id=None)) is None  # idempotent only
    assert coordinator_key(ApiKey.TxnOffsetCommit, R(transactional_id="t", group_id="g")) == (0, "g")
    assert coordinator_key(ApiKey.OffsetFetch, R(groups=[R(group_id="g")])) == (0, "g")
    assert coordinator_key(ApiKey.Produce, R(transactional_id="t")) is None  # the partition leader's


def test_explicit_assignments_kept_in_order_saved_and_forgotten(tmp_path):
    from minibroker.cluster import manual_assignment_error

    c = Cluster([1, 2, 3], data_dir=tmp_path)
    c.set_replication("t", 2)
    c.assign("t", {0: [3, 1], 1: [2, 3]})
    assert c.replicas("t", 0) == [3, 1] and c.leader("t", 0) == 3
    assert len(c.replicas("t", 2)) == 2  # a partition not assigned is placed round-robin
    again = Cluster([1, 2, 3], data_dir=tmp_path)
    assert again.replicas("t", 1) == [2, 3]
    again.forget("t")
    assert Cluster([1, 2, 3], data_dir=tmp_path).assigned == {}
    # ReplicationControlManager.validateManualPartitionAssignment, in its order
    assert manual_assignment_error([], {1}) is not None
    assert "broker 9" in manual_assignment_error([9, 1], {1, 2})
    assert "more than once" in manual_assignment_error([2, 2], {1, 2})
    assert "2 replica(s)" in manual_assignment_error([1, 2], {1, 2}, factor=1)
    assert manual_assignment_error([2, 1], {1, 2}, factor=2) is None
