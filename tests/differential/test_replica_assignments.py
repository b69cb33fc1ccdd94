"""Explicit replica assignments in CreateTopics and CreatePartitions against Kafka 4.4 (one node
each): what is refused and with which code (ReplicationControlManager's manual-assignment checks:
an empty list, an unregistered broker, a broker twice, a partition twice, a gap, a factor unlike
the topic's, a count unlike the partitions added), and that an accepted assignment is what Metadata
and DescribeTopicPartitions report. The same on three virtual brokers, where the order of the
replicas (the first is the preferred leader) shows, is in
tests/integration/test_replica_assignments.py."""

from __future__ import annotations

import datetime
import uuid

import pytest

from tests.reference.client import part, req

CREATE_TOPICS, CREATE_PARTITIONS, METADATA, DTP = 19, 37, 3, 75
SUFFIX = uuid.uuid4().hex[:6]


def _node(s) -> int:
    md = s.call(req(METADATA, 12, topics=(), allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False))
    return md.brokers[0].node_id


@pytest.fixture(scope="module")
def nodes(differential_pair):
    return {s.name: _node(s) for s in differential_pair.sides}


def _create(name: str, assignments, partitions: int = -1, factor: int = -1, validate_only: bool = False):
    # v4: the last version without the created topic's configs, whose list is compared elsewhere
    base = (CREATE_TOPICS, 4)
    return req(CREATE_TOPICS, 4, topics=(part(
        base, "CreatableTopic", name=name, num_partitions=partitions, replication_factor=factor,
        assignments=tuple(part(base, "CreatableReplicaAssignment", partition_index=i, broker_ids=tuple(ids))
                          for i, ids in assignments), configs=()),),
        timeout=datetime.timedelta(seconds=10), validate_only=validate_only)


def _add(name: str, count: int, assignments):
    base = (CREATE_PARTITIONS, 3)
    return req(CREATE_PARTITIONS, 3, topics=(part(
        base, "CreatePartitionsTopic", name=name, count=count,
        assignments=None if assignments is None else tuple(
            part(base, "CreatePartitionsAssignment", broker_ids=tuple(ids)) for ids in assignments)),),
        timeout=datetime.timedelta(seconds=10), validate_only=False)


def _codes(pair, what, make) -> list[int]:
    k, m = pair.both(make)
    pair.check(what, (k, m))
    return [t.error_code for t in getattr(k, "topics", None) or k.results]


# where a case names "N", each side's own node id goes
CREATE_CASES = [
    ("an empty replica list", [(0, [])], 39),
    ("an unregistered broker", [(0, ["N"]), (1, [4242])], 39),
    ("a broker twice", [(0, ["N", "N"])], 39),
    ("a partition twice", [(0, ["N"]), (0, ["N"])], 39),
    ("a gap", [(0, ["N"]), (2, ["N"])], 39),
    ("partitions out of order", [(1, ["N"]), (0, ["N"])], 0),
]


@pytest.mark.parametrize("what,assignments,code", CREATE_CASES, ids=[c[0] for c in CREATE_CASES])
def test_create_topics_assignment_checks(differential_pair, nodes, what, assignments, code):
    pair = differential_pair
    name = f"ra-{what.replace(' ', '-')}-{SUFFIX}"

    def make(s):
        own = [(i, [nodes[s.name] if n == "N" else n for n in ids]) for i, ids in assignments]
        return _create(name, own)
    assert _codes(pair, f"CreateTopics with {what}", make) == [code]


def test_manual_assignment_with_a_count_or_factor_refused(differential_pair, nodes):
    pair = differential_pair
    name = f"ra-both-{SUFFIX}"
    for partitions, factor in ((1, -1), (-1, 1), (1, 1)):
        codes = _codes(pair, f"CreateTopics assignment with partitions {partitions}, factor {factor}",
                       lambda s: _create(name, [(0, [nodes[s.name]])], partitions, factor))
        assert codes == [42], codes  # INVALID_REQUEST


def test_assignment_reported_and_extended(differential_pair, nodes):
    pair = differential_pair
    name = f"ra-kept-{SUFFIX}"
    assert _codes(pair, "CreateTopics validate_only", lambda s: _create(
        name, [(0, [nodes[s.name]]), (1, [nodes[s.name]])], validate_only=True)) == [0]
    assert _codes(pair, "CreateTopics two partitions assigned", lambda s: _create(
        name, [(0, [nodes[s.name]]), (1, [nodes[s.name]])])) == [0]
    for s in pair.sides:
        pair._await_leaders(s, [name], 2)
    bad = [("two assignments for one partition", 3, [["N"], ["N"]], 39),
           ("an unregistered broker", 3, [[4242]], 39),
           ("a broker twice (and a factor unlike the topic's)", 3, [["N", "N"]], 39),
           ("an empty list", 3, [[]], 39),
           ("assigned", 3, [["N"]], 0),
           ("placed by the broker", 4, None, 0)]
    for what, count, assignments, code in bad:
        codes = _codes(pair, f"CreatePartitions with {what}", lambda s: _add(
            name, count, None if assignments is None else [[nodes[s.name] if n == "N" else n for n in ids]
                                                           for ids in assignments]))
        assert codes == [code], (what, codes)
    for s in pair.sides:
        pair._await_leaders(s, [name], 4)
        md = s.call(req(METADATA, 12, topics=(part((METADATA, 12), "MetadataRequestTopic", name=name,
                                                   topic_id=None),),
                        allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        assert [list(p.replica_nodes) for p in sorted(md.topics[0].partitions, key=lambda p: p.partition_index)] \
            == [[nodes[s.name]]] * 4, (s.name, md)
        base = (DTP, 0)
        d = s.call(req(DTP, 0, topics=(part(base, "TopicRequest", name=name),), response_partition_limit=100,
                       cursor=None))
        assert [list(p.replica_nodes) for p in d.topics[0].partitions] == [[nodes[s.name]]] * 4, (s.name, d)
