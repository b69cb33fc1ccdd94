"""What LogValidator-style record checks look like to a real client (confluent-kafka / librdkafka):
LogAppendTime from the broker default (log.message.timestamp.type) and from a topic config, read
back as TIMESTAMP_LOG_APPEND_TIME with the broker's time, an idempotent compressed producer
included; a topic that overrides the default back to CreateTime keeps the producer's times;
INVALID_TIMESTAMP from message.timestamp.before.max.ms; a compacted topic refusing a record
without a key (INVALID_RECORD).
The wire-level answers are compared with Kafka 4.4 in tests/differential/test_record_validation.py.
"""

from __future__ import annotations

import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

HOUR_MS = 3_600_000


def _create(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 1, 1, config=configs)]).values():
        f.result(timeout=30)


def _produce(bootstrap: str, topic: str, items, **extra) -> list:
    """Send (key, value, timestamp) items; the delivery reports' messages (or errors)."""
    reports: list = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **extra})
    for key, value, ts in items:
        p.produce(topic, value=value, key=key, timestamp=ts or 0,
                  on_delivery=lambda err, msg: reports.append(err if err is not None else msg))
    assert p.flush(30) == 0, "messages left undelivered after 30 s"
    return reports


def _consume(bootstrap: str, topic: str, n: int) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out: list = []
        deadline = time.monotonic() + 60
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and not m.error():
                out.append(m)
        return out
    finally:
        c.close()


def test_log_append_time_read_by_librdkafka(broker_factory, topic):
    mb = broker_factory(log_message_timestamp_type="LogAppendTime")
    boot = mb.bootstrap_servers
    old = int(time.time() * 1000) - 5 * HOUR_MS
    _create(boot, topic, {})  # the broker's default: LogAppendTime
    _create(boot, topic + "-ct", {"message.timestamp.type": "CreateTime"})
    before = int(time.time() * 1000)
    reports = _produce(boot, topic, [(b"k%d" % i, b"v%d" % i, old + i) for i in range(20)],
                       **{"enable.idempotence": True, "compression.type": "lz4"})
    assert all(not isinstance(r, KafkaError) for r in reports), reports[:3]
    ct_reports = _produce(boot, topic + "-ct", [(b"k", b"v", old)])
    after = int(time.time() * 1000)
    # the delivery report carries the broker's log_append_time_ms
    kinds = {r.timestamp()[0] for r in reports}
    assert kinds == {confluent_kafka.TIMESTAMP_LOG_APPEND_TIME}, kinds
    assert all(before - 1000 <= r.timestamp()[1] <= after + 1000 for r in reports), reports[0].timestamp()
    got = _consume(boot, topic, 20)
    assert [m.value() for m in got] == [b"v%d" % i for i in range(20)]
    for m in got:
        kind, ts = m.timestamp()
        assert kind == confluent_kafka.TIMESTAMP_LOG_APPEND_TIME, m.timestamp()
        assert before - 1000 <= ts <= after + 1000, (ts, before, after)
    assert ct_reports[0].timestamp() == (confluent_kafka.TIMESTAMP_CREATE_TIME, old)
    (m,) = _consume(boot, topic + "-ct", 1)
    assert m.timestamp() == (confluent_kafka.TIMESTAMP_CREATE_TIME, old)


def test_timestamp_bounds_refuse_with_invalid_timestamp(broker_factory, topic):
    mb = broker_factory()
    boot = mb.bootstrap_servers
    _create(boot, topic, {"message.timestamp.before.max.ms": str(HOUR_MS)})
    now = int(time.time() * 1000)
    reports = _produce(boot, topic, [(b"k", b"old", now - 3 * HOUR_MS)], **{"linger.ms": 0, "retries": 0})
    assert isinstance(reports[0], KafkaError) and reports[0].code() == KafkaError.INVALID_TIMESTAMP, reports
    reports = _produce(boot, topic, [(b"k", b"fresh", now)])
    assert not isinstance(reports[0], KafkaError), reports


def test_compacted_topic_refuses_keyless_records(broker_factory, topic):
    mb = broker_factory()
    boot = mb.bootstrap_servers
    _create(boot, topic, {"cleanup.policy": "compact"})
    reports = _produce(boot, topic, [(None, b"no key", None)], **{"linger.ms": 0, "retries": 0})
    assert isinstance(reports[0], KafkaError) and reports[0].code() == KafkaError.INVALID_RECORD, reports
    reports = _produce(boot, topic, [(b"k", b"keyed", None), (b"k", None, None)])
    assert not any(isinstance(r, KafkaError) for r in reports), reports
    assert [m.value() for m in _consume(boot, topic, 2)] == [b"keyed", None]


def test_altered_timestamp_type_applies_to_the_next_batch(broker_factory, topic):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    mb = broker_factory()
    boot = mb.bootstrap_servers
    _create(boot, topic, {})
    old = int(time.time() * 1000) - HOUR_MS
    (first,) = _produce(boot, topic, [(b"k", b"before", old)])
    assert first.timestamp() == (confluent_kafka.TIMESTAMP_CREATE_TIME, old)
    admin = AdminClient({"bootstrap.servers": boot})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("message.timestamp.type", "LogAppendTime", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(timeout=30)
    (second,) = _produce(boot, topic, [(b"k", b"after", old)])
    assert second.timestamp()[0] == confluent_kafka.TIMESTAMP_LOG_APPEND_TIME and second.timestamp()[1] > old


def test_log_append_time_on_transactional_batches(broker_factory, topic):
    mb = broker_factory()
    boot = mb.bootstrap_servers
    _create(boot, topic, {"message.timestamp.type": "LogAppendTime"})
    old = int(time.time() * 1000) - HOUR_MS
    p = Producer({"bootstrap.servers": boot, "transactional.id": f"tx-{topic}", "compression.type": "gzip"})
    p.init_transactions(30)
    for commit in (True, False, True):
        p.begin_transaction()
        for i in range(5):
            p.produce(topic, key=b"k", value=b"%s-%d" % (b"c" if commit else b"a", i), timestamp=old)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    c = Consumer({"bootstrap.servers": boot, "group.id": f"g-{topic}", "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list = []
        deadline = time.monotonic() + 60
        while len(got) < 10 and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and not m.error():
                got.append(m)
    finally:
        c.close()
    assert [m.value() for m in got] == [b"c-%d" % i for i in range(5)] * 2
    assert {m.timestamp()[0] for m in got} == {confluent_kafka.TIMESTAMP_LOG_APPEND_TIME}
    assert all(m.timestamp()[1] > old + HOUR_MS // 2 for m in got)
