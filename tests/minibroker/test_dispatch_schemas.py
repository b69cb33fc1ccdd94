"""Every api version the broker advertises has kio request and response schemas.

The dispatcher imports schemas lazily (on an api's first request) to keep start-up short, so
this is where a range that kio cannot serve would be caught.
"""

from pathlib import Path

from minibroker.app import build_dispatcher
from minibroker.broker import Broker
from minibroker.config.options import Config
from minibroker_protocol import codec


def test_every_advertised_version_has_schemas(tmp_path: Path):
    broker = Broker(Config(port=0, data_dir=tmp_path))
    try:
        dispatcher = build_dispatcher(broker, eager=True)
        assert len(dispatcher.apis) > 20
        for api in dispatcher.apis.values():
            for version in range(api.min_version, api.max_version + 1):
                assert codec.request_type(api.key, version) is not None, (api.key, version)
                assert codec.response_type(api.key, version) is not None, (api.key, version)
    finally:
        import asyncio
        asyncio.run(broker.stop())
