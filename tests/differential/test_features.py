"""Finalized feature levels (KIP-584) in ApiVersions: what clients read to pick a protocol.

The Java client and franz-go switch to transactions v2 when ``transaction.version`` ≥ 2 is
finalized with an epoch ≥ 0, so the finalized levels of the features minibroker implements must
be Kafka's. The *supported* ranges differ on purpose where minibroker does not (yet) serve a
level: tests/differential/divergences.py lists that.
"""

from __future__ import annotations

import pytest

from tests.reference.client import req

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
