"""Transactions v2 (KIP-890 part 2) against Kafka 4.4: the explicit cases of cases.CASES_V2 with
transaction.version 2 finalized on both brokers of the session's pair (switched with
UpdateFeatures, as an operator upgrades a cluster, and switched back afterwards).

The random examples of test_eos_differential.py send Produce v12, TxnOffsetCommit v5 and EndTxn v5
too, at level 1: which protocol a request follows depends on its version, not on the level; the
level decides only what the coordinator's own aborts do and how its log is written.
"""

from __future__ import annotations

import pytest

from tests.reference import settings

from .cases import CASES_V2, run_case
from .levels import set_transaction_version


@pytest.fixture(scope="module")
def tv2_pair(differential_pair):
    pair = differential_pair
    try:
        for side in pair.sides:
            set_transaction_version(side.conn.address[1], 2)
        yield pair
    finally:
        for side in pair.sides:
            set_transaction_version(side.conn.address[1], settings.TRANSACTION_VERSION)


@pytest.mark.parametrize("name", sorted(CASES_V2))
def test_v2_case_matches_kafka(tv2_pair, name):
    run_case(name)
