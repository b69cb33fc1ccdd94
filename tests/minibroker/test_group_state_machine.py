"""The group coordinator's core driven synchronously: no sockets, no loop, no sleeps.

Time is a ManualClock moved by hand; timeouts run when the test calls ``run_due()``;
answers to JoinGroup/SyncGroup calls that had to wait come out of ``take_answers()``.
``__consumer_offsets`` is an in-memory list of batches, or a real LogManager where the
test replays it.
"""

from __future__ import annotations

import pytest

from minibroker.coordinator.group.machine import GroupMachine
from minibroker.coordinator.group.membership import JOIN, SYNC, Waiting
from minibroker.coordinator.group.model import GroupError, Offset
from minibroker.coordinator.group.state import GroupState, IllegalTransition, transition
from minibroker.coordinator.group.store import BrokerOffsetsTopic
from minibroker.core.clock import ManualClock
from minibroker_protocol.errors import ErrorCode as E
from minibroker_protocol.topics import GROUP_METADATA_TOPIC
from minibroker_storage.config import LogConfig
from minibroker_storage.manager import LogManager

S = GroupState


class MemoryOffsetsTopic:
    """``__consumer_offsets`` as a list of appended batches (one partition)."""

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.end = 0

    def partition_for(self, group_id: str) -> int:
        return 0

    def append(self, partition: int, batch: bytes) -> int:
        base = self.end
        self.batches.append(batch)
        self.end += int.from_bytes(batch[23:27], "big") + 1  # last offset delta + 1
        return base

    def info(self):
        return None

    def log(self, partition: int):
        raise AssertionError("not replayed")


def machine(clock=None, *, delay_ms=0, topic=None, verify=None) -> GroupMachine:
    return GroupMachine(topic or MemoryOffsetsTopic(), clock=clock or ManualClock(),
                        data_dir="/nonexistent", verify_produce=verify,
                        initial_rebalance_delay_ms=delay_ms)


def join(m: GroupMachine, group="g", member_id="", *, instance=None, client="c",
         session_ms=10_000, rebalance_ms=5_000, protocols=(("range", b"meta"),),
         known_id_required=False):
    return m.join(group_id=group, member_id=member_id, instance_id=instance, client_id=client,
                  client_host="/127.0.0.1", session_timeout_ms=session_ms,
                  rebalance_timeout_ms=rebalance_ms, protocol_type="consumer",
                  protocols=list(protocols), require_known_member_id=known_id_required)


def sync(m: GroupMachine, gen, member_id, assignments=None, group="g", instance=None):
    return m.sync(group_id=group, generation=gen, member_id=member_id, instance_id=instance,
                  protocol_type="consumer", protocol_name="range",
                  assignments=assignments or {})


def answers(m: GroupMachine) -> dict:
    """{(kind, member id): answer} of the calls that waited."""
    return {(kind, mem.member_id): value for kind, mem, value in m.take_answers()}


def stable_one(m: GroupMachine, group="g", **kw) -> str:
    w = join(m, group, **kw)
    assert isinstance(w, Waiting)
    mid = w.member.member_id
    (ans,) = answers(m).values()
    assert ans["generation_id"] == 1 and ans["leader"] == mid
    assert isinstance(sync(m, 1, mid, {mid: b"A"}, group=group), Waiting)
    assert answers(m) == {(SYNC, mid): (b"A", "consumer", "range")}
    return mid


def stable_two(m: GroupMachine, clock: ManualClock, **kw) -> tuple[str, str, int]:
    a = stable_one(m, **kw)
    wb = join(m, **kw)
    b = wb.member.member_id
    assert m.groups["g"].state == S.PREPARING_REBALANCE and not answers(m)
    assert isinstance(join(m, member_id=a, **kw), Waiting)
    got = answers(m)
    assert got[(JOIN, a)]["generation_id"] == got[(JOIN, b)]["generation_id"] == 2
    assert [x[0] for x in got[(JOIN, a)]["members"]] == [a, b] and got[(JOIN, b)]["members"] == []
    sync(m, 2, b)
    sync(m, 2, a, {a: b"1", b: b"2"})
    assert answers(m) == {(SYNC, a): (b"1", "consumer", "range"),
                          (SYNC, b): (b"2", "consumer", "range")}
    return a, b, 2


# -- the state table ---------------------------------------------------------------------------

def test_states_carry_kafkas_names_and_valid_predecessors():
    # ClassicGroupState in Kafka's group-coordinator module
    assert [s.value for s in S] == ["Empty", "PreparingRebalance", "CompletingRebalance",
                                    "Stable", "Dead"]
    assert S.EMPTY.valid_previous == {S.PREPARING_REBALANCE}
    assert S.PREPARING_REBALANCE.valid_previous == {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}
    assert S.COMPLETING_REBALANCE.valid_previous == {S.PREPARING_REBALANCE}
    assert S.STABLE.valid_previous == {S.COMPLETING_REBALANCE}
    assert S.DEAD.valid_previous == set(S)
    assert S.STABLE == "Stable" and f"{S.STABLE}" == "Stable"


def test_an_illegal_transition_is_refused():
    class G:
        state = S.EMPTY
    with pytest.raises(IllegalTransition):
        transition(G, S.STABLE)
    transition(G, S.PREPARING_REBALANCE)
    assert G.state == S.PREPARING_REBALANCE


# -- join, sync, rebalance ------------------------------------------------------------------

def test_one_member_joins_and_syncs_and_the_group_is_persisted():
    topic = MemoryOffsetsTopic()
    m = machine(topic=topic)
    mid = stable_one(m)
    g = m.groups["g"]
    assert (g.state, g.generation, g.leader, g.protocol) == (S.STABLE, 1, mid, "range")
    assert g.members[mid].assignment == b"A" and g.persisted_value is not None
    assert len(topic.batches) == 1  # the Stable generation's GroupMetadataValue
    # a follower's (here: the leader's) second SyncGroup in Stable answers at once
    assert sync(m, 1, mid) == (b"A", "consumer", "range")


def test_join_errors_are_raised_not_answered():
    m = machine()
    with pytest.raises(GroupError) as e:
        join(m, session_ms=10)
    assert e.value.code == E.invalid_session_timeout
    with pytest.raises(GroupError) as e:
        join(m, member_id="nobody")
    assert e.value.code == E.unknown_member_id
    with pytest.raises(GroupError) as e:
        join(m, known_id_required=True)
    assert e.value.code == E.member_id_required and str(e.value).startswith("c-")
    assert not m.take_answers()


def test_a_new_member_rebalances_and_the_leader_gets_everyones_metadata():
    clock = ManualClock()
    m = machine(clock)
    a, b, gen = stable_two(m, clock)
    g = m.groups["g"]
    assert (g.state, g.generation, g.leader) == (S.STABLE, gen, a)


def test_heartbeat_during_a_rebalance_and_with_a_stale_generation():
    m = machine()
    a = stable_one(m)
    join(m)  # a newcomer
    with pytest.raises(GroupError) as e:
        m.heartbeat("g", 1, a, None)
    assert e.value.code == E.rebalance_in_progress
    with pytest.raises(GroupError) as e:
        m.heartbeat("g", 0, a, None)
    assert e.value.code == E.illegal_generation


def test_a_waiting_sync_fails_when_a_rebalance_starts():
    m = machine()
    clock = m.clock
    a, b, gen = stable_two(m, clock)
    join(m, member_id=a)  # the leader rejoins: PreparingRebalance
    join(m, member_id=b)  # both joined: CompletingRebalance, generation 3
    answers(m)
    assert isinstance(sync(m, gen + 1, b), Waiting)  # the follower waits for the leader
    m.leave("g", [(a, None)])
    got = answers(m)
    assert got[(SYNC, b)].code == E.rebalance_in_progress


def test_leaving_member_fails_its_pending_join():
    m = machine()
    a, b, gen = stable_two(m, m.clock)
    join(m, member_id=a)  # waits for b to rejoin
    assert m.leave("g", [(a, None)]) == [E.none]
    assert answers(m)[(JOIN, a)].code == E.unknown_member_id


# -- time ---------------------------------------------------------------------------------

def test_session_timeout_removes_a_silent_member():
    clock = ManualClock()
    m = machine(clock)
    a, b, gen = stable_two(m, clock)
    clock.advance(9_000)
    m.heartbeat("g", gen, a, None)
    assert m.run_due() == 0
    clock.advance(1_000)  # b's 10 s session ends
    m.run_due()
    g = m.groups["g"]
    assert b not in g.members and g.state == S.PREPARING_REBALANCE
    with pytest.raises(GroupError) as e:
        m.heartbeat("g", gen, a, None)
    assert e.value.code == E.rebalance_in_progress
    join(m, member_id=a)
    assert answers(m)[(JOIN, a)]["generation_id"] == gen + 1


def test_rebalance_timeout_drops_a_member_that_does_not_rejoin():
    clock = ManualClock()
    m = machine(clock)
    a, b, gen = stable_two(m, clock, session_ms=10_000, rebalance_ms=3_000)
    join(m, member_id=a, session_ms=10_000, rebalance_ms=3_000)
    clock.advance(2_999)
    with pytest.raises(GroupError):  # b heartbeats but does not rejoin
        m.heartbeat("g", gen, b, None)
    assert m.run_due() == 0 and not m.take_answers()
    clock.advance(1)
    m.run_due()
    got = answers(m)
    assert got[(JOIN, a)]["generation_id"] == gen + 1
    assert [x[0] for x in got[(JOIN, a)]["members"]] == [a]
    assert b not in m.groups["g"].members


def test_the_initial_delay_is_extended_once_per_newcomer_within_the_rebalance_timeout():
    clock = ManualClock()
    m = machine(clock, delay_ms=3_000)
    join(m, rebalance_ms=10_000)
    clock.advance(1_000)
    join(m, rebalance_ms=10_000)  # arrives during the delay: one more delay
    clock.advance(2_000)
    m.run_due()  # the first delay is over; extended by 3 s
    assert not m.take_answers() and m.groups["g"].state == S.PREPARING_REBALANCE
    clock.advance(2_999)
    m.run_due()
    assert not m.take_answers()
    clock.advance(1)
    m.run_due()
    got = answers(m)
    assert len(got) == 2 and {a["generation_id"] for a in got.values()} == {1}


def test_a_pending_member_id_expires_after_its_session_timeout():
    clock = ManualClock()
    m = machine(clock)
    a = stable_one(m)
    with pytest.raises(GroupError):
        join(m, session_ms=6_000, known_id_required=True)  # the client dies here
    join(m, member_id=a)  # the leader rejoins: the pending id is still expected
    assert not m.take_answers()
    clock.advance(6_000)
    m.run_due()
    assert answers(m)[(JOIN, a)]["generation_id"] == 2


def test_next_deadline_follows_heartbeats():
    clock = ManualClock()
    m = machine(clock)
    a = stable_one(m)
    assert m.next_deadline() == pytest.approx(clock.monotonic() + 10.0)
    clock.advance(4_000)
    m.heartbeat("g", 1, a, None)
    assert m.next_deadline() == pytest.approx(clock.monotonic() + 10.0)


# -- static members ------------------------------------------------------------------------

def test_static_member_rejoins_under_a_new_id_without_a_rebalance_and_the_old_id_is_fenced():
    m = machine()
    old = stable_one(m, instance="i-1")
    ans = join(m, instance="i-1")  # the same instance restarted: no member id
    assert isinstance(ans, dict) and ans["member_id"] != old and ans["generation_id"] == 1
    g = m.groups["g"]
    assert g.state == S.STABLE and g.static["i-1"] == g.leader == ans["member_id"]
    with pytest.raises(GroupError) as e:
        m.heartbeat("g", 1, old, "i-1")
    assert e.value.code == E.fenced_instance_id


def test_static_member_not_rejoined_stays_in_the_group():
    clock = ManualClock()
    m = machine(clock)
    s = stable_one(m, instance="keep", rebalance_ms=300)
    join(m, rebalance_ms=300)
    clock.advance(300)
    m.run_due()
    got = answers(m)
    (newcomer,) = [k[1] for k in got]
    assert s in m.groups["g"].members and newcomer in m.groups["g"].members


# -- offsets --------------------------------------------------------------------------------

def off(n: int) -> Offset:
    return Offset(n, -1, "", 1_700_000_000_000)


def test_offset_commit_generation_checks():
    m = machine()
    a, b, gen = stable_two(m, m.clock)

    def commit(gen_, member, instance=None):
        try:
            m.commit_offsets("g", gen_, member, instance, {("t", 0): off(5)})
        except GroupError as e:
            return e.code
        return E.none

    assert commit(gen, a) == E.none
    assert commit(gen - 1, a) == E.illegal_generation
    assert commit(gen, "stranger") == E.unknown_member_id
    assert commit(-1, "") == E.unknown_member_id  # a managed group, a non-member
    join(m, member_id=a)
    join(m, member_id=b)  # CompletingRebalance of generation gen + 1
    assert commit(gen + 1, a) == E.rebalance_in_progress
    # assign() consumers: a group with no members only stores offsets
    m.commit_offsets("solo", -1, "", None, {("t", 1): off(7)})
    assert [(t, p, o.offset, c) for t, p, o, c in m.fetch_offsets("solo", None, False)[1]] == [
        ("t", 1, 7, E.none)]


def test_txn_offsets_stay_pending_until_the_marker_and_a_newer_plain_commit_wins():
    topic = MemoryOffsetsTopic()
    m = machine(topic=topic)
    m.txn_commit_offsets("g", 42, 0, -1, "", None, {("t", 0): off(10), ("t", 1): off(11)})
    assert m.fetch_offsets("g", [("t", 0)], True)[1] == [("t", 0, None, E.unstable_offset_commit)]
    assert m.fetch_offsets("g", [("t", 0)], False)[1] == [("t", 0, None, E.none)]
    m.commit_offsets("g", -1, "", None, {("t", 1): off(20)})  # written after the txn's
    topic.log = lambda p: type("L", (), {"log_end_offset": topic.end})()
    m.on_marker(0, 42, True)
    got = {(t, p): o.offset for t, p, o, _ in m.fetch_offsets("g", None, True)[1]}
    assert got == {("t", 0): 10, ("t", 1): 20}


def test_txn_offset_commit_asks_the_transaction_coordinator():
    calls = []

    def verify(pid, epoch, topic, partition, add=False):
        calls.append((pid, epoch, topic, partition))
        return E.invalid_producer_epoch

    m = machine(verify=verify)
    assert m.verify_txn_producer("g", 7, 3) == E.invalid_producer_epoch
    assert calls == [(7, 3, GROUP_METADATA_TOPIC, 0)]


# -- replay -----------------------------------------------------------------------------------

def _real_topic(data_dir):
    logs = LogManager(data_dir, LogConfig())

    def internal_log(name, partition):
        if logs.topic(name) is None:
            logs.create_topic(name, 1, {"cleanup.policy": "compact"})
        return logs.get_log(name, partition)

    def partition_for(group_id):
        internal_log(GROUP_METADATA_TOPIC, 0)
        return 0

    return logs, BrokerOffsetsTopic(logs, internal_log, partition_for)


def test_load_replays_without_a_loop_and_loaded_members_expire_by_the_clock(tmp_path):
    logs, topic = _real_topic(tmp_path)
    clock = ManualClock()
    m = GroupMachine(topic, clock=clock, data_dir=tmp_path, initial_rebalance_delay_ms=0)
    a, b, gen = stable_two(m, clock)
    m.commit_offsets("g", gen, a, None, {("t", 0): off(3)})
    m.txn_commit_offsets("g", 9, 0, gen, a, None, {("t", 0): off(4)})
    logs.close_all()

    logs, topic = _real_topic(tmp_path)
    clock2 = ManualClock()
    m2 = GroupMachine(topic, clock=clock2, data_dir=tmp_path, initial_rebalance_delay_ms=0)
    m2.load()  # a plain function: this test has no event loop
    g = m2.groups["g"]
    assert (g.state, g.generation, set(g.members)) == (S.STABLE, gen, {a, b})
    assert g.offsets[("t", 0)].offset == 3 and 9 in g.txn_offsets
    clock2.advance(10_000)
    m2.run_due()
    assert not g.members and g.state == S.EMPTY and g.generation == gen + 1
    logs.close_all()


# -- the asyncio adapter ------------------------------------------------------------------------

async def test_the_adapter_answers_waiting_joins_when_the_manual_clock_moves():
    import asyncio

    from minibroker.coordinator.group.coordinator import GroupCoordinator

    clock = ManualClock()
    coord = GroupCoordinator(offsets_topic=MemoryOffsetsTopic(), data_dir="/nonexistent",
                             clock=clock, initial_rebalance_delay_ms=3_000)
    kw = dict(group_id="g", member_id="", instance_id=None, client_id="c", client_host="",
              session_timeout_ms=10_000, rebalance_timeout_ms=10_000, protocol_type="consumer",
              protocols=[("range", b"m")], require_known_member_id=False)
    first = asyncio.ensure_future(coord.join(**kw))
    await asyncio.sleep(0)
    assert not first.done()  # the initial delay runs on the manual clock, not the loop's
    clock.advance(3_000)
    coord.poll()
    ans = await asyncio.wait_for(first, 1)
    assert ans["generation_id"] == 1 and ans["leader"] == ans["member_id"]
    assert await coord.sync(group_id="g", generation=1, member_id=ans["member_id"],
                            instance_id=None, protocol_type=None, protocol_name=None,
                            assignments={ans["member_id"]: b"x"}) == (b"x", "consumer", "range")
    assert coord.groups["g"].state == S.STABLE


def test_the_adapter_loads_without_a_loop_and_arms_its_timer_once_started(tmp_path):
    import asyncio

    from minibroker.coordinator.group.coordinator import GroupCoordinator

    logs, topic = _real_topic(tmp_path)
    m = GroupMachine(topic, data_dir=tmp_path, initial_rebalance_delay_ms=0)
    stable_one(m, session_ms=6_000)
    logs.close_all()

    logs, topic = _real_topic(tmp_path)
    coord = GroupCoordinator(offsets_topic=topic, data_dir=tmp_path)
    coord.load()  # no running loop here
    assert coord.groups["g"].state == S.STABLE and coord._timer is None

    async def started():
        coord.start()
        return coord._timer is not None

    assert asyncio.run(started())
    logs.close_all()


def test_deadlines_run_in_order_skip_cancelled_ones_and_compact():
    from minibroker.coordinator.timers import Deadlines

    clock = ManualClock()
    d = Deadlines(clock.monotonic)
    ran = []
    d.call_later(20, ran.append, "b")
    d.call_later(10, ran.append, "a")
    d.call_later(15, ran.append, "x").cancel()
    h = d.call_later(1_000, ran.append, "stale")
    for _ in range(200):  # as heartbeats replace a member's expiry
        h.cancel()
        h = d.call_later(1_000, ran.append, "stale")
    h.cancel()
    assert len(d._heap) < 100  # cancelled entries do not pile up
    assert d.next_at() == pytest.approx(clock.monotonic() + 0.010)
    clock.advance(20)
    assert d.run_due() == 2 and ran == ["a", "b"] and d.next_at() is None
