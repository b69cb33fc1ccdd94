"""Feature levels as ApiVersions reports them (KIP-584), checked against what Kafka 4.4 answers."""

from __future__ import annotations

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

from minibroker.dispatch import Dispatcher
from minibroker.features import FeatureError, Features, FeatureSpec
from minibroker_protocol import codec
from minibroker_protocol.api_keys import ApiKey


def call_api_versions(d: Dispatcher, version: int):
    R = load_request_schema(ApiKey.ApiVersions, version)
    req = R(client_software_name="t", client_software_version="1") if version >= 3 else R()
    resp = d.handle(memoryview(codec.encode_request(req, correlation_id=7, client_id="t")), None)
    data = b"".join(bytes(c) for c in resp.chunks)
    entity, _ = entity_reader(load_response_schema(ApiKey.ApiVersions, version))(data[4:], 0)
    return entity

TV = FeatureSpec("transaction.version", 0, 2, 2)
MV = FeatureSpec("metadata.version", 7, 33, 33)
OFF = FeatureSpec("group.version", 0, 1, 0)


def test_level_outside_the_supported_range_is_refused_and_changes_nothing():
    f = Features((TV,))
    with pytest.raises(FeatureError):
        f.set_level("transaction.version", 3)
    with pytest.raises(FeatureError):
        f.set_level("no.such.feature", 1)
    assert f.level("transaction.version") == 2 and f.epoch == 0


def test_a_change_bumps_the_epoch_and_tells_listeners():
    seen = []
    f = Features((TV,))
    f.on_change(lambda name, old, new: seen.append((name, old, new)))
    f.set_level("transaction.version", 1)
    assert (f.level("transaction.version"), f.epoch, seen) == (1, 1, [("transaction.version", 2, 1)])


def test_level_zero_is_not_finalized():
    f = Features((TV, OFF))
    assert f.finalized() == [("transaction.version", 2)]


def test_apiversions_below_v4_omits_supported_features_with_minimum_zero():
    # What Kafka 4.4 answers: v3 lists only metadata.version (min 7) as supported.
    f = Features((TV, MV))
    assert [n for n, _, _ in f.supported(3)] == ["metadata.version"]
    assert [n for n, _, _ in f.supported(4)] == ["transaction.version", "metadata.version"]


@pytest.mark.parametrize("version", [3, 4])
def test_apiversions_carries_finalized_levels_and_a_nonnegative_epoch(version):
    d = Dispatcher(Features((TV, OFF)))
    r = call_api_versions(d, version)
    assert r.finalized_features_epoch >= 0
    assert [(k.name, k.min_version_level, k.max_version_level) for k in r.finalized_features] == [
        ("transaction.version", 2, 2)]
    supported = {k.name: (k.min_version, k.max_version) for k in r.supported_features}
    assert supported == ({"transaction.version": (0, 2), "group.version": (0, 1)} if version == 4 else {})


def test_apiversions_v2_has_no_feature_fields():
    r = call_api_versions(Dispatcher(Features((TV,))), 2)
    assert not hasattr(r, "finalized_features")
    assert codec.response_type(ApiKey.ApiVersions, 2) is type(r)
