"""``--as-version``: the dispatcher advertises what that Kafka release served (no I/O)."""

from __future__ import annotations

import argparse

import pytest

from minibroker.app import build_dispatcher
from minibroker.broker import Broker
from minibroker.config.options import Config, ConfigError, add_serve_options, load
from minibroker_protocol.api_keys import ApiKey


def _apis(tmp_path, release):
    broker = Broker(Config(data_dir=tmp_path, port=0, as_version=release, transaction_version=0,
                           group_version=0))
    try:
        return {a.key: (a.min_version, a.max_version) for a in build_dispatcher(broker).apis.values()}
    finally:
        broker.logs.close_all()


def test_kafka_2_8(tmp_path):
    apis = _apis(tmp_path, "2.8")
    assert apis[ApiKey.Produce] == (3, 9) and apis[ApiKey.EndTxn] == (0, 3)
    assert apis[ApiKey.ApiVersions] == (0, 3) and apis[ApiKey.Fetch] == (4, 12)
    assert ApiKey.ConsumerGroupHeartbeat not in apis and ApiKey.DescribeTransactions not in apis


def test_kafka_3_9_has_no_kip_848_nor_transactions_v2(tmp_path):
    apis = _apis(tmp_path, "3.9")
    assert apis[ApiKey.Produce] == (3, 11) and apis[ApiKey.EndTxn] == (0, 4)
    assert apis[ApiKey.TxnOffsetCommit] == (0, 4) and ApiKey.ConsumerGroupDescribe not in apis


def _load(*argv):
    p = argparse.ArgumentParser()
    add_serve_options(p)
    return load(p.parse_args(list(argv)), env={})


def test_before_4_0_the_features_are_0_and_cannot_be_raised():
    cfg = _load("--as-version", "3.9.1").config
    assert cfg.as_version == "3.9" and cfg.transaction_version == 0 and cfg.group_version == 0
    with pytest.raises(ConfigError) as info:
        _load("--as-version", "2.8", "--transaction-version", "2")
    assert info.value.problems == [
        "--transaction-version 2: Kafka 2.8 had no such feature level; with --as-version 2.8 it is 0"]
    with pytest.raises(ConfigError) as info:
        _load("--as-version", "1.1")
    assert "must be a Kafka release" in info.value.problems[0]
    assert _load("--as-version", "4.0").config.transaction_version is None


def test_single_apis_capped(tmp_path):
    cfg = _load("--as-version", "4.0", "--max-api-versions", "EndTxn=3, produce=9,68=0").config
    assert cfg.max_api_versions == ((0, 9), (26, 3), (68, 0))
    broker = Broker(Config(data_dir=tmp_path, port=0, as_version="4.0",
                           max_api_versions=cfg.max_api_versions))
    try:
        apis = {a.key: (a.min_version, a.max_version) for a in build_dispatcher(broker).apis.values()}
    finally:
        broker.logs.close_all()
    assert apis[ApiKey.EndTxn] == (0, 3) and apis[ApiKey.Produce] == (3, 9)
    assert apis[ApiKey.ConsumerGroupHeartbeat] == (0, 0)
    for bad, words in [("EndTxn", "write API=VERSION"), ("Nope=1", "not an API name"),
                       ("EndTxn=x", "must be an integer")]:
        with pytest.raises(ConfigError) as info:
            _load("--max-api-versions", bad)
        assert words in info.value.problems[0], info.value.problems
