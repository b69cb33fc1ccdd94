"""min.insync.replicas on ``--brokers 3``: with virtual brokers stopped over the control plane,
an acks=all write to a partition with fewer replicas in sync than min.insync.replicas is refused
with NOT_ENOUGH_REPLICAS (confluent-kafka sees it as the delivery error), acks=1 is not, and the
write goes through again once a broker is back. The cap at the replication factor is compared
with Kafka 4.4 in tests/differential/test_min_insync_replicas.py."""

from __future__ import annotations

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def _boot(b) -> str:
    return ",".join(b.addresses)


def _send(b, topic: str, acks: str) -> list:
    reports: list = []
    p = Producer({"bootstrap.servers": _boot(b), "acks": acks, "retries": 0, "linger.ms": 0,
                  "enable.idempotence": False, "message.timeout.ms": 20_000})
    p.produce(topic, key=b"k", value=b"v", on_delivery=lambda err, msg: reports.append(err))
    assert p.flush(30) == 0, "a message left undelivered after 30 s"
    return reports


def test_not_enough_replicas_when_brokers_stop(broker_factory, topic):
    b = broker_factory(["--brokers", "3"], control=True)
    admin = AdminClient({"bootstrap.servers": _boot(b)})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]],
                                  config={"min.insync.replicas": "2"})])[topic].result(timeout=30)
    assert _send(b, topic, "all") == [None]
    b.control.stop_broker(3)  # two of three in sync: still enough
    assert _send(b, topic, "all") == [None]
    b.control.stop_broker(2)  # one in sync: acks=all refused, acks=1 taken
    (err,) = _send(b, topic, "all")
    assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS, err
    assert _send(b, topic, "1") == [None]
    produced = [r for r in b.control.requests(api="Produce", topic=topic) if r.get("error")]
    assert any("NOT_ENOUGH_REPLICAS" in str(r["error"]).upper() for r in produced), produced
    b.control.start_broker(2)
    assert _send(b, topic, "all") == [None]
