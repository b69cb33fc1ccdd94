"""Transactions v2 (KIP-890 part 2) against Kafka 4.4: the explicit cases of cases.CASES_V2 with
transaction.version 2 finalized on both brokers of the session's pair (switched with
UpdateFeatures, as an operator upgrades a cluster, and switched back afterwards).

The random examples of test_eos_differential.py send Produce v12, TxnOffsetCommit v5 and EndTxn v5
too, at level 1: which protocol a request follows depends on its version, not on the level; the
level decides only what the coordinator's own aborts do and how its log is written.
"""

from __future__ import annotations

import pytest

from .cases import CASES_V2, run_case
from .test_features import _features, _settled, _update


@pytest.fixture(scope="module")
def tv2_pair(differential_pair):
    pair = differential_pair
    try:
        for side in pair.sides:
            epoch0 = _features(side, 4)[0]
            answer = _update(side, 1, [("transaction.version", 2, 1)], False)
            assert answer.error_code == 0, (side.name, answer)
            _epoch, finalized = _settled(side, epoch0, True)
            assert finalized.get("transaction.version") == (2, 2), (side.name, finalized)
        yield pair
    finally:
        for side in pair.sides:
            _update(side, 1, [("transaction.version", 1, 2)], False)


@pytest.mark.parametrize("name", sorted(CASES_V2))
def test_v2_case_matches_kafka(tv2_pair, name):
    run_case(name)
