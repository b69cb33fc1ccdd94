"""AlterPartitionReassignments, ListPartitionReassignments, DescribeQuorum, UnregisterBroker and
AlterReplicaLogDirs against Kafka 4.4: the same requests to both brokers, the answers compared,
and the error messages (which the normaliser drops) compared here one by one.

The reference Kafka is one combined KRaft node (broker and controller, node 1): its one broker is
the only valid replica, its quorum has one voter. UnregisterBroker is only sent for ids that are
not registered: unregistering the reference's own broker would take it out of the session.
"""

from __future__ import annotations

import datetime
import time
import uuid

import pytest

from tests.reference.client import part, req

ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS, ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS = 34, 35, 45, 46
DESCRIBE_QUORUM, UNREGISTER_BROKER = 55, 64


def ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


def _messages(answer, *path: str) -> list:
    """Every error message at ``path`` (attribute names, lists walked), in the answer's order."""
    items = [answer]
    for name in path:
        nxt = []
        for item in items:
            value = getattr(item, name)
            nxt.extend(value if isinstance(value, tuple) else (value,))
        items = nxt
    return [(getattr(i, "partition_index", None), int(i.error_code), i.error_message) for i in items]


def _same_messages(what: str, answers, *path: str) -> None:
    k, m = (sorted(_messages(a, *path), key=repr) for a in answers)
    assert k == m, f"{what}: messages differ\n  kafka:      {k}\n  minibroker: {m}"


@pytest.fixture(scope="module")
def topic(differential_pair):
    name = f"cluster-{uuid.uuid4().hex[:8]}"
    differential_pair.create_topics([name], 2)
    return name


# -- AlterPartitionReassignments / ListPartitionReassignments -----------------------------------

def _alter(version, topics, allow=True):
    base = (ALTER_REASSIGNMENTS, version)
    extra = {"allow_replication_factor_change": allow} if version >= 1 else {}
    return req(ALTER_REASSIGNMENTS, version, timeout_ms=ms(5000), **extra, topics=tuple(
        part(base, "ReassignableTopic", name=t, partitions=tuple(
            part(base, "ReassignablePartition", partition_index=p, replicas=None if r is None else tuple(r))
            for p, r in ps))
        for t, ps in topics))


def _list(topics):
    base = (LIST_REASSIGNMENTS, 0)
    return req(LIST_REASSIGNMENTS, 0, timeout_ms=ms(5000), topics=None if topics is None else tuple(
        part(base, "ListPartitionReassignmentsTopics", name=t, partition_indexes=tuple(ps)) for t, ps in topics))


@pytest.mark.parametrize("version", [0, 1])
def test_alter_partition_reassignments_matches_kafka(differential_pair, topic, version):
    pair = differential_pair
    node = 1  # both brokers' node id (the reference's node.id, minibroker's default)
    cases = [
        ("the same replicas", [(topic, [(0, [node])])], True),
        ("cancel with nothing in progress", [(topic, [(0, None), (1, None)])], True),
        ("an unregistered broker", [(topic, [(0, [node + 1])])], True),
        ("a broker twice", [(topic, [(0, [node, node])])], True),
        ("no replicas", [(topic, [(1, [])])], True),
        ("a negative id", [(topic, [(1, [-1])])], True),
        ("factor kept, change not allowed", [(topic, [(1, [node])])], False),
        ("factor changed, change not allowed (the broker check first)", [(topic, [(0, [node, node + 1])])],
         False),
        ("an unknown partition", [(topic, [(7, [node])])], True),
        ("an unknown topic", [(f"{topic}-none", [(0, [node]), (1, None)])], True),
        ("a partition twice", [(topic, [(0, [node]), (0, [node])])], True),
        ("a topic twice", [(topic, [(0, [node])]), (topic, [(1, [node])])], True),
        ("nothing", [], True),
    ]
    for what, topics, allow in cases:
        answers = pair.both(lambda s, t=topics, a=allow: _alter(version, t, a))
        pair.check(f"AlterPartitionReassignments v{version}: {what}", answers)
        _same_messages(what, answers, "responses", "partitions")
        assert answers[0].error_message == answers[1].error_message, what


def test_list_partition_reassignments_matches_kafka(differential_pair, topic):
    pair = differential_pair
    pair.both(lambda s: _alter(1, [(topic, [(0, [1])])]))  # completed at once: nothing is listed
    for what, topics in [("all", None), ("some", [(topic, [0, 5]), (f"{topic}-none", [0])]),
                         ("none asked", [])]:
        pair.check(f"ListPartitionReassignments: {what}", pair.both(lambda s, t=topics: _list(t)))


# -- DescribeQuorum ------------------------------------------------------------------------------

def _quorum(version, topics):
    base = (DESCRIBE_QUORUM, version)
    return req(DESCRIBE_QUORUM, version, topics=tuple(
        part(base, "TopicData", topic_name=t, partitions=tuple(
            part(base, "PartitionData", partition_index=p) for p in ps))
        for t, ps in topics))


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_quorum_matches_kafka(differential_pair, version):
    pair = differential_pair
    metadata = "__cluster_metadata"
    for what, topics in [("the metadata partition", [(metadata, [0])]),
                         ("another topic", [("foo", [0])]),
                         ("another partition", [(metadata, [1])]),
                         ("the partition twice", [(metadata, [0, 0])]),
                         ("with another topic", [(metadata, [0]), ("foo", [0])]),
                         ("nothing", [])]:
        answers = pair.both(lambda s, t=topics: _quorum(version, t))
        pair.check(f"DescribeQuorum v{version}: {what}", answers)
        if version >= 2:
            _same_messages(what, answers, "topics", "partitions")
            assert answers[0].error_message == answers[1].error_message

    # what the normaliser drops or the divergence list leaves out, checked for its shape
    now = time.time() * 1000
    for s, answer in zip(pair.sides, pair.both(lambda s: _quorum(version, [(metadata, [0])]))):
        p = answer.topics[0].partitions[0]
        (voter,) = p.current_voters
        assert voter.replica_id == p.leader_id == 1 and p.leader_epoch >= 1, s.name
        assert 0 <= voter.log_end_offset and 0 <= p.high_watermark <= voter.log_end_offset, s.name
        if version >= 1:
            for stamp in (voter.last_fetch_timestamp, voter.last_caught_up_timestamp):
                assert abs(stamp - now) < 120_000, (s.name, stamp, now)
        if version >= 2:
            (node,) = answer.nodes
            assert node.node_id == 1 and [lst.name for lst in node.listeners] == ["CONTROLLER"], s.name


# -- UnregisterBroker ----------------------------------------------------------------------------

@pytest.mark.parametrize("broker", [7, -1])
def test_unregister_broker_matches_kafka(differential_pair, broker):
    pair = differential_pair
    answers = pair.both(lambda s: req(UNREGISTER_BROKER, 0, broker_id=broker))
    pair.check(f"UnregisterBroker {broker}", answers)
    assert answers[0].error_message == answers[1].error_message == f"Broker ID {broker} is not currently registered"


# -- AlterReplicaLogDirs -------------------------------------------------------------------------

@pytest.mark.parametrize("version", [1, 2])
def test_alter_replica_log_dirs_matches_kafka(differential_pair, topic, version):
    pair = differential_pair
    home = {s.name: s.call(req(DESCRIBE_LOG_DIRS, 4, topics=None)).results[0].log_dir for s in pair.sides}
    base = (ALTER_REPLICA_LOG_DIRS, version)

    def alter(dirs):
        def make(s):
            return req(ALTER_REPLICA_LOG_DIRS, version, dirs=tuple(
                part(base, "AlterReplicaLogDir", path=home[s.name] if path is None else path, topics=tuple(
                    part(base, "AlterReplicaLogDirTopic", name=t, partitions=tuple(ps)) for t, ps in topics))
                for path, topics in dirs))
        return make
    for what, dirs in [
        ("the broker's log dir", [(None, [(topic, [0, 1, 5]), (f"{topic}-none", [0])])]),
        ("a path that is no log dir", [("/nowhere/at/all", [(topic, [0, 1]), (f"{topic}-none", [0])])]),
        ("both", [(None, [(topic, [0])]), ("/nowhere", [(topic, [1])])]),
        ("nothing", []),
    ]:
        pair.check(f"AlterReplicaLogDirs v{version}: {what}", pair.both(alter(dirs)))


# -- the throttles kafka-reassign-partitions.sh --verify clears ----------------------------------

def test_clearing_broker_throttles_matches_kafka(differential_pair):
    """--verify and --cancel DELETE the replication throttles on every broker: none is set on
    either broker, and both answer the deletion as done."""
    pair = differential_pair
    incremental_alter_configs, broker, delete = 44, 4, 1
    base = (incremental_alter_configs, 1)
    names = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
             "replica.alter.log.dirs.io.max.bytes.per.second")
    answers = pair.both(lambda s: req(incremental_alter_configs, 1, validate_only=False, resources=(
        part(base, "AlterConfigsResource", resource_type=broker, resource_name="1", configs=tuple(
            part(base, "AlterableConfig", name=n, config_operation=delete, value=None) for n in names)),)))
    pair.check("IncrementalAlterConfigs: delete a broker's throttles", answers)
    assert [int(r.error_code) for a in answers for r in a.responses] == [0, 0]
