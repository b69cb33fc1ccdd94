"""KIP-392 fetch-from-follower on ``--brokers 3`` with a rack per virtual broker and Kafka's
RackAwareReplicaSelector: Metadata tells each broker's rack, the leader answers a consumer in
another rack with the preferred read replica (no records), and confluent-kafka with client.rack
then reads every record from that follower, as the control plane's request log shows; a consumer
in the leader's rack, or in no rack, reads from the leader. A stale leader epoch sent to a follower
is fenced, as Kafka's follower fences it."""

from __future__ import annotations

import datetime
import time

import pytest

from tests.reference.client import Connection, part, req

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

RACKS = ["rack-a", "rack-b", "rack-c"]
ARGS = ["--brokers", "3", "--broker-rack", ",".join(RACKS),
        "--replica-selector-class", "org.apache.kafka.common.replica.RackAwareReplicaSelector"]
FETCH, METADATA = 1, 3
N = 200


def _boot(b) -> str:
    return ",".join(b.addresses)


def _conn(b, node: int) -> Connection:
    host, port = b.addresses[node - 1].rsplit(":", 1)
    return Connection(host, int(port))


def _fetch(conn: Connection, topic: str, rack: str, epoch: int = -1, version: int = 12):
    base = (FETCH, version)
    fp = part(base, "FetchPartition", partition=0, current_leader_epoch=epoch, fetch_offset=0,
              last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
    r = conn.call(req(FETCH, version, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0,
                      max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1, rack_id=rack,
                      forgotten_topics_data=(), topics=(part(base, "FetchTopic", topic=topic, partitions=(fp,)),)))
    return r.responses[0].partitions[0]


def _consume(b, topic: str, rack: str | None) -> list[bytes]:
    conf = {"bootstrap.servers": _boot(b), "group.id": f"g-{topic}-{rack}", "enable.auto.commit": False,
            "fetch.wait.max.ms": 100}
    if rack is not None:
        conf["client.rack"] = rack
    c = Consumer(conf)
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(out) < N and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append(m.value())
        return out
    finally:
        c.close()


def _last_seq(b) -> int:
    seen = b.control.requests(limit=1)
    return seen[-1]["seq"] if seen else 0


def _fetches_served_by(b, topic: str, since: int) -> list[int]:
    """The node of each Fetch naming the topic after request ``since``, in order."""
    return [r["broker"] for r in b.control.requests(api="Fetch", topic=topic, since=since)]


def test_consumer_reads_from_the_follower_in_its_rack(broker_factory, topic):
    b = broker_factory(ARGS, control=True)
    admin = AdminClient({"bootstrap.servers": _boot(b)})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]])])[topic].result(
        timeout=30)
    with _conn(b, 2) as conn:
        md = conn.call(req(METADATA, 12, topics=(), allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False))
    assert {br.node_id: br.rack for br in md.brokers} == {1: "rack-a", 2: "rack-b", 3: "rack-c"}
    p = Producer({"bootstrap.servers": _boot(b), "linger.ms": 5})
    for i in range(N):
        p.produce(topic, value=b"%d" % i)
    assert p.flush(30) == 0
    expected = [b"%d" % i for i in range(N)]

    # raw: the leader (1) points a rack-c consumer at 3, with the offsets and no records
    leader = _conn(b, 1)
    try:
        answer = _fetch(leader, topic, "rack-c")
        assert (answer.error_code, answer.preferred_read_replica, answer.high_watermark) == (0, 3, N), answer
        assert not answer.records
        for rack in ("rack-a", "rack-z", ""):  # the leader's rack, no replica's, none
            answer = _fetch(leader, topic, rack)
            assert (answer.error_code, answer.preferred_read_replica) == (0, -1), (rack, answer)
            assert answer.records
    finally:
        leader.close()
    follower = _conn(b, 3)
    try:
        assert _fetch(follower, topic, "rack-c").records  # a follower serves a consumer (v11+)
        assert _fetch(follower, topic, "rack-c", version=10).error_code == 6  # NOT_LEADER_OR_FOLLOWER
    finally:
        follower.close()

    before = _last_seq(b)
    assert _consume(b, topic, "rack-b") == expected
    served = _fetches_served_by(b, topic, before)
    assert 2 in served and 3 not in served, served
    assert served.count(2) >= served.count(1), served  # after the first answer, the follower

    before = _last_seq(b)
    assert _consume(b, topic, "rack-a") == expected
    assert set(_fetches_served_by(b, topic, before)) == {1}

    # the leader moves away and back: a follower fences the epoch the consumer knew
    b.control.move_leader(topic, 0, 2)
    b.control.move_leader(topic, 0, 1)
    follower = _conn(b, 3)
    try:
        assert _fetch(follower, topic, "rack-c", epoch=0).error_code == 74  # FENCED_LEADER_EPOCH
        assert _fetch(follower, topic, "rack-c", epoch=2).error_code == 0
        assert _fetch(follower, topic, "rack-c", epoch=3).error_code == 75  # UNKNOWN_LEADER_EPOCH
    finally:
        follower.close()
