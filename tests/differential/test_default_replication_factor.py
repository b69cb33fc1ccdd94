"""``default.replication.factor`` above the live brokers, against Apache Kafka 4.4: a single Kafka
and a single minibroker, both with the factor 3. Kafka's controller cannot place three replicas
on one broker, so CreateTopics asking for the default (-1) is refused with
INVALID_REPLICATION_FACTOR, and a Metadata request that would auto-create the topic answers
UNKNOWN_TOPIC_OR_PARTITION every time and creates nothing. An explicit factor is unaffected.

Its own pair: the session's brokers run with the default factor 1.
"""

from __future__ import annotations

import datetime

import pytest

from minibroker.testing import MiniBroker, topic_name
from tests.reference import settings
from tests.reference.client import part, req
from tests.reference.kafka import KafkaReference

from .pair import Pair

CREATE_TOPICS, METADATA, DESCRIBE_CONFIGS = 19, 3, 32
FACTOR = 3


@pytest.fixture(scope="module")
def pair(kafka_reference):
    # kafka_reference: skips (or fails under MINIBROKER_TEST_REQUIRE_TOOLS) without a JDK
    props = {**settings.kafka_properties(), "default.replication.factor": str(FACTOR)}
    with MiniBroker(name="diff-drf", **settings.minibroker_options(),
                    default_replication_factor=FACTOR) as mb, \
            KafkaReference(props, classpath=settings.kafka_classpath()) as kafka:
        p = Pair(kafka.port, mb.port)
        try:
            yield p
        finally:
            p.close()


def _check(pair: Pair, what: str, make):
    """Both answers the same after normalising; Kafka's raw answer."""
    answers = pair.both(make)
    pair.check(what, answers)
    return answers[0]


def _create(name: str, partitions: int, factor: int, validate_only: bool):
    base = (CREATE_TOPICS, 7)
    return req(CREATE_TOPICS, 7, topics=(part(base, "CreatableTopic", name=name, num_partitions=partitions,
                                               replication_factor=factor, assignments=(), configs=()),),
               timeout=datetime.timedelta(seconds=10), validate_only=validate_only)


def _metadata(name: str, auto: bool):
    return req(METADATA, 12, topics=(part((METADATA, 12), "MetadataRequestTopic", name=name, topic_id=None),),
               allow_auto_topic_creation=auto, include_topic_authorized_operations=False)


def test_create_topics_with_the_default_factor_refused(pair):
    name = topic_name("drf-create")
    for validate_only in (True, False):
        for partitions in (-1, 2):
            k = _check(pair, f"CreateTopics rf -1, {partitions} partitions, validate_only={validate_only}",
                       lambda s: _create(name, partitions, -1, validate_only))
            assert [t.error_code for t in k.topics] == [38], k  # INVALID_REPLICATION_FACTOR
    answers = pair.both(lambda s: _metadata(name, False))
    assert [t.error_code for a in answers for t in a.topics] == [3, 3]  # nothing was created


def test_auto_create_with_the_default_factor_refused(pair):
    name = topic_name("drf-auto")
    for i in range(3):
        k = _check(pair, f"Metadata #{i} auto-creating", lambda s: _metadata(name, True))
        assert [t.error_code for t in k.topics] == [3], k  # UNKNOWN_TOPIC_OR_PARTITION
    answers = pair.both(lambda s: _metadata(name, False))
    assert [t.error_code for a in answers for t in a.topics] == [3, 3]


def test_explicit_factor_unaffected(pair):
    name = topic_name("drf-explicit")
    # the created topic's configs list is compared elsewhere (minibroker lists fewer of them)
    answers = pair.both(lambda s: _create(name, 1, 1, False))
    got = [[(t.error_code, t.num_partitions, t.replication_factor) for t in a.topics] for a in answers]
    assert got[0] == got[1] == [(0, 1, 1)], got


def test_broker_config_shows_the_factor(pair):
    base = (DESCRIBE_CONFIGS, 4)
    answers = pair.both(lambda s: req(DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=False,
                                      resources=(part(base, "DescribeConfigsResource", resource_type=4,
                                                      resource_name="1",
                                                      configuration_keys=("default.replication.factor",)),)))
    values = [[(c.name, c.value) for r in a.results for c in r.configs] for a in answers]
    assert values[0] == values[1] == [("default.replication.factor", str(FACTOR))], values
