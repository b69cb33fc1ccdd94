"""The newest versions minibroker serves of APIs stock Kafka 4.x clients send (issue 16 item 3),
answered as Kafka 4.4 answers them: Metadata v13, DescribeCluster v2, Fetch v17/v18,
ListOffsets v11 (every special timestamp)."""

from __future__ import annotations

import datetime
import uuid

import pytest

from tests.reference.client import part, req

METADATA, DESCRIBE_CLUSTER, FETCH, LIST_OFFSETS, PRODUCE = 3, 60, 1, 2, 0
PARTITIONS = 2


@pytest.fixture(scope="module")
def topic(differential_pair):
    name = f"current-{uuid.uuid4().hex[:8]}"
    differential_pair.create_topics([name], PARTITIONS)
    for s in differential_pair.sides:
        r = s.call(req(METADATA, 12, topics=(part((METADATA, 12), "MetadataRequestTopic", name=name,
                                                   topic_id=None),),
                       allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        s.topic_ids[name] = r.topics[0].topic_id
    return name


def _served(pair, key: int, version: int) -> None:
    for s in pair.sides:
        lo, hi = s.versions[key]
        assert lo <= version <= hi, f"{s.name} does not serve api {key} v{version} ({lo}-{hi})"


def test_metadata_v13(differential_pair, topic):
    pair = differential_pair
    _served(pair, METADATA, 13)

    def make(s):
        return req(METADATA, 13, topics=(
            part((METADATA, 13), "MetadataRequestTopic", name=topic, topic_id=None),
            part((METADATA, 13), "MetadataRequestTopic", name=None, topic_id=uuid.uuid4()),
        ), allow_auto_topic_creation=False, include_topic_authorized_operations=False)

    answer = pair.check("Metadata v13", pair.both(make))
    assert answer is not None


@pytest.mark.parametrize("include_fenced", [False, True])
def test_describe_cluster_v2(differential_pair, include_fenced):
    pair = differential_pair
    _served(pair, DESCRIBE_CLUSTER, 2)
    k, m = pair.both(lambda s: req(DESCRIBE_CLUSTER, 2, include_cluster_authorized_operations=False,
                                   endpoint_type=1, include_fenced_brokers=include_fenced))
    pair.check("DescribeCluster v2", (k, m))
    assert [b.is_fenced for b in k.brokers] == [b.is_fenced for b in m.brokers] == [False]


@pytest.mark.parametrize("isolation", [0, 1])
@pytest.mark.parametrize("version", [12, 17, 18])
def test_fetch_v17_v18(differential_pair, topic, version, isolation):
    pair = differential_pair
    _served(pair, FETCH, version)
    _produce(pair, topic)

    def make(s):
        base = (FETCH, version)
        parts = tuple(part(base, "FetchPartition", partition=i, current_leader_epoch=-1, fetch_offset=0,
                           last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
                      for i in range(PARTITIONS))
        missing = part(base, "FetchPartition", partition=PARTITIONS, current_leader_epoch=-1, fetch_offset=0,
                       last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
        ft = part(base, "FetchTopic", topic=topic, topic_id=s.topic_ids[topic], partitions=parts + (missing,))
        unknown = part(base, "FetchTopic", topic="no-such-topic", topic_id=uuid.uuid4(), partitions=parts[:1])
        replica = part(base, "ReplicaState", replica_id=-1, replica_epoch=-1) if version >= 15 else None
        return req(FETCH, version, cluster_id=None, replica_id=-1, replica_state=replica,
                   max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=8 << 20, isolation_level=isolation,
                   session_id=0, session_epoch=-1, topics=(ft, unknown), forgotten_topics_data=(),
                   rack_id="")

    pair.check(f"Fetch v{version}", pair.both(make))


# ListOffsetsRequest's special timestamps: latest, earliest, max timestamp, earliest local,
# latest tiered, earliest pending upload (v11, KIP-1023).
@pytest.mark.parametrize("version, timestamp", [(11, t) for t in (-1, -2, -3, -4, -5, -6)] + [(10, -6), (8, -5), (7, -4), (6, -3), (5, -4), (1, -3), (1, -6)])
def test_list_offsets_v11(differential_pair, topic, version, timestamp):
    pair = differential_pair
    _served(pair, LIST_OFFSETS, version)
    _produce(pair, topic)

    def make(s):
        base = (LIST_OFFSETS, version)
        parts = tuple(part(base, "ListOffsetsPartition", partition_index=i, current_leader_epoch=-1,
                           timestamp=timestamp) for i in range(PARTITIONS))
        return req(LIST_OFFSETS, version, replica_id=-1, isolation_level=0, timeout=datetime.timedelta(seconds=5),
                   topics=(part(base, "ListOffsetsTopic", name=topic, partitions=parts),))

    pair.check(f"ListOffsets v{version} timestamp {timestamp}", pair.both(make))


_produced: set[str] = set()


def _produce(pair, topic: str) -> None:
    """Three records in partition 0 of both brokers, once per module."""
    if topic in _produced:
        return
    _produced.add(topic)
    from minibroker_protocol.records import build_batch

    batch = build_batch([(None, b"v%d" % i) for i in range(3)])
    for s in pair.sides:
        base = (PRODUCE, 9)
        data = part(base, "PartitionProduceData", index=0, records=batch)
        r = s.call(req(PRODUCE, 9, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=10),
                       topic_data=(part(base, "TopicProduceData", name=topic, partition_data=(data,)),)))
        assert r.responses[0].partition_responses[0].error_code == 0, (s.name, r)


OFFSET_COMMIT, OFFSET_FETCH = 8, 9


def test_offset_commit_and_fetch_v10_by_topic_id(differential_pair, topic):
    pair = differential_pair
    _served(pair, OFFSET_COMMIT, 10)
    _served(pair, OFFSET_FETCH, 10)
    group = f"g-{uuid.uuid4().hex[:8]}"
    pair.find_coordinators(group, [])
    stranger = uuid.uuid4()

    def commit(s):
        base = (OFFSET_COMMIT, 10)
        parts = tuple(part(base, "OffsetCommitRequestPartition", partition_index=i, committed_offset=1 + i,
                           committed_leader_epoch=-1, committed_metadata=f"m{i}") for i in range(PARTITIONS + 1))
        return req(OFFSET_COMMIT, 10, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                   group_instance_id=None, topics=(
                       part(base, "OffsetCommitRequestTopic", topic_id=s.topic_ids[topic], partitions=parts),
                       part(base, "OffsetCommitRequestTopic", topic_id=stranger, partitions=parts[:1])))

    pair.check("OffsetCommit v10", pair.both(commit))

    def fetch(s, everything=False):
        base = (OFFSET_FETCH, 10)
        topics = None if everything else (
            part(base, "OffsetFetchRequestTopics", topic_id=s.topic_ids[topic], partition_indexes=(0, 1, 2)),
            part(base, "OffsetFetchRequestTopics", topic_id=stranger, partition_indexes=(0,)))
        g = part(base, "OffsetFetchRequestGroup", group_id=group, member_id=None, member_epoch=-1,
                 topics=topics)
        return req(OFFSET_FETCH, 10, groups=(g,), require_stable=False)

    k, m = pair.both(fetch)
    pair.check("OffsetFetch v10 by id", (k, m))
    pair.check("OffsetFetch v10, all topics", pair.both(lambda s: fetch(s, everything=True)))
    # topic_id is dropped by the normaliser: check each side named its own topic's id.
    for side, answer in zip(pair.sides, (k, m)):
        ids = [t.topic_id for t in answer.groups[0].topics]
        assert ids[0] == side.topic_ids[topic], (side.name, ids)


def test_produce_v13_by_topic_id(differential_pair, topic):
    """Produce v13 (KIP-516) names topics by id: a batch to the topic's id, and one to an id no
    topic has (UNKNOWN_TOPIC_ID), answered per topic id."""
    pair = differential_pair
    _served(pair, PRODUCE, 13)
    from minibroker_protocol.records import build_batch

    batch = build_batch([(None, b"v13-%d" % i) for i in range(2)])
    unknown = uuid.uuid4()
    base = (PRODUCE, 13)

    def make(s):
        return req(PRODUCE, 13, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=10),
                   topic_data=tuple(part(base, "TopicProduceData", topic_id=tid, partition_data=(
                       part(base, "PartitionProduceData", index=1, records=batch),))
                       for tid in (s.topic_ids[topic], unknown)))

    answers = pair.both(make)
    for s, r in zip(pair.sides, answers):
        assert r.responses[0].topic_id == s.topic_ids[topic], (s.name, r)
        assert r.responses[1].topic_id == unknown, (s.name, r)
    pair.check("Produce v13", answers)
