"""Feature levels through the stock Java Admin client (what kafka-features.sh runs, KIP-584):
describeFeatures reads ApiVersions' finalized levels, updateFeatures changes them at runtime, the
change survives a restart, and --transaction-version at start-up wins over it."""

from __future__ import annotations

import pytest

from minibroker.testing import MiniBroker, requests_seen

from . import java_client


@pytest.fixture(scope="module")
def admin():
    return java_client.json_driver("FeatureLevels")


def test_update_features_at_runtime_survives_restart(admin):
    with MiniBroker(name="features") as b:
        first = admin(b.bootstrap_servers, "describe")
        # Kafka 4.4's defaults for a new cluster: transactions v2, KIP-848 consumer groups,
        # share groups with their level 2 (dead-letter queues), streams groups
        assert first["finalized"] == {"transaction.version": 2, "group.version": 1,
                                      "share.version": 2, "streams.version": 1}, first
        assert first["supported"]["share.version"] == [0, 2], first
        assert first["epoch"] >= 0, first
        assert first["supported"]["transaction.version"] == [0, 2], first
        assert first["supported"]["group.version"] == [0, 1], first

        refused = admin(b.bootstrap_servers, "update", "transaction.version", "5", "UPGRADE")
        assert refused["ok"] is False and "InvalidUpdateVersionException" in refused["error"], refused
        assert admin(b.bootstrap_servers, "update", "transaction.version", "0", "SAFE_DOWNGRADE") == {"ok": True}
        after = admin(b.bootstrap_servers, "describe")
        assert after["finalized"] == {"group.version": 1, "share.version": 2,
                                      "streams.version": 1} and after["epoch"] == first["epoch"] + 1, after
        assert ("UpdateFeatures", 2, "apache-kafka-java") in requests_seen(b.log_text())
        assert "features.level_finalized" in b.log_text()

        b.restart(graceful=False)  # kill -9: the level was on disk before the answer
        kept = admin(b.bootstrap_servers, "describe")
        assert kept["finalized"] == {"group.version": 1, "share.version": 2,
                                     "streams.version": 1} and kept["epoch"] == after["epoch"], kept

        b.restart(args=["--transaction-version", "1"])
        asked = admin(b.bootstrap_servers, "describe")
        assert asked["finalized"] == {"transaction.version": 1, "group.version": 1,
                                      "share.version": 2, "streams.version": 1}, asked
        assert asked["epoch"] == kept["epoch"] + 1, asked
