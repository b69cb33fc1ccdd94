"""KIP-848 consumer groups as Kafka 4.4 answers them: the same ConsumerGroupHeartbeat scripts,
step by step against both brokers (group.version 1 on both, the default of each).

Each step's answer is reduced to what a client reads — error code and message, member id and
epoch, heartbeat interval, the assignment by topic name (topic ids differ between the brokers)
— and ConsumerGroupDescribe, ListGroups, DescribeGroups, OffsetCommit/OffsetFetch with member
epochs and TxnOffsetCommit with a consumer's group metadata are compared the same way. Steps that
wait for the assignment interval (``group.consumer.assignment.interval.ms``, 1 s on both) sleep
between the two brokers' calls alike.

Placement by the ``uniform`` assignor with several members depends on Kafka's hash-map order
(consumer_assignors.py), so scripts with several members use ``range``, or compare what
``uniform`` fixes: the balance and what a member keeps.
"""

from __future__ import annotations

import datetime
import time
import uuid

import pytest

from tests.reference.client import api_versions, part, req

from .levels import set_feature_level

HEARTBEAT, DESCRIBE = 68, 69
LIST_GROUPS, DESCRIBE_GROUPS, DELETE_GROUPS = 16, 15, 42
OFFSET_COMMIT, OFFSET_FETCH = 8, 9
INIT_PRODUCER_ID, ADD_OFFSETS, TXN_OFFSET_COMMIT, END_TXN = 22, 25, 28, 26
INTERVAL = 1.25  # past group.consumer.assignment.interval.ms (1 s)


def _uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Script:
    """One scenario on both brokers: each step runs on Kafka, then on minibroker, and must
    reduce to the same answer."""

    def __init__(self, pair, topics: dict[str, int]) -> None:
        self.pair = pair
        self.topics = {name: _uid(name) for name in topics}
        for name, n in topics.items():
            pair.create_topics([self.topics[name]], n)
        self.group = _uid("cg")
        pair.find_coordinators(self.group, [])
        self.index_topic_ids()

    def index_topic_ids(self) -> None:
        """Each side's topic ids by name (again after a test adds topics to ``topic_ids``)."""
        self.names = {s.name: {v: k for k, v in s.topic_ids.items()} for s in self.pair.sides}

    def await_regex_resolved(self) -> None:
        """Both resolve a new regex off the request path, within milliseconds (the group epoch
        moves to 2): wait for that on each side before comparing."""
        for side in self.pair.sides:
            deadline = time.monotonic() + 10
            while side.call(req(DESCRIBE, 1, group_ids=(self.group,),
                                include_authorized_operations=False)).groups[0].group_epoch < 2:
                assert time.monotonic() < deadline, f"{side.name}: the regex was never resolved"
                time.sleep(0.02)

    def t(self, name: str) -> str:
        return self.topics[name]

    def _local(self, topic_name: str) -> str:
        for short, real in self.topics.items():
            if real == topic_name:
                return short
        return topic_name

    def _assignment(self, side, topic_partitions) -> dict[str, list[int]]:
        names = self.names[side.name]
        return {self._local(names.get(t.topic_id, str(t.topic_id))): sorted(t.partitions)
                for t in topic_partitions}

    def both(self, what: str, make, reduce):
        answers = [reduce(s, s.call(make(s))) for s in self.pair.sides]
        k, m = answers
        assert k == m, f"{what}:\n  Kafka:      {k}\n  minibroker: {m}"
        return k

    def hb(self, what: str, member: str, epoch: int = 0, *, group: str | None = None,
           names: tuple[str, ...] | None = None, regex: str | None = None,
           owned: dict[str, list[int]] | None = None, rebalance: int | None = None,
           instance: str | None = None, assignor: str | None = None, version: int = 1):
        if epoch == 0:
            owned = {} if owned is None else owned
            rebalance = 60_000 if rebalance is None else rebalance
            if names is None and regex is None:
                names = ("t1",)

        def make(s):
            tps = None
            if owned is not None:
                tps = tuple(part((HEARTBEAT, 1), "TopicPartitions", topic_id=s.topic_ids[self.t(t)],
                                 partitions=tuple(ps)) for t, ps in owned.items())
            fields = dict(group_id=self.group if group is None else group, member_id=member,
                          member_epoch=epoch, instance_id=instance, rack_id=None,
                          rebalance_timeout=datetime.timedelta(
                              milliseconds=-1 if rebalance is None else rebalance),
                          subscribed_topic_names=None if names is None else tuple(
                              self.topics.get(n, n) for n in names),
                          server_assignor=assignor, topic_partitions=tps)
            if version >= 1:
                fields["subscribed_topic_regex"] = regex
            return req(HEARTBEAT, version, **fields)

        def reduce(s, r):
            return (r.error_code.name, r.error_message, r.member_id, r.member_epoch,
                    int(r.heartbeat_interval.total_seconds() * 1000),
                    None if r.assignment is None else self._assignment(s, r.assignment.topic_partitions))

        return self.both(what, make, reduce)

    def describe(self, what: str, *groups: str):
        def reduce(s, r):
            out = []
            for g in r.groups:
                members = tuple(sorted(
                    (m.member_id, m.instance_id, m.member_epoch, m.client_id, m.client_host,
                     tuple(sorted(self._local(n) for n in m.subscribed_topic_names)),
                     m.subscribed_topic_regex, self._assignment(s, m.assignment.topic_partitions),
                     self._assignment(s, m.target_assignment.topic_partitions), m.member_type)
                    for m in g.members))
                out.append((g.error_code.name, g.error_message, g.group_state, g.group_epoch,
                            g.assignment_epoch, g.assignor_name, members))
            return out

        return self.both(what, lambda s: req(DESCRIBE, 1, group_ids=groups or (self.group,),
                                             include_authorized_operations=False), reduce)


@pytest.fixture
def script(differential_pair):
    def make(**topics: int) -> Script:
        return Script(differential_pair, topics or {"t1": 3})
    return make


def test_invalid_heartbeats(script):
    s = script(t1=3)
    s.hb("empty group id", "m1", group="")
    s.hb("empty member id (v1)", "")
    s.hb("no rebalance timeout when joining", "m1", rebalance=-1)
    s.both("owned partitions null when joining",
           lambda side: req(HEARTBEAT, 1, group_id=s.group, member_id="m1", member_epoch=0,
                            instance_id=None, rack_id=None,
                            rebalance_timeout=datetime.timedelta(seconds=60),
                            subscribed_topic_names=(s.t("t1"),), subscribed_topic_regex=None,
                            server_assignor=None, topic_partitions=None),
           lambda side, r: (r.error_code.name, r.error_message))
    s.both("no subscription when joining",
           lambda side: req(HEARTBEAT, 1, group_id=s.group, member_id="m1", member_epoch=0,
                            instance_id=None, rack_id=None,
                            rebalance_timeout=datetime.timedelta(seconds=60),
                            subscribed_topic_names=None, subscribed_topic_regex=None,
                            server_assignor=None, topic_partitions=()),
           lambda side, r: (r.error_code.name, r.error_message))
    s.hb("epoch -3", "m1", -3)
    s.hb("an assignor Kafka does not have", "m1", assignor="sticky")
    s.hb("a regex RE2 refuses", "m1", names=None, regex="(")
    s.hb("a look-behind (Java's regex has it, RE2 not)", "m1", names=None, regex="(?<=a)b")
    s.hb("heartbeat of a group nobody created", "m1", 5, group=_uid("nogroup"))
    s.hb("leave of a group nobody created", "m1", -1, group=_uid("nogroup"))
    s.hb("static leave without instance id", "m1", -2)


def test_two_members_revoke_then_assign(script, differential_pair):
    s = script(t1=3)
    s.hb("m1 joins", "m1")
    s.hb("m1 heartbeats", "m1", 2)
    s.hb("m1 full heartbeat", "m1", 2, names=("t1",), owned={"t1": [0, 1, 2]}, rebalance=60_000)
    s.hb("greater epoch", "m1", 3)
    s.hb("unknown member", "zz", 1)
    s.hb("m2 joins within the assignment interval", "m2")
    s.describe("assigning")
    time.sleep(INTERVAL)
    s.hb("m2 after the interval: unreleased", "m2", 2)
    s.describe("reconciling")
    s.hb("m1 without owned list: told what it keeps", "m1", 2)
    s.hb("m1 still owning what it must revoke", "m1", 2, owned={"t1": [0, 1, 2]})
    s.hb("m1 revoked", "m1", 2, owned={"t1": [0, 1]})
    s.hb("m2 at its previous epoch without owned list", "m2", 2)
    s.hb("m1 at its previous epoch owning a revoked partition", "m1", 2, owned={"t1": [0, 1, 2]})
    s.describe("after the fencing")


def test_a_group_to_its_end(script):
    s = script(t1=3)
    s.hb("A joins", "A", assignor="range")
    s.hb("B joins", "B", assignor="range")
    time.sleep(INTERVAL)
    s.hb("A heartbeats", "A", 2)
    s.hb("B heartbeats", "B", 2)
    s.describe("range, two members")
    s.both("ListGroups v5", lambda side: req(LIST_GROUPS, 5, states_filter=(), types_filter=()),
           lambda side, r: sorted((g.group_state, g.group_type, g.protocol_type)
                                  for g in r.groups if g.group_id == s.group))
    s.both("ListGroups v5 classic only",
           lambda side: req(LIST_GROUPS, 5, states_filter=(), types_filter=("classic",)),
           lambda side, r: [g.group_id for g in r.groups if g.group_id == s.group])
    s.both("DescribeGroups v6 of a consumer group",
           lambda side: req(DESCRIBE_GROUPS, 6, groups=(s.group,), include_authorized_operations=False),
           lambda side, r: [(g.error_code.name, g.error_message, g.group_state) for g in r.groups])
    s.both("DescribeGroups v5 of a consumer group",
           lambda side: req(DESCRIBE_GROUPS, 5, groups=(s.group,), include_authorized_operations=False),
           lambda side, r: [(g.error_code.name, g.group_state) for g in r.groups])
    s.both("DeleteGroups of a group with members",
           lambda side: req(DELETE_GROUPS, 2, groups_names=(s.group,)),
           lambda side, r: [x.error_code.name for x in r.results])
    s.hb("B leaves", "B", -1)
    s.hb("B leaves again", "B", -1)
    s.describe("one left")
    s.hb("A leaves", "A", -1)
    s.describe("empty")
    s.both("DeleteGroups of an empty consumer group",
           lambda side: req(DELETE_GROUPS, 2, groups_names=(s.group,)),
           lambda side, r: [x.error_code.name for x in r.results])
    s.describe("deleted")


def _commit(s: Script, version: int, epoch: int, member: str, group: str | None = None):
    base = (OFFSET_COMMIT, version)

    def make(side):
        fields = dict(group_id=group or s.group, member_id=member, group_instance_id=None,
                      topics=(part(base, "OffsetCommitRequestTopic", name=s.t("t1"), partitions=(
                          part(base, "OffsetCommitRequestPartition", partition_index=0, committed_offset=5,
                               committed_leader_epoch=-1, committed_metadata=""),)),))
        fields["generation_id_or_member_epoch"] = epoch
        return req(OFFSET_COMMIT, version, **fields)

    return make


def test_offsets_with_member_epochs(script):
    s = script(t1=3)
    s.hb("A joins", "A")
    codes = lambda side, r: [p.error_code.name for t in r.topics for p in t.partitions]  # noqa: E731
    s.both("OffsetCommit v9 at a stale epoch", _commit(s, 9, 99, "A"), codes)
    s.both("OffsetCommit v9 at its epoch", _commit(s, 9, 2, "A"), codes)
    s.both("OffsetCommit v9 of an unknown member", _commit(s, 9, 2, "Z"), codes)
    s.both("OffsetCommit v8 by a consumer member", _commit(s, 8, 2, "A"), codes)
    s.both("OffsetCommit v9 without member", _commit(s, 9, -1, ""), codes)
    s.both("OffsetCommit v9 to no group at epoch 3", _commit(s, 9, 3, "A", group=_uid("fresh")), codes)
    s.both("OffsetCommit v8 to no group at generation 3", _commit(s, 8, 3, "A", group=_uid("fresh")), codes)

    def fetch(member, epoch):
        return lambda side: req(OFFSET_FETCH, 9, groups=(part((OFFSET_FETCH, 9), "OffsetFetchRequestGroup",
                                                               group_id=s.group, member_id=member,
                                                               member_epoch=epoch, topics=None),),
                                require_stable=False)

    def reduce(side, r):
        g = r.groups[0]
        return (g.error_code.name, [(s._local(t.name), [(p.partition_index, p.committed_offset,
                                                          p.error_code.name) for p in t.partitions])
                                    for t in g.topics])

    s.both("OffsetFetch v9 without member", fetch(None, -1), reduce)
    s.both("OffsetFetch v9 at its epoch", fetch("A", 2), reduce)
    s.both("OffsetFetch v9 at a stale epoch", fetch("A", 1), reduce)
    s.both("OffsetFetch v9 of an unknown member", fetch("Z", 2), reduce)


def test_transactional_offsets_with_a_consumers_group_metadata(script, differential_pair):
    """sendOffsetsToTransaction of a KIP-848 consumer: the generation is its member epoch."""
    s = script(t1=3)
    s.hb("A joins", "A")
    tid = _uid("cg-txn")
    differential_pair.find_coordinators(s.group, [tid])
    ids = {}
    for side in differential_pair.sides:
        deadline = time.monotonic() + 30
        while True:  # Kafka loads a new __transaction_state partition first
            r = side.call(req(INIT_PRODUCER_ID, 4, transactional_id=tid,
                              transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1,
                              producer_epoch=-1))
            if r.error_code.name not in ("coordinator_load_in_progress", "not_coordinator",
                                         "coordinator_not_available") or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert r.error_code == 0, (side.name, r)
        ids[side.name] = (r.producer_id, r.producer_epoch)
        r = side.call(req(ADD_OFFSETS, 3, transactional_id=tid, producer_id=r.producer_id,
                          producer_epoch=r.producer_epoch, group_id=s.group))
        assert r.error_code == 0, (side.name, r)

    def commit(member, generation):
        base = (TXN_OFFSET_COMMIT, 4)

        def make(side):
            pid, epoch = ids[side.name]
            return req(TXN_OFFSET_COMMIT, 4, transactional_id=tid, group_id=s.group, producer_id=pid,
                       producer_epoch=epoch, generation_id=generation, member_id=member,
                       group_instance_id=None, topics=(part(base, "TxnOffsetCommitRequestTopic",
                                                            name=s.t("t1"), partitions=(
                           part(base, "TxnOffsetCommitRequestPartition", partition_index=0,
                                committed_offset=7, committed_leader_epoch=-1, committed_metadata=""),)),))
        return make

    codes = lambda side, r: [p.error_code.name for t in r.topics for p in t.partitions]  # noqa: E731
    s.both("TxnOffsetCommit at a stale member epoch", commit("A", 1), codes)
    s.both("TxnOffsetCommit of an unknown member", commit("Z", 2), codes)
    s.both("TxnOffsetCommit without group metadata", commit("", -1), codes)
    s.both("TxnOffsetCommit at the member's epoch", commit("A", 2), codes)
    for side in differential_pair.sides:
        pid, epoch = ids[side.name]
        r = side.call(req(END_TXN, 3, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                          committed=True))
        assert r.error_code == 0, (side.name, r)


def test_static_membership(script):
    s = script(t1=3, t2=3)
    s.hb("s1 joins", "s1", instance="i1", names=("t1", "t2"), assignor="range")
    s.hb("s2 with the same instance id", "s2", instance="i1", names=("t1", "t2"))
    s.hb("s1 leaves, will come back", "s1", -2, instance="i1")
    s.describe("static member away")
    s.hb("s2 takes the instance's place", "s2", instance="i1", names=("t1", "t2"))
    s.describe("replaced")
    s.hb("s1 heartbeats again", "s1", 2, instance="i1")
    s.hb("s2 with an unknown instance id", "s2", 2, instance="i9")
    s.hb("s2 heartbeats", "s2", 2, instance="i1")


def test_range_with_static_and_dynamic_members(script):
    s = script(t1=5, t2=2)
    s.hb("d1 joins", "d1", names=("t1", "t2"), assignor="range")
    s.hb("a-static joins", "zz", instance="a-static", names=("t1", "t2"), assignor="range")
    s.hb("d0 joins", "d0", names=("t1",), assignor="range")
    time.sleep(INTERVAL)
    s.hb("d1 heartbeats", "d1", 2)
    s.describe("targets: static first, then by member id")


def test_epochs_of_subscriptions(script):
    s = script(t1=3, t2=3)
    s.hb("A with t1", "A")
    s.hb("B subscribes to nothing", "B", names=())
    s.describe("no bump for an empty subscription")
    g2 = _uid("cg2")
    s.pair.find_coordinators(g2, [])
    s.hb("new group, empty subscription", "A", group=g2, names=())
    s.hb("then a member with topics", "B", group=g2)
    s.describe("new group", g2)
    g3 = _uid("cg3")
    s.hb("a topic that does not exist", "A", group=g3, names=("nosuch",))
    s.describe("subscribed to a missing topic", g3)
    s.hb("A changes its subscription", "A", 2, names=("t1", "t2"))
    s.describe("changed subscription")


def test_regex_subscription(script):
    s = script(t1=2, t2=1)
    # RE2 syntax, matched against whole names: a class for t1's last character, t2 by name
    regex = f"{s.t('t1')[:-1]}[0-9a-f]|{s.t('t2')}"
    s.hb("regex join", "r1", names=None, regex=regex)
    s.await_regex_resolved()
    s.describe("regex resolved in the background, not yet assigned")
    time.sleep(INTERVAL)
    s.hb("regex resolved", "r1", 1)
    s.describe("regex resolved")
    s.hb("a regex matching nothing", "r2", group=_uid("cgx"), names=None, regex="^nomatch$")


def test_regex_matches_internal_topics(script):
    """Kafka resolves a group's regex against every topic of its metadata image, the internal
    ones too (GroupMetadataManager.refreshRegularExpressions has no internal-topic filter), so a
    member whose regex names __consumer_offsets is assigned its partitions (franz-go's
    Test848RegexBrokerResolves relies on it)."""
    s = script(t1=1)
    for side in s.pair.sides:  # the group's FindCoordinator made __consumer_offsets
        s.pair._await_leaders(side, ["__consumer_offsets"], 1)
    s.index_topic_ids()
    s.hb("regex naming an internal topic", "i1", names=None, regex=f"__consumer_offsets|{s.t('t1')}")
    s.await_regex_resolved()
    time.sleep(INTERVAL)
    got = s.hb("the internal topic is assigned", "i1", 1)
    assert got[-1] == {"__consumer_offsets": [0], "t1": [0]}, got


def test_group_version_0_refuses_the_consumer_protocol(script, differential_pair):
    """At group.version 0 (UpdateFeatures, as kafka-features.sh downgrades it) both brokers still
    list ConsumerGroupHeartbeat/ConsumerGroupDescribe in ApiVersions (Kafka 4.4 does, formatted at
    0 or downgraded) and refuse them with UNSUPPORTED_VERSION; back at 1 a member joins again."""
    s = script(t1=1)
    pair = differential_pair
    try:
        for side in pair.sides:
            set_feature_level(side.conn.address[1], "group.version", 0)
        listed = [{k for k in api_versions(side.conn) if k in (HEARTBEAT, DESCRIBE)} for side in pair.sides]
        assert listed == [{HEARTBEAT, DESCRIBE}] * 2, listed
        s.hb("a heartbeat at group.version 0", "m1")
        s.describe("a describe at group.version 0")
    finally:
        for side in pair.sides:
            set_feature_level(side.conn.address[1], "group.version", 1)
    s.hb("a heartbeat at group.version 1 again", "m1")
