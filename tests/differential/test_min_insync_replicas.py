"""min.insync.replicas against Kafka 4.4 on one node: Kafka caps it at the replication factor
(Partition.effectiveMinIsr), so an acks=all write to a one-replica topic asking for 2 or 3 in sync
succeeds; 0 is refused as a config (INVALID_CONFIG). NOT_ENOUGH_REPLICAS itself needs brokers
down: tests/integration/test_min_insync_replicas.py stops virtual brokers for it."""

from __future__ import annotations

import datetime
import uuid

from minibroker_protocol.records import build_batch
from tests.reference.client import part, req

PRODUCE, CREATE_TOPICS = 0, 19


def _create(name: str, value: str):
    base = (CREATE_TOPICS, 4)
    return req(CREATE_TOPICS, 4, topics=(part(
        base, "CreatableTopic", name=name, num_partitions=1, replication_factor=1, assignments=(),
        configs=(part(base, "CreatableTopicConfig", name="min.insync.replicas", value=value),)),),
        timeout=datetime.timedelta(seconds=10), validate_only=False)


def _produce(topic: str, acks: int):
    base = (PRODUCE, 9)
    pd = part(base, "PartitionProduceData", index=0, records=build_batch([(b"k", b"v")]))
    return req(PRODUCE, 9, transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=5),
               topic_data=(part(base, "TopicProduceData", name=topic, partition_data=(pd,)),))


def test_min_insync_capped_at_the_replication_factor(differential_pair):
    pair = differential_pair
    suffix = uuid.uuid4().hex[:6]
    k = pair.check("CreateTopics min.insync.replicas=0", pair.both(lambda s: _create(f"mi0-{suffix}", "0")))
    assert [t["error_code"] for t in k["topics"]] == [40], k  # INVALID_CONFIG
    for value in ("2", "3"):
        name = f"mi{value}-{suffix}"
        pair.check(f"CreateTopics min.insync.replicas={value}", pair.both(lambda s: _create(name, value)))
        for s in pair.sides:
            pair._await_leaders(s, [name], 1)
        for acks in (-1, 1):
            k = pair.check(f"Produce acks={acks} to min.insync.replicas={value}",
                           pair.both(lambda s: _produce(name, acks)))
            assert [p["error_code"] for t in k["responses"] for p in t["partition_responses"]] == [0], k
