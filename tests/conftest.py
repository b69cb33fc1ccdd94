"""Fixtures shared by every test folder: ONE Apache Kafka per test session (it takes seconds to
start), the reference of the differential tests and of the application tests that run the same
thing against Kafka and minibroker (tests/integration/test_streams_eos.py).

Without java or the Kafka jars the tests skip, or fail under MINIBROKER_TEST_REQUIRE_TOOLS=1
(set by tests/run.sh, which fetches the jars).
"""

from __future__ import annotations

import os

import pytest

from tests.reference import settings
from tests.reference.kafka import KafkaReference, KafkaUnavailable


@pytest.fixture(scope="session")
def kafka_reference():
    kafka = KafkaReference(settings.kafka_properties(), classpath=settings.kafka_classpath(),
                           sasl_users=settings.SASL_USERS)
    try:
        kafka.java()
    except KafkaUnavailable as e:
        if os.environ.get("MINIBROKER_TEST_REQUIRE_TOOLS"):
            pytest.fail(str(e))
        pytest.skip(str(e))
    with kafka:
        yield kafka
