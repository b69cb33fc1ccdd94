"""Fixtures for tests against a real minibroker process.

- ``broker``: one broker per test module (4 partitions for auto-created
  topics, 8 MiB segments so client workloads roll segments).
- ``broker_factory``: start brokers with custom options inside one test;
  every one is closed (and its process killed, by PID) when the test ends.
- ``topic``: a topic name unique to the test.

On a failing test, the tail of each broker's log is attached to the report.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from minibroker.testing import MiniBroker

from .clients import unique_topic
from .support import project_broker

MODULE_BROKER_ARGS = ["--num-partitions", "4", "--segment-bytes", str(8 * 1024 * 1024)]

INTEGRATION_DIR = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if INTEGRATION_DIR in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


class BrokerFactory:
    def __init__(self, name: str) -> None:
        self.name = name
        self.brokers: list[MiniBroker] = []

    def __call__(self, extra_args=(), *, start: bool = True, **kwargs) -> MiniBroker:
        b = project_broker(extra_args, name=kwargs.pop("name", f"{self.name}{len(self.brokers)}"), **kwargs)
        self.brokers.append(b)
        return b.start() if start else b

    def close(self) -> None:
        for b in self.brokers:
            b.close()


@pytest.fixture(scope="module")
def broker(request):
    b = project_broker(MODULE_BROKER_ARGS, name=request.module.__name__.rsplit(".", 1)[-1])
    try:
        b.start()
        yield b
    finally:
        b.close()


@pytest.fixture
def broker_factory(request):
    name = "".join(c if c.isalnum() or c in "-_" else "-" for c in request.node.name)[:40]
    f = BrokerFactory(name)
    try:
        yield f
    finally:
        f.close()


@pytest.fixture
def topic(request) -> str:
    return unique_topic(request.node.name)


def _brokers_of(item) -> list[MiniBroker]:
    found = []
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, MiniBroker):
            found.append(value)
        elif isinstance(value, BrokerFactory):
            found.extend(value.brokers)
    return found


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for b in _brokers_of(item):
            report.sections.append(
                (f"minibroker {b.name} (pid {b.pid}, port {b.port}) log tail: {b.log_path}",
                 b.log_tail(60) or "(empty)"))
