"""minibroker/config/group_configs.py: Kafka 4.4's GroupConfig validation and the coordinators'
lookup. The messages and order are checked against Kafka by tests/differential/test_group_configs.py;
these cover what the differential test cannot reach with Kafka's default bounds."""

from __future__ import annotations

import pytest

from minibroker.config import group_configs as gc
from minibroker.config.options import Config
from minibroker_storage import group_configs as store


def _config(tmp_path, **kw) -> Config:
    return Config(data_dir=tmp_path, **kw)


@pytest.mark.parametrize("value, ok", [
    ("latest", True), ("EARLIEST", False), ("BY_DURATION:PT1H", False), ("by_duration:PT1H", True), ("by_duration:P1DT2H3M4.5S", True),
    ("by_duration:pt0s", True), ("by_duration:-PT1H", False), ("by_duration:PT-1H", False),
    ("by_duration:P", False), ("by_duration:PT", False), ("by_duration:1H", False), ("none", False),
])
def test_share_auto_offset_reset(tmp_path, value, ok):
    configs = {"share.auto.offset.reset": value}
    if ok:
        assert gc.validate(configs, _config(tmp_path)) == {"share.auto.offset.reset": value}
    else:
        with pytest.raises(gc.GroupConfigError, match="The value must be either 'earliest', 'latest'"):
            gc.validate(configs, _config(tmp_path))


def test_values_are_kept_as_kafka_prints_them(tmp_path):
    got = gc.validate({"consumer.session.timeout.ms": " +50000 ", "share.renew.acknowledge.enable": "TRUE",
                       "streams.rack.aware.assignment.tags": " a , b"}, _config(tmp_path))
    assert got == {"consumer.session.timeout.ms": "50000", "share.renew.acknowledge.enable": "true",
                   "streams.rack.aware.assignment.tags": "a,b"}
    with pytest.raises(gc.GroupConfigError, match="Not a number of type INT"):
        gc.validate({"consumer.session.timeout.ms": "2147483648"}, _config(tmp_path))


def test_bounds_take_in_the_broker_default_and_session_must_exceed_heartbeat(tmp_path):
    c = _config(tmp_path, group_consumer_session_timeout_ms=2000, group_consumer_heartbeat_interval_ms=500)
    assert gc.validate({"consumer.session.timeout.ms": "3000"}, c) == {"consumer.session.timeout.ms": "3000"}
    with pytest.raises(gc.GroupConfigError, match="must be in the range 2000 to 60000 inclusive"):
        gc.validate({"consumer.session.timeout.ms": "1999"}, c)
    with pytest.raises(gc.GroupConfigError, match="consumer.session.timeout.ms must be greater than "
                                                 "consumer.heartbeat.interval.ms"):
        gc.validate({"consumer.session.timeout.ms": "2000", "consumer.heartbeat.interval.ms": "2000"}, c)


def test_lookup_kept_across_a_reload_and_unreadable_file(tmp_path):
    c = _config(tmp_path, group_consumer_session_timeout_ms=30000)
    groups = gc.GroupConfigs(c)
    assert groups.group_int("g", "consumer.session.timeout.ms") == 30000
    groups.replace("g", {"consumer.session.timeout.ms": "50000"}, validate_only=True)
    assert groups.groups() == [] and not (tmp_path / store.FILE).exists()
    groups.replace("g", {"consumer.session.timeout.ms": "50000"})
    assert gc.GroupConfigs.load(c).group_int("g", "consumer.session.timeout.ms") == 50000
    assert gc.GroupConfigs.load(c).group_config("other", "share.auto.offset.reset") == "latest"
    groups.replace("g", {})
    assert gc.GroupConfigs.load(c).groups() == []
    (tmp_path / store.FILE).write_text("{")
    assert gc.GroupConfigs.load(c).groups() == []  # reported, never fatal
