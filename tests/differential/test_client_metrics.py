"""KIP-714 client telemetry and the config APIs its subscriptions use, against Kafka 4.4.

The pair's Kafka runs with a metrics receiver (tests/reference/telemetry_sink.py), so both serve
GetTelemetrySubscriptions and PushTelemetry. A client instance id chosen by the test makes the
subscription id comparable (CRC32C of the metric set as Java's HashSet prints it, XOR the id's
hash); one the broker picks is random on both sides and is compared by shape only.
"""

from __future__ import annotations

import datetime
import gzip
import time
import uuid

import pytest

from tests.reference.client import part, req

from .divergences import REFUSED_ON_PURPOSE

GET, PUSH, IAC, DESCRIBE_CONFIGS, LIST_CONFIG_RESOURCES, CREATE_TOPICS = 71, 72, 44, 32, 74, 19
CLIENT_METRICS, TOPIC, BROKER = 16, 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _payload() -> bytes:
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    data = metrics_pb2.MetricsData()
    metric = data.resource_metrics.add().scope_metrics.add().metrics.add()
    metric.name = "org.apache.kafka.producer.record.send.rate"
    metric.gauge.data_points.add().as_double = 2.5
    return data.SerializeToString()


def _alter(resources, validate_only=False, version=1):
    return req(IAC, version, validate_only=validate_only, resources=tuple(
        part((IAC, version), "AlterConfigsResource", resource_type=kind, resource_name=name,
             configs=tuple(part((IAC, version), "AlterableConfig", name=k, config_operation=op, value=v)
                           for k, op, v in configs))
        for kind, name, configs in resources))


def _get(iid):
    return req(GET, 0, client_instance_id=iid)


def _push(iid, sub, data=b"", compression=0, terminating=False):
    return req(PUSH, 0, client_instance_id=iid, subscription_id=sub, terminating=terminating,
               compression_type=compression, metrics=data)


def _telemetry(pair):
    for s in pair.sides:
        if GET not in s.versions or PUSH not in s.versions:
            pytest.skip(f"{s.name} does not serve client telemetry (no JDK for the reference sink?)")


def _subscription(pair, name, configs):
    pair.check(f"set subscription {name}", pair.both(lambda s: _alter([(CLIENT_METRICS, name, configs)])))


def _remove_subscriptions(pair, names):
    for name in names:
        pair.both(lambda s, n=name: _alter([(CLIENT_METRICS, n, [(k, DELETE, None) for k in
                                                                  ("metrics", "interval.ms", "match")])]))


def test_subscriptions_and_pushes_match_kafka(differential_pair):
    pair = differential_pair
    _telemetry(pair)
    payload = _payload()
    a = uuid.UUID("0f0e0d0c-0b0a-0908-0706-050403020100")
    b = uuid.UUID("11111111-2222-3333-4444-555555555555")
    names = ["tm-one", "tm-two", "tm-none"]
    try:
        got = pair.check("get, no subscription", pair.both(lambda s: _get(a)))
        pair.check("get again at once: throttled", pair.both(lambda s: _get(a)))
        sub = got["subscription_id"]
        pair.check("push naming another subscription", pair.both(lambda s: _push(a, sub + 1, payload)))
        pair.check("push right after a refused push", pair.both(lambda s: _push(a, sub, payload)))
        for reserved in (uuid.UUID(int=0), uuid.UUID(int=1)):
            pair.check("push with a reserved id", pair.both(lambda s, r=reserved: _push(r, 0, payload)))
        # Subscriptions that match only this test's connections (client id "differential").
        _subscription(pair, "tm-one", [("metrics", SET, "org.apache.kafka.producer., org.apache.kafka.consumer.co"),
                                       ("interval.ms", SET, "1000"), ("match", SET, "client_id=differential")])
        _subscription(pair, "tm-two", [("metrics", SET, "org.apache.kafka.consumer.fetch,zeta.x,alpha"),
                                       ("interval.ms", SET, "2000"), ("match", SET, "client_id=diff.*")])
        _subscription(pair, "tm-none", [("metrics", SET, "*"), ("match", SET, "client_software_name=nomatch")])
        pair.check("re-evaluated at once after a change", pair.both(lambda s: _get(a)))
        got = pair.check("a new instance gets the union", pair.both(lambda s: _get(b)))
        sub = got["subscription_id"]
        pair.check("an undecodable payload", pair.both(lambda s: _push(b, sub, b"\x01\x02 not otlp")))
        pair.check("get before the interval", pair.both(lambda s: _get(b)))
        time.sleep(1.1)
        pair.check("unknown compression type", pair.both(lambda s: _push(b, sub, payload, compression=9)))
        time.sleep(1.1)
        pair.check("gzip-compressed push", pair.both(lambda s: _push(b, sub, gzip.compress(payload), 1)))
        pair.check("terminating push", pair.both(lambda s: _push(b, sub, payload, terminating=True)))
        pair.check("push after terminating", pair.both(lambda s: _push(b, sub, payload)))
        pair.check("too large", pair.both(lambda s: _push(b, sub, b"x" * 1_048_577, terminating=True)))
        _subscription(pair, "tm-none", [("metrics", SET, "*"), ("match", SET, "client_id=differential")])
        pair.check("'*' subscribes to everything", pair.both(lambda s: _get(b)))
        # An id the broker picks: random on both sides, the rest of the answer equal.
        answers = pair.both(lambda s: _get(None))
        assert all(r.client_instance_id.int != 0 and r.error_code == 0 for r in answers)
        shape = [(r.requested_metrics, r.push_interval, r.accepted_compression_types, r.telemetry_max_bytes,
                  r.delta_temporality) for r in answers]
        assert shape[0] == shape[1]
    finally:
        _remove_subscriptions(pair, names)


def test_config_alterations_match_kafka(differential_pair):
    pair = differential_pair
    topic = "iac-diff"
    for s in pair.sides:
        r = s.call(req(CREATE_TOPICS, 5, timeout=datetime.timedelta(seconds=10), validate_only=False,
                       topics=(part((CREATE_TOPICS, 5), "CreatableTopic", name=topic, num_partitions=1,
                                    replication_factor=1, assignments=(), configs=()),)))
        assert r.topics[0].error_code in (0, 36)
    steps = [
        ("set two", [(TOPIC, topic, [("retention.ms", SET, "100000"), ("cleanup.policy", SET, "compact")])]),
        ("append to a list", [(TOPIC, topic, [("cleanup.policy", APPEND, "delete")])]),
        ("append what is there", [(TOPIC, topic, [("cleanup.policy", APPEND, "delete")])]),
        ("subtract", [(TOPIC, topic, [("cleanup.policy", SUBTRACT, "compact")])]),
        ("append to a non-list", [(TOPIC, topic, [("retention.ms", APPEND, "5")])]),
        ("unknown name", [(TOPIC, topic, [("foo.bar", SET, "5")])]),
        ("bad number", [(TOPIC, topic, [("retention.ms", SET, "abc")])]),
        ("one bad of two changes nothing", [(TOPIC, topic, [("retention.ms", SET, "5"),
                                                              ("retention.bytes", SET, "x")])]),
        ("null SET", [(TOPIC, topic, [("retention.ms", SET, None)])]),
        ("bad list element", [(TOPIC, topic, [("cleanup.policy", APPEND, "a,b")])]),
        ("empty list", [(TOPIC, topic, [("cleanup.policy", SET, "")])]),
        ("list with blanks", [(TOPIC, topic, [("cleanup.policy", SET, "delete , compact")])]),
        ("delete", [(TOPIC, topic, [("retention.ms", DELETE, None)])]),
        ("delete unset and unknown", [(TOPIC, topic, [("segment.ms", DELETE, None), ("nope", DELETE, None)])]),
        ("duplicate keys", [(TOPIC, topic, [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)])]),
        ("unknown operation", [(TOPIC, topic, [("retention.ms", 7, "1")])]),
        ("default topic", [(TOPIC, "", [("retention.ms", SET, "1")])]),
        ("invalid topic name", [(TOPIC, "bad name!", [("retention.ms", SET, "1")])]),
        ("unknown topic", [(TOPIC, "iac-no-such-topic", [("retention.ms", SET, "1")])]),
        ("duplicate resource", [(TOPIC, topic, [("retention.ms", SET, "1")]),
                                (TOPIC, topic, [("retention.ms", SET, "2")])]),
        ("unknown resource type", [(99, "x", [("a", SET, "1")])]),
        ("client metrics checks", [(CLIENT_METRICS, "", [("metrics", SET, "*")]),
                                   (CLIENT_METRICS, "iac-a", [("foo", SET, "1")]),
                                   (CLIENT_METRICS, "iac-b", [("interval.ms", SET, "50")]),
                                   (CLIENT_METRICS, "iac-c", [("interval.ms", SET, "abc")]),
                                   (CLIENT_METRICS, "iac-d", [("match", SET, "foo=bar")]),
                                   (CLIENT_METRICS, "iac-e", [("match", SET, "client_id=[")]),
                                   (CLIENT_METRICS, "iac-f", [("metrics", APPEND, "a")]),
                                   (CLIENT_METRICS, "iac-g", [("metrics", SET, None)])]),
        ("client metrics set", [(CLIENT_METRICS, "iac-ok", [("metrics", SET, "a, b"),
                                                            ("match", SET, "client_id=x.*, client_software_name=y")])]),
    ]
    for what, resources in steps:
        pair.check(what, pair.both(lambda s, r=resources: _alter(r)))
    pair.check("validate only", pair.both(lambda s: _alter([(TOPIC, topic, [("retention.ms", SET, "77")])], True)))
    pair.check("v0", pair.both(lambda s: _alter([(TOPIC, topic, [("segment.ms", SET, "3600000")])], version=0)))

    def describe(kind, name):
        return req(DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=True,
                   resources=(part((DESCRIBE_CONFIGS, 4), "DescribeConfigsResource", resource_type=kind,
                                   resource_name=name, configuration_keys=None),))
    # The topic's own (dynamic) configs: minibroker lists fewer defaults than Kafka, so compare these.
    own = [{(c.name, c.value) for c in r.results[0].configs if c.config_source == 1}
           for r in pair.both(lambda s: describe(TOPIC, topic))]
    assert own[0] == own[1] == {("cleanup.policy", "delete,compact"), ("segment.ms", "3600000")}
    for name in ("iac-ok", "iac-none", ""):
        pair.check(f"describe subscription {name!r}", pair.both(lambda s, n=name: describe(CLIENT_METRICS, n)))
    for version, types in ((0, ()), (1, (CLIENT_METRICS,)), (1, (99,))):
        kw = {"resource_types": types} if version else {}
        pair.check(f"list config resources v{version} {types}",
                   pair.both(lambda s, v=version, k=kw: req(LIST_CONFIG_RESOURCES, v, **k)))
    listed = [{(c.resource_name, c.resource_type) for c in r.config_resources}
              for r in pair.both(lambda s: req(LIST_CONFIG_RESOURCES, 1, resource_types=(TOPIC,)))]
    assert (topic, TOPIC) in listed[0] and (topic, TOPIC) in listed[1]
    _remove_subscriptions(pair, ["iac-ok"])


def test_broker_configs_are_refused_on_purpose(differential_pair):
    assert any("BROKER" in k for k in REFUSED_ON_PURPOSE)
    r = differential_pair.mini.call(_alter([(BROKER, "1", [("log.cleaner.threads", SET, "2")])]))
    assert [x.error_code for x in r.responses] == [42]
    assert all("at runtime" in x.error_message for x in r.responses)
