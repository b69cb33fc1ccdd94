"""Streams groups (KIP-1071) as Kafka 4.4 answers them: the same raw StreamsGroupHeartbeat (88),
StreamsGroupDescribe (89) and StreamsGroupTopologyDescriptionUpdate (93) requests to the
reference Kafka and to minibroker, answer by answer.

Answers are reduced to what a client reads: error codes and messages, member epochs, intervals,
statuses (code and detail), tasks, topology as described. Member and process ids are the test's
own, so the same on both sides; topic names are made per test with a prefix both share.

Epochs are compared where both brokers move them by the same rule (join, the initial delay,
internal topic creation); the assignment arrives after ``streams.initial.rebalance.delay.ms``
(3 s, Kafka's default on both), so a test heartbeats each side until its tasks arrive (bounded)
and compares where both ended.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
import uuid

import pytest

from minibroker_protocol.build import build, nested
from minibroker_protocol.codec import request_type
from tests.reference.client import part, req

HEARTBEAT, DESCRIBE, DESCRIPTION_UPDATE = 88, 89, 93


def _uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Script:
    def __init__(self, pair, version: int = 1, partitions: int = 2,
                 internal_topics_exist: bool = False) -> None:
        self.pair = pair
        self.version = version
        self.app = _uid("sapp")
        self.source = f"{self.app}-in"
        # Kafka may bump the group epoch once per internal topic it created, as its metadata
        # image sees them (divergences.py): after a creation, epochs are left out of comparisons
        self.mask_epochs = False
        made = [f"{self.app}-store-changelog", f"{self.app}-rep"] if internal_topics_exist else []
        pair.create_topics([self.source, *made], partitions)
        pair.find_coordinators(self.app, [])
        self.process = str(uuid.uuid4())

    def both(self, what: str, make, reduce):
        answers = [reduce(self.call(s, make(s))) for s in self.pair.sides]
        k, m = answers
        assert k == m, f"{what}:\n  Kafka:      {k}\n  minibroker: {m}"
        return k

    @staticmethod
    def call(s, entity):
        """One request; a coordinator still loading (Kafka, just after __consumer_offsets
        was made) is asked again, bounded."""
        for _ in range(40):
            r = s.call(entity)
            if getattr(r, "error_code", None) is None or r.error_code.name not in (
                    "coordinator_load_in_progress", "coordinator_not_available", "not_coordinator"):
                return r
            time.sleep(0.5)
        return r

    def n(self, cls_name: str, /, **kw):
        return build(nested(request_type(HEARTBEAT, self.version), cls_name), **kw)

    def topology(self, *, changelog: bool = True, source: str | None = None, epoch: int = 0):
        src = source or self.source
        info = self.n("TopicInfo", name=f"{self.app}-store-changelog", partitions=0,
                      replication_factor=0,
                      topic_configs=(self.n("KeyValue", key="cleanup.policy", value="compact"),))
        return self.n("Topology", epoch=epoch, subtopologies=(
            self.n("Subtopology", subtopology_id="0", source_topics=(src,), source_topic_regex=(),
                   state_changelog_topics=(info,) if changelog else (),
                   repartition_sink_topics=(f"{self.app}-rep",), repartition_source_topics=(),
                   copartition_groups=()),
            self.n("Subtopology", subtopology_id="1", source_topics=(), source_topic_regex=(),
                   state_changelog_topics=(),
                   repartition_sink_topics=(), copartition_groups=(),
                   repartition_source_topics=(self.n("TopicInfo", name=f"{self.app}-rep",
                                                     partitions=0, replication_factor=0,
                                                     topic_configs=()),)),
        ))

    def hb_request(self, member: str, epoch: int, *, group: str | None = None, topology=None,
                   owned=None, rebalance_ms: int | None = None, process: str | None = None,
                   instance: str | None = None):
        join = epoch == 0
        tasks = () if join else None
        others = () if join else None
        if owned is not None:
            tasks = tuple(self.n("TaskIds", subtopology_id=s, partitions=tuple(ps))
                          for s, ps in owned)
            others = ()
        return req(HEARTBEAT, self.version, group_id=self.app if group is None else group,
                   member_id=member, member_epoch=epoch, endpoint_information_epoch=0,
                   instance_id=instance,
                   rebalance_timeout=datetime.timedelta(
                       milliseconds=rebalance_ms if rebalance_ms is not None
                       else (30_000 if join else -1)),
                   topology=topology, active_tasks=tasks,
                   standby_tasks=others, warmup_tasks=others,
                   process_id=(process or self.process) if join else None, user_endpoint=None,
                   client_tags=() if join else None, task_offsets=None, task_end_offsets=None,
                   shutdown_application=False)

    def hb_reduce(self, r):
        def tasks(ts):
            return None if ts is None else sorted((t.subtopology_id, sorted(t.partitions)) for t in ts)
        return (r.error_code.name, r.error_message, None if self.mask_epochs else r.member_epoch,
                int(r.heartbeat_interval.total_seconds() * 1000),
                int(r.task_offset_interval.total_seconds() * 1000),
                int(r.acceptable_recovery_lag),
                getattr(r, "topology_description_required", None),
                None if r.status is None else [(s.status_code, s.status_detail) for s in r.status],
                tasks(r.active_tasks), tasks(r.standby_tasks), tasks(r.warmup_tasks),
                r.endpoint_information_epoch)

    def hb(self, what: str, member: str, epoch: int = 0, **kw):
        return self.both(what, lambda s: self.hb_request(member, epoch, **kw), self.hb_reduce)

    def until_assigned(self, member: str, epoch: int, want_tasks: int) -> tuple:
        """Heartbeat each side until its member holds ``want_tasks`` active tasks; compare the
        answers that brought them."""
        final = []
        for s in self.pair.sides:
            e = epoch
            owned: list = []
            deadline = time.monotonic() + 20
            for _ in range(100):
                r = self.call(s, self.hb_request(member, e, owned=owned))
                assert r.error_code == 0, (s.name, r.error_code.name, r.error_message)
                e = r.member_epoch
                if r.active_tasks is not None:
                    owned = [(t.subtopology_id, list(t.partitions)) for t in r.active_tasks]
                    if sum(len(t.partitions) for t in r.active_tasks) == want_tasks:
                        final.append((e, self.hb_reduce(r)))
                        break
                assert time.monotonic() < deadline, f"{s.name}: no tasks within 20 s"
                time.sleep(0.5)
        answers = [a for _e, a in final]
        assert answers[0] == answers[1], f"the assignment:\n  Kafka:      {answers[0]}\n  minibroker: {answers[1]}"
        return final[0][0], answers[0]

    def describe(self, what: str, groups: tuple[str, ...], *, include_description: bool = True):
        def make(s):
            return req(DESCRIBE, self.version, group_ids=groups, include_authorized_operations=False,
                       include_topology_description=include_description)

        def reduce(r):
            def a(x):
                return [sorted((t.subtopology_id, sorted(t.partitions)) for t in ts)
                        for ts in (x.active_tasks, x.standby_tasks, x.warmup_tasks)]
            out = []
            for g in r.groups:
                topo = None if g.topology is None else (g.topology.epoch, [
                    (st.subtopology_id, list(st.source_topics), list(st.repartition_sink_topics),
                     [(i.name, i.partitions, i.replication_factor,
                       [(kv.key, kv.value) for kv in i.topic_configs]) for i in st.state_changelog_topics],
                     [(i.name, i.partitions, i.replication_factor) for i in st.repartition_source_topics])
                    for st in g.topology.subtopologies])
                members = [(m.member_id, m.member_epoch, m.instance_id, m.rack_id, m.client_host,
                            m.topology_epoch, m.process_id, a(m.assignment), a(m.target_assignment),
                            m.is_classic) for m in sorted(g.members, key=lambda m: m.member_id)]
                if self.mask_epochs:
                    members = [(mid, None, *rest) for mid, _e, *rest in members]
                out.append((g.error_code.name, g.error_message, g.group_id, g.group_state,
                            None if self.mask_epochs else g.group_epoch,
                            None if self.mask_epochs else g.assignment_epoch, topo, members,
                            getattr(g, "topology_description_status", None),
                            getattr(g, "assignor_name", None)))
            return out

        return self.both(what, make, reduce)


@pytest.mark.parametrize("version", [0, 1])
def test_join_internal_topics_delay_assignment_describe_leave(differential_pair, version):
    sc = Script(differential_pair, version)
    m = str(uuid.uuid4())
    first = sc.hb("join", m, 0, topology=sc.topology())
    assert first[0] == "none" and first[2] == 1 and first[8] == []
    assert [c for c, _ in first[7]] == [5, 3]  # ASSIGNMENT_DELAYED, MISSING_INTERNAL_TOPICS
    sc.mask_epochs = True
    _epoch, final = sc.until_assigned(m, first[2], 4)
    assert final[8] == [("0", [0, 1]), ("1", [0, 1])] and final[7] == []
    desc = sc.describe("describe", (sc.app, "no-such-streams-group"))
    assert desc[0][3] == "Stable" and desc[1][0] == "group_id_not_found"
    sc.describe("describe without the topology description", (sc.app,), include_description=False)
    # the internal topics exist on both, with the computed partition counts
    for s in differential_pair.sides:
        md = s.call(req(3, 12, topics=None, allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False))
        counts = {t.name: len(t.partitions) for t in md.topics}
        assert counts.get(f"{sc.app}-store-changelog") == 2, (s.name, counts)
        assert counts.get(f"{sc.app}-rep") == 2, (s.name, counts)
    sc.hb("leave", m, -1)
    sc.describe("describe after the leave", (sc.app,))
    sc.both("delete the empty group", lambda s: req(42, 2, groups_names=(sc.app,)),
            lambda r: [(x.group_id, x.error_code.name) for x in r.results])
    sc.describe("describe after the delete", (sc.app,))


def test_refusals(differential_pair):
    sc = Script(differential_pair, 1)
    m = str(uuid.uuid4())
    sc.hb("empty group id", m, 0, group="", topology=sc.topology())
    sc.hb("null topology on join", m, 0, topology=None)
    sc.hb("missing rebalance timeout", m, 0, topology=sc.topology(), rebalance_ms=-1)
    sc.hb("unknown group, epoch 1", m, 1)
    sc.hb("bad epoch", m, -3, topology=sc.topology())
    first = sc.hb("join", m, 0, topology=sc.topology())
    sc.hb("unknown member", str(uuid.uuid4()), first[2])
    sc.hb("epoch ahead", m, first[2] + 5)
    sc.hb("leave of an unknown member", str(uuid.uuid4()), -1)
    sc.hb("another topology epoch", str(uuid.uuid4()), 0, topology=sc.topology(epoch=1))
    # (its statuses depend on whether Kafka's metadata shows the internal topics yet)
    sc.both("the group's topology epoch",
            lambda s: sc.hb_request(str(uuid.uuid4()), 0, topology=sc.topology()),
            lambda r: (r.error_code.name, r.error_message))
    sc.both("active tasks without standby and warm-up tasks",
            lambda s: dataclasses.replace(sc.hb_request(m, first[2], owned=[]), standby_tasks=None),
            sc.hb_reduce)


def test_missing_source_topic(differential_pair):
    sc = Script(differential_pair, 1)
    m = str(uuid.uuid4())
    missing = f"{sc.app}-nowhere"
    first = sc.hb("join with a missing source", m, 0, topology=sc.topology(source=missing))
    assert (1, f"Source topics {missing} are missing.") in first[7]
    sc.describe("describe not ready", (sc.app,))


def test_topology_description_update_and_listing(differential_pair):
    sc = Script(differential_pair, 1)
    m = str(uuid.uuid4())
    first = sc.hb("join", m, 0, topology=sc.topology())
    Q = request_type(DESCRIPTION_UPDATE, 0)
    node = build(nested(Q, "TopologyDescriptionNode"), name="KSTREAM-SOURCE-0000000000",
                 node_type=1, source_topics=(sc.source,), sink_topic=None, stores=(),
                 successors=())
    desc = build(nested(Q, "TopologyDescription"), global_stores=(), subtopologies=(
        build(nested(Q, "TopologyDescriptionSubtopology"), subtopology_id="0", nodes=(node,)),))
    for member, epoch in ((m, 0), ("someone-else", 0), (m, 7)):
        sc.both(f"93 from {member} at epoch {epoch}",
                lambda s, member=member, epoch=epoch: build(
                    Q, group_id=sc.app, member_id=member, topology_epoch=epoch,
                    topology_description=desc),
                lambda r: (r.error_code.name, r.error_message))
    sc.both("ListGroups v5 of streams groups",
            lambda s: req(16, 5, states_filter=(), types_filter=("streams",)),
            lambda r: [(g.protocol_type, g.group_state, g.group_type) for g in r.groups
                       if g.group_id == sc.app])
    for v in (5, 6):
        sc.both(f"DescribeGroups v{v} of a streams group",
                lambda s, v=v: req(15, v, groups=(sc.app,), include_authorized_operations=False),
                lambda r: [(g.error_code.name, getattr(g, "error_message", None), g.group_state,
                            g.protocol_type, len(g.members)) for g in r.groups])
    sc.both("a KIP-848 consumer's heartbeat into the streams group",
            lambda s: req(68, 1, group_id=sc.app, member_id="consumer-" + m[:8], member_epoch=0,
                          instance_id=None, rack_id=None,
                          rebalance_timeout=datetime.timedelta(seconds=30),
                          subscribed_topic_names=(sc.source,), subscribed_topic_regex=None,
                          server_assignor=None, topic_partitions=()),
            lambda r: (r.error_code.name, r.error_message))
    sc.both("a classic JoinGroup into the streams group",
            lambda s: req(11, 9, group_id=sc.app, session_timeout=datetime.timedelta(seconds=30),
                          rebalance_timeout=datetime.timedelta(seconds=30), member_id="",
                          group_instance_id=None, protocol_type="consumer",
                          protocols=(part((11, 9), "JoinGroupRequestProtocol", name="range",
                                          metadata=b""),), reason=None),
            lambda r: r.error_code.name)
    sc.hb("leave", m, -1)
    assert first[2] == 1


def test_offsets_delete_groups_and_a_second_member(differential_pair):
    """OffsetCommit v9 / OffsetFetch v9 at the member's epoch (StreamsGroup.validateOffsetCommit),
    DeleteGroups of a group with members, a second member of another process: its first answer,
    the first member's revocation, and the group's state after both settle."""
    sc = Script(differential_pair, 1, internal_topics_exist=True)
    m1, m2 = "member-one-" + uuid.uuid4().hex[:6], "member-two-" + uuid.uuid4().hex[:6]
    first = sc.hb("join", m1, 0, topology=sc.topology())
    assert [c for c, _ in first[7]] == [5]  # only ASSIGNMENT_DELAYED: nothing to create
    epoch, final = sc.until_assigned(m1, first[2], 4)
    assert epoch == final[2] == 2  # the join, the initial delay's bump

    def commit(member, e, v=9):
        return req(8, v, group_id=sc.app, generation_id_or_member_epoch=e, generation_id=e,
                   member_id=member, group_instance_id=None, retention_time_ms=-1, topics=(
                       part((8, v), "OffsetCommitRequestTopic", name=sc.source, partitions=(
                           part((8, v), "OffsetCommitRequestPartition", partition_index=0,
                                committed_offset=0, committed_leader_epoch=-1,
                                committed_metadata=""),)),))

    def commit_reduce(r):
        return [(t.name, p.partition_index, p.error_code.name) for t in r.topics for p in t.partitions]

    sc.both("commit at the member's epoch", lambda s: commit(m1, epoch), commit_reduce)
    sc.both("commit at a stale epoch", lambda s: commit(m1, epoch - 1), commit_reduce)
    sc.both("commit by a stranger", lambda s: commit("stranger", epoch), commit_reduce)
    sc.both("commit v7 by the member", lambda s: commit(m1, epoch, 7), commit_reduce)

    def fetch(member, e):
        return req(9, 9, groups=(part((9, 9), "OffsetFetchRequestGroup", group_id=sc.app,
                                      member_id=member, member_epoch=e, topics=None),),
                   require_stable=False)

    def fetch_reduce(r):
        return [(g.error_code.name, [(t.name, [(p.partition_index, p.committed_offset)
                                              for p in t.partitions]) for t in g.topics])
                for g in r.groups]

    sc.both("fetch at the member's epoch", lambda s: fetch(m1, epoch), fetch_reduce)
    sc.both("fetch at a stale epoch", lambda s: fetch(m1, epoch - 1), fetch_reduce)
    sc.both("delete a group with members", lambda s: req(42, 2, groups_names=(sc.app,)),
            lambda r: [(x.group_id, x.error_code.name) for x in r.results])
    second = sc.hb("a second member joins", m2, 0, topology=sc.topology(),
                   process=str(uuid.uuid4()))
    assert second[8] == []  # what it gets is still the first member's
    time.sleep(1.2)  # past streams.assignment.interval.ms (1 s): the next heartbeat assigns
    second = sc.hb("the second member after the assignment interval", m2, second[2], owned=[])
    owned = [(t[0], t[1]) for t in final[8]]
    revoking = sc.hb("the first member is told to revoke", m1, epoch, owned=owned)
    assert revoking[2] == epoch and sum(len(p) for _s, p in revoking[8]) == 2
    sc.hb("the first member revoked", m1, epoch, owned=revoking[8])
    sc.describe("describe while the second member catches up", (sc.app,))
    sc.hb("the first member leaves", m1, revoking[2] if revoking[2] != epoch else epoch + 1)


def test_shutdown_application(differential_pair):
    """A member asks the whole application to shut down (SHUTDOWN_APPLICATION): every member's
    next heartbeat carries the status."""
    sc = Script(differential_pair, 1, internal_topics_exist=True)
    a, b = "member-a-" + uuid.uuid4().hex[:6], "member-b-" + uuid.uuid4().hex[:6]
    ea = sc.hb("a joins", a, 0, topology=sc.topology())[2]
    eb = sc.hb("b joins", b, 0, topology=sc.topology())[2]
    sc.both("a asks for a shutdown",
            lambda s: dataclasses.replace(sc.hb_request(a, ea), shutdown_application=True),
            sc.hb_reduce)
    sc.hb("b hears of it", b, eb)
    sc.hb("a hears of it again", a, ea)


def test_user_endpoints(differential_pair):
    """Members with an application.server endpoint (interactive queries): the endpoint
    information epoch and the partitions each endpoint serves, as the heartbeat answers them."""
    sc = Script(differential_pair, 1, internal_topics_exist=True)
    m = "member-e-" + uuid.uuid4().hex[:6]

    def with_endpoint(member, epoch, info_epoch=0, owned=None):
        r = sc.hb_request(member, epoch, owned=owned)
        fields = {"endpoint_information_epoch": info_epoch}
        if epoch == 0:
            fields["user_endpoint"] = sc.n("Endpoint", host="app-host", port=8080)
        return dataclasses.replace(r, topology=sc.topology() if epoch == 0 else None, **fields)

    def reduce(r):
        eps = None if r.partitions_by_user_endpoint is None else [
            (e.user_endpoint.host, e.user_endpoint.port,
             sorted((t.topic, sorted(t.partitions)) for t in e.active_partitions),
             sorted((t.topic, sorted(t.partitions)) for t in e.standby_partitions))
            for e in r.partitions_by_user_endpoint]
        return sc.hb_reduce(r) + (eps,)

    first = sc.both("join with an endpoint", lambda s: with_endpoint(m, 0), reduce)
    answers = []
    for s in differential_pair.sides:
        e, info, owned = first[2], first[11], None
        deadline = time.monotonic() + 20
        for _ in range(60):
            r = sc.call(s, with_endpoint(m, e, info, owned))
            assert r.error_code == 0, (s.name, r.error_message)
            e, info = r.member_epoch, r.endpoint_information_epoch
            if r.active_tasks is not None:
                owned = [(t.subtopology_id, list(t.partitions)) for t in r.active_tasks]
            if r.partitions_by_user_endpoint and owned:
                answers.append(reduce(r))
                break
            assert time.monotonic() < deadline, f"{s.name}: no endpoint partitions within 20 s"
            time.sleep(0.5)
    assert answers[0] == answers[1], f"endpoints:\n  Kafka:      {answers[0]}\n  minibroker: {answers[1]}"
    sc.both("the same endpoint epoch again", lambda s: with_endpoint(m, answers[0][2], answers[0][11]),
            reduce)


def test_standby_replicas_from_the_group_config(differential_pair):
    """streams.num.standby.replicas = 1 set on the group (IncrementalAlterConfigs): two members of
    two processes each hold half the active tasks and, as standbys, the other half."""
    sc = Script(differential_pair, 1, internal_topics_exist=True)
    api = (44, 1)
    sc.both("streams.num.standby.replicas = 1",
            lambda s: req(44, 1, validate_only=False, resources=(
                part(api, "AlterConfigsResource", resource_type=32, resource_name=sc.app,
                     configs=(part(api, "AlterableConfig", name="streams.num.standby.replicas",
                                   config_operation=0, value="1"),)),)),
            lambda r: [(x.error_code.name, x.error_message) for x in r.responses])
    a, b = "member-a-" + uuid.uuid4().hex[:6], "member-b-" + uuid.uuid4().hex[:6]
    ea = sc.hb("a joins", a, 0, topology=sc.topology())[2]
    eb = sc.hb("b joins", b, 0, topology=sc.topology(), process=str(uuid.uuid4()))[2]
    held: dict[str, dict] = {}
    for s in differential_pair.sides:
        state = {a: [ea, []], b: [eb, []]}
        deadline = time.monotonic() + 30
        for _ in range(120):
            for member in (a, b):
                e, owned = state[member]
                r = sc.call(s, sc.hb_request(member, e, owned=owned))
                assert r.error_code == 0, (s.name, r.error_message)
                state[member][0] = r.member_epoch
                if r.active_tasks is not None:
                    state[member][1] = [(t.subtopology_id, list(t.partitions)) for t in r.active_tasks]
                    state[member].append(sorted((t.subtopology_id, sorted(t.partitions))
                                                for t in r.standby_tasks))
            g = sc.call(s, req(DESCRIBE, 1, group_ids=(sc.app,), include_authorized_operations=False,
                               include_topology_description=False)).groups[0]
            if g.group_state == "Stable" and all(m.assignment.standby_tasks for m in g.members):
                held[s.name] = {m.member_id: (
                    sorted((t.subtopology_id, sorted(t.partitions)) for t in m.assignment.active_tasks),
                    sorted((t.subtopology_id, sorted(t.partitions)) for t in m.assignment.standby_tasks))
                    for m in g.members}
                break
            assert time.monotonic() < deadline, f"{s.name}: not stable with standbys within 30 s"
            time.sleep(0.5)
    # Which member gets the lower partitions differs (Kafka walks hash maps, divergences.py):
    # compare what each member holds, by shape. Standbys only of the stateful subtopology (0).
    def shape(side: dict) -> list:
        out = []
        for active, standby in side.values():
            others = [a for a, _s in side.values() if a is not active][0]
            out.append(([(s, len(p)) for s, p in active], standby == [t for t in others if t[0] == "0"]))
        return sorted(out)
    assert shape(held["kafka"]) == shape(held["minibroker"]), held
    assert all(ok for _a, ok in shape(held["kafka"])), held


@pytest.mark.timeout(180)
def test_session_timeout_fences_a_silent_member(differential_pair):
    """A member that stops heartbeating is fenced after streams.session.timeout.ms (45 s, the
    smallest Kafka 4.4 allows); the one left gets every task. One wait serves both brokers."""
    sc = Script(differential_pair, 1, internal_topics_exist=True)
    a, b = "member-a-" + uuid.uuid4().hex[:6], "member-b-" + uuid.uuid4().hex[:6]
    ea = sc.hb("a joins", a, 0, topology=sc.topology())[2]
    eb = sc.hb("b joins", b, 0, topology=sc.topology(), process=str(uuid.uuid4()))[2]
    epochs = {s.name: ea for s in differential_pair.sides}
    owned: dict[str, list] = {s.name: [] for s in differential_pair.sides}
    until = time.monotonic() + 50
    for _ in range(40):  # only a heartbeats, every 2 s for 50 s
        for s in differential_pair.sides:
            r = sc.call(s, sc.hb_request(a, epochs[s.name], owned=owned[s.name]))
            assert r.error_code == 0, (s.name, r.error_message)
            epochs[s.name] = r.member_epoch
            if r.active_tasks is not None:
                owned[s.name] = [(t.subtopology_id, list(t.partitions)) for t in r.active_tasks]
        if time.monotonic() > until:
            break
        time.sleep(2)
    for s in differential_pair.sides:
        g = sc.call(s, req(DESCRIBE, 1, group_ids=(sc.app,), include_authorized_operations=False,
                           include_topology_description=False)).groups[0]
        assert [m.member_id for m in g.members] == [a], (s.name, g)
    sc.hb("b, fenced, heartbeats", b, eb)
    # the member left gets every task, on both
    for s in differential_pair.sides:
        for _ in range(40):
            if sum(len(p) for _s, p in owned[s.name]) == 4:
                break
            r = sc.call(s, sc.hb_request(a, epochs[s.name], owned=owned[s.name]))
            assert r.error_code == 0, (s.name, r.error_message)
            epochs[s.name] = r.member_epoch
            if r.active_tasks is not None:
                owned[s.name] = [(t.subtopology_id, list(t.partitions)) for t in r.active_tasks]
            time.sleep(0.5)
        assert sorted(owned[s.name]) == [("0", [0, 1]), ("1", [0, 1])], (s.name, owned)
