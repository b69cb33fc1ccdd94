"""structlog set-up: one event per decision, key=value on a console, JSON in containers."""

from __future__ import annotations

import logging
import sys

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}


class _StderrLogger:
    """Looks sys.stderr up on every event, so a replaced stream (pytest's capture,
    a daemon's redirect) never leaves cached loggers writing to a closed file."""

    def msg(self, message: str) -> None:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()

    log = debug = info = warn = warning = error = critical = exception = fatal = msg


def _stderr_factory(*_args) -> _StderrLogger:
    return _StderrLogger()


def configure(level: str = "info", fmt: str = "console") -> None:
    renderer = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=_stderr_factory,
        cache_logger_on_first_use=True,
    )
