"""Reassignments in the virtual-broker model (AlterPartitionReassignments' effect): replicas move,
leaders follow, one that waits for a stopped broker is in progress until it starts, all kept in
cluster.json; the quorum epoch follows controller changes."""

from __future__ import annotations

from minibroker.cluster import Cluster


def _cluster(tmp_path=None) -> Cluster:
    c = Cluster([1, 2, 3], tmp_path)
    c.set_replication("t", 2)
    c.observe("t", 2)
    return c


def test_a_kept_leader_stays_and_a_removed_one_hands_over_to_the_first_new_replica():
    c = _cluster()
    leader = c.leader("t", 0)
    other = next(n for n in (1, 2, 3) if n != leader)
    c.reassign("t", 0, [other, leader])  # the leader is kept though it is not first
    assert c.replicas("t", 0) == [other, leader] and c.leader("t", 0) == leader
    assert c.leader_epoch("t", 0) == 0 and not c.ongoing()
    third = next(n for n in (1, 2, 3) if n not in (leader, other))
    c.reassign("t", 0, [third, other])  # leader removed: the first new replica up leads
    assert c.leader("t", 0) == third and c.leader_epoch("t", 0) == 1
    assert c.isr("t", 0) == [third, other]


def test_growing_and_shrinking_the_replicas():
    c = _cluster()
    c.reassign("t", 1, [3, 1, 2])
    assert c.replicas("t", 1) == [3, 1, 2] and c.isr("t", 1) == [3, 1, 2]
    c.reassign("t", 1, [2])
    assert c.replicas("t", 1) == [2] and c.leader("t", 1) == 2


def test_errors_in_kafkas_words():
    c = _cluster()
    assert c.reassignment_error("t", 0, [], True) == (
        "invalid_replica_assignment", "The manual partition assignment includes an empty replica list.")
    assert c.reassignment_error("t", 0, [1, 7], True) == (
        "invalid_replica_assignment",
        "The manual partition assignment includes broker 7, but no such broker is registered.")
    assert c.reassignment_error("t", 0, [2, 2], True) == (
        "invalid_replica_assignment", "The manual partition assignment includes the broker 2 more than once.")
    assert c.reassignment_error("t", 0, [1, 2, 3], False) == (
        "invalid_replication_factor", "The replication factor is changed from 2 to 3")
    assert c.reassignment_error("t", 0, [3, 1], False) is None
    c.stop(3)  # a stopped broker is still registered: a target may name it
    assert c.reassignment_error("t", 0, [3, 1], False) is None


def test_a_reassignment_to_a_stopped_broker_waits_for_it_and_can_be_cancelled(tmp_path):
    c = _cluster(tmp_path)
    before = c.replicas("t", 0)
    down = next(n for n in (1, 2, 3) if n not in before)
    c.stop(down)
    target = [down, before[0]]
    c.reassign("t", 0, target)
    replicas, adding, removing = c.ongoing()[("t", 0)]
    assert replicas == target + [n for n in before if n not in target]
    assert adding == [down] and removing == [n for n in before if n not in target]
    # kept across a restart, as Kafka's metadata log keeps it
    again = Cluster([1, 2, 3], tmp_path)
    assert again.ongoing() == c.ongoing()
    assert again.cancel_reassignment("t", 0) and not again.ongoing()
    assert again.replicas("t", 0) == before and not again.cancel_reassignment("t", 0)
    # the reassignment completes when the broker starts
    c.start(down)
    assert not c.ongoing() and c.replicas("t", 0) == target


def test_assignments_survive_a_restart_and_go_with_the_topic(tmp_path):
    c = _cluster(tmp_path)
    c.reassign("t", 1, [3, 2, 1])
    assert Cluster([1, 2, 3], tmp_path).replicas("t", 1) == [3, 2, 1]
    c.forget("t")
    assert Cluster([1, 2, 3], tmp_path).replicas("t", 1) == Cluster([1, 2, 3]).replicas("t", 1)


def test_the_quorum_epoch_counts_controller_changes():
    c = _cluster()
    assert c.quorum_epoch == 1 and c.controller() == 1
    c.stop(2)
    assert c.quorum_epoch == 1  # not the controller
    c.stop(1)
    assert c.controller() == 3 and c.quorum_epoch == 2
    c.start(1)
    assert c.controller() == 1 and c.quorum_epoch == 3
