"""KIP-848 consumer groups driven synchronously: heartbeats in, epochs and assignments out.

The expected epochs, states and messages are what Kafka 4.4 answered to the same sequences
(probed with raw requests; tests/differential/test_consumer_groups.py replays them against
both brokers). Time is a ManualClock; timeouts run on ``run_due()``.
"""

from __future__ import annotations

import uuid

import pytest

from minibroker.coordinator.group import consumer_assignors as A
from minibroker.coordinator.group.consumer_group import ConsumerGroupError, TopicView
from minibroker.coordinator.group.consumer_member import ConsumerMember, MemberState, reconcile
from minibroker.coordinator.group.machine import GroupMachine
from minibroker.coordinator.group.model import GroupError, Offset
from minibroker.core.clock import ManualClock
from minibroker_protocol.errors import ErrorCode as E

from .test_group_state_machine import MemoryOffsetsTopic

T1, T2, T3 = (uuid.UUID(int=i) for i in (1, 2, 3))


class Topics:
    def __init__(self) -> None:
        self.by_name = {"t1": TopicView("t1", T1, 3), "t2": TopicView("t2", T2, 3)}

    def __call__(self):
        return list(self.by_name.values())


@pytest.fixture
def env():
    clock = ManualClock()
    topics = Topics()
    m = GroupMachine(MemoryOffsetsTopic(), clock=clock, data_dir="/nonexistent", topics=topics)
    return m, clock, topics


def hb(m, member, epoch=0, *, group="g", names=None, regex=None, owned=None, rebalance=None,
       instance=None, assignor=None, version=1):
    if epoch == 0:
        owned = {} if owned is None else owned
        rebalance = 60_000 if rebalance is None else rebalance
        if names is None and regex is None:
            names = ("t1",)
    return m.consumer_heartbeat(
        version=version, group_id=group, member_id=member, member_epoch=epoch,
        instance_id=instance, rebalance_timeout_ms=-1 if rebalance is None else rebalance,
        subscribed_names=names, subscribed_regex=regex, server_assignor=assignor, owned=owned,
        client_id="c", client_host="/127.0.0.1")


def parts(a):
    return None if a is None else {t: sorted(ps) for t, ps in a.items()}


def cg(m, group="g"):
    return m.consumer.describe(group)


def refused(fn, *a, **kw) -> ConsumerGroupError:
    with pytest.raises(ConsumerGroupError) as e:
        fn(*a, **kw)
    return e.value


# -- validation ------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, code, message", [
    (dict(group="", member="m"), E.invalid_request, "GroupId can't be empty."),
    (dict(member=""), E.invalid_request, "MemberId can't be empty."),
    (dict(member="m", rebalance=-1), E.invalid_request,
     "RebalanceTimeoutMs must be provided in first request."),
    (dict(member="m", epoch=-3), E.invalid_request, "MemberEpoch is invalid."),
    (dict(member="m", assignor="sticky"), E.unsupported_assignor,
     "ServerAssignor sticky is not supported. Supported assignors: uniform, range."),
    (dict(member="m", names=None, regex="("), E.invalid_regular_expression,
     "SubscribedTopicRegex `(` is not a valid regular expression: missing closing )."),
])
def test_invalid_heartbeats_are_refused_with_kafkas_message(env, kw, code, message):
    m, _, _ = env
    member = kw.pop("member")
    e = refused(hb, m, member, **kw)
    assert (e.code, e.message) == (code, message)


def test_join_needs_empty_owned_partitions_and_a_subscription(env):
    m, _, _ = env
    e = refused(m.consumer_heartbeat, version=1, group_id="g", member_id="m", member_epoch=0,
                rebalance_timeout_ms=1000, subscribed_names=("t1",), owned=None)
    assert e.message == "TopicPartitions must be empty when (re-)joining."
    e = refused(m.consumer_heartbeat, version=1, group_id="g", member_id="m", member_epoch=0,
                rebalance_timeout_ms=1000, owned={})
    assert e.message == ("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null "
                         "when (re-)joining.")


def test_unknown_group_and_member(env):
    m, _, _ = env
    e = refused(hb, m, "m1", 5, group="nogroup")
    assert (e.code, e.message) == (E.group_id_not_found, "Consumer group nogroup not found.")
    e = refused(hb, m, "m1", -1, group="nogroup")
    assert (e.code, e.message) == (E.group_id_not_found, "Group nogroup not found.")
    hb(m, "m1")
    e = refused(hb, m, "zz", 1)
    assert (e.code, e.message) == (E.unknown_member_id, "Member zz is not a member of group g.")


def test_v0_member_id_is_generated(env):
    m, _, _ = env
    a = hb(m, "", version=0)
    assert len(a.member_id) == 22 and a.member_epoch == 2


# -- epochs, assignment, reconciliation ----------------------------------------------------------
def test_two_members_rebalance_as_kafka_does(env):
    m, clock, _ = env
    a = hb(m, "m1")
    assert (a.member_epoch, parts(a.assignment)) == (2, {T1: [0, 1, 2]})
    b = hb(m, "m2")
    # within group.consumer.assignment.interval.ms of the last assignment: not recomputed yet
    assert (b.member_epoch, parts(b.assignment)) == (2, {})
    assert (cg(m).state, cg(m).group_epoch, cg(m).assignment_epoch) == ("Assigning", 3, 2)
    clock.advance(1300)
    r = hb(m, "m2", 2)
    assert (r.member_epoch, r.assignment) == (3, None)  # t1-2 is still m1's: unreleased
    assert (cg(m).state, cg(m).assignment_epoch) == ("Reconciling", 3)
    assert parts(cg(m).target["m2"]) == {T1: [2]}
    r = hb(m, "m1", 2)  # no owned list: it is told what it keeps
    assert (r.member_epoch, parts(r.assignment)) == (2, {T1: [0, 1]})
    assert cg(m).members["m1"].state == MemberState.UNREVOKED_PARTITIONS
    r = hb(m, "m1", 2, owned={T1: frozenset({0, 1, 2})})
    assert (r.member_epoch, r.assignment) == (2, None)  # still owns what it must revoke
    r = hb(m, "m1", 2, owned={T1: frozenset({0, 1})})
    assert (r.member_epoch, r.assignment) == (3, None)
    # the answer that moved m2 on may be lost: its previous epoch is accepted with owned partitions
    e = refused(hb, m, "m2", 2)
    assert e.code == E.fenced_member_epoch and "smaller member epoch (2)" in e.message
    r = hb(m, "m2", 3, owned={})
    assert (r.member_epoch, parts(r.assignment)) == (3, {T1: [2]})
    assert cg(m).state == "Stable"


def test_greater_epoch_is_fenced(env):
    m, _, _ = env
    hb(m, "m1")
    e = refused(hb, m, "m1", 3)
    assert e.message == ("The consumer group member has a greater member epoch (3) than the one "
                         "known by the group coordinator (2). The member must abandon all its "
                         "partitions and rejoin.")


def test_epoch_bumps(env):
    m, _, _ = env
    assert hb(m, "A", group="a").member_epoch == 2  # new group + subscription
    assert hb(m, "B", group="a", names=()).member_epoch == 2  # subscribes to nothing: no bump
    assert cg(m, "a").group_epoch == 2
    assert hb(m, "A", group="b", names=()).member_epoch == 1
    assert hb(m, "B", group="b", names=()).member_epoch == 1
    assert hb(m, "C", group="b").member_epoch == 2  # the first assignment with partitions: at once
    assert (cg(m, "b").state, cg(m, "b").assignment_epoch) == ("Reconciling", 2)
    assert hb(m, "A", group="c", names=("nosuch",)).member_epoch == 2


def test_leave_bumps_and_the_last_leave_empties(env):
    m, _, _ = env
    hb(m, "A")
    hb(m, "B")
    r = hb(m, "B", -1)
    assert (r.member_id, r.member_epoch, r.heartbeat_interval_ms, r.assignment) == ("B", -1, 0, None)
    assert (cg(m).state, cg(m).group_epoch, cg(m).assignment_epoch) == ("Assigning", 4, 2)
    hb(m, "A", -1)
    assert (cg(m).state, cg(m).group_epoch, cg(m).assignment_epoch) == ("Empty", 5, 5)
    e = refused(hb, m, "A", -1)
    assert e.code == E.unknown_member_id


def test_session_timeout_fences_a_silent_member(env):
    m, clock, _ = env
    hb(m, "A")
    clock.advance(44000)
    hb(m, "A", 2)
    hb(m, "B")
    clock.advance(44000)
    hb(m, "A", 2)
    clock.advance(2000)
    m.run_due()
    assert set(cg(m).members) == {"A"}
    assert cg(m).group_epoch == 4


def test_rebalance_timeout_fences_a_member_that_does_not_revoke(env):
    m, clock, _ = env
    hb(m, "A", rebalance=5_000)
    clock.advance(1500)
    hb(m, "B")
    r = hb(m, "A", 2)  # told to give up partitions
    assert cg(m).members["A"].state == MemberState.UNREVOKED_PARTITIONS and r.assignment
    clock.advance(4000)
    hb(m, "B", 3)
    m.run_due()
    assert "A" in cg(m).members
    clock.advance(1100)
    m.run_due()
    assert "A" not in cg(m).members


# -- static membership ------------------------------------------------------------------------------
def test_static_member_replaced_after_a_static_leave(env):
    m, _, _ = env
    s1 = hb(m, "s1", group="gs", instance="i1", names=("t1", "t2"), assignor="range")
    assert s1.member_epoch == 2
    e = refused(hb, m, "s2", group="gs", instance="i1", names=("t1", "t2"))
    assert (e.code, e.message) == (
        E.unreleased_instance_id, "Static member s2 with instance id i1 cannot join the group "
        "because the instance id is owned by s1 member.")
    assert hb(m, "s1", -2, group="gs", instance="i1").member_epoch == -2
    assert cg(m, "gs").state == "Reconciling"
    s2 = hb(m, "s2", group="gs", instance="i1", names=("t1", "t2"))
    assert (s2.member_epoch, parts(s2.assignment)) == (2, {T1: [0, 1, 2], T2: [0, 1, 2]})
    assert cg(m, "gs").state == "Stable"
    e = refused(hb, m, "s1", 2, group="gs", instance="i1")
    assert (e.code, e.message) == (E.fenced_instance_id,
                                   "Static member s1 with instance id i1 was fenced by member s2.")
    e = refused(hb, m, "s2", 2, group="gs", instance="i9")
    assert (e.code, e.message) == (E.unknown_member_id, "Instance id i9 is unknown.")
    for leave in (-1, -2):  # a leave checks the instance id as a heartbeat does
        e = refused(hb, m, "s1", leave, group="gs", instance="i1")
        assert (e.code, e.message) == (E.fenced_instance_id,
                                       "Static member s1 with instance id i1 was fenced by member s2.")
        e = refused(hb, m, "s2", leave, group="gs", instance="i9")
        assert (e.code, e.message) == (E.unknown_member_id, "Instance id i9 is unknown.")
    e = refused(hb, m, "s2", -2, group="gs")
    assert e.message == "InstanceId can't be null."


# -- regex -------------------------------------------------------------------------------------
def test_regex_resolves_at_the_next_heartbeat(env):
    m, clock, topics = env
    r = hb(m, "r1", group="gr", names=None, regex="t.*")
    assert (r.member_epoch, parts(r.assignment)) == (1, {})
    clock.advance(1200)
    r = hb(m, "r1", 1, group="gr")
    assert (r.member_epoch, parts(r.assignment)) == (2, {T1: [0, 1, 2], T2: [0, 1, 2]})
    # a new matching topic is picked up at the next heartbeat
    topics.by_name["t3"] = TopicView("t3", T3, 1)
    clock.advance(1200)
    r = hb(m, "r1", 2, group="gr")
    assert (r.member_epoch, parts(r.assignment)) == (3, {T1: [0, 1, 2], T2: [0, 1, 2], T3: [0]})
    assert "t3" in m.consumer.describe("gr").regex_topics["t.*"]


def test_regex_is_re2_and_matches_whole_names(env):
    m, _, _ = env
    e = refused(hb, m, "r", names=None, regex="(?<=a)b")
    assert e.code == E.invalid_regular_expression
    hb(m, "r", group="gx", names=None, regex="t")  # matches no topic: "t" is not "t1"
    hb(m, "r", 1, group="gx")
    assert m.consumer.describe("gx").regex_topics["t"] == frozenset()


# -- offsets ----------------------------------------------------------------------------------------
def test_offset_commit_and_fetch_check_the_member_epoch(env):
    m, _, _ = env
    hb(m, "A")
    off = {("t1", 0): Offset(5, -1, "", 0)}
    with pytest.raises(GroupError) as e:
        m.commit_offsets("g", 99, "A", None, off, api_version=9)
    assert e.value.code == E.stale_member_epoch
    with pytest.raises(GroupError) as e:
        m.commit_offsets("g", 2, "A", None, off, api_version=8)
    assert e.value.code == E.unsupported_version
    with pytest.raises(GroupError) as e:
        m.commit_offsets("g", -1, "", None, off, api_version=9)
    assert e.value.code == E.unknown_member_id
    m.commit_offsets("g", 2, "A", None, off, api_version=9)
    with pytest.raises(GroupError) as e:
        m.commit_offsets("fresh", 3, "A", None, off, api_version=9)
    assert e.value.code == E.group_id_not_found
    assert m.fetch_offsets("g", None, False)[1][0][2].offset == 5
    with pytest.raises(GroupError) as e:
        m.fetch_offsets("g", None, False, "A", 1)
    assert e.value.code == E.stale_member_epoch
    with pytest.raises(GroupError) as e:
        m.txn_commit_offsets("g", 7, 0, 1, "A", None, off)
    assert e.value.code == E.illegal_generation


def test_a_classic_join_meets_a_consumer_group(env):
    m, _, _ = env
    hb(m, "A")
    from .test_group_state_machine import join
    with pytest.raises(GroupError) as e:
        join(m, "g")
    assert e.value.code == E.inconsistent_group_protocol
    assert m.delete_group("g") == E.non_empty_group
    hb(m, "A", -1)
    assert m.delete_group("g") == E.none


# -- assignors and reconciliation, pure ---------------------------------------------------------
def _spec(mid, topics=(T1,), current=None, instance=None):
    return A.MemberSpec(mid, instance, frozenset(topics), current or {})


TOPICS = {T1: A.TopicSpec(T1, "t1", 5), T2: A.TopicSpec(T2, "t2", 2)}


def test_range_assigns_contiguous_ranges_static_members_first():
    out = A.assign("range", [_spec("b"), _spec("a"), _spec("z", instance="i0")], TOPICS)
    assert {m: parts(a) for m, a in out.items()} == {
        "z": {T1: [0, 1]}, "a": {T1: [2, 3]}, "b": {T1: [4]}}


def test_uniform_is_sticky_and_balanced():
    first = A.assign("uniform", [_spec("a", (T1, T2))], TOPICS)
    assert parts(first["a"]) == {T1: [0, 1, 2, 3, 4], T2: [0, 1]}
    second = A.assign("uniform", [_spec("a", (T1, T2), first["a"]), _spec("b", (T1, T2))], TOPICS)
    sizes = sorted(sum(len(p) for p in a.values()) for a in second.values())
    assert sizes == [3, 4]
    a_now = {(t, p) for t, ps in second["a"].items() for p in ps}
    a_before = {(t, p) for t, ps in first["a"].items() for p in ps}
    assert a_now <= a_before  # a only gives up partitions


def test_uniform_heterogeneous_covers_every_partition_once():
    out = A.assign("uniform", [_spec("a", (T1,)), _spec("b", (T1, T2)), _spec("c", (T2,))], TOPICS)
    owned = [(t, p) for a in out.values() for t, ps in a.items() for p in ps]
    assert sorted(owned) == sorted([(T1, p) for p in range(5)] + [(T2, p) for p in range(2)])
    assert all(t in {T1} for t in out["a"]) and all(t in {T2} for t in out["c"])


def test_reconcile_waits_for_revocation_then_moves_on():
    m = ConsumerMember("m", member_epoch=1, assigned={T1: frozenset({0, 1})})
    free = lambda t, p: -1  # noqa: E731
    step = reconcile(m, 2, {T1: frozenset({0})}, None, free)
    assert (step.state, step.member_epoch, parts(step.pending_revocation)) == (
        MemberState.UNREVOKED_PARTITIONS, 1, {T1: [1]})
    assert reconcile(step, 2, {T1: frozenset({0})}, {T1: frozenset({0, 1})}, free) is step
    done = reconcile(step, 2, {T1: frozenset({0})}, {T1: frozenset({0})}, free)
    assert (done.state, done.member_epoch, parts(done.assigned)) == (MemberState.STABLE, 2, {T1: [0]})
    held = reconcile(ConsumerMember("n", member_epoch=1), 2, {T1: frozenset({1})}, {},
                     lambda t, p: 1)
    assert (held.state, held.member_epoch, parts(held.assigned)) == (
        MemberState.UNRELEASED_PARTITIONS, 2, {})
