"""Run real minibroker processes from tests and scripts.

``MiniBroker`` is a context manager and process handle (start, stop, ``kill -9``,
restart on the same port and data dir); ``topic_name()`` makes unique topic
names. The pytest fixtures (``minibroker``, ``minibroker_bootstrap``,
``minibroker_factory``, ``unique_topic``) live in ``minibroker.testing.pytest_plugin``,
which pytest loads by itself wherever minibroker is installed. See README.md in
this directory.
"""

from __future__ import annotations

from .broker import TEST_DEFAULTS, MiniBroker, MiniBrokerError, topic_name
from .requests import requests_seen

__all__ = ["MiniBroker", "MiniBrokerError", "topic_name", "TEST_DEFAULTS", "requests_seen"]
