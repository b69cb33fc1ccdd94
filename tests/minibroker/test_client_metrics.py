"""KIP-714 client instances and subscriptions, with a manual clock and no I/O.

The subscription ids below were answered by Apache Kafka 4.4.0 for the same instance ids and
subscriptions (tests/differential/test_client_metrics.py sends them to both brokers)."""

from __future__ import annotations

import gzip
import uuid

import pytest

from minibroker.client_metrics import configs as cmc
from minibroker.client_metrics.manager import ClientMetricsManager, Refused, java_hash_set_order
from minibroker.client_metrics.received import ReceivedMetrics
from minibroker.core.clock import ManualClock
from minibroker_protocol.errors import ErrorCode

A = uuid.UUID("0f0e0d0c-0b0a-0908-0706-050403020100")
B = uuid.UUID("11111111-2222-3333-4444-555555555555")
CLIENT = {"client_id": "differential", "client_software_name": "unknown", "client_software_version": "unknown",
          "client_source_address": "127.0.0.1", "client_source_port": "5000"}


class Conn:
    closed = False


def manager(**kw):
    clock = ManualClock()
    saved = []
    m = ClientMetricsManager(clock=clock, max_bytes=1000, save=saved.append, **kw)
    return m, clock, saved


def payload(value=2.5, delta_sum=None) -> bytes:
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    data = metrics_pb2.MetricsData()
    rm = data.resource_metrics.add()
    kv = rm.resource.attributes.add()
    kv.key, kv.value.string_value = "client_id", "differential"
    metrics = rm.scope_metrics.add().metrics
    g = metrics.add()
    g.name = "org.apache.kafka.producer.record.send.rate"
    g.gauge.data_points.add().as_double = value
    if delta_sum is not None:
        s = metrics.add()
        s.name = "org.apache.kafka.producer.record.send.total"
        s.sum.aggregation_temporality = 1
        s.sum.is_monotonic = True
        p = s.sum.data_points.add()
        p.as_int = delta_sum
        a = p.attributes.add()
        a.key, a.value.string_value = "topic", "orders"
    return data.SerializeToString()


def test_subscription_ids_are_kafkas():
    m, clock, saved = manager()
    assert m.get_subscriptions(A, CLIENT).subscription_id == -725132322
    m.alter("s1", {"metrics": "org.apache.kafka.producer., org.apache.kafka.consumer.coordinator",
                   "interval.ms": "1000"})
    inst = m.get_subscriptions(A, CLIENT)  # re-evaluated at once: no throttle
    assert (inst.subscription_id, inst.interval_ms) == (-1918201617, 1000)
    assert inst.metrics == ("org.apache.kafka.producer.", "org.apache.kafka.consumer.coordinator")
    m.alter("s2", {"metrics": "org.apache.kafka.consumer.fetch,org.apache.kafka.producer.,zeta.x,alpha",
                   "interval.ms": "2000", "match": "client_id=diff.*"})
    m.alter("s3", {"metrics": "*", "match": "client_software_name=nomatch"})
    inst = m.get_subscriptions(B, CLIENT)
    assert inst.subscription_id == 730125546
    assert inst.metrics == ("org.apache.kafka.producer.", "org.apache.kafka.consumer.coordinator", "zeta.x",
                            "alpha", "org.apache.kafka.consumer.fetch")
    m.alter("s3", {"metrics": "*", "match": "client_id=differential"})
    clock.advance(1)
    inst = m.get_subscriptions(B, CLIENT)
    assert (inst.metrics, inst.subscription_id) == (("*",), 279548059)
    assert saved[-1]["s3"] == {"metrics": "*", "match": "client_id=differential"}


def test_throttle_terminating_and_errors_follow_kafka():
    m, clock, _ = manager()
    m.alter("all", {"metrics": "*", "interval.ms": "1000"})
    inst = m.get_subscriptions(None, CLIENT)
    iid, sub = inst.instance_id, inst.subscription_id
    assert iid.int != 0
    with pytest.raises(Refused) as e:
        m.get_subscriptions(iid, CLIENT)
    assert e.value.code == ErrorCode.throttling_quota_exceeded
    m.push(iid, sub, False, 0, payload(), CLIENT)  # right after a Get: allowed
    with pytest.raises(Refused) as e:
        m.push(iid, sub, False, 0, payload(), CLIENT)
    assert e.value.code == ErrorCode.throttling_quota_exceeded
    clock.advance(1000)
    with pytest.raises(Refused) as e:
        m.push(iid, sub + 1, False, 0, payload(), CLIENT)
    assert e.value.code == ErrorCode.unknown_subscription_id
    clock.advance(1000)
    for code, args in [(ErrorCode.unsupported_compression_type, (9, payload())),
                       (ErrorCode.telemetry_too_large, (0, b"x" * 1001))]:
        with pytest.raises(Refused) as e:
            m.push(iid, sub, True, *args, CLIENT)  # terminating: no throttle
        assert e.value.code == code
        m.instances[iid].terminating = False
    m.push(iid, sub, True, 0, payload(), CLIENT)
    with pytest.raises(Refused) as e:
        m.push(iid, sub, False, 0, payload(), CLIENT)
    assert e.value.code == ErrorCode.invalid_request
    for reserved in (uuid.UUID(int=0), uuid.UUID(int=1), None):
        with pytest.raises(Refused):
            m.push(reserved, 0, False, 0, b"", CLIENT)


def test_instances_expire_and_go_with_their_connection():
    m, clock, _ = manager()
    conn = Conn()
    m.get_subscriptions(A, CLIENT, conn)
    m.get_subscriptions(B, CLIENT)
    conn.closed = True
    assert [i.instance_id for i in m.live()] == [B]
    clock.advance(899_999)  # 3 × the default 5 min interval
    assert m.live()
    clock.advance(1)
    assert m.live() == []
    # Kafka forgets them; the console still lists them, gone, with why and when
    assert [(i.instance_id, i.gone_reason) for i in m.gone()] == [(B, "expired"), (A, "disconnected")]
    assert m.gone()[0].gone_ms == clock.wall_ms()


def test_a_client_no_subscription_matches_still_asked_and_is_counted():
    m, clock, _ = manager()
    conn = Conn()
    inst = m.get_subscriptions(None, CLIENT, conn)  # no subscription at all: asked for nothing
    assert (inst.metrics, inst.interval_ms, inst.gets) == ((), 300_000, 1)
    with pytest.raises(Refused):
        m.get_subscriptions(inst.instance_id, CLIENT, conn)  # too early: refused, still counted
    assert [(i.instance_id, i.gets, i.pushes) for i in m.live()] == [(inst.instance_id, 2, 0)]
    conn.closed = True
    assert m.live() == [] and [i.gets for i in m.gone()] == [2]
    # back with the id it was given, on a new connection: live again, its counts carried on
    m.alter("all", {"metrics": "*", "interval.ms": "1000"})
    again = m.get_subscriptions(inst.instance_id, CLIENT, Conn())
    m.push(again.instance_id, again.subscription_id, False, 0, payload(), CLIENT)
    assert (again.gets, again.pushes, again.metrics) == (3, 1, ("*",))
    assert m.gone() == [] and m.live() == [again]


def test_match_selects_on_every_attribute_in_full():
    m, _, _ = manager()
    m.alter("lib", {"metrics": "a", "match": "client_software_name=librdkafka, client_id=orders-.*"})
    assert m.get_subscriptions(A, {**CLIENT, "client_software_name": "librdkafka", "client_id": "orders-7"}).metrics \
        == ("a",)
    assert m.get_subscriptions(B, {**CLIENT, "client_software_name": "librdkafka-x", "client_id": "orders-7"}).metrics \
        == ()
    m.alter("lib", {})  # every config deleted: the subscription goes
    assert m.configs == {} and m.subscriptions == {}


@pytest.mark.parametrize("name,configs,code,message", [
    ("", {"metrics": "*"}, ErrorCode.invalid_request, "Subscription name can't be empty"),
    ("s", {"foo": "1"}, ErrorCode.invalid_request, "Unknown client metrics configuration: foo"),
    ("s", {"interval.ms": "99"}, ErrorCode.invalid_request, "Invalid value 99 for interval.ms, interval must be"),
    ("s", {"interval.ms": "x"}, ErrorCode.invalid_config, "Not a number of type INT"),
    ("s", {"match": "client_id"}, ErrorCode.invalid_config, "Illegal client matching pattern: client_id"),
    ("s", {"match": "client_id=a=b"}, ErrorCode.invalid_config, "Illegal client matching pattern"),
    ("s", {"match": "host=a"}, ErrorCode.invalid_config, "Illegal client matching pattern"),
    ("s", {"match": "client_id=("}, ErrorCode.invalid_config, "Illegal client matching pattern"),
])
def test_bad_subscriptions_are_refused_and_change_nothing(name, configs, code, message):
    m, _, saved = manager()
    with pytest.raises(cmc.SubscriptionError) as e:
        m.alter(name, configs)
    assert e.value.code == code and message in str(e.value)
    assert m.configs == {} and saved == []


def test_unreadable_stored_subscription_is_skipped():
    m, _, _ = manager(subscriptions={"ok": {"metrics": "*"}, "bad": {"interval.ms": "1"}})
    assert list(m.subscriptions) == ["ok"]


def test_java_hash_set_order_grows_its_table():
    names = [f"metric.{i}" for i in range(40)]
    order = java_hash_set_order(names)
    assert sorted(order) == sorted(names) and len(order) == 40


def test_received_metrics_keep_last_values_and_delta_totals():
    m, clock, _ = manager()
    received = ReceivedMetrics(clock)
    m.receiver = received.receive
    m.alter("all", {"metrics": "*", "interval.ms": "100"})
    inst = m.get_subscriptions(A, CLIENT)
    m.push(A, inst.subscription_id, False, 1, gzip.compress(payload(2.5, delta_sum=3)), CLIENT)
    clock.advance(100)
    m.push(A, inst.subscription_id, False, 0, payload(4.0, delta_sum=4), CLIENT)
    view = received.view(A)
    assert view is not None and view["pushes"] == 2 and view["resource"] == {"client_id": "differential"}
    by_name = {x["name"]: x for x in view["metrics"]}
    assert by_name["org.apache.kafka.producer.record.send.rate"]["value"] == 4.0
    total = by_name["org.apache.kafka.producer.record.send.total"]
    assert (total["value"], total["total"], total["attributes"]) == (4.0, 7.0, {"topic": "orders"})
    clock.advance(100)
    with pytest.raises(Refused) as e:
        m.push(A, inst.subscription_id, False, 0, b"\x01\x02 not otlp", CLIENT)
    assert e.value.code == ErrorCode.invalid_record
    assert received.view(A)["pushes"] == 2
