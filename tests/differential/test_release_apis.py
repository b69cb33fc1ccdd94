"""minibroker/config/kafka_releases.py (what ``--as-version`` advertises) is what each release's own
kafka-clients jar says its broker served — checked for the oldest, a 3.x and the newest release
(the others come from the same generator: python -m tests.reference.release_apis generate)."""

from __future__ import annotations

import shutil

import pytest

from minibroker.config.kafka_releases import RELEASES
from tests.reference import release_apis


@pytest.mark.parametrize("release", ["2.1", "3.9", "4.4"])
def test_the_table_is_the_release_jar(release):
    if not shutil.which("java") or not shutil.which("mvn"):
        pytest.fail("java and mvn are needed (tests/run.sh installs them)")
    read_from, table = RELEASES[release]
    assert read_from == release_apis.RELEASES[release]
    from_jar = {key: (lo, hi) for key, (_name, lo, hi) in release_apis.read(read_from).items()}
    assert table == from_jar


def test_the_newest_release_caps_nothing_minibroker_serves():
    """minibroker serves no version newer than Kafka 4.4 does (its --as-version 4.4 is itself)."""
    import tempfile

    from minibroker.app import build_dispatcher
    from minibroker.broker import Broker
    from minibroker.config.options import Config

    with tempfile.TemporaryDirectory() as d:
        broker = Broker(Config(data_dir=__import__("pathlib").Path(d), port=0))
        try:
            apis = build_dispatcher(broker, eager=True).apis
        finally:
            broker.logs.close_all()
    newest = RELEASES["4.4"][1]
    over = {a.key.name: (a.max_version, newest.get(int(a.key))) for a in apis.values()
            if newest.get(int(a.key)) is None or a.max_version > newest[int(a.key)][1]}
    assert not over, over
