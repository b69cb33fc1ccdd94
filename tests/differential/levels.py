"""Switching a broker's finalized transaction.version (or group.version) at runtime, as an operator does with
``kafka-features.sh``: UpdateFeatures, then wait until the broker's ApiVersions shows the level
(Kafka answers once its controller committed the change; its broker sees it a moment later)."""

from __future__ import annotations

import time

from tests.reference.client import Connection, part, req

API_VERSIONS, UPDATE_FEATURES = 18, 57
UPGRADE, SAFE_DOWNGRADE = 1, 2


def finalized(conn: Connection) -> dict[str, int]:
    r = conn.call(req(API_VERSIONS, 3, client_software_name="differential", client_software_version="1"))
    return {f.name: f.max_version_level for f in r.finalized_features}


def set_transaction_version(port: int, level: int, timeout: float = 15.0) -> None:
    set_feature_level(port, "transaction.version", level, timeout)


def set_feature_level(port: int, feature: str, level: int, timeout: float = 15.0) -> None:
    with Connection("127.0.0.1", port) as conn:
        current = finalized(conn).get(feature, 0)
        if current == level:
            return
        key = part((UPDATE_FEATURES, 1), "FeatureUpdateKey", feature=feature,
                   max_version_level=level, upgrade_type=UPGRADE if level > current else SAFE_DOWNGRADE,
                   allow_downgrade=False)
        answer = conn.call(req(UPDATE_FEATURES, 1, feature_updates=(key,), validate_only=False))
        assert answer.error_code == 0, answer
        deadline = time.monotonic() + timeout
        while finalized(conn).get(feature, 0) != level:
            assert time.monotonic() < deadline, f"{feature} {level} not visible on :{port}"
            time.sleep(0.05)
