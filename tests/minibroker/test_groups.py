"""The group coordinator over the wire (Kafka's classic protocol), against an in-process broker.

JoinGroup / SyncGroup / Heartbeat / LeaveGroup with their error codes, OffsetCommit and
OffsetFetch across versions, TxnOffsetCommit with require_stable, the admin APIs, and what
survives a restart. Members that block in JoinGroup/SyncGroup use their own connection and
run as tasks; every wait is bounded.

The tests at the end pin down deviations from Kafka's GroupCoordinator found (and fixed) while
writing these tests; each test names the Kafka behaviour expected.
"""

from __future__ import annotations

import asyncio
import datetime
import struct

import pytest
from kio.index import load_request_schema

from minibroker.app import start
from minibroker.config.options import Config, FsyncPolicy
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode as E

from . import requests as rq
from .conftest import RawClient
from .test_transactions import end_txn, init

MS = datetime.timedelta(milliseconds=1)


def cfg_for(tmp_path, **kw) -> Config:
    base = dict(port=0, data_dir=tmp_path / "data", fsync=FsyncPolicy("never"), num_partitions=4,
                group_initial_rebalance_delay_ms=0)
    base.update(kw)
    return Config(**base)


class Running:
    """An in-process broker plus the raw clients connected to it (closed together)."""

    def __init__(self, running) -> None:
        self.running = running
        self.clients: list[RawClient] = []

    @property
    def broker(self):
        return self.running.broker

    @property
    def coord(self):
        return self.running.broker.group_coordinator

    async def connect(self) -> RawClient:
        c = await RawClient.connect(self.running.port)
        self.clients.append(c)
        return c

    async def close(self) -> None:
        for c in self.clients:
            await c.close()
        self.clients.clear()
        await self.running.close()


@pytest.fixture
async def gb(tmp_path):
    r = Running(await start(cfg_for(tmp_path)))
    try:
        yield r
    finally:
        await r.close()


# -- request builders ------------------------------------------------------------------------

def subscription(*topics: str, userdata: bytes | None = None) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    if userdata is None:
        return out + struct.pack(">i", -1)
    return out + struct.pack(">i", len(userdata)) + userdata


def join_req(group, member_id="", *, v=9, instance=None, session_ms=10_000, rebalance_ms=5_000,
             ptype="consumer", protocols=(("range", b"meta"),)):
    cls = load_request_schema(11, v)
    P = nested(cls, "JoinGroupRequestProtocol")
    return build(cls, group_id=group, session_timeout=session_ms * MS, rebalance_timeout=rebalance_ms * MS,
                 member_id=member_id, group_instance_id=instance, protocol_type=ptype,
                 protocols=tuple(build(P, name=n, metadata=m) for n, m in protocols), reason=None)


def sync_req(group, gen, member_id, assignments=None, *, v=5, instance=None, ptype="consumer",
             pname="range"):
    cls = load_request_schema(14, v)
    A = nested(cls, "SyncGroupRequestAssignment")
    return build(cls, group_id=group, generation_id=gen, member_id=member_id,
                 group_instance_id=instance, protocol_type=ptype, protocol_name=pname,
                 assignments=tuple(build(A, member_id=m, assignment=a)
                                   for m, a in (assignments or {}).items()))


def hb_req(group, gen, member_id, *, v=4, instance=None):
    return rq.req(12, v, group_id=group, generation_id=gen, member_id=member_id,
                  group_instance_id=instance)


def leave_req(group, members, *, v=5):
    """members: [(member_id, instance_id)]; v0-2 take exactly one member id."""
    cls = load_request_schema(13, v)
    if v < 3:
        (mid, _iid), = members
        return build(cls, group_id=group, member_id=mid)
    M = nested(cls, "MemberIdentity")
    return build(cls, group_id=group, members=tuple(
        build(M, member_id=m, group_instance_id=i, reason=None) for m, i in members))


def commit_req(group, offsets, *, gen=-1, member="", instance=None, v=9):
    """offsets: {(topic, partition): (offset, leader_epoch, metadata)}."""
    cls = load_request_schema(8, v)
    T = nested(cls, "OffsetCommitRequestTopic")
    P = nested(cls, "OffsetCommitRequestPartition")
    by_topic: dict[str, list] = {}
    for (t, p), (off, epoch, meta) in offsets.items():
        by_topic.setdefault(t, []).append(build(
            P, partition_index=p, committed_offset=off, committed_leader_epoch=epoch,
            commit_timestamp=-1, committed_metadata=meta))
    return build(cls, group_id=group, generation_id_or_member_epoch=gen, member_id=member,
                 group_instance_id=instance, retention_time=datetime.timedelta(milliseconds=-1),
                 topics=tuple(build(T, name=t, partitions=tuple(ps)) for t, ps in by_topic.items()))


def commit_codes(resp) -> dict:
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def fetch_req(group, parts, *, v=7, stable=False):
    """parts: [(topic, partition)] or None (all committed offsets; v2+)."""
    cls = load_request_schema(9, v)
    if v >= 8:
        return fetch_groups_req([(group, parts)], v=v, stable=stable)
    T = nested(cls, "OffsetFetchRequestTopic")
    return build(cls, group_id=group, topics=_fetch_topics(T, parts), require_stable=stable)


def fetch_groups_req(groups, *, v=9, stable=False):
    cls = load_request_schema(9, v)
    G = nested(cls, "OffsetFetchRequestGroup")
    T = nested(cls, "OffsetFetchRequestTopics")
    return build(cls, require_stable=stable, groups=tuple(
        build(G, group_id=g, member_id=None, member_epoch=-1, topics=_fetch_topics(T, parts))
        for g, parts in groups))


def _fetch_topics(T, parts):
    if parts is None:
        return None
    by_topic: dict[str, list[int]] = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(p)
    return tuple(build(T, name=t, partition_indexes=tuple(ps)) for t, ps in by_topic.items())


def fetched(resp, group=None) -> dict:
    """{(topic, partition): (offset, leader_epoch, metadata, error)} of one group."""
    if hasattr(resp, "groups"):
        (g,) = [g for g in resp.groups if group is None or g.group_id == group]
        assert g.error_code == 0, g
        topics = g.topics
    else:
        assert getattr(resp, "error_code", 0) == 0, resp
        topics = resp.topics
    return {(t.name, p.partition_index): (p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                         p.metadata, p.error_code)
            for t in topics for p in t.partitions}


def txn_commit_req(tid, pid, epoch, group, offsets, *, gen=-1, member="", instance=None, v=3):
    cls = load_request_schema(28, v)
    T = nested(cls, "TxnOffsetCommitRequestTopic")
    P = nested(cls, "TxnOffsetCommitRequestPartition")
    by_topic: dict[str, list] = {}
    for (t, p), off in offsets.items():
        by_topic.setdefault(t, []).append(build(P, partition_index=p, committed_offset=off,
                                                committed_leader_epoch=-1,
                                                committed_metadata=f"txn-{off}"))
    return build(cls, transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
                 generation_id=gen, member_id=member, group_instance_id=instance,
                 topics=tuple(build(T, name=t, partitions=tuple(ps)) for t, ps in by_topic.items()))


def add_offsets_req(tid, pid, epoch, group, v=3):
    return rq.req(25, v, transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group)


def offset_delete_req(group, parts):
    cls = load_request_schema(47, 0)
    T = nested(cls, "OffsetDeleteRequestTopic")
    P = nested(cls, "OffsetDeleteRequestPartition")
    by_topic: dict[str, list] = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(build(P, partition_index=p))
    return build(cls, group_id=group, topics=tuple(build(T, name=t, partitions=tuple(ps))
                                                   for t, ps in by_topic.items()))


# -- membership helpers ----------------------------------------------------------------------

async def join(c: RawClient, group, member_id="", timeout=8.0, **kw):
    return await c.call(join_req(group, member_id, **kw), timeout=timeout)


async def join_new(c: RawClient, group, timeout=8.0, **kw):
    """A new dynamic member: MEMBER_ID_REQUIRED (v4+), then the real join (blocks until the
    rebalance completes)."""
    v = kw.get("v", 9)
    if v >= 4 and kw.get("instance") is None:
        first = await join(c, group, "", **kw)
        assert first.error_code == E.member_id_required, first
        assert first.member_id and first.generation_id == -1
        return await join(c, group, first.member_id, timeout=timeout, **kw)
    return await join(c, group, "", timeout=timeout, **kw)


def spawn(coro) -> asyncio.Task:
    return asyncio.ensure_future(coro)


async def settle(task, timeout=8.0):
    return await asyncio.wait_for(task, timeout)


async def until_state(gb, group, state, timeout=3.0):
    for _ in range(int(timeout / 0.01)):
        g = gb.coord.groups.get(group)
        if g is not None and g.state == state:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{group} not {state} within {timeout} s: {gb.coord.groups.get(group)}")


async def stable_group(gb, group, n=2, *, topics=("t",), **kw):
    """n dynamic members joined and synced (leader assigns b"a<i>"): [(client, member_id)], gen."""
    clients = [await gb.connect() for _ in range(n)]
    first = await join_new(clients[0], group, protocols=(("range", subscription(*topics)),), **kw)
    assert first.error_code == 0, first
    members = [first.member_id]
    gen = first.generation_id
    assert (await clients[0].call(sync_req(group, gen, first.member_id,
                                           {first.member_id: b"a0"}))).error_code == 0
    for i in range(1, n):
        # the newcomer's join waits for the others to rejoin
        new = spawn(join_new(clients[i], group, protocols=(("range", subscription(*topics)),), **kw))
        await until_state(gb, group, "PreparingRebalance")
        olds = [spawn(join(clients[j], group, members[j],
                           protocols=(("range", subscription(*topics)),), **kw)) for j in range(i)]
        answers = [await settle(t) for t in olds] + [await settle(new)]
        assert all(a.error_code == 0 for a in answers), answers
        members = [a.member_id for a in answers]
        gen = answers[0].generation_id
        leader = answers[0].leader
        syncs = [spawn(clients[j].call(sync_req(
            group, gen, members[j],
            {m: f"a{k}".encode() for k, m in enumerate(members)} if members[j] == leader else {})))
            for j in range(i + 1)]
        synced = [await settle(t) for t in syncs]
        assert all(s.error_code == 0 for s in synced), synced
    return list(zip(clients, members)), gen


# -- JoinGroup / SyncGroup -------------------------------------------------------------------

SYNC_VERSION_FOR_JOIN = {0: 0, 1: 1, 2: 1, 3: 2, 4: 2, 5: 3, 6: 4, 7: 5, 8: 5, 9: 5}


@pytest.mark.parametrize("v", range(10))
async def test_join_and_sync_one_member_every_version(gb, v):
    c = await gb.connect()
    group = f"g-join-v{v}"
    first = await join(c, group, v=v)
    if v >= 4:
        # KIP-394: a new member is handed its id first and must rejoin with it
        assert first.error_code == E.member_id_required
        assert first.member_id.startswith("raw-test-")
        assert gb.coord.groups[group].members == {}
        ans = await join(c, group, first.member_id, v=v)
        assert ans.member_id == first.member_id
    else:
        ans = first
    assert ans.error_code == 0 and ans.generation_id == 1
    assert ans.leader == ans.member_id
    assert ans.protocol_name == "range"
    if v >= 7:
        assert ans.protocol_type == "consumer"
    assert [(m.member_id, m.metadata) for m in ans.members] == [(ans.member_id, b"meta")]
    sv = SYNC_VERSION_FOR_JOIN[v]
    s = await c.call(sync_req(group, 1, ans.member_id, {ans.member_id: b"mine"}, v=sv))
    assert s.error_code == 0 and s.assignment == b"mine"
    if sv >= 5:
        assert (s.protocol_type, s.protocol_name) == ("consumer", "range")
    assert gb.coord.groups[group].state == "Stable"
    assert (await c.call(hb_req(group, 1, ans.member_id, v=min(v, 4)))).error_code == 0


async def test_two_members_rebalance_and_the_leader_assignment_reaches_the_follower(gb):
    group = "g-two"
    a, b = await gb.connect(), await gb.connect()
    ja = await join_new(a, group, protocols=(("range", b"A-range"), ("roundrobin", b"A-rr")))
    assert (ja.error_code, ja.generation_id) == (0, 1)
    assert (await a.call(sync_req(group, 1, ja.member_id, {ja.member_id: b"all"}))).assignment == b"all"

    # B arrives: its join waits in PreparingRebalance until A rejoins
    jb_task = spawn(join_new(b, group, protocols=(("roundrobin", b"B-rr"),)))
    await until_state(gb, group, "PreparingRebalance")
    assert not jb_task.done()
    hb = await a.call(hb_req(group, 1, ja.member_id))
    assert hb.error_code == E.rebalance_in_progress
    # a SyncGroup of the old generation during the rebalance
    assert (await a.call(sync_req(group, 1, ja.member_id, pname=None, ptype=None))).error_code == \
        E.rebalance_in_progress
    ja2 = await join(a, group, ja.member_id, protocols=(("range", b"A-range"), ("roundrobin", b"A-rr")))
    jb = await settle(jb_task)
    assert ja2.error_code == jb.error_code == 0
    assert ja2.generation_id == jb.generation_id == 2
    # the old leader stays leader; the only protocol both support wins
    assert ja2.leader == jb.leader == ja.member_id
    assert ja2.protocol_name == jb.protocol_name == "roundrobin"
    assert {m.member_id: m.metadata for m in ja2.members} == {ja.member_id: b"A-rr", jb.member_id: b"B-rr"}
    assert jb.members == ()

    # the follower's SyncGroup waits for the leader's assignment
    sb_task = spawn(b.call(sync_req(group, 2, jb.member_id, pname="roundrobin")))
    await asyncio.sleep(0.1)
    assert not sb_task.done()
    assert gb.coord.groups[group].state == "CompletingRebalance"
    sa = await a.call(sync_req(group, 2, ja.member_id, {ja.member_id: b"to-A", jb.member_id: b"to-B"},
                               pname="roundrobin"))
    sb = await settle(sb_task)
    assert (sa.error_code, sa.assignment) == (0, b"to-A")
    assert (sb.error_code, sb.assignment, sb.protocol_name) == (0, b"to-B", "roundrobin")
    # a late SyncGroup in Stable gets the stored assignment again
    again = await b.call(sync_req(group, 2, jb.member_id, pname="roundrobin"))
    assert (again.error_code, again.assignment) == (0, b"to-B")
    for cl, mid in ((a, ja.member_id), (b, jb.member_id)):
        assert (await cl.call(hb_req(group, 2, mid))).error_code == 0

    d = (await a.call(rq.req(15, 5, groups=(group,), include_authorized_operations=False))).groups[0]
    assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data) == (0, "Stable", "consumer", "roundrobin")
    assert {m.member_id: (m.member_assignment, m.member_metadata) for m in d.members} == {
        ja.member_id: (b"to-A", b"A-rr"), jb.member_id: (b"to-B", b"B-rr")}
    assert {m.client_id for m in d.members} == {"raw-test"}
    assert all(m.client_host == "/127.0.0.1" for m in d.members)


async def test_leader_sync_fills_missing_assignments_with_empty(gb):
    (pairs, gen) = await stable_group(gb, "g-missing", 2)
    # stable_group gave every member an assignment; a new rebalance where the leader skips one
    (ca, ma), (cb, mb) = pairs
    ta = spawn(join(ca, "g-missing", ma, protocols=(("range", subscription("t")),)))
    await until_state(gb, "g-missing", "PreparingRebalance")  # the leader's rejoin starts it
    tb = spawn(join(cb, "g-missing", mb, protocols=(("range", subscription("t")),)))
    ja, jb = await settle(ta), await settle(tb)
    leader = ja.leader
    lc, lm, fc, fm = (ca, ma, cb, mb) if leader == ma else (cb, mb, ca, ma)
    fs = spawn(fc.call(sync_req("g-missing", ja.generation_id, fm)))
    await asyncio.sleep(0.05)
    await lc.call(sync_req("g-missing", ja.generation_id, lm, {lm: b"x"}))
    assert (await settle(fs)).assignment == b""


async def test_join_errors(gb):
    c = await gb.connect()
    assert (await join(c, "")).error_code == E.invalid_group_id
    assert (await join(c, "g-err", session_ms=5_999)).error_code == E.invalid_session_timeout
    assert (await join(c, "g-err", session_ms=1_800_001)).error_code == E.invalid_session_timeout
    # an unknown member id, into a group that does not exist and into one that does
    assert (await join(c, "g-err", "nobody")).error_code == E.unknown_member_id
    assert (await join(c, "g-err", protocols=())).error_code == E.inconsistent_group_protocol
    ja = await join_new(c, "g-err")
    assert ja.error_code == 0
    assert (await join(c, "g-err", "nobody")).error_code == E.unknown_member_id
    # a new member whose protocol type or protocols do not fit the group's
    c2 = await gb.connect()
    r = await join(c2, "g-err", ptype="connect")
    assert r.error_code == E.inconsistent_group_protocol
    r = await join(c2, "g-err", protocols=(("roundrobin", b""),))
    assert r.error_code == E.inconsistent_group_protocol
    assert (await c.call(sync_req("g-err", 1, ja.member_id, {ja.member_id: b""}))).error_code == 0


async def test_sync_and_heartbeat_errors(gb):
    c = await gb.connect()
    ja = await join_new(c, "g-serr")
    mid, gen = ja.member_id, ja.generation_id
    assert (await c.call(sync_req("g-serr", gen, "nobody"))).error_code == E.unknown_member_id
    assert (await c.call(sync_req("g-nogroup", gen, mid))).error_code == E.unknown_member_id
    assert (await c.call(sync_req("g-serr", gen + 1, mid))).error_code == E.illegal_generation
    assert (await c.call(sync_req("g-serr", gen, mid, ptype="connect"))).error_code == \
        E.inconsistent_group_protocol
    assert (await c.call(sync_req("g-serr", gen, mid, pname="roundrobin"))).error_code == \
        E.inconsistent_group_protocol
    assert (await c.call(sync_req("g-serr", gen, mid, {mid: b"ok"}))).error_code == 0
    assert (await c.call(hb_req("g-serr", gen, "nobody"))).error_code == E.unknown_member_id
    assert (await c.call(hb_req("g-nogroup", gen, mid))).error_code == E.unknown_member_id
    assert (await c.call(hb_req("g-serr", gen + 1, mid))).error_code == E.illegal_generation
    assert (await c.call(hb_req("g-serr", gen - 1, mid))).error_code == E.illegal_generation
    for v in range(5):
        assert (await c.call(hb_req("g-serr", gen, mid, v=v))).error_code == 0


async def test_heartbeat_in_completing_rebalance_is_fine(gb):
    c = await gb.connect()
    ja = await join_new(c, "g-hbcr")
    assert gb.coord.groups["g-hbcr"].state == "CompletingRebalance"
    assert (await c.call(hb_req("g-hbcr", ja.generation_id, ja.member_id))).error_code == 0


async def test_leave_group_every_version_and_rebalance(gb):
    for v in range(6):
        group = f"g-leave-v{v}"
        pairs, gen = await stable_group(gb, group, 2)
        (ca, ma), (cb, mb) = pairs
        r = await ca.call(leave_req(group, [(ma, None)], v=v))
        if v >= 3:
            assert r.error_code == 0 and [(m.member_id, m.error_code) for m in r.members] == [(ma, 0)]
        else:
            assert r.error_code == 0
        g = gb.coord.groups[group]
        assert ma not in g.members
        # the remaining member learns of the rebalance and rejoins alone
        assert (await cb.call(hb_req(group, gen, mb))).error_code == E.rebalance_in_progress
        jb = await join(cb, group, mb, protocols=(("range", subscription("t")),))
        assert (jb.error_code, jb.generation_id, jb.leader) == (0, gen + 1, mb)
        r = await cb.call(leave_req(group, [(mb, None)], v=v))
        assert r.error_code == 0
        # the last member gone: Empty, one generation later
        assert (g.state, g.generation) == ("Empty", gen + 2)
        r = await cb.call(leave_req(group, [("nobody", None)], v=v))
        if v >= 3:
            assert [m.error_code for m in r.members] == [E.unknown_member_id]
        else:
            assert r.error_code == E.unknown_member_id


async def test_leaving_member_fails_the_pending_join_of_the_rebalance(gb):
    pairs, gen = await stable_group(gb, "g-leave-join", 2)
    (ca, ma), (cb, mb) = pairs
    ta = spawn(join(ca, "g-leave-join", ma, protocols=(("range", subscription("t")),)))
    await asyncio.sleep(0.05)
    # B leaves instead of rejoining: A's join completes at once, alone
    await cb.call(leave_req("g-leave-join", [(mb, None)]))
    ja = await settle(ta, 3)
    assert (ja.error_code, ja.generation_id, [m.member_id for m in ja.members]) == (0, gen + 1, [ma])


async def test_static_member_replaced_is_fenced(gb):
    group = "g-static"
    c1, c2, d = await gb.connect(), await gb.connect(), await gb.connect()
    await d.call(rq.create_topics([("t", 1, 1, None)]))
    # a static member joins without MEMBER_ID_REQUIRED
    s1 = await join(c1, group, instance="inst-1", protocols=(("range", subscription("t")),))
    assert (s1.error_code, s1.generation_id) == (0, 1)
    jd_task = spawn(join_new(d, group, protocols=(("range", subscription("t")),)))
    await until_state(gb, group, "PreparingRebalance")
    s1b = await join(c1, group, s1.member_id, instance="inst-1", protocols=(("range", subscription("t")),))
    jd = await settle(jd_task)
    assert s1b.generation_id == jd.generation_id == 2
    leader_c, leader_m = (c1, s1.member_id) if s1b.leader == s1.member_id else (d, jd.member_id)
    other_c, other_m = (d, jd.member_id) if leader_c is c1 else (c1, s1.member_id)
    inst = {s1.member_id: "inst-1"}
    ts = spawn(other_c.call(sync_req(group, 2, other_m, instance=inst.get(other_m))))
    await asyncio.sleep(0.05)
    await leader_c.call(sync_req(group, 2, leader_m, {s1.member_id: b"S", jd.member_id: b"D"},
                                 instance=inst.get(leader_m)))
    await settle(ts)
    g = gb.coord.groups[group]
    assert g.state == "Stable"

    # the same instance comes back (a restarted process): new member id, no rebalance
    s2 = await join(c2, group, instance="inst-1", protocols=(("range", subscription("t")),))
    assert s2.error_code == 0 and s2.member_id != s1.member_id
    assert s2.generation_id == 2 and g.state == "Stable" and g.generation == 2
    sync2 = await c2.call(sync_req(group, 2, s2.member_id, instance="inst-1"))
    assert (sync2.error_code, sync2.assignment) == (0, b"S")
    assert (await d.call(hb_req(group, 2, jd.member_id))).error_code == 0
    # the old incarnation is fenced everywhere
    assert (await c1.call(hb_req(group, 2, s1.member_id, instance="inst-1"))).error_code == E.fenced_instance_id
    assert (await c1.call(sync_req(group, 2, s1.member_id, instance="inst-1"))).error_code == E.fenced_instance_id
    r = await c1.call(commit_req(group, {("t", 0): (1, -1, "")}, gen=2, member=s1.member_id,
                                 instance="inst-1"))
    assert set(commit_codes(r).values()) == {E.fenced_instance_id}
    assert (await join(c1, group, s1.member_id, instance="inst-1",
                       protocols=(("range", subscription("t")),))).error_code == E.fenced_instance_id
    r = await c1.call(leave_req(group, [(s1.member_id, "inst-1")]))
    assert [m.error_code for m in r.members] == [E.fenced_instance_id]
    # the new incarnation commits and heartbeats fine
    r = await c2.call(commit_req(group, {("t", 0): (1, -1, "")}, gen=2, member=s2.member_id,
                                 instance="inst-1"))
    assert set(commit_codes(r).values()) == {0}
    assert (await c2.call(hb_req(group, 2, s2.member_id, instance="inst-1"))).error_code == 0
    # an administrative leave by instance id alone (member id "")
    r = await d.call(leave_req(group, [("", "inst-1")]))
    assert [m.error_code for m in r.members] == [0]
    assert s2.member_id not in g.members and "inst-1" not in g.static


async def test_session_timeout_and_rebalance_timeout_remove_members(gb, monkeypatch):
    import minibroker.coordinator.group.membership as cg
    monkeypatch.setattr(cg, "MIN_SESSION_TIMEOUT_MS", 100)
    pairs, gen = await stable_group(gb, "g-expire", 2, session_ms=600, rebalance_ms=600)
    (ca, ma), (cb, mb) = pairs
    g = gb.coord.groups["g-expire"]
    # A keeps heartbeating, B goes silent
    for _ in range(12):
        await asyncio.sleep(0.1)
        code = (await ca.call(hb_req("g-expire", gen, ma))).error_code
        if code == E.rebalance_in_progress:
            break
    assert code == E.rebalance_in_progress and mb not in g.members
    ja = await join(ca, "g-expire", ma, session_ms=600, rebalance_ms=600,
                    protocols=(("range", subscription("t")),))
    assert (ja.generation_id, [m.member_id for m in ja.members]) == (gen + 1, [ma])
    assert (await ca.call(sync_req("g-expire", gen + 1, ma, {ma: b"x"}))).error_code == 0

    # a rebalance where a member does not rejoin within the rebalance timeout
    cc = await gb.connect()
    jc_task = spawn(join_new(cc, "g-expire", session_ms=600, rebalance_ms=600,
                             protocols=(("range", subscription("t")),)))
    # A only heartbeats (does not rejoin): it is dropped when the rebalance timeout ends
    t0 = asyncio.get_running_loop().time()
    for _ in range(30):
        await asyncio.sleep(0.05)
        await ca.call(hb_req("g-expire", gen + 1, ma))
        if jc_task.done():
            break
    jc = await settle(jc_task, 3)
    assert jc.error_code == 0 and [m.member_id for m in jc.members] == [jc.member_id]
    assert jc.generation_id == gen + 2 and ma not in g.members
    assert asyncio.get_running_loop().time() - t0 < 2.0
    assert (await ca.call(hb_req("g-expire", gen + 1, ma))).error_code == E.unknown_member_id


async def test_initial_rebalance_delay_gathers_the_first_members(tmp_path):
    r = Running(await start(cfg_for(tmp_path, group_initial_rebalance_delay_ms=400)))
    try:
        a, b = await r.connect(), await r.connect()
        t0 = asyncio.get_running_loop().time()
        ta = spawn(join_new(a, "g-delay"))
        await asyncio.sleep(0.1)
        tb = spawn(join_new(b, "g-delay"))
        ja, jb = await settle(ta, 5), await settle(tb, 5)
        elapsed = asyncio.get_running_loop().time() - t0
        # both in the first generation, answered after the delay, which b's arrival during it
        # extended by one more delay (Kafka's InitialDelayedJoin): 0.4 + 0.4 s, not 0.4 s
        assert ja.generation_id == jb.generation_id == 1
        assert len(ja.members if ja.leader == ja.member_id else jb.members) == 2
        assert 0.75 <= elapsed < 4.0
    finally:
        await r.close()


async def test_initial_rebalance_delay_alone_is_not_extended(tmp_path):
    r = Running(await start(cfg_for(tmp_path, group_initial_rebalance_delay_ms=400)))
    try:
        a = await r.connect()
        t0 = asyncio.get_running_loop().time()
        ja = await settle(spawn(join_new(a, "g-delay-1")), 5)
        elapsed = asyncio.get_running_loop().time() - t0
        assert ja.generation_id == 1 and ja.leader == ja.member_id
        assert 0.35 <= elapsed < 0.75
    finally:
        await r.close()


async def test_initial_rebalance_delay_is_capped_by_the_rebalance_timeout(tmp_path):
    # Rebalance timeout 1 s, delay 0.4 s, a newcomer every 0.3 s: the delay is extended to 0.8 s
    # (remaining 0.6 -> 0.2) and then 1.0 s (remaining 0), and the first generation completes
    # there with the four members that arrived by then, however many keep coming.
    r = Running(await start(cfg_for(tmp_path, group_initial_rebalance_delay_ms=400)))
    try:
        clients = [await r.connect() for _ in range(6)]
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        done: dict[int, float] = {}

        async def member(i, c):
            j = await join_new(c, "g-delay-cap", rebalance_ms=1000)
            done[i] = loop.time() - t0
            return j

        tasks = []
        for i, c in enumerate(clients):
            tasks.append(spawn(member(i, c)))
            await asyncio.sleep(0.3)
        answers = [await settle(t, 8) for t in tasks]
        assert [j.generation_id for j in answers[:4]] == [1, 1, 1, 1]
        assert all(j.generation_id > 1 for j in answers[4:])
        assert 0.95 <= done[0] < 1.5, done
    finally:
        await r.close()


# -- OffsetCommit / OffsetFetch ---------------------------------------------------------------

async def test_offset_commit_fetch_round_trip_across_versions(gb):
    c = await gb.connect()
    await c.call(rq.create_topics([("oc-a", 3, 1, None), ("oc-b", 2, 1, None)]))
    for cv in range(2, 10):
        group = f"g-oc-v{cv}"
        offsets = {("oc-a", 0): (10 + cv, 5, f"meta-{cv}"), ("oc-a", 2): (20, 7, ""),
                   ("oc-b", 1): (0, -1, "x" * 100)}
        r = await c.call(commit_req(group, offsets, v=cv))
        assert commit_codes(r) == {tp: 0 for tp in offsets}
        for fv in range(1, 10):
            want = [("oc-a", 0), ("oc-a", 1), ("oc-a", 2), ("oc-b", 1)]
            got = fetched(await c.call(fetch_req(group, want, v=fv)))
            epoch_kept = cv >= 6 and fv >= 5  # leader epochs: OffsetCommit v6+, OffsetFetch v5+
            exp = {tp: (o, e if epoch_kept else -1, m, 0) for tp, (o, e, m) in offsets.items()}
            exp[("oc-a", 1)] = (-1, -1, "", 0)  # never committed
            assert got == exp, (cv, fv)
            if fv >= 2:
                # null topics: everything the group committed
                every = fetched(await c.call(fetch_req(group, None, v=fv)))
                assert every == {tp: x for tp, x in exp.items() if x[0] >= 0}, (cv, fv)


async def test_offset_fetch_batched_groups(gb):
    c = await gb.connect()
    await c.call(rq.create_topics([("ob", 2, 1, None)]))
    await c.call(commit_req("g-b1", {("ob", 0): (5, -1, "one")}))
    await c.call(commit_req("g-b2", {("ob", 1): (6, 3, "two")}))
    for v in (8, 9):
        resp = await c.call(fetch_groups_req([("g-b1", [("ob", 0), ("ob", 1)]), ("g-b2", None),
                                              ("g-none", [("ob", 0)])], v=v))
        assert [g.group_id for g in resp.groups] == ["g-b1", "g-b2", "g-none"]
        assert fetched(resp, "g-b1") == {("ob", 0): (5, -1, "one", 0), ("ob", 1): (-1, -1, "", 0)}
        assert fetched(resp, "g-b2") == {("ob", 1): (6, 3, "two", 0)}
        assert fetched(resp, "g-none") == {("ob", 0): (-1, -1, "", 0)}


async def test_simple_commits_and_commit_errors(gb):
    c = await gb.connect()
    await c.call(rq.create_topics([("sc", 2, 1, None)]))
    # generation -1, no member: a consumer using assign() only; the group is created Empty
    r = await c.call(commit_req("g-simple", {("sc", 0): (3, -1, "m"), ("sc", 1): (4, -1, None)}))
    assert set(commit_codes(r).values()) == {0}
    assert gb.coord.groups["g-simple"].state == "Empty"
    assert fetched(await c.call(fetch_req("g-simple", [("sc", 0), ("sc", 1)]))) == {
        ("sc", 0): (3, -1, "m", 0), ("sc", 1): (4, -1, "", 0)}
    # unknown topic / partition, too much metadata: per partition, the rest still commits
    r = await c.call(commit_req("g-simple", {("sc", 0): (8, -1, ""), ("sc", 7): (1, -1, ""),
                                             ("no-such-topic", 0): (1, -1, ""),
                                             ("sc", 1): (9, -1, "z" * 4097)}))
    assert commit_codes(r) == {("sc", 0): 0, ("sc", 7): E.unknown_topic_or_partition,
                               ("no-such-topic", 0): E.unknown_topic_or_partition,
                               ("sc", 1): E.offset_metadata_too_large}
    assert fetched(await c.call(fetch_req("g-simple", [("sc", 0), ("sc", 1)]))) == {
        ("sc", 0): (8, -1, "", 0), ("sc", 1): (4, -1, "", 0)}
    # a generation >= 0 for a group that does not exist: ILLEGAL_GENERATION before v9, then
    # GROUP_ID_NOT_FOUND (Kafka's OffsetMetadataManager.validateOffsetCommit)
    r = await c.call(commit_req("g-nonexistent", {("sc", 0): (1, -1, "")}, gen=3, member="m", v=8))
    assert set(commit_codes(r).values()) == {E.illegal_generation}
    r = await c.call(commit_req("g-nonexistent", {("sc", 0): (1, -1, "")}, gen=3, member="m"))
    assert set(commit_codes(r).values()) == {E.group_id_not_found}
    lst = await c.call(rq.req(16, 4, states_filter=()))
    assert ("g-simple", "", "Empty") in {
        (g.group_id, g.protocol_type, g.group_state) for g in lst.groups}


async def test_offset_commit_generation_checks(gb):
    await (await gb.connect()).call(rq.create_topics([("gc", 2, 1, None)]))
    pairs, gen = await stable_group(gb, "g-gen", 2)
    (ca, ma), (cb, mb) = pairs
    one = {("gc", 0): (1, -1, "")}

    async def code(c, **kw):
        return set(commit_codes(await c.call(commit_req("g-gen", one, **kw))).values())

    assert await code(ca, gen=gen, member=ma) == {0}
    assert await code(ca, gen=gen - 1, member=ma) == {E.illegal_generation}
    assert await code(ca, gen=gen + 1, member=ma) == {E.illegal_generation}
    assert await code(ca, gen=gen, member="nobody") == {E.unknown_member_id}
    # a "simple" commit into a group with members
    assert await code(ca) == {E.unknown_member_id}
    # PreparingRebalance: a member of the current generation may still commit
    cc = await gb.connect()
    tc = spawn(join_new(cc, "g-gen", protocols=(("range", subscription("t")),)))
    await until_state(gb, "g-gen", "PreparingRebalance")
    assert await code(ca, gen=gen, member=ma) == {0}
    ta = spawn(join(ca, "g-gen", ma, protocols=(("range", subscription("t")),)))
    tb = spawn(join(cb, "g-gen", mb, protocols=(("range", subscription("t")),)))
    answers = [await settle(t) for t in (ta, tb, tc)]
    assert {a.generation_id for a in answers} == {gen + 1}
    # CompletingRebalance: the new generation may not commit before it has its assignment
    assert gb.coord.groups["g-gen"].state == "CompletingRebalance"
    assert await code(ca, gen=gen + 1, member=ma) == {E.rebalance_in_progress}


async def test_offset_commit_v2_to_v9_generation_field(gb):
    await (await gb.connect()).call(rq.create_topics([("gv", 1, 1, None)]))
    pairs, gen = await stable_group(gb, "g-genv", 1)
    (c, m), = pairs
    for v in range(2, 10):
        r = await c.call(commit_req("g-genv", {("gv", 0): (v, -1, "")}, gen=gen, member=m, v=v))
        assert set(commit_codes(r).values()) == {0}, v
        r = await c.call(commit_req("g-genv", {("gv", 0): (v, -1, "")}, gen=gen + 5, member=m, v=v))
        assert set(commit_codes(r).values()) == {E.illegal_generation}, v


# -- transactional offsets --------------------------------------------------------------------

async def _txn_with_offsets(c, tid, group, offsets, **kw):
    r = await c.call(init(tid))
    pid, ep = r.producer_id, r.producer_epoch
    assert (await c.call(add_offsets_req(tid, pid, ep, group))).error_code == 0
    resp = await c.call(txn_commit_req(tid, pid, ep, group, offsets, **kw))
    return pid, ep, commit_codes(resp)


async def test_txn_offsets_pending_until_commit_marker(gb):
    c = await gb.connect()
    await c.call(rq.create_topics([("to", 3, 1, None)]))
    group = "g-txn"
    await c.call(commit_req(group, {("to", 0): (5, -1, "old"), ("to", 1): (6, -1, "old")}))
    pid, ep, codes = await _txn_with_offsets(c, "t-go", group, {("to", 0): (50), ("to", 1): (60)})
    assert set(codes.values()) == {0}
    parts = [("to", 0), ("to", 1), ("to", 2)]
    for v in (7, 8, 9):
        # require_stable: the partitions with pending offsets answer UNSTABLE_OFFSET_COMMIT
        got = fetched(await c.call(fetch_req(group, parts, v=v, stable=True)), group)
        assert got == {("to", 0): (-1, -1, "", E.unstable_offset_commit),
                       ("to", 1): (-1, -1, "", E.unstable_offset_commit),
                       ("to", 2): (-1, -1, "", 0)}, v
        # without it: the committed (old) offsets
        got = fetched(await c.call(fetch_req(group, parts, v=v)), group)
        assert got[("to", 0)][:3] == (5, -1, "old") and got[("to", 1)][:3] == (6, -1, "old")
    assert (await c.call(end_txn("t-go", pid, ep, True))).error_code == 0
    got = fetched(await c.call(fetch_req(group, parts, v=7, stable=True)))
    assert got == {("to", 0): (50, -1, "txn-50", 0), ("to", 1): (60, -1, "txn-60", 0),
                   ("to", 2): (-1, -1, "", 0)}

    # the next transaction aborts: the offsets stay those of the committed one
    assert (await c.call(add_offsets_req("t-go", pid, ep, group))).error_code == 0
    r = await c.call(txn_commit_req("t-go", pid, ep, group, {("to", 0): 99, ("to", 2): 98}))
    assert set(commit_codes(r).values()) == {0}
    assert fetched(await c.call(fetch_req(group, [("to", 2)], v=7, stable=True)))[("to", 2)][3] == \
        E.unstable_offset_commit
    assert (await c.call(end_txn("t-go", pid, ep, False))).error_code == 0
    got = fetched(await c.call(fetch_req(group, parts, v=7, stable=True)))
    assert got == {("to", 0): (50, -1, "txn-50", 0), ("to", 1): (60, -1, "txn-60", 0),
                   ("to", 2): (-1, -1, "", 0)}


@pytest.mark.parametrize("v", range(4))
async def test_txn_offset_commit_versions_and_errors(gb, v):
    c = await gb.connect()
    await c.call(rq.create_topics([("tv", 1, 1, None)]))
    group = f"g-txnv{v}"
    tid = f"t-v{v}"
    await c.call(init(tid))
    r = await c.call(init(tid))  # epoch 1, so that epoch 0 is a stale one
    pid, ep = r.producer_id, r.producer_epoch
    assert ep == 1
    # before AddOffsetsToTxn the offsets partition is not part of the transaction
    codes = commit_codes(await c.call(txn_commit_req(tid, pid, ep, group, {("tv", 0): 1}, v=v)))
    assert set(codes.values()) == {E.invalid_txn_state}
    assert (await c.call(add_offsets_req(tid, pid, ep, group))).error_code == 0
    codes = commit_codes(await c.call(txn_commit_req(tid, pid, ep, group, {("tv", 0): 7, ("tv", 3): 1}, v=v)))
    assert codes == {("tv", 0): 0, ("tv", 3): E.unknown_topic_or_partition}
    # a stale epoch: INVALID_PRODUCER_EPOCH at every version, as Kafka 4.4 answers
    # (tests/differential found that it does not send PRODUCER_FENCED here)
    codes = commit_codes(await c.call(txn_commit_req(tid, pid, ep - 1, group, {("tv", 0): 1}, v=v)))
    assert set(codes.values()) == {E.invalid_producer_epoch}
    assert (await c.call(end_txn(tid, pid, ep, True))).error_code == 0
    assert fetched(await c.call(fetch_req(group, [("tv", 0)], stable=True)))[("tv", 0)][:2] == (7, -1)


async def test_txn_offset_commit_generation_checks(gb):
    """KIP-447: TxnOffsetCommit v3 carries the consumer's generation and member id."""
    c = await gb.connect()
    await c.call(rq.create_topics([("tg", 1, 1, None)]))
    pairs, gen = await stable_group(gb, "g-txngen", 1)
    (_cm, m), = pairs
    r = await c.call(init("t-gen"))
    pid, ep = r.producer_id, r.producer_epoch
    assert (await c.call(add_offsets_req("t-gen", pid, ep, "g-txngen"))).error_code == 0

    async def code(**kw):
        return set(commit_codes(await c.call(txn_commit_req(
            "t-gen", pid, ep, "g-txngen", {("tg", 0): 3}, **kw))).values())

    assert await code(gen=gen + 1, member=m) == {E.illegal_generation}
    assert await code(gen=gen, member="zombie") == {E.unknown_member_id}
    assert await code(gen=gen, member=m) == {0}
    # without group metadata (v0-v2 style): accepted whatever the group's state
    assert await code() == {0}
    assert (await c.call(end_txn("t-gen", pid, ep, True))).error_code == 0


# -- admin ------------------------------------------------------------------------------------

async def test_list_describe_delete_groups(gb):
    c = await gb.connect()
    await c.call(rq.create_topics([("adm", 1, 1, None)]))
    pairs, gen = await stable_group(gb, "g-adm-stable", 1)
    await c.call(commit_req("g-adm-empty", {("adm", 0): (1, -1, "")}))
    cc = await gb.connect()
    jc = await join_new(cc, "g-adm-completing")
    assert jc.error_code == 0

    def listed(resp):
        return {g.group_id: (g.protocol_type, getattr(g, "group_state", None)) for g in resp.groups}

    every = listed(await c.call(rq.req(16, 5, states_filter=(), types_filter=())))
    assert every == {"g-adm-stable": ("consumer", "Stable"), "g-adm-empty": ("", "Empty"),
                     "g-adm-completing": ("consumer", "CompletingRebalance")}
    for v in range(4):
        assert set(listed(await c.call(rq.req(16, v)))) == set(every), v
    assert set(listed(await c.call(rq.req(16, 4, states_filter=("Stable", "Empty"))))) == {
        "g-adm-stable", "g-adm-empty"}
    assert set(listed(await c.call(rq.req(16, 4, states_filter=("stable",))))) == {"g-adm-stable"}
    assert listed(await c.call(rq.req(16, 4, states_filter=("Dead",)))) == {}
    assert set(listed(await c.call(rq.req(16, 5, states_filter=(), types_filter=("classic",))))) == set(every)
    assert listed(await c.call(rq.req(16, 5, states_filter=(), types_filter=("consumer",)))) == {}

    for v in range(6):
        d = await c.call(rq.req(15, v, groups=("g-adm-stable", "g-adm-completing", "g-adm-unknown"),
                                include_authorized_operations=False))
        st, comp, unknown = d.groups
        assert (st.error_code, st.group_state, st.protocol_data, len(st.members)) == (0, "Stable", "range", 1)
        assert st.members[0].member_assignment == b"a0"
        # not Stable: members without metadata or assignment, no protocol
        assert (comp.group_state, comp.protocol_data) == ("CompletingRebalance", "")
        assert [(m.member_metadata, m.member_assignment) for m in comp.members] == [(b"", b"")]
        assert (unknown.error_code, unknown.group_state, unknown.members) == (0, "Dead", ())

    r = await c.call(rq.req(42, 2, groups_names=("g-adm-stable", "g-adm-empty", "g-adm-unknown",
                                                 "g-adm-completing")))
    assert {x.group_id: x.error_code for x in r.results} == {
        "g-adm-stable": E.non_empty_group, "g-adm-empty": 0, "g-adm-unknown": E.group_id_not_found,
        "g-adm-completing": E.non_empty_group}
    assert fetched(await c.call(fetch_req("g-adm-empty", [("adm", 0)]))) == {("adm", 0): (-1, -1, "", 0)}
    assert "g-adm-empty" not in listed(await c.call(rq.req(16, 5, states_filter=(), types_filter=())))
    for v in (0, 1):
        r = await c.call(rq.req(42, v, groups_names=("g-adm-empty",)))
        assert r.results[0].error_code == E.group_id_not_found


async def test_offset_delete(gb):
    c = await gb.connect()
    await c.call(rq.create_topics([("od-sub", 2, 1, None), ("od-other", 2, 1, None)]))
    # an Empty group: everything may go
    await c.call(commit_req("g-od-empty", {("od-sub", 0): (1, -1, ""), ("od-other", 1): (2, -1, "")}))
    r = await c.call(offset_delete_req("g-od-empty", [("od-sub", 0), ("od-other", 0)]))
    assert r.error_code == 0
    assert {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions} == {
        ("od-sub", 0): 0, ("od-other", 0): 0}
    assert fetched(await c.call(fetch_req("g-od-empty", None))) == {("od-other", 1): (2, -1, "", 0)}
    # a group with a member subscribed to od-sub: only the other topic's offsets may go
    pairs, gen = await stable_group(gb, "g-od-live", 1, topics=("od-sub",))
    (cm, m), = pairs
    await cm.call(commit_req("g-od-live", {("od-sub", 0): (5, -1, ""), ("od-other", 0): (6, -1, "")},
                             gen=gen, member=m))
    r = await c.call(offset_delete_req("g-od-live", [("od-sub", 0), ("od-other", 0)]))
    assert r.error_code == 0
    assert {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions} == {
        ("od-sub", 0): E.group_subscribed_to_topic, ("od-other", 0): 0}
    assert fetched(await c.call(fetch_req("g-od-live", None))) == {("od-sub", 0): (5, -1, "", 0)}
    r = await c.call(offset_delete_req("g-od-unknown", [("od-sub", 0)]))
    assert r.error_code == E.group_id_not_found


# -- restart ------------------------------------------------------------------------------------

async def test_offsets_generation_and_txn_outcomes_survive_a_restart(tmp_path):
    cfg = cfg_for(tmp_path)
    r = Running(await start(cfg))
    try:
        c = await r.connect()
        await c.call(rq.create_topics([("rs", 3, 1, None)]))
        pairs, gen = await stable_group(r, "g-rs", 1)
        (cm, m), = pairs
        await cm.call(commit_req("g-rs", {("rs", 0): (11, 2, "kept")}, gen=gen, member=m))
        await c.call(commit_req("g-rs-simple", {("rs", 1): (12, -1, "simple")}))
        # a committed transaction, an aborted one, and one still open at the restart
        pid, ep, _ = await _txn_with_offsets(c, "t-rs1", "g-rs-txn", {("rs", 0): 100})
        assert (await c.call(end_txn("t-rs1", pid, ep, True))).error_code == 0
        await c.call(add_offsets_req("t-rs1", pid, ep, "g-rs-txn"))
        await c.call(txn_commit_req("t-rs1", pid, ep, "g-rs-txn", {("rs", 0): 200, ("rs", 1): 201}))
        assert (await c.call(end_txn("t-rs1", pid, ep, False))).error_code == 0
        pid2, ep2, codes = await _txn_with_offsets(c, "t-rs2", "g-rs-open", {("rs", 2): 300})
        assert set(codes.values()) == {0}
        # a deleted group stays deleted
        await c.call(commit_req("g-rs-deleted", {("rs", 0): (1, -1, "")}))
        assert (await c.call(rq.req(42, 2, groups_names=("g-rs-deleted",)))).results[0].error_code == 0
    finally:
        await r.close()

    r = Running(await start(cfg))
    try:
        c = await r.connect()
        assert fetched(await c.call(fetch_req("g-rs", [("rs", 0)]))) == {("rs", 0): (11, 2, "kept", 0)}
        assert fetched(await c.call(fetch_req("g-rs-simple", None))) == {("rs", 1): (12, -1, "simple", 0)}
        assert fetched(await c.call(fetch_req("g-rs-txn", [("rs", 0), ("rs", 1)], stable=True))) == {
            ("rs", 0): (100, -1, "txn-100", 0), ("rs", 1): (-1, -1, "", 0)}
        # the open transaction's offsets are still pending, and still resolved by its marker
        assert fetched(await c.call(fetch_req("g-rs-open", [("rs", 2)], stable=True)))[("rs", 2)][3] == \
            E.unstable_offset_commit
        assert (await c.call(end_txn("t-rs2", pid2, ep2, True))).error_code == 0
        assert fetched(await c.call(fetch_req("g-rs-open", [("rs", 2)], stable=True))) == {
            ("rs", 2): (300, -1, "txn-300", 0)}
        assert "g-rs-deleted" not in r.coord.groups
        # the group comes back as it was persisted (Kafka's onGroupLoaded): Stable, same
        # generation and members, whose heartbeats are expected from now on
        g = r.coord.groups["g-rs"]
        assert (g.state, g.generation, g.protocol_type) == ("Stable", gen, "consumer")
        assert list(g.members) == [m]
        j = await join_new(await r.connect(), "g-rs")
        assert j.generation_id == gen + 1
    finally:
        await r.close()


# -- behaviours once missed, pinned to Kafka's GroupCoordinator --------------------------------

async def test_txn_offset_commit_allowed_in_completing_rebalance(gb):
    c = await gb.connect()
    await c.call(rq.create_topics([("tcr", 1, 1, None)]))
    cm = await gb.connect()
    j = await join_new(cm, "g-tcr")
    assert gb.coord.groups["g-tcr"].state == "CompletingRebalance"
    r = await c.call(init("t-tcr"))
    pid, ep = r.producer_id, r.producer_epoch
    await c.call(add_offsets_req("t-tcr", pid, ep, "g-tcr"))
    codes = commit_codes(await c.call(txn_commit_req("t-tcr", pid, ep, "g-tcr", {("tcr", 0): 1},
                                                     gen=j.generation_id, member=j.member_id)))
    assert set(codes.values()) == {0}


async def test_static_rejoin_with_new_metadata_same_protocol_keeps_the_generation(gb):
    c1, c2 = await gb.connect(), await gb.connect()
    s = await join(c1, "g-static-meta", instance="i", protocols=(("range", subscription("t", userdata=b"1")),))
    await c1.call(sync_req("g-static-meta", s.generation_id, s.member_id, {s.member_id: b"A"}, instance="i"))
    s2 = await join(c2, "g-static-meta", instance="i", protocols=(("range", subscription("t", userdata=b"2")),))
    g = gb.coord.groups["g-static-meta"]
    assert (s2.error_code, s2.generation_id, g.state) == (0, s.generation_id, "Stable")


async def test_stable_group_members_survive_a_restart(tmp_path):
    cfg = cfg_for(tmp_path)
    r = Running(await start(cfg))
    try:
        pairs, gen = await stable_group(r, "g-members", 2)
        members = [m for _, m in pairs]
    finally:
        await r.close()
    r = Running(await start(cfg))
    try:
        c = await r.connect()
        codes = [(await c.call(hb_req("g-members", gen, m))).error_code for m in members]
        assert codes == [0, 0]
    finally:
        await r.close()


async def test_pending_member_expires_after_its_session_timeout(gb, monkeypatch):
    import minibroker.coordinator.group.membership as cg
    monkeypatch.setattr(cg, "MIN_SESSION_TIMEOUT_MS", 100)
    a, ghost = await gb.connect(), await gb.connect()
    ja = await join_new(a, "g-pending", session_ms=10_000, rebalance_ms=4_000)
    await a.call(sync_req("g-pending", 1, ja.member_id, {ja.member_id: b""}))
    first = await join(ghost, "g-pending", session_ms=200)
    assert first.error_code == E.member_id_required  # and the client dies here
    await asyncio.sleep(0.5)
    # the leader rejoins: nobody else is expected, the rebalance completes at once
    ans = await join(a, "g-pending", ja.member_id, session_ms=10_000, rebalance_ms=4_000, timeout=1.5)
    assert ans.error_code == 0 and ans.generation_id == 2


async def test_leader_join_retry_in_completing_rebalance_gets_the_same_generation(gb):
    c = await gb.connect()
    j = await join_new(c, "g-retry")
    again = await join(c, "g-retry", j.member_id, timeout=3)
    g = gb.coord.groups["g-retry"]
    assert (again.error_code, again.generation_id, g.state) == (0, j.generation_id, "CompletingRebalance")
    assert [m.member_id for m in again.members] == [j.member_id]


async def test_stale_generation_beats_rebalance_in_progress(gb):
    await (await gb.connect()).call(rq.create_topics([("sg", 1, 1, None)]))
    pairs, gen = await stable_group(gb, "g-stale", 1)
    (c, m), = pairs
    cc = await gb.connect()
    tc = spawn(join_new(cc, "g-stale"))
    await until_state(gb, "g-stale", "PreparingRebalance")
    hb = (await c.call(hb_req("g-stale", gen - 1, m))).error_code
    ta = spawn(join(c, "g-stale", m, protocols=(("range", subscription("t")),)))
    await settle(ta)
    await settle(tc)
    assert gb.coord.groups["g-stale"].state == "CompletingRebalance"
    oc = set(commit_codes(await c.call(commit_req("g-stale", {("sg", 0): (1, -1, "")},
                                                  gen=gen, member=m))).values())
    assert (hb, oc) == (E.illegal_generation, {E.illegal_generation})


async def test_empty_group_takes_the_protocol_type_of_its_next_member(gb):
    c = await gb.connect()
    j = await join_new(c, "g-ptype")
    await c.call(sync_req("g-ptype", 1, j.member_id, {j.member_id: b""}))
    await c.call(leave_req("g-ptype", [(j.member_id, None)]))
    assert gb.coord.groups["g-ptype"].state == "Empty"
    j2 = await join_new(c, "g-ptype", ptype="connect", protocols=(("default", b"w"),))
    assert (j2.error_code, j2.protocol_type) == (0, "connect")
    s = await c.call(sync_req("g-ptype", j2.generation_id, j2.member_id, {j2.member_id: b""},
                              ptype="connect", pname="default"))
    assert s.error_code == 0


async def test_txn_offsets_do_not_overwrite_a_newer_plain_commit(gb):
    c = await gb.connect()
    await c.call(rq.create_topics([("newer", 1, 1, None)]))
    pid, ep, codes = await _txn_with_offsets(c, "t-newer", "g-newer", {("newer", 0): 10})
    assert set(codes.values()) == {0}
    await c.call(commit_req("g-newer", {("newer", 0): (20, -1, "plain")}))
    assert (await c.call(end_txn("t-newer", pid, ep, True))).error_code == 0
    assert fetched(await c.call(fetch_req("g-newer", [("newer", 0)])))[("newer", 0)][0] == 20


async def test_replayed_marker_only_completes_its_own_offsets_partition(tmp_path):
    cfg = cfg_for(tmp_path, offsets_topic_partitions=2)
    r = Running(await start(cfg))
    try:
        b = r.broker
        groups = [f"g-part-{i}" for i in range(20)]
        g0 = next(g for g in groups if b.offsets_partition_for(g) == 0)
        g1 = next(g for g in groups if b.offsets_partition_for(g) == 1)
        c = await r.connect()
        await c.call(rq.create_topics([("rp", 1, 1, None)]))
        r1 = await c.call(init("t-part"))
        pid, ep = r1.producer_id, r1.producer_epoch
        # transaction 1 (aborted) commits offsets of the group on partition 1
        await c.call(add_offsets_req("t-part", pid, ep, g1))
        await c.call(txn_commit_req("t-part", pid, ep, g1, {("rp", 0): 1}))
        assert (await c.call(end_txn("t-part", pid, ep, False))).error_code == 0
        # transaction 2, still open at the restart, commits offsets of the group on partition 0
        await c.call(add_offsets_req("t-part", pid, ep, g0))
        await c.call(txn_commit_req("t-part", pid, ep, g0, {("rp", 0): 2}))
        assert fetched(await c.call(fetch_req(g0, [("rp", 0)], stable=True)))[("rp", 0)][3] == \
            E.unstable_offset_commit
    finally:
        await r.close()
    r = Running(await start(cfg))
    try:
        c = await r.connect()
        assert fetched(await c.call(fetch_req(g0, [("rp", 0)], stable=True)))[("rp", 0)][3] == \
            E.unstable_offset_commit
        assert (await c.call(end_txn("t-part", pid, ep, True))).error_code == 0
        assert fetched(await c.call(fetch_req(g0, [("rp", 0)])))[("rp", 0)][0] == 2
    finally:
        await r.close()


async def test_static_member_not_rejoined_stays_in_the_group(gb):
    s, d = await gb.connect(), await gb.connect()
    js = await join(s, "g-keep", instance="keep", session_ms=10_000, rebalance_ms=300)
    await s.call(sync_req("g-keep", 1, js.member_id, {js.member_id: b""}, instance="keep"))
    jd = await join_new(d, "g-keep", session_ms=10_000, rebalance_ms=300, timeout=3)
    assert jd.error_code == 0
    assert js.member_id in {m.member_id for m in (jd.members or ())} | (
        set(gb.coord.groups["g-keep"].members))
