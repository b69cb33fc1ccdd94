"""SIGINT and SIGTERM before the event loop takes them over: remembered, never raised.

Python's own SIGINT handler raises KeyboardInterrupt wherever the main thread happens to be (a
Ctrl-C in the first few milliseconds printed a traceback from an import), and SIGTERM's default
kills the process without the clean stop the running broker does. From the process's first code
(minibroker/launch.py) to the event loop's handlers (app.serve), and again after the loop, a
signal only sets ``requested``: the CLI stops at its next step, app.serve before serving.

The handlers are set through ``_signal``, the builtin module ``signal`` wraps: importing
``signal`` builds its enums first, milliseconds on a loaded machine during which a Ctrl-C would
still raise in an import.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]

__all__ = ["catch", "release", "requested"]

requested = False


def _remember(_sig: int, _frame: object) -> None:
    global requested
    requested = True


def catch() -> None:
    for sig in (_signal.SIGINT, _signal.SIGTERM):
        _signal.signal(sig, _remember)


def release() -> None:
    """Python's defaults again: a tool that runs long stops on Ctrl-C as any command does."""
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    _signal.signal(_signal.SIGTERM, _signal.SIG_DFL)
