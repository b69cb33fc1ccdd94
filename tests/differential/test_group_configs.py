"""Group configs (GROUP config resources) against Kafka 4.4: DescribeConfigs of a group with and
without configs of its own, IncrementalAlterConfigs' validation (names, types, the broker's
bounds, APPEND/SUBTRACT, null values, validate_only), ListConfigResources' groups, and the
heartbeat interval a group's config gives its KIP-848 members."""

from __future__ import annotations

import datetime
import uuid

from tests.reference.client import part, req

IAC, DESCRIBE_CONFIGS, LIST_CONFIG_RESOURCES, HEARTBEAT = 44, 32, 74, 68
GROUP = 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

GROUPS = ("gc-diff-a", "gc-diff-b", "gc-diff-c")
ALL_NAMES = (
    "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "consumer.assignment.interval.ms",
    "consumer.assignor.offload.enable", "share.session.timeout.ms", "share.heartbeat.interval.ms",
    "share.record.lock.duration.ms", "share.delivery.count.limit", "share.partition.max.record.locks",
    "share.auto.offset.reset", "share.isolation.level", "share.renew.acknowledge.enable",
    "share.assignment.interval.ms", "share.assignor.offload.enable", "streams.session.timeout.ms",
    "streams.heartbeat.interval.ms", "streams.num.standby.replicas", "streams.initial.rebalance.delay.ms",
    "streams.assignment.interval.ms", "streams.assignor.offload.enable", "streams.task.offset.interval.ms",
    "streams.num.warmup.replicas", "streams.rack.aware.assignment.tags", "streams.acceptable.recovery.lag",
    "streams.assignor.name", "errors.deadletterqueue.topic.name", "errors.deadletterqueue.copy.record.enable")


def _alter(name, configs, validate_only=False, version=1):
    api = (IAC, version)
    return req(IAC, version, validate_only=validate_only, resources=(
        part(api, "AlterConfigsResource", resource_type=GROUP, resource_name=name,
             configs=tuple(part(api, "AlterableConfig", name=k, config_operation=op, value=v)
                           for k, op, v in configs)),))


def _describe(name, keys=None, synonyms=True, docs=True, version=4):
    api = (DESCRIBE_CONFIGS, version)
    kw = {"include_documentation": docs} if version >= 3 else {}
    return req(DESCRIBE_CONFIGS, version, include_synonyms=synonyms, **kw, resources=(
        part(api, "DescribeConfigsResource", resource_type=GROUP, resource_name=name,
             configuration_keys=keys),))


def _clear(pair):
    for g in GROUPS:
        pair.both(lambda s, g=g: _alter(g, [(n, DELETE, None) for n in ALL_NAMES]))


# (what, group, [(name, operation, value)], validate_only): each answered alike by both brokers
ALTERATIONS = [
    ("set within the bounds", "gc-diff-a", [("consumer.session.timeout.ms", SET, "50000"),
                                            ("consumer.heartbeat.interval.ms", SET, "6000")], False),
    ("session under the broker minimum", "gc-diff-a", [("consumer.session.timeout.ms", SET, "40000")], False),
    ("session over the broker maximum", "gc-diff-a", [("consumer.session.timeout.ms", SET, "70000")], False),
    ("heartbeat under", "gc-diff-a", [("consumer.heartbeat.interval.ms", SET, "4000")], False),
    ("heartbeat checked before session", "gc-diff-b", [("consumer.session.timeout.ms", SET, "1"),
                                                      ("consumer.heartbeat.interval.ms", SET, "1")], False),
    ("consumer checked before share", "gc-diff-b", [("share.heartbeat.interval.ms", SET, "1"),
                                                   ("consumer.session.timeout.ms", SET, "1")], False),
    ("not a number", "gc-diff-a", [("consumer.session.timeout.ms", SET, "abc")], False),
    ("under the type's own minimum", "gc-diff-a", [("consumer.session.timeout.ms", SET, "0")], False),
    ("a long that is not one", "gc-diff-a", [("streams.acceptable.recovery.lag", SET, "x")], False),
    ("unknown name", "gc-diff-a", [("nope", SET, "1")], False),
    ("unknown name before a bad value", "gc-diff-a", [("consumer.heartbeat.interval.ms", SET, "x"),
                                                      ("nope", SET, "1")], False),
    ("APPEND", "gc-diff-a", [("consumer.session.timeout.ms", APPEND, "1")], False),
    ("APPEND to a list config", "gc-diff-a", [("streams.rack.aware.assignment.tags", APPEND, "a")], False),
    ("SUBTRACT of an unknown name", "gc-diff-a", [("nope", SUBTRACT, "1")], False),
    ("null value", "gc-diff-a", [("consumer.session.timeout.ms", SET, None)], False),
    ("duplicate keys", "gc-diff-a", [("share.delivery.count.limit", SET, "3"),
                                     ("share.delivery.count.limit", SET, "4")], False),
    ("reset by duration", "gc-diff-a", [("share.auto.offset.reset", SET, "by_duration:PT1H")], False),
    ("negative duration", "gc-diff-a", [("share.auto.offset.reset", SET, "by_duration:-PT1H")], False),
    ("unknown reset", "gc-diff-a", [("share.auto.offset.reset", SET, "bogus")], False),
    ("isolation level", "gc-diff-a", [("share.isolation.level", SET, "x")], False),
    ("boolean", "gc-diff-a", [("share.renew.acknowledge.enable", SET, "maybe")], False),
    ("DLQ starting with __", "gc-diff-a", [("errors.deadletterqueue.topic.name", SET, "__x")], False),
    ("DLQ name", "gc-diff-a", [("errors.deadletterqueue.topic.name", SET, "dlq.x")], False),
    ("an internal config", "gc-diff-a", [("consumer.assignor.offload.enable", SET, "false")], False),
    ("standby replicas over the broker's maximum", "gc-diff-a", [("streams.num.standby.replicas", SET, "5")],
     False),
    ("warmup replicas over", "gc-diff-a", [("streams.num.warmup.replicas", SET, "100")], False),
    ("lock duration", "gc-diff-a", [("share.record.lock.duration.ms", SET, "10000")], False),
    ("delivery count", "gc-diff-a", [("share.delivery.count.limit", SET, "11")], False),
    ("record locks", "gc-diff-a", [("share.partition.max.record.locks", SET, "5000")], False),
    ("share assignment interval", "gc-diff-a", [("share.assignment.interval.ms", SET, "20000")], False),
    ("consumer assignment interval", "gc-diff-a", [("consumer.assignment.interval.ms", SET, "20000")], False),
    ("streams session", "gc-diff-a", [("streams.session.timeout.ms", SET, "44000")], False),
    ("streams task offset interval", "gc-diff-a", [("streams.task.offset.interval.ms", SET, "0")], False),
    ("unregistered assignor", "gc-diff-a", [("streams.assignor.name", SET, "foo")], False),
    ("empty list element", "gc-diff-a", [("streams.rack.aware.assignment.tags", SET, "a, b,,c")], False),
    ("list", "gc-diff-a", [("streams.rack.aware.assignment.tags", SET, "a, b")], False),
    ("validate only: good", "gc-diff-b", [("share.delivery.count.limit", SET, "3")], True),
    ("validate only: bad", "gc-diff-b", [("share.delivery.count.limit", SET, "1")], True),
    ("upper-case reset", "gc-diff-c", [("share.auto.offset.reset", SET, "EARLIEST")], False),
    ("upper-case prefix", "gc-diff-c", [("share.auto.offset.reset", SET, "BY_DURATION:PT1H")], False),
    ("lower-case duration", "gc-diff-c", [("share.auto.offset.reset", SET, "by_duration:pt1h30m")], False),
    ("negative hours", "gc-diff-c", [("share.auto.offset.reset", SET, "by_duration:PT-1H")], False),
    ("upper-case boolean", "gc-diff-c", [("share.renew.acknowledge.enable", SET, "TRUE")], False),
    ("signed padded int", "gc-diff-c", [("consumer.session.timeout.ms", SET, " +50000 ")], False),
    ("int overflow", "gc-diff-c", [("consumer.session.timeout.ms", SET, "2147483648")], False),
    ("default group", "", [("consumer.session.timeout.ms", SET, "50000")], False),
    ("share limits", "gc-diff-b", [("share.session.timeout.ms", SET, "60000"),
                                   ("share.heartbeat.interval.ms", SET, "15000"),
                                   ("share.record.lock.duration.ms", SET, "15000"),
                                   ("share.isolation.level", SET, "read_committed"),
                                   ("share.auto.offset.reset", SET, "earliest")], False),
]


def test_group_configs_match_kafka(differential_pair):
    pair = differential_pair
    _clear(pair)
    try:
        pair.check("describe a group nobody configured", pair.both(lambda s: _describe("gc-diff-a")))
        pair.check("describe the default group", pair.both(lambda s: _describe("")))
        for what, group, configs, validate_only in ALTERATIONS:
            pair.check(what, pair.both(lambda s, g=group, c=configs, v=validate_only: _alter(g, c, v)))
        pair.check("v0", pair.both(lambda s: _alter("gc-diff-b", [("share.delivery.count.limit", SET, "4")],
                                                    version=0)))
        for group in GROUPS:
            pair.check(f"describe {group}", pair.both(lambda s, g=group: _describe(g)))
        pair.check("some keys, no synonyms or documentation", pair.both(lambda s: _describe(
            "gc-diff-a", keys=("consumer.session.timeout.ms", "consumer.assignor.offload.enable", "nope"),
            synonyms=False, docs=False)))
        pair.check("describe v1", pair.both(lambda s: _describe("gc-diff-b", version=1)))
        pair.check("groups with configs", pair.both(lambda s: req(LIST_CONFIG_RESOURCES, 1,
                                                                   resource_types=(GROUP,))))
        pair.check("delete one", pair.both(lambda s: _alter("gc-diff-a", [("consumer.session.timeout.ms",
                                                                            DELETE, None)])))
        pair.check("describe after delete", pair.both(lambda s: _describe("gc-diff-a")))
        pair.check("delete every config of b", pair.both(lambda s: _alter(
            "gc-diff-b", [(n, DELETE, None) for n in ALL_NAMES])))
        pair.check("a group without configs is not listed", pair.both(
            lambda s: req(LIST_CONFIG_RESOURCES, 1, resource_types=(GROUP,))))
    finally:
        _clear(pair)


def test_consumer_group_heartbeat_uses_the_group_config(differential_pair):
    """GroupMetadataManager reads consumer.heartbeat.interval.ms per group: the interval a
    joining member is told, on both brokers."""
    pair = differential_pair
    topic, group, plain = "gc-diff-hb-topic", "gc-diff-hb", "gc-diff-hb-plain"
    pair.create_topics([topic], 1)
    pair.check("set the interval", pair.both(lambda s: _alter(group, [("consumer.heartbeat.interval.ms", SET,
                                                                        "7000")])))
    members = {g: str(uuid.uuid4()) for g in (group, plain)}
    for g in members:
        pair.find_coordinators(g, [])
    try:
        for g, member in members.items():
            answers = pair.both(lambda s, g=g, m=member: _heartbeat(g, m, 0, topic))
            assert [(r.error_code, r.heartbeat_interval) for r in answers][0] == \
                [(r.error_code, r.heartbeat_interval) for r in answers][1], answers
            assert answers[0].heartbeat_interval == datetime.timedelta(
                milliseconds=7000 if g == group else 5000), answers
    finally:
        for g, member in members.items():
            pair.both(lambda s, g=g, m=member: _heartbeat(g, m, -1))
        pair.both(lambda s: _alter(group, [("consumer.heartbeat.interval.ms", DELETE, None)]))


def _heartbeat(group, member, epoch, topic=None):
    return req(HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=epoch, instance_id=None,
               rack_id=None, rebalance_timeout=datetime.timedelta(milliseconds=60_000 if epoch == 0 else -1),
               subscribed_topic_names=(topic,) if epoch == 0 else None, subscribed_topic_regex=None,
               server_assignor=None, topic_partitions=() if epoch == 0 else None)
