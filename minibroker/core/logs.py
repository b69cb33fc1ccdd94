"""structlog set-up: one event per decision, key=value on a console, JSON in containers.

structlog itself is imported when the first event is written, not here (storage/lazylog.py
says why): ``configure`` only records how, and ``hold``/``release`` keep the events of the
broker's start-up until its listeners accept connections.
"""

from __future__ import annotations

import sys
import time
from collections.abc import MutableMapping
from typing import Any

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}
_level = "info"


class _StderrLogger:
    """Looks sys.stderr up on every event, so a replaced stream (pytest's capture,
    a daemon's redirect) never leaves cached loggers writing to a closed file."""

    def msg(self, message: str) -> None:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()

    log = debug = info = warn = warning = error = critical = exception = fatal = msg


def _stderr_factory(*_args) -> _StderrLogger:
    return _StderrLogger()


def _timestamp(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    # structlog's TimeStamper(fmt="iso", utc=True), except that an event held at start-up
    # (lazylog.hold) keeps the time it happened
    if "timestamp" not in event:
        now = time.time()
        event["timestamp"] = (time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
                              + f".{int(now % 1 * 1e6):06d}Z")
    return event


def _setup(level: str, fmt: str) -> None:
    import structlog

    renderer = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            _timestamp,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=_stderr_factory,
        cache_logger_on_first_use=True,
    )


def configure(level: str = "info", fmt: str = "console") -> None:
    # imported here, not at the top: minibroker_storage's package import reaches kio, which
    # the CLI imports only after it has kept hypothesis out (cli.main)
    from minibroker_storage import lazylog

    global _level
    _level = level
    lazylog.configure_with(lambda: _setup(level, fmt), _LEVELS[level])


def hold() -> None:
    """Keep events (at the configured level) in memory until ``release``."""
    from minibroker_storage import lazylog

    lazylog.hold(_LEVELS[_level])


def release() -> None:
    from minibroker_storage import lazylog

    lazylog.release()
