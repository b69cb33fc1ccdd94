"""The cyclic garbage collector off from the process's first code until a start's first requests.

A start allocates ~40,000 objects that live as long as the broker (modules, classes, kio's
schemas, the configuration, the storage's state) and almost no cyclic garbage; the collector's
passes over them while they are made cost ~8-10 ms of CPU on the way to the first Metadata answer
(issue 33), and more while a large transaction history is replayed. ``hold`` (minibroker/launch.py)
turns it off; ``release`` turns it on again once the first clients' requests pause (app.serve,
with the held start-up log events), before a tool runs, and when the broker stops, so the pass it
owes runs then. Reference counting frees everything else meanwhile, as always.
"""

from __future__ import annotations

import gc

__all__ = ["hold", "release"]

_held = False


def hold() -> None:
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def release() -> None:
    """The collector on again, if ``hold`` turned it off (a test's own setting is left alone)."""
    global _held
    if _held:
        _held = False
        gc.enable()
