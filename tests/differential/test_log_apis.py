"""CreatePartitions, DeleteRecords, DescribeLogDirs, OffsetForLeaderEpoch and ElectLeaders
against Kafka 4.4: the same requests to both brokers, the answers compared.

Kafka Streams purges its repartition topics with DeleteRecords; admin tools grow topics with
CreatePartitions and run preferred elections; the Java consumer checks its position with
OffsetForLeaderEpoch after a leader change. With one broker the leader epoch is 0 on both.
"""

from __future__ import annotations

import datetime
import time

from minibroker_protocol.records import build_batch
from tests.reference.client import part, req

CREATE_TOPICS, PRODUCE, FETCH, LIST_OFFSETS, METADATA = 19, 0, 1, 2, 3
DELETE_RECORDS, OFFSET_FOR_LEADER_EPOCH, DESCRIBE_LOG_DIRS, CREATE_PARTITIONS, ELECT_LEADERS = 21, 23, 35, 37, 43


def ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


def _produce(pair, topic: str, partition: int, count: int) -> None:
    blob = build_batch([(b"k%d" % i, b"v%d" % i) for i in range(count)])

    def make(s):
        base = (PRODUCE, 9)
        pd = part(base, "PartitionProduceData", index=partition, records=blob)
        td = part(base, "TopicProduceData", name=topic, partition_data=(pd,))
        return req(PRODUCE, 9, transactional_id=None, acks=-1, timeout=ms(5000), topic_data=(td,))
    pair.check(f"produce {count} to {topic}-{partition}", pair.both(make))


def _earliest(pair, topic: str, partitions: int):
    def make(s):
        base = (LIST_OFFSETS, 7)
        parts = tuple(part(base, "ListOffsetsPartition", partition_index=i, current_leader_epoch=-1, timestamp=-2)
                      for i in range(partitions))
        return req(LIST_OFFSETS, 7, replica_id=-1, isolation_level=0, timeout=ms(5000),
                   topics=(part(base, "ListOffsetsTopic", name=topic, partitions=parts),))
    return pair.check(f"earliest offsets of {topic}", pair.both(make))


def _create_partitions(topics, validate_only=False, version=3):
    base = (CREATE_PARTITIONS, version)
    return req(CREATE_PARTITIONS, version, timeout=ms(10_000), validate_only=validate_only, topics=tuple(
        part(base, "CreatePartitionsTopic", name=name, count=count,
             assignments=None if assignments is None else tuple(
                 part(base, "CreatePartitionsAssignment", broker_ids=tuple(a)) for a in assignments))
        for name, count, assignments in topics))


def test_create_partitions_matches_kafka(differential_pair):
    pair = differential_pair
    pair.create_topics(["cp-diff", "cp-diff-b"], 1)
    for what, topics, validate_only in [
        ("grow to 2, validate only", [("cp-diff", 2, None)], True),
        ("grow to 3", [("cp-diff", 3, None)], False),
        ("same count", [("cp-diff", 3, None)], False),
        ("fewer", [("cp-diff", 2, None)], False),
        ("unknown topic", [("cp-diff-none", 2, None)], False),
        ("duplicate topic", [("cp-diff-b", 2, None), ("cp-diff-b", 3, None)], False),
        ("too few assignments", [("cp-diff-b", 3, [[1]])], False),
        ("unknown broker", [("cp-diff-b", 2, [[7]])], False),
        ("assignment", [("cp-diff-b", 2, [[1]])], False),
    ]:
        pair.check(f"CreatePartitions: {what}", pair.both(lambda s, t=topics, v=validate_only:
                                                           _create_partitions(t, v)))
    pair._await_leaders(pair.kafka, ["cp-diff"], 3)
    _produce(pair, "cp-diff", 2, 3)  # the new partition takes records
    _earliest(pair, "cp-diff", 3)


def test_delete_records_matches_kafka(differential_pair):
    pair = differential_pair
    pair.create_topics(["dr-diff"], 2)
    for _ in range(3):
        _produce(pair, "dr-diff", 0, 4)

    def delete(offsets, partition=0, topic="dr-diff", version=2):
        base = (DELETE_RECORDS, version)
        return req(DELETE_RECORDS, version, timeout=ms(5000), topics=(part(
            base, "DeleteRecordsTopic", name=topic, partitions=tuple(
                part(base, "DeleteRecordsPartition", partition_index=partition if isinstance(o, int) else o[0],
                     offset=o if isinstance(o, int) else o[1]) for o in offsets)),))
    for what, make in [
        ("inside a batch", lambda s: delete([5])),
        ("backwards: nothing moves", lambda s: delete([2])),
        ("past the high watermark", lambda s: delete([13])),
        ("below -1", lambda s: delete([-5])),
        ("-1: up to the high watermark", lambda s: delete([(1, -1)])),
        ("unknown partition", lambda s: delete([(9, 1)])),
        ("unknown topic", lambda s: delete([1], topic="dr-diff-none")),
        ("v0", lambda s: delete([6], version=0)),
    ]:
        pair.check(f"DeleteRecords: {what}", pair.both(make))
    _earliest(pair, "dr-diff", 2)

    def fetch(s, offset):
        base = (FETCH, 12)
        fp = part(base, "FetchPartition", partition=0, current_leader_epoch=-1, fetch_offset=offset,
                  last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
        return req(FETCH, 12, replica_id=-1, max_wait=ms(0), min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                   session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=(),
                   topics=(part(base, "FetchTopic", topic="dr-diff", partitions=(fp,)),))
    pair.check("fetch below the new log start", pair.both(lambda s: fetch(s, 3)))
    pair.check("fetch at the new log start", pair.both(lambda s: fetch(s, 6)))


def test_offset_for_leader_epoch_matches_kafka(differential_pair):
    pair = differential_pair
    pair.create_topics(["ole-diff"], 1)
    _produce(pair, "ole-diff", 0, 3)

    def ask(version, partitions, topic="ole-diff"):
        base = (OFFSET_FOR_LEADER_EPOCH, version)
        return req(OFFSET_FOR_LEADER_EPOCH, version, replica_id=-1, topics=(part(
            base, "OffsetForLeaderTopic", topic=topic, partitions=tuple(
                part(base, "OffsetForLeaderPartition", partition=p, current_leader_epoch=cur, leader_epoch=ep)
                for p, cur, ep in partitions)),))
    for version in (2, 3, 4):
        pair.check(f"OffsetForLeaderEpoch v{version}", pair.both(lambda s, v=version: ask(v, [
            (0, -1, 0), (0, 0, 0), (0, -1, 1), (0, -1, -1), (0, 1, 0), (3, -1, 0)])))
    pair.check("unknown topic", pair.both(lambda s: ask(4, [(0, -1, 0)], topic="ole-diff-none")))

    # the epoch the stored batches carry: 0 on both
    def fetch(s):
        base = (FETCH, 12)
        fp = part(base, "FetchPartition", partition=0, current_leader_epoch=-1, fetch_offset=0,
                  last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
        return req(FETCH, 12, replica_id=-1, max_wait=ms(0), min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                   session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=(),
                   topics=(part(base, "FetchTopic", topic="ole-diff", partitions=(fp,)),))
    answers = pair.both(fetch)
    epochs = [bytes(a.responses[0].partitions[0].records)[12:16] for a in answers]
    assert epochs[0] == epochs[1] == b"\0\0\0\0"


def test_elect_leaders_and_log_dirs_match_kafka(differential_pair):
    pair = differential_pair
    pair.create_topics(["el-diff"], 2)

    def elect(version, election_type, partitions):
        base = (ELECT_LEADERS, version)
        tps = None if partitions is None else tuple(part(base, "TopicPartitions", topic=t, partitions=tuple(ps))
                                                    for t, ps in partitions)
        kw = {"election_type": election_type} if version >= 1 else {}
        return req(ELECT_LEADERS, version, topic_partitions=tps, timeout=ms(5000), **kw)
    for version in (0, 1, 2):
        for election_type in ((0,) if version == 0 else (0, 1)):
            pair.check(f"ElectLeaders v{version} type {election_type}", pair.both(
                lambda s, v=version, e=election_type: elect(v, e, [("el-diff", [0, 1, 5]), ("el-diff-none", [0])])))
    # for every partition: the session's Kafka holds topics other tests made on it alone, so
    # only this test's topic is compared (listed, with no partition that needed an election)
    every = pair.both(lambda s: elect(2, 0, None))
    mine = [[(r.topic, r.partition_result) for r in a.replica_election_results if r.topic == "el-diff"]
            for a in every]
    assert mine[0] == mine[1] == [("el-diff", ())], mine

    _produce(pair, "el-diff", 1, 5)
    time.sleep(0.2)

    def log_dirs(version, topics):
        base = (DESCRIBE_LOG_DIRS, version)
        return req(DESCRIBE_LOG_DIRS, version, topics=None if topics is None else tuple(
            part(base, "DescribableLogDirTopic", topic=t, partitions=tuple(ps)) for t, ps in topics))
    for version in (1, 2, 3, 4):
        answers = pair.both(lambda s, v=version: log_dirs(v, [("el-diff", [0, 1, 7]), ("el-diff-none", [0])]))
        shapes = []
        for a in answers:
            assert len(a.results) == 1 and a.results[0].error_code == 0
            r = a.results[0]
            shapes.append([(t.name, [(p.partition_index, p.partition_size, p.offset_lag, p.is_future_key)
                                     for p in t.partitions]) for t in r.topics])
            if version >= 4:
                assert r.total_bytes > 0 and r.usable_bytes > 0
        assert shapes[0] == shapes[1], shapes
