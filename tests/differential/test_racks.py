"""broker.rack and the rack-aware replica selector (KIP-392) against Apache Kafka 4.4: one Kafka
and one minibroker, both with broker.rack=rack-a and RackAwareReplicaSelector. Metadata and
DescribeCluster report the rack; a Fetch from a consumer in another rack, in the same rack or in
none is answered alike (one replica: never a preferred read replica, the records read); a Fetch
v10 (no rack field) too. Virtual brokers, where the preferred replica is a follower, are in
tests/integration/test_fetch_from_follower.py.

Its own pair: the session's brokers run without racks.
"""

from __future__ import annotations

import datetime

import pytest

from minibroker.testing import MiniBroker, topic_name
from minibroker_protocol.records import build_batch
from tests.reference import settings
from tests.reference.client import part, req
from tests.reference.kafka import KafkaReference

from .pair import Pair

PRODUCE, FETCH, METADATA, DESCRIBE_CLUSTER = 0, 1, 3, 60
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@pytest.fixture(scope="module")
def pair(kafka_reference):
    # kafka_reference: skips (or fails under MINIBROKER_TEST_REQUIRE_TOOLS) without a JDK
    props = {**settings.kafka_properties(), "broker.rack": "rack-a", "replica.selector.class": SELECTOR}
    with MiniBroker(name="diff-racks", **settings.minibroker_options(), broker_rack="rack-a",
                    replica_selector_class=SELECTOR) as mb, \
            KafkaReference(props, classpath=settings.kafka_classpath()) as kafka:
        p = Pair(kafka.port, mb.port)
        try:
            yield p
        finally:
            p.close()


def test_rack_reported(pair):
    for s in pair.sides:
        md = s.call(req(METADATA, 12, topics=(), allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False))
        assert [b.rack for b in md.brokers] == ["rack-a"], (s.name, md.brokers)
        dc = s.call(req(DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=False, endpoint_type=1))
        assert [b.rack for b in dc.brokers] == ["rack-a"], (s.name, dc.brokers)


def test_broker_configs(pair):
    base = (32, 4)
    keys = ("broker.rack", "replica.selector.class", "log.message.timestamp.type",
            "log.message.timestamp.after.max.ms", "min.insync.replicas")
    answers = pair.both(lambda s: req(32, 4, include_synonyms=False, include_documentation=False, resources=(
        part(base, "DescribeConfigsResource", resource_type=4, resource_name="1", configuration_keys=keys),)))
    values = [sorted((c.name, c.value) for r in a.results for c in r.configs) for a in answers]
    assert values[0] == values[1], values
    assert ("broker.rack", "rack-a") in values[0] and ("replica.selector.class", SELECTOR) in values[0], values


def _fetch(topic: str, version: int, rack: str | None):
    base = (FETCH, version)
    fp = part(base, "FetchPartition", partition=0, current_leader_epoch=-1, fetch_offset=0,
              last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
    fields = dict(max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                  session_id=0, session_epoch=-1, forgotten_topics_data=(),
                  topics=(part(base, "FetchTopic", topic=topic, partitions=(fp,)),))
    if version >= 11:
        fields["rack_id"] = rack
    if version < 15:
        fields["replica_id"] = -1
    return req(FETCH, version, **fields)


def test_fetch_with_a_client_rack(pair):
    topic = topic_name("racks")
    pair.create_topics([topic], 1)
    base = (PRODUCE, 9)
    pd = part(base, "PartitionProduceData", index=0, records=build_batch([(b"k", b"v"), (b"k2", b"v2")]))
    answers = pair.both(lambda s: req(PRODUCE, 9, transactional_id=None, acks=-1,
                                      timeout=datetime.timedelta(seconds=5),
                                      topic_data=(part(base, "TopicProduceData", name=topic, partition_data=(pd,)),)))
    pair.check("Produce", answers)
    for version, rack in ((10, None), (11, "rack-b"), (12, "rack-a"), (12, ""), (12, "rack-b")):
        k = pair.check(f"Fetch v{version} rack {rack!r}", pair.both(lambda s: _fetch(topic, version, rack)))
        p = k["responses"][0]["partitions"][0]
        assert p["error_code"] == 0 and len(p["records"]) == 1, p
        if version >= 11:
            assert p["preferred_read_replica"] == -1, p
