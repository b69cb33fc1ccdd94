"""AlterConfigs v0-2, the non-incremental form, against Kafka 4.4: a topic's dynamic configs become
exactly those sent (the rest are deleted), validate_only, null values, bad values, unknown topics,
duplicate keys, logger resources, and group and client metrics resources. Broker resources are
refused on purpose (divergences.REFUSED_ON_PURPOSE), checked on minibroker alone below, as are
the requests Kafka 4.4 leaves unanswered (a resource named twice, an unknown resource type)."""

from __future__ import annotations

import uuid

import pytest

from tests.reference.client import part, req

ALTER, DESCRIBE_CONFIGS = 33, 32
TOPIC, GROUP, CLIENT_METRICS = 2, 32, 16
DYNAMIC_TOPIC_CONFIG = 1
NAME = f"ac-diff-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def topic(differential_pair):
    differential_pair.create_topics([NAME], 1)
    return NAME


def _alter(resources, validate_only=False, version=2):
    api = (ALTER, version)
    return req(ALTER, version, validate_only=validate_only, resources=tuple(
        part(api, "AlterConfigsResource", resource_type=kind, resource_name=name,
             configs=tuple(part(api, "AlterableConfig", name=k, value=v) for k, v in configs))
        for kind, name, configs in resources))


def _dynamic(s, kind, name):
    """The resource's own configs as DescribeConfigs reports them."""
    api = (DESCRIBE_CONFIGS, 4)
    r = s.call(req(DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=False, resources=(
        part(api, "DescribeConfigsResource", resource_type=kind, resource_name=name,
             configuration_keys=None),)))
    res = r.results[0]
    if kind == TOPIC:
        return res.error_code, sorted((c.name, c.value) for c in res.configs
                                      if c.config_source == DYNAMIC_TOPIC_CONFIG)
    return res.error_code, sorted((c.name, c.value) for c in res.configs)


def _check(pair, what, resources, validate_only=False, version=2):
    k, m = pair.both(lambda s: _alter(resources, validate_only, version))
    pair.check(f"AlterConfigs v{version} {what}", (k, m))
    return k


def test_whole_set_replaced(differential_pair, topic):
    pair = differential_pair
    for s in pair.sides:
        lo, hi = s.versions[ALTER]
        assert (lo, hi) == (0, 2), f"{s.name} serves AlterConfigs v{lo}-{hi}"
    first = [("retention.ms", "86400000"), ("cleanup.policy", "compact,delete"), ("segment.ms", "3600000")]
    assert _check(pair, "set three", [(TOPIC, topic, first)]).responses[0].error_code == 0
    k, m = (_dynamic(s, TOPIC, topic) for s in pair.sides)
    assert k == m == (0, sorted(first))
    # only one key sent: the other two are deleted
    _check(pair, "set one", [(TOPIC, topic, [("retention.ms", "1000")])], version=0)
    k, m = (_dynamic(s, TOPIC, topic) for s in pair.sides)
    assert k == m == (0, [("retention.ms", "1000")])
    # validate_only changes nothing
    _check(pair, "validate only", [(TOPIC, topic, [("segment.ms", "7200000")])], validate_only=True,
           version=1)
    k, m = (_dynamic(s, TOPIC, topic) for s in pair.sides)
    assert k == m == (0, [("retention.ms", "1000")])
    # a null value or a key given twice refuses the whole resource
    for what, configs in (("null value", [("segment.ms", "7200000"), ("retention.ms", None)]),
                          ("duplicate key", [("segment.ms", "1"), ("segment.ms", "7200000")])):
        assert _check(pair, what, [(TOPIC, topic, configs)]).responses[0].error_code == 42
        k, m = (_dynamic(s, TOPIC, topic) for s in pair.sides)
        assert k == m == (0, [("retention.ms", "1000")])
    # nothing: every dynamic config goes
    _check(pair, "empty", [(TOPIC, topic, [])])
    k, m = (_dynamic(s, TOPIC, topic) for s in pair.sides)
    assert k == m == (0, [])


@pytest.mark.parametrize("what,resources", [
    ("bad value", [(TOPIC, NAME, [("retention.ms", "soon")])]),
    ("unknown config", [(TOPIC, NAME, [("no.such.config", "1")])]),
    ("bad value among good", [(TOPIC, NAME, [("segment.ms", "3600000"), ("cleanup.policy", "sometimes")])]),
    ("unknown topic", [(TOPIC, f"{NAME}-missing", [("retention.ms", "1000")])]),
    ("default topic", [(TOPIC, "", [("retention.ms", "1000")])]),
    ("logger", [(8, "1", [("kafka", "DEBUG")])]),
    ("loggers", [(8, "1", []), (8, "2", [])]),
    ("a good and a bad topic", [(TOPIC, NAME, []), (TOPIC, f"{NAME}-missing", [])]),
    ("group", [(GROUP, "ac-diff-group", [("consumer.session.timeout.ms", "50000")])]),
    ("group out of bounds", [(GROUP, "ac-diff-group", [("consumer.session.timeout.ms", "1")])]),
    ("group cleared", [(GROUP, "ac-diff-group", [])]),
    ("client metrics", [(CLIENT_METRICS, "ac-diff-sub", [("metrics", "org.apache.kafka.producer"),
                                                          ("interval.ms", "60000")])]),
    ("client metrics bad interval", [(CLIENT_METRICS, "ac-diff-sub", [("interval.ms", "5")])]),
    ("client metrics cleared", [(CLIENT_METRICS, "ac-diff-sub", [])]),
])
def test_refusals_and_other_resources(differential_pair, topic, what, resources):
    pair = differential_pair
    before = [_dynamic(s, TOPIC, topic) for s in pair.sides]
    _check(pair, what, resources)
    after = [_dynamic(s, TOPIC, topic) for s in pair.sides]
    assert after[0] == after[1]
    if not what.startswith("a good"):
        assert before == after


@pytest.mark.parametrize("what,resources,code,message", [
    ("broker", [(4, "1", [("log.cleaner.threads", "2")])], 42,
     "minibroker does not change broker configs at runtime; set broker options at start-up (minibroker --help)"),
    ("duplicate resource", [(TOPIC, NAME, []), (TOPIC, NAME, [])], 42, "Duplicate resource."),
    ("unknown resource type", [(99, "x", [("a", "b")])], 35, "Unknown resource type 99."),
])
def test_minibroker_only(differential_pair, topic, what, resources, code, message):
    s = differential_pair.mini
    r = s.call(_alter(resources))
    assert [(x.error_code, x.error_message) for x in r.responses] == [(code, message)] * len(resources)
