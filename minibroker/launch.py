"""The process's first code of ours: the ``minibroker`` script and ``python -m minibroker``.

The signal handlers are installed before anything else is imported, so a Ctrl-C or SIGTERM at
any moment of start-up ends the broker quietly, with the status a running broker's stop has (0)
(minibroker/core/stop_signals.py).
"""

from __future__ import annotations

from .core import startup_gc, stop_signals

stop_signals.catch()
startup_gc.hold()


def main() -> int:
    from .cli.main import main as cli_main
    return cli_main()
