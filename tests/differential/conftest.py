"""Fixtures of the differential tests: the pair of brokers over the session's one Kafka
(``kafka_reference``, tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def differential_pair(kafka_reference):
    from .run import brokers

    with brokers(kafka_reference) as (pair, _kafka, _mb):
        yield pair
