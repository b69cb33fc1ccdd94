"""Feature levels as ApiVersions reports them (KIP-584), checked against what Kafka 4.4 answers."""

from __future__ import annotations

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

from minibroker.config.features import FeatureError, Features, FeatureSpec
from minibroker.net.dispatch import Dispatcher
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


# -- UpdateFeatures and the levels kept in the data dir ---------------------------------------

from types import SimpleNamespace  # noqa: E402

from minibroker.config.features import SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE, load_features  # noqa: E402
from minibroker_storage import feature_levels  # noqa: E402


def test_update_is_all_or_nothing_and_bumps_the_epoch_once():
    saved = []
    f = Features((TV, OFF), persist=lambda levels, epoch: saved.append((levels, epoch)))
    refused = f.update([("transaction.version", 1, SAFE_DOWNGRADE), ("no.such", 1, UPGRADE)], False, 1)
    assert "no.such. Local controller 1 does not support this feature." in refused
    assert (f.level("transaction.version"), f.epoch, saved) == (2, 0, [])
    assert f.update([("transaction.version", 1, SAFE_DOWNGRADE), ("group.version", 1, UPGRADE)], False, 1) is None
    assert (f.levels(), f.epoch) == ({"transaction.version": 1, "group.version": 1}, 1)
    assert saved == [({"transaction.version": 1, "group.version": 1}, 1)]


def test_update_refusals_name_kafkas_reason():
    f = Features((TV,))
    cases = {
        ("transaction.version", 1, UPGRADE): "Can't downgrade the version of this feature without setting",
        ("transaction.version", 3, UPGRADE): "Local controller 7 only supports versions 0-2",
        ("transaction.version", -1, UPGRADE): "A feature version cannot be less than 0.",
        ("transaction.version", 1, 0): "The controller does not support the given upgrade type.",
    }
    for update, why in cases.items():
        assert why in f.update([update], False, 7), update
    f.update([("transaction.version", 0, UNSAFE_DOWNGRADE)], False, 7)
    assert "Can't downgrade to a newer version." in f.update([("transaction.version", 1, SAFE_DOWNGRADE)], False, 7)
    assert f.update([("transaction.version", 2, UPGRADE)], True, 7) is None  # validate only
    assert (f.level("transaction.version"), f.epoch) == (0, 1)
    assert f.finalized() == []


def _config(tmp_path, tv=None, gv=None):
    return SimpleNamespace(data_dir=tmp_path, transaction_version=tv, group_version=gv, node_id=1)


def test_levels_survive_a_restart_and_the_command_line_wins(tmp_path):
    f = load_features(_config(tmp_path))
    # a new data dir: its levels are written at once, as kafka-storage.sh format does
    assert (f.transaction_version, f.epoch) == (2, 0)
    assert feature_levels.load(tmp_path) == ({"transaction.version": 2, "group.version": 1,
                                              "share.version": 2, "streams.version": 1}, 0)
    (tmp_path / "meta.properties").write_text("version=1\ncluster.id=x\nnode.id=1\n")
    f.update([("transaction.version", 0, SAFE_DOWNGRADE)], False, 1)
    again = load_features(_config(tmp_path))
    assert (again.transaction_version, again.epoch) == (0, 1)
    asked = load_features(_config(tmp_path, tv=1))
    assert (asked.transaction_version, asked.epoch) == (1, 2)
    assert feature_levels.load(tmp_path) == ({"transaction.version": 1, "group.version": 1,
                                              "share.version": 2, "streams.version": 1}, 2)


def test_an_unreadable_or_foreign_levels_file_falls_back_to_defaults(tmp_path):
    (tmp_path / feature_levels.FILE).write_text("transaction.version=banana\n")
    assert load_features(_config(tmp_path)).transaction_version == 2
    (tmp_path / feature_levels.FILE).write_text("transaction.version=7\nshare.version=1\nfeatures.epoch=4\n")
    f = load_features(_config(tmp_path))
    assert (f.transaction_version, f.epoch) == (2, 4)


# ---- issue 31: share.version of a data dir made before share groups --------------------------

def _older_data_dir(tmp_path, levels_file: str | None = None):
    (tmp_path / "meta.properties").write_text("version=1\ncluster.id=x\nnode.id=1\n")
    if levels_file is not None:
        (tmp_path / feature_levels.FILE).write_text(levels_file)
    return _config(tmp_path)


def test_an_older_data_dir_without_levels_keeps_share_groups_off(tmp_path):
    config = _older_data_dir(tmp_path)
    dry = load_features(config, dry_run=True)  # the early listener's view: the same, nothing written
    assert (dry.share_version, dry.transaction_version) == (0, 2)
    assert feature_levels.load(tmp_path) is None
    f = load_features(config)
    assert (f.share_version, f.transaction_version, f.group_version, f.epoch) == (0, 2, 1, 0)
    assert ("share.version", 2) not in f.finalized()
    assert feature_levels.load(tmp_path) == ({"transaction.version": 2, "group.version": 1,
                                              "share.version": 0, "streams.version": 0}, 0)
    # as kafka-features.sh upgrade: an UpdateFeatures raises it, and the level is kept
    assert f.update([("share.version", 1, UPGRADE)], False, 1) is None
    again = load_features(config)
    assert (again.share_version, again.epoch) == (1, 1)


def test_an_older_levels_file_without_share_version_keeps_its_levels(tmp_path):
    f = load_features(_older_data_dir(tmp_path, "transaction.version=1\nfeatures.epoch=3\n"))
    assert (f.share_version, f.transaction_version, f.group_version, f.epoch) == (0, 1, 1, 3)
    assert feature_levels.load(tmp_path) == ({"transaction.version": 1, "group.version": 1,
                                              "share.version": 0, "streams.version": 0}, 3)


def test_an_existing_data_dir_that_served_share_groups_keeps_them(tmp_path):
    config = _older_data_dir(tmp_path)
    (tmp_path / "__share_group_state-7").mkdir()
    assert load_features(config).share_version == 2
    served = tmp_path / "served"  # a build serving share groups made its history file
    served.mkdir()
    (served / "share-history.jsonl").write_text('{"key":"broker","ts":1,"kind":"started"}\n')
    assert load_features(_older_data_dir(served)).share_version == 2
    explicit = tmp_path / "other"
    explicit.mkdir()
    f = load_features(_older_data_dir(explicit, "share.version=1\nfeatures.epoch=2\n"))
    assert (f.share_version, f.epoch) == (1, 2)
