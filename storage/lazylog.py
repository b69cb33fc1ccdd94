"""structlog loggers that import structlog on first use, and that can hold events a moment.

Importing the structlog package (its dev, stdlib and tracebacks modules, and logging) costs more
than anything else a broker's start-up needs before it can answer ApiVersions (issue 21). So
modules get their logger here, and nothing imports structlog until an event is written:

- ``get_logger(name)`` is a stand-in for ``structlog.get_logger(name)``; its first event imports
  and configures structlog (``configure_with``) and from then on every call goes straight to
  structlog's own logger.
- ``hold(level)`` makes events at ``level`` or above wait in memory, with the wall time they
  happened (and the exception being handled, for ``exception``); ``release()`` writes them, in
  order, stamped with those times. The broker holds from its start until just after its listeners
  accept connections, so the import happens after it is ready. ``release`` is also registered at
  exit, so held events are never lost.
"""

from __future__ import annotations

import atexit
import sys
import time
from collections.abc import Callable
from typing import Any

# structlog's level names, as make_filtering_bound_logger numbers them
LEVELS = {"debug": 10, "info": 20, "msg": 20, "warning": 30, "warn": 30, "error": 40,
          "exception": 40, "critical": 50, "fatal": 50}

_configure: Callable[[], None] | None = None
_configured = False
# Events below this level are dropped here, before structlog is imported for them: a broker
# started at --log-level warning then never imports it for the info events of its first
# requests (issue 33). 0 until configure_with is given a level: everything goes to structlog.
_min_level = 0
_held: list[tuple[Logger, str, Any, dict[str, Any], float]] | None = None
_hold_level = 0


def configure_with(setup: Callable[[], None], level: int = 0) -> None:
    """``setup`` imports and configures structlog; it runs before the first event is written
    (at once if one already has been). ``level``: the lowest level ``setup`` lets through
    (make_filtering_bound_logger's), below which events are dropped without structlog."""
    global _configure, _min_level
    _min_level = level
    if _configured:
        setup()
    else:
        _configure = setup


def hold(level: int) -> None:
    global _held, _hold_level
    if _held is None:
        _held = []
        atexit.register(release)
    _hold_level = level


def release() -> None:
    """Write the held events and stop holding."""
    global _held
    held, _held = _held, None
    for logger, method, event, kw, at in held or ():
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1e6):06d}Z"
        getattr(logger.real(), method)(event, timestamp=stamp, **kw)


def _structlog() -> Any:
    global _configure, _configured
    setup, _configure = _configure, None
    _configured = True
    if setup is not None:
        setup()
    import structlog
    return structlog


class Logger:
    """What ``structlog.get_logger`` gives, bought on first use."""

    __slots__ = ("_name", "_context", "_real")

    def __init__(self, name: str | None, context: tuple[tuple[str, Any], ...] = ()) -> None:
        self._name = name
        self._context = context
        self._real: Any = None

    def real(self) -> Any:
        real = self._real
        if real is None:
            structlog = _structlog()
            real = structlog.get_logger(self._name) if self._name else structlog.get_logger()
            if self._context:
                real = real.bind(**dict(self._context))
            self._real = real
        return real

    def bind(self, **values: Any) -> Any:
        if self._real is not None:
            return self._real.bind(**values)
        return Logger(self._name, self._context + tuple(values.items()))

    def _event(self, method: str, event: Any, kw: dict[str, Any]) -> Any:
        if LEVELS[method] < _min_level:
            return None
        if _held is not None:
            if LEVELS[method] >= _hold_level:
                if method == "exception" or kw.get("exc_info") is True:
                    kw["exc_info"] = sys.exc_info()
                    method = "error" if method == "exception" else method
                _held.append((self, method, event, kw, time.time()))
            return None
        return getattr(self.real(), method)(event, **kw)

    def debug(self, event: Any = None, **kw: Any) -> Any:
        return self._event("debug", event, kw)

    def info(self, event: Any = None, **kw: Any) -> Any:
        return self._event("info", event, kw)

    def warning(self, event: Any = None, **kw: Any) -> Any:
        return self._event("warning", event, kw)

    warn = warning

    def error(self, event: Any = None, **kw: Any) -> Any:
        return self._event("error", event, kw)

    def exception(self, event: Any = None, **kw: Any) -> Any:
        return self._event("exception", event, kw)

    def critical(self, event: Any = None, **kw: Any) -> Any:
        return self._event("critical", event, kw)


def get_logger(name: str | None = None) -> Logger:
    return Logger(name)
