"""KIP-1071 streams groups driven synchronously: heartbeats in, epochs, statuses and tasks out.

Time is a ManualClock; timeouts run on ``run_due()``. The first heartbeat's answer (epoch 1, no
tasks, ASSIGNMENT_DELAYED and MISSING_INTERNAL_TOPICS with the topics named in that order) is
what Kafka 4.4 answered to the same request (tests/differential/test_streams_groups.py).
"""

from __future__ import annotations

import uuid

import pytest

from minibroker.coordinator.group import streams_assignor as sa
from minibroker.coordinator.group import streams_topology as st
from minibroker.coordinator.group.consumer_group import ConsumerGroupError, TopicView
from minibroker.coordinator.group.machine import GroupMachine
from minibroker.coordinator.group.model import GroupError, Offset
from minibroker.coordinator.group.streams_group import StreamsHeartbeat
from minibroker.core.clock import ManualClock
from minibroker_protocol.errors import ErrorCode as E

from .test_group_state_machine import MemoryOffsetsTopic


class Topics:
    def __init__(self) -> None:
        self.by_name: dict[str, TopicView] = {"in": TopicView("in", uuid.uuid4(), 2)}
        self.created: list[tuple[str, int, int, dict]] = []

    def __call__(self):
        return list(self.by_name.values())

    def create(self, name: str, partitions: int, rf: int, configs: dict) -> None:
        self.created.append((name, partitions, rf, configs))
        self.by_name[name] = TopicView(name, uuid.uuid4(), partitions)


TOPOLOGY = st.Topology(0, (
    st.Subtopology("0", source_topics=("in",), repartition_sink_topics=("rep",),
                   state_changelog_topics=(st.TopicInfo("store-changelog", 0, 0,
                                                        (("cleanup.policy", "compact"),)),)),
    st.Subtopology("1", repartition_source_topics=(st.TopicInfo("rep", 0, 0),)),
))


@pytest.fixture
def env():
    clock = ManualClock()
    topics = Topics()
    m = GroupMachine(MemoryOffsetsTopic(), clock=clock, data_dir="/nonexistent", topics=topics,
                     create_topic=topics.create)
    return m, clock, topics


def hb(m, member, epoch=0, *, process="p1", owned=None, topology=TOPOLOGY, **kw):
    join = epoch == 0
    return m.streams_heartbeat(StreamsHeartbeat(
        group_id=kw.pop("group", "g"), member_id=member, member_epoch=epoch,
        rebalance_timeout_ms=30_000 if join else -1, topology=topology if join else None,
        # the three task lists come together or not at all (Kafka refuses a mix)
        active=({} if join else owned), standby={} if join or owned is not None else None,
        warmup={} if join or owned is not None else None,
        process_id=process if join else None, **kw), client_id="c", client_host="/127.0.0.1")


def tasks(t):
    return None if t is None else {s: sorted(ps) for s, ps in t.items()}


def test_first_heartbeat_creates_internal_topics_then_delay_then_all_tasks(env):
    m, clock, topics = env
    a = hb(m, "m1")
    assert a.member_epoch == 1 and tasks(a.active) == {}
    assert a.statuses == (
        (st.ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance delay."),
        (st.MISSING_INTERNAL_TOPICS, "Internal topics are missing: store-changelog, rep"))
    # changelog: one partition per task of subtopology 0; repartition: its writer's sources
    assert topics.created == [("store-changelog", 2, 0, {"cleanup.policy": "compact"}),
                              ("rep", 2, 0, {})]
    assert (a.heartbeat_interval_ms, a.task_offset_interval_ms) == (5000, 60000)
    clock.advance(1000)
    a = hb(m, "m1", 1, owned=None)
    assert a.statuses[0][0] == st.ASSIGNMENT_DELAYED and a.active is None
    clock.advance(2500)
    a = hb(m, "m1", 1, owned=None)
    # epoch 3, as on Kafka 4.4: the join (1), the internal topics' creation (2), the initial
    # delay's own bump (3)
    assert a.statuses == () and a.member_epoch == 3
    assert tasks(a.active) == {"0": [0, 1], "1": [0, 1]}
    sg = m.streams.describe("g")
    assert (sg.state, sg.group_epoch, sg.assignment_epoch) == ("Stable", 3, 3)


def test_initial_delay_on_a_ready_topology_is_assigning_2_over_1(env):
    m, clock, topics = env
    topo = st.Topology(0, (st.Subtopology("0", source_topics=("in",)),))
    a = hb(m, "m1", topology=topo)
    assert (a.member_epoch, tasks(a.active)) == (1, {})
    sg = m.streams.describe("g")
    assert (sg.state, sg.group_epoch, sg.assignment_epoch) == ("Assigning", 2, 1)
    clock.advance(3000)
    a = hb(m, "m1", 1, owned=None)
    assert (a.member_epoch, tasks(a.active)) == (2, {"0": [0, 1]})


def _stable_one(m, clock):
    hb(m, "m1")
    clock.advance(3500)
    a = hb(m, "m1", 1, owned=None)
    return a.member_epoch


def test_second_member_gets_tasks_after_the_first_revokes(env):
    m, clock, _ = env
    e1 = _stable_one(m, clock)
    b = hb(m, "m2", process="p2")
    # within streams.assignment.interval.ms of the last assignment: held back
    assert b.statuses == ((st.ASSIGNMENT_DELAYED,
                           "Assignment delayed due to the configured assignment interval."),)
    clock.advance(1000)
    b = hb(m, "m2", b.member_epoch, owned={})
    epoch = m.streams.describe("g").assignment_epoch
    # m2's half is still m1's: nothing for m2 yet
    assert not b.active
    a = hb(m, "m1", e1, owned=None)
    assert a.member_epoch == e1  # revoking: the epoch waits
    kept = a.active
    assert sum(len(ps) for ps in kept.values()) == 2
    assert m.streams.describe("g").state == "Reconciling"
    a = hb(m, "m1", e1, owned=kept)
    assert a.member_epoch == epoch
    b = hb(m, "m2", epoch, owned={})
    got = {(s, p) for s, ps in b.active.items() for p in ps}
    assert got == {(s, p) for s in "01" for p in (0, 1)} - {(s, p) for s, ps in kept.items() for p in ps}
    assert m.streams.describe("g").state == "Stable"


def test_session_timeout_fences_and_moves_tasks(env):
    m, clock, _ = env
    _stable_one(m, clock)
    b = hb(m, "m2", process="p2")
    clock.advance(46_000)
    m.run_due()
    sg = m.streams.describe("g")
    assert set(sg.members) == set()  # both silent past 45 s
    b = hb(m, "m3", process="p3")
    assert b.member_epoch == sg.group_epoch
    assert tasks(b.active) == {"0": [0, 1], "1": [0, 1]}


def test_missing_source_topic_status_and_not_ready(env):
    m, clock, topics = env
    del topics.by_name["in"]
    a = hb(m, "m1")
    assert (st.MISSING_SOURCE_TOPICS, "Source topics in are missing.") in a.statuses
    assert m.streams.describe("g").state == "NotReady"
    assert topics.created == []


def test_validation_and_fencing_messages(env):
    m, clock, _ = env
    with pytest.raises(ConsumerGroupError) as e:
        hb(m, "m1", topology=None)
    assert (e.value.code, e.value.message) == (E.invalid_request,
                                               "Topology must be non-null when (re-)joining.")
    with pytest.raises(ConsumerGroupError) as e:
        hb(m, "", group="g")
    assert e.value.message == "MemberId can't be empty."
    with pytest.raises(ConsumerGroupError) as e:
        hb(m, "m1", 3, owned=None)
    assert e.value.code == E.group_id_not_found
    hb(m, "m1")
    with pytest.raises(ConsumerGroupError) as e:
        hb(m, "m1", 7, owned=None)
    assert e.value.code == E.fenced_member_epoch
    with pytest.raises(ConsumerGroupError) as e:
        hb(m, "zz", 1, owned=None)
    assert e.value.code == E.unknown_member_id
    with pytest.raises(ConsumerGroupError) as e:
        m.streams_heartbeat(StreamsHeartbeat(group_id="g", member_id="m1", member_epoch=1,
                                             active={}, standby=None, warmup=None))
    assert e.value.message == "If one task-type is non-null, all must be non-null."
    with pytest.raises(ConsumerGroupError) as e:
        hb(m, "m1", -3)
    assert e.value.message == "MemberEpoch is -3, but must be greater than or equal to -2."


def test_leave_bumps_epoch_and_offsets_follow_member_epochs(env):
    m, clock, _ = env
    e1 = _stable_one(m, clock)
    off = {("in", 0): Offset(5, -1, "", 0)}
    with pytest.raises(GroupError) as e:
        m.commit_offsets("g", e1 - 1, "m1", None, off, api_version=9)
    assert e.value.code == E.stale_member_epoch
    m.commit_offsets("g", e1, "m1", None, off, api_version=9)
    assert m.fetch_offsets("g", [("in", 0)], False)[1][0][2].offset == 5
    assert m.delete_group("g") == E.non_empty_group
    a = hb(m, "m1", -1)
    assert a.member_epoch == -1
    sg = m.streams.describe("g")
    assert sg.state == "Empty" and sg.group_epoch == e1 + 1
    assert m.delete_group("g") == E.none


def test_assignor_is_sticky_balanced_and_places_standbys_on_other_processes():
    tasks_ = {"0": 4, "1": 2}
    members = [sa.MemberSpec("a", "p1"), sa.MemberSpec("b", "p2"), sa.MemberSpec("c", "p2")]
    out = sa.assign(members, tasks_, num_standby=1)
    counts = sorted(len(sa.to_tasks(x.active)) for x in out.values())
    assert counts == [2, 2, 2]
    for mid, x in out.items():
        proc = {"a": "p1", "b": "p2", "c": "p2"}[mid]
        for t in sa.to_tasks(x.standby):
            owner = next(k for k, y in out.items() if t in sa.to_tasks(y.active))
            assert {"a": "p1", "b": "p2", "c": "p2"}[owner] != proc
    # a member that leaves: the others keep what they had
    again = sa.assign([sa.MemberSpec("a", "p1", sa.to_tasks(out["a"].active)),
                       sa.MemberSpec("b", "p2", sa.to_tasks(out["b"].active))], tasks_)
    assert sa.to_tasks(out["a"].active) <= sa.to_tasks(again["a"].active)
    assert sa.to_tasks(out["b"].active) <= sa.to_tasks(again["b"].active)


def test_copartitioning_and_repartition_counts():
    topo = st.Topology(0, (
        st.Subtopology("0", source_topics=("a", "b"), copartition_groups=(("a", "b"),),
                       repartition_sink_topics=("r",)),
        st.Subtopology("1", repartition_source_topics=(st.TopicInfo("r", 0, 0),)),
    ))
    bad = st.configure(topo, {"a": 2, "b": 3})
    assert bad.statuses[0] == (st.INCORRECTLY_PARTITIONED_TOPICS,
                               "Following topics do not have the same number of partitions: [a, b]")
    ok = st.configure(topo, {"a": 3, "b": 3})
    assert ok.tasks == {"0": 3, "1": 3} and ok.missing_internal == {"r": (3, 0, {})}
