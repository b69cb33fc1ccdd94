"""pytest plugin (entry point ``pytest11``): fixtures giving running minibroker brokers.

- ``minibroker`` (session): a ``MiniBroker`` handle of a broker shared by the session.
- ``minibroker_bootstrap`` (session): its ``host:port`` for ``bootstrap.servers``; with
  ``--minibroker-bootstrap HOST:PORT`` (or the ini option ``minibroker_bootstrap``) that
  address instead, and no broker is started.
- ``minibroker_factory`` (function): ``minibroker_factory(**options)`` starts a broker of
  its own (``MiniBroker`` options) and returns its handle (``restart()``, ``kill9()``,
  ``start()``, ``stop()``); every one is closed when the test ends, pass or fail.
- ``controlled_minibroker`` / ``virtual_minibroker`` (function): a broker of the test's own with
  its control plane on (``.control``: fault rules, the clock, the request log); the second on a
  virtual clock that moves only with ``.control.advance(...)``.
- ``registry_minibroker`` (function): a broker of the test's own with the built-in Schema
  Registry on; ``schema_registry_url`` (function): that registry's ``http://host:port``.
- ``unique_topic`` (function): a topic name unique to this test run.

When a test using a broker fails, the tail of that broker's log is added to the report.

pytest loads this module in every run wherever minibroker is installed, so it imports
nothing but pytest at import time and registers no autouse fixtures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .broker import MiniBroker

_SESSION_BROKER = pytest.StashKey["MiniBroker"]()
_LOG_LINES = 30


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("minibroker", "minibroker fixtures")
    group.addoption(
        "--minibroker-bootstrap", default=None, metavar="HOST:PORT",
        help="give minibroker_bootstrap this address (a broker or a Kafka cluster already running) "
             "instead of starting a broker; tests using the `minibroker` handle are skipped")
    group.addoption(
        "--minibroker-keep", action="store_true", default=False,
        help="keep the brokers' temporary directories (data and broker.log) after the run")
    parser.addini("minibroker_bootstrap", default=None,
                  help="default for --minibroker-bootstrap")
    parser.addini("minibroker_args", type="args", default=[],
                  help="extra command-line options for the session broker, e.g. --num-partitions 4")


def _external_bootstrap(config: pytest.Config) -> str | None:
    return config.getoption("minibroker_bootstrap") or config.getini("minibroker_bootstrap") or None


def _keep(config: pytest.Config) -> bool | None:
    return True if config.getoption("minibroker_keep") else None  # None: MINIBROKER_TEST_KEEP decides


@pytest.fixture(scope="session")
def minibroker(request: pytest.FixtureRequest) -> Iterator[MiniBroker]:
    """A broker process shared by the whole session (its ``MiniBroker`` handle).

    Tests that restart or kill a broker should take their own from ``minibroker_factory``.
    """
    config = request.config
    external = _external_bootstrap(config)
    if external:
        pytest.skip(f"needs a minibroker process of its own; --minibroker-bootstrap={external} given")
    from .broker import MiniBroker

    broker = MiniBroker(name="session", args=config.getini("minibroker_args"), keep=_keep(config))
    try:
        broker.start()
        config.stash[_SESSION_BROKER] = broker
        yield broker
    finally:
        if _SESSION_BROKER in config.stash:
            del config.stash[_SESSION_BROKER]
        broker.close()


@pytest.fixture(scope="session")
def minibroker_bootstrap(request: pytest.FixtureRequest) -> str:
    """``host:port`` of the session broker, for ``bootstrap.servers``."""
    external = _external_bootstrap(request.config)
    if external:
        return external
    return request.getfixturevalue("minibroker").bootstrap_servers


class MiniBrokerFactory:
    """Starts brokers for one test; ``close()`` (run at the test's end) closes them all."""

    def __init__(self, name: str, keep: bool | None) -> None:
        self.name = name
        self.keep = keep
        self.brokers: list[MiniBroker] = []

    def __call__(self, *, start: bool = True, **options: Any) -> MiniBroker:
        from .broker import MiniBroker

        options.setdefault("name", f"{self.name}-{len(self.brokers)}")
        options.setdefault("keep", self.keep)
        broker = MiniBroker(**options)
        self.brokers.append(broker)
        return broker.start() if start else broker

    def close(self) -> None:
        for broker in self.brokers:
            broker.close()


@pytest.fixture
def minibroker_factory(request: pytest.FixtureRequest) -> Iterator[MiniBrokerFactory]:
    """``minibroker_factory(**options)`` → a started ``MiniBroker`` that lives until the test ends."""
    from .broker import _TOPIC_ILLEGAL

    factory = MiniBrokerFactory(_TOPIC_ILLEGAL.sub("-", request.node.name)[:40], _keep(request.config))
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def controlled_minibroker(minibroker_factory: MiniBrokerFactory) -> MiniBroker:
    """A broker of this test's own with its control plane on: ``.control`` adds fault rules,
    advances the clock, reads the request log (docs/testing-the-bad-days.md)."""
    return minibroker_factory(control=True)


@pytest.fixture
def virtual_minibroker(minibroker_factory: MiniBrokerFactory) -> MiniBroker:
    """Like ``controlled_minibroker``, on a virtual clock: time moves only with
    ``.control.advance("61s")``, so timeouts happen when the test says."""
    return minibroker_factory(control=True, clock="virtual")


@pytest.fixture
def registry_minibroker(minibroker_factory: MiniBrokerFactory) -> MiniBroker:
    """A broker of this test's own serving the Schema Registry too (``.schema_registry_url``)."""
    return minibroker_factory(schema_registry=True)


@pytest.fixture
def schema_registry_url(registry_minibroker: MiniBroker) -> str:
    """The URL confluent-kafka's ``SchemaRegistryClient({"url": ...})`` takes."""
    return registry_minibroker.schema_registry_url


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test (its name plus a random suffix, legal for Kafka)."""
    from .broker import topic_name

    return topic_name(request.node.name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    outcome = yield
    report = outcome.get_result()
    if not report.failed or report.when == "teardown":
        return
    brokers = _brokers_of(item)
    for broker in brokers:
        report.sections.append((f"minibroker {broker.name} log ({broker.log_path}, last lines)",
                                broker.log_tail(_LOG_LINES)))


def _brokers_of(item: pytest.Item) -> list[MiniBroker]:
    funcargs = getattr(item, "funcargs", None) or {}
    if not funcargs and _SESSION_BROKER not in item.config.stash:
        return []
    from .broker import MiniBroker

    found: list[MiniBroker] = []
    for value in funcargs.values():
        if isinstance(value, MiniBroker):
            found.append(value)
        elif isinstance(value, MiniBrokerFactory):
            found.extend(value.brokers)
    session = item.config.stash.get(_SESSION_BROKER, None)
    if session is not None and session not in found and "minibroker_bootstrap" in funcargs:
        found.append(session)
    return found
