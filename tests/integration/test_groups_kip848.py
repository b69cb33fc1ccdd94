"""KIP-848 consumer groups (``group.protocol=consumer``) with librdkafka (confluent-kafka 2.16).

Real consumers against one broker process: two members share a topic's partitions and hand them
over at their committed positions when the second joins and when one leaves; a static member
(``group.instance.id``) that closes is replaced by a new process with the same instance id
without a rebalance of the others; a regex subscription picks up a topic created after it
joined; a broker restart (membership is not persisted) makes the member rejoin and go on from
its committed offsets. The broker's request counts prove the consumers spoke
ConsumerGroupHeartbeat and never JoinGroup. Every poll loop is bounded in time.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from minibroker.testing import requests_seen

from .clients import create_topic, produce_confluent, unique_topic
from .conftest import MODULE_BROKER_ARGS
from .support import project_broker

# The broker's consumer-group timings shortened, so a member that vanishes is fenced in
# seconds and members heartbeat often (the client may not set them under this protocol).
KIP848_ARGS = MODULE_BROKER_ARGS + ["--group-consumer-session-timeout-ms", "6000",
                                    "--group-consumer-heartbeat-interval-ms", "500"]


@pytest.fixture(scope="module")
def broker():
    b = project_broker(KIP848_ARGS, name="test_groups_kip848")
    try:
        b.start()
        yield b
    finally:
        b.close()


def consumer(bootstrap: str, group: str, name: str, **extra) -> Consumer:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "client.id": name, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    conf.update(extra)
    return Consumer(conf)


def poll_until(consumers, done, timeout: float, on_record=None) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        for c in consumers:
            m = c.poll(0.1)
            if m is not None and m.error() is None and on_record is not None:
                on_record(c, m)


def assigned(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def test_two_members_share_and_hand_over_partitions(broker):
    bs = broker.bootstrap_servers
    topic = unique_topic("kip848-share")
    create_topic(bs, topic, 4)
    produce_confluent(bs, topic, range(200))
    group = f"kip848-{uuid.uuid4().hex[:8]}"
    seen: dict[tuple[int, int], str] = {}

    def record(c, m):
        key = (m.partition(), m.offset())
        assert key not in seen, f"offset {key} delivered twice ({seen[key]}, {c})"
        seen[key] = str(id(c))
        c.commit(message=m, asynchronous=False)

    c1 = consumer(bs, group, "kip848-a")
    c1.subscribe([topic])
    poll_until([c1], lambda: len(seen) >= 40, 30, record)
    c2 = consumer(bs, group, "kip848-b")
    c2.subscribe([topic])
    # the second member gets half once the first has revoked them (revoke before assign)
    poll_until([c1, c2], lambda: len(assigned(c1)) == 2 and len(assigned(c2)) == 2, 30, record)
    assert assigned(c1) | assigned(c2) == {0, 1, 2, 3}
    poll_until([c1, c2], lambda: len(seen) == 200, 30, record)
    c2.close()  # leaves with epoch -1: c1 takes everything back
    poll_until([c1], lambda: len(assigned(c1)) == 4, 30, record)
    produce_confluent(bs, topic, range(200, 240))
    poll_until([c1], lambda: len(seen) == 240, 30, record)
    c1.close()

    ag = AdminClient({"bootstrap.servers": bs})
    listed = ag.list_consumer_groups(request_timeout=10).result(timeout=15)
    mine = [g for g in listed.valid if g.group_id == group]
    assert mine and mine[0].type.name == "CONSUMER", [(g.group_id, g.type) for g in listed.valid]
    counts = {(api, sw) for api, _v, sw in requests_seen(broker.log_text())}
    librdkafka = {sw for _api, sw in counts if "librdkafka" in sw or "confluent-kafka" in sw}
    assert any(("ConsumerGroupHeartbeat", sw) in counts for sw in librdkafka), counts
    log = broker.log_text()
    assert f"group_id={group}" in log and "consumer_group.member_left" in log


def test_static_member_is_replaced_without_a_rebalance(broker):
    bs = broker.bootstrap_servers
    topic = unique_topic("kip848-static")
    create_topic(bs, topic, 2)
    group = f"kip848-static-{uuid.uuid4().hex[:8]}"
    a = consumer(bs, group, "static-a", **{"group.instance.id": "worker-1"})
    b = consumer(bs, group, "static-b", **{"group.instance.id": "worker-2"})
    for c in (a, b):
        c.subscribe([topic])
    poll_until([a, b], lambda: len(assigned(a)) == 1 and len(assigned(b)) == 1, 30)
    before = assigned(a)
    a.close()  # a static member leaves with epoch -2: its partitions wait for it
    a2 = consumer(bs, group, "static-a2", **{"group.instance.id": "worker-1"})
    a2.subscribe([topic])
    poll_until([a2, b], lambda: assigned(a2) == before, 20)
    assert len(assigned(b)) == 1
    a2.close()
    b.close()
    log = broker.log_text()
    assert "consumer_group.static_member_left" in log and "consumer_group.static_member_replaced" in log


def test_regex_subscription_picks_up_a_new_topic(broker):
    bs = broker.bootstrap_servers
    prefix = f"kip848-rx-{uuid.uuid4().hex[:6]}"
    create_topic(bs, f"{prefix}-one", 1)
    produce_confluent(bs, f"{prefix}-one", range(10))
    group = f"kip848-rx-{uuid.uuid4().hex[:8]}"
    c = consumer(bs, group, "regex", **{"topic.metadata.refresh.interval.ms": 500})
    c.subscribe([f"^{prefix}-.*"])
    got: set[str] = set()
    poll_until([c], lambda: len(got) >= 10, 30, lambda _c, m: got.add(f"{m.topic()}/{m.offset()}"))
    create_topic(bs, f"{prefix}-two", 1)
    produce_confluent(bs, f"{prefix}-two", range(5))
    poll_until([c], lambda: len(got) >= 15, 30, lambda _c, m: got.add(f"{m.topic()}/{m.offset()}"))
    assert {t.split("/")[0] for t in got} == {f"{prefix}-one", f"{prefix}-two"}
    c.close()


def test_member_rejoins_after_a_broker_restart(broker_factory):
    b = broker_factory(KIP848_ARGS)
    bs = b.bootstrap_servers
    topic = unique_topic("kip848-restart")
    create_topic(bs, topic, 2)
    produce_confluent(bs, topic, range(50))
    group = f"kip848-restart-{uuid.uuid4().hex[:8]}"
    c = consumer(bs, group, "restart")
    c.subscribe([topic])
    count = [0]

    def record(cons, m):
        count[0] += 1
        cons.commit(message=m, asynchronous=False)

    poll_until([c], lambda: count[0] == 50, 30, record)
    b.restart()  # membership is not persisted: the member's next heartbeat is UNKNOWN_MEMBER_ID
    produce_confluent(bs, topic, range(50, 80))
    poll_until([c], lambda: count[0] == 80, 60, record)
    committed = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
    assert sum(tp.offset for tp in committed) == 80
    c.close()
    assert "error=unknown_member_id" in b.log_text()  # the rejoin, as the divergence list says
