"""Finalized feature levels (KIP-584) in ApiVersions: what clients read to pick a protocol.

The Java client and franz-go switch to transactions v2 when ``transaction.version`` ≥ 2 is
finalized with an epoch ≥ 0, so the finalized levels of the features minibroker implements must
be Kafka's. The *supported* ranges differ on purpose where minibroker does not (yet) serve a
level: tests/differential/divergences.py lists that.
"""

from __future__ import annotations

import time

import pytest

from tests.reference.client import part, req

from .divergences import FEATURES_MINIBROKER_SERVES

API_VERSIONS = 18


def _features(side, version: int):
    r = side.call(req(API_VERSIONS, version, client_software_name="differential",
                      client_software_version="1"))
    assert r.error_code == 0
    finalized = {k.name: (k.min_version_level, k.max_version_level) for k in r.finalized_features
                 if k.name in FEATURES_MINIBROKER_SERVES}
    supported = {k.name for k in r.supported_features}
    return r.finalized_features_epoch, finalized, supported


@pytest.mark.parametrize("version", [3, 4])
def test_finalized_levels_match_kafka(differential_pair, version):
    (k_epoch, k_final, k_sup), (m_epoch, m_final, m_sup) = (
        _features(s, version) for s in differential_pair.sides)
    assert k_epoch >= 0 and m_epoch >= 0
    assert m_final == k_final
    # v3 omits features whose minimum is 0 (all that minibroker has); v4 lists them.
    assert m_sup <= k_sup
    assert (version == 4) == bool(m_sup)


UPDATE_FEATURES = 57
# (version, [(feature, level, upgrade type)], validate_only): Kafka 4.4's answers to each are the
# reference. Levels minibroker does not serve (transaction.version 2, group.version 1) are left
# out: their supported ranges differ on purpose (divergences.FEATURES_MINIBROKER_SERVES).
UPDATES = [
    (1, [("transaction.version", 0, 1)], False),        # a downgrade asked as an upgrade
    (1, [("transaction.version", 0, 2)], True),         # validate only: nothing changes
    (1, [("transaction.version", 0, 2)], False),        # safe downgrade to 0: not finalized any more
    (1, [("transaction.version", 1, 1)], False),
    (1, [("transaction.version", 0, 3)], False),        # unsafe downgrade
    (1, [("transaction.version", 1, 2)], False),        # a "downgrade" to a newer level
    (1, [("transaction.version", 9, 1)], False),        # outside the supported range
    (1, [("no.such", 1, 1)], False),
    (2, [("no.such", 1, 1)], False),
    (1, [("transaction.version", 1, 1), ("no.such", 1, 1)], False),  # all or nothing
    (2, [("transaction.version", 1, 1)], False),        # same level: the epoch still moves
    (0, [("transaction.version", 0, 2)], False),        # v0 cannot downgrade
    (1, [("transaction.version", 1, 1), ("transaction.version", 1, 1)], False),
    (1, [("group.version", 0, 1)], False),
    (1, [("transaction.version", -1, 1)], False),
    (1, [("transaction.version", 1, 0)], False),        # no such upgrade type
    (1, [], False),
]


def _update(side, version, updates, validate_only):
    base = (UPDATE_FEATURES, version)
    keys = tuple(part(base, "FeatureUpdateKey", feature=f, max_version_level=level, upgrade_type=kind,
                      allow_downgrade=False) for f, level, kind in updates)
    return side.call(req(UPDATE_FEATURES, version, feature_updates=keys, validate_only=validate_only))


def _settled(side, epoch_before: int, moves: bool, timeout: float = 5.0):
    """The side's (epoch, finalized levels) once a change it committed is visible."""
    deadline = time.monotonic() + timeout
    while True:
        epoch, finalized, _ = _features(side, 4)
        if not moves or epoch > epoch_before or time.monotonic() > deadline:
            return epoch, finalized
        time.sleep(0.05)


def test_update_features_as_kafka_answers(differential_pair):
    pair = differential_pair
    try:
        for version, updates, validate_only in UPDATES:
            before = [_features(s, 4)[0] for s in pair.sides]
            answers = [_update(s, version, updates, validate_only) for s in pair.sides]
            pair.check(f"UpdateFeatures v{version} {updates} validate_only={validate_only}", answers)
            # Kafka answers once its controller committed the change; its broker's ApiVersions
            # shows it a moment later. Kafka's epoch is the offset of its metadata image
            # (KRaftMetadataCache.features), so any metadata record — another test's topic, a
            # controller's no-op record — moves it too: Kafka's must move when a request that
            # changes something (not validate_only, not empty) succeeded, and never go back.
            # minibroker's epoch counts only feature changes: it moves by exactly one then.
            moves = answers[0].error_code == 0 and not validate_only and bool(updates)
            after = [_settled(s, epoch0, moves) for s, epoch0 in zip(pair.sides, before)]
            (k_epoch, k_final), (m_epoch, m_final) = after
            assert m_final == k_final, (updates, k_final, m_final)
            assert (k_epoch > before[0]) if moves else (k_epoch >= before[0]), (updates, before, after)
            assert m_epoch - before[1] == int(moves), (updates, before, after)
    finally:
        for s in pair.sides:  # the session's brokers go on at the levels they started with
            _update(s, 1, [("transaction.version", 1, 1)], False)
