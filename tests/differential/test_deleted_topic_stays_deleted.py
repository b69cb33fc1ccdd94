"""After DeleteTopics, which requests bring the topic back, against Kafka 4.4: only a Metadata
request that may create topics (v0-v3 always may; v4+ when allow_auto_topic_creation is set;
never an all-topics request or one by topic id, KafkaApis.handleTopicMetadataRequest) with
auto.create.topics.enable on. Every other request that names the deleted topic - Metadata v4+
without the flag, by id, or for all topics, DescribeTopicPartitions, ListOffsets, Fetch, Produce,
OffsetCommit, CreatePartitions - leaves it deleted on both brokers (issue 32: a
KIP-848 regex consumer's topic must not come back through a Metadata request that did not ask).
"""

from __future__ import annotations

import datetime
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from minibroker_protocol.records import build_batch
from tests.reference.client import part, req

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT = 0, 1, 2, 3, 8
DELETE_TOPICS, CREATE_PARTITIONS, DTP = 20, 37, 75


def _metadata(topic: str | None, version: int, allow: bool | None = None, topic_id=None):
    base = (METADATA, version)
    fields: dict = {}
    if version >= 4:
        fields["allow_auto_topic_creation"] = bool(allow)
    if version >= 8 and version <= 10:
        fields["include_cluster_authorized_operations"] = False
    if version >= 8:
        fields["include_topic_authorized_operations"] = False
    if topic is None and topic_id is None:
        topics = None if version >= 1 else ()
    elif version >= 10:
        topics = (part(base, "MetadataRequestTopic", name=topic, topic_id=topic_id),)
    else:
        topics = (part(base, "MetadataRequestTopic", name=topic),)
    return req(METADATA, version, topics=topics, **fields)


def _exists(s, topic: str) -> bool:
    r = s.call(_metadata(topic, 12, allow=False))
    return r.topics[0].error_code == 0


def _await_gone(s, topic: str) -> None:
    deadline = time.monotonic() + 30
    while _exists(s, topic):  # Kafka's brokers apply the deletion shortly after the controller
        assert time.monotonic() < deadline, f"{s.name}: {topic} still there 30 s after DeleteTopics"
        time.sleep(0.05)


def _delete(pair, topic: str) -> None:
    for s in pair.sides:
        r = s.call(req(DELETE_TOPICS, 6, topics=(part((DELETE_TOPICS, 6), "DeleteTopicState", name=topic,
                                                       topic_id=None),),
                       timeout=datetime.timedelta(seconds=10)))
        assert r.responses[0].error_code == 0, (s.name, r)
        _await_gone(s, topic)


def _others(topic: str, topic_id):
    """Requests naming the deleted topic that must not create it, by name."""
    out = []
    for v, allow in ((4, False), (9, False), (12, False), (13, False)):
        out.append((f"Metadata v{v} allow={allow}", lambda s, v=v, allow=allow: _metadata(topic, v, allow)))
    out.append(("Metadata v12 all topics, allow=True", lambda s: _metadata(None, 12, True)))
    out.append(("Metadata v12 by id, allow=True",
                lambda s: _metadata(None, 12, True, topic_id=s.topic_ids.get(topic))))
    out.append(("DescribeTopicPartitions", lambda s: req(DTP, 0, topics=(part((DTP, 0), "TopicRequest", name=topic),),
                                                         response_partition_limit=100, cursor=None)))
    out.append(("ListOffsets", lambda s: req(LIST_OFFSETS, 7, replica_id=-1, isolation_level=0, topics=(
        part((LIST_OFFSETS, 7), "ListOffsetsTopic", name=topic, partitions=(
            part((LIST_OFFSETS, 7), "ListOffsetsPartition", partition_index=0, current_leader_epoch=-1,
                 timestamp=-1),)),))))
    fb = (FETCH, 12)
    out.append(("Fetch", lambda s: req(FETCH, 12, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0,
                                       max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                                       rack_id="", forgotten_topics_data=(), topics=(part(fb, "FetchTopic", topic=topic,
                                       partitions=(part(fb, "FetchPartition", partition=0, current_leader_epoch=-1,
                                                        fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                                                        partition_max_bytes=1 << 20),)),))))
    pb = (PRODUCE, 9)
    out.append(("Produce", lambda s: req(PRODUCE, 9, transactional_id=None, acks=-1,
                                         timeout=datetime.timedelta(seconds=5), topic_data=(
        part(pb, "TopicProduceData", name=topic, partition_data=(
            part(pb, "PartitionProduceData", index=0, records=build_batch([(b"k", b"v")])),)),))))
    cb = (OFFSET_COMMIT, 8)
    out.append(("OffsetCommit", lambda s: req(OFFSET_COMMIT, 8, group_id=f"g-{topic}", generation_id_or_member_epoch=-1,
                                              member_id="", group_instance_id=None, topics=(
        part(cb, "OffsetCommitRequestTopic", name=topic, partitions=(
            part(cb, "OffsetCommitRequestPartition", partition_index=0, committed_offset=1,
                 committed_leader_epoch=-1, committed_metadata=""),)),))))
    out.append(("CreatePartitions", lambda s: req(CREATE_PARTITIONS, 3, topics=(
        part((CREATE_PARTITIONS, 3), "CreatePartitionsTopic", name=topic, count=2, assignments=None),),
        timeout=datetime.timedelta(seconds=5), validate_only=False)))
    return out


@pytest.fixture
def deleted(differential_pair):
    topic = f"gone-{uuid.uuid4().hex[:8]}"
    differential_pair.create_topics([topic], 1)
    _delete(differential_pair, topic)
    return topic


def test_requests_that_do_not_ask_leave_it_deleted(differential_pair, deleted):
    pair = differential_pair
    for what, make in _others(deleted, None):
        pair.both(make)
        states = [_exists(s, deleted) for s in pair.sides]
        assert states == [False, False], f"after {what}: exists on (Kafka, minibroker) = {states}"


@pytest.mark.parametrize("version,allow", [(1, None), (3, None), (4, True), (12, True), (13, True)])
def test_metadata_that_may_create_brings_it_back(differential_pair, deleted, version, allow):
    pair = differential_pair
    pair.both(lambda s: _metadata(deleted, version, allow))
    # Kafka creates it through its controller: seen by its brokers shortly after
    deadline = time.monotonic() + 30
    while not all(_exists(s, deleted) for s in pair.sides) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [_exists(s, deleted) for s in pair.sides] == [True, True], (version, allow)


def _regex_consumer_then_delete(boot: str, prefix: str) -> tuple[int, bool]:
    """A KIP-848 consumer (confluent-kafka, group.protocol=consumer) subscribed to ``^prefix-.*``
    reads one record from each of two topics; one is deleted; the consumer polls on for 6 s.
    (records read, whether the deleted topic exists afterwards)."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": boot})
    names = [f"{prefix}-a", f"{prefix}-b"]
    for f in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        f.result(timeout=30)
    producer = Producer({"bootstrap.servers": boot})
    for n in names:
        producer.produce(n, b"x")
    assert producer.flush(30) == 0
    del producer  # a live producer's metadata refresh asks to create (allow.auto.create.topics)
    c = Consumer({"bootstrap.servers": boot, "group.id": f"g-{prefix}", "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 500})
    try:
        c.subscribe([f"^{prefix}-.*"])
        got, deadline = 0, time.monotonic() + 30
        while got < 2 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got += 1
        admin.delete_topics([names[1]])[names[1]].result(timeout=30)
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            c.poll(0.3)
        return got, names[1] in admin.list_topics(timeout=10).topics
    finally:
        c.close()


def test_regex_consumer_does_not_bring_it_back(differential_pair, kafka_reference):
    pytest.importorskip("confluent_kafka")
    mini = differential_pair.mini.conn.address
    suffix = uuid.uuid4().hex[:6]
    # both at once: each side polls out a fixed 6 s after the delete
    with ThreadPoolExecutor(2) as pool:
        fk = pool.submit(_regex_consumer_then_delete, f"127.0.0.1:{kafka_reference.port}", f"rxk{suffix}")
        fm = pool.submit(_regex_consumer_then_delete, f"{mini[0]}:{mini[1]}", f"rxm{suffix}")
        k, m = fk.result(), fm.result()
    assert k == m == (2, False), (k, m)
