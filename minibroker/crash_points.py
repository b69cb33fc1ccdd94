"""Test-only fault hooks, handed to the coordinators by the wiring.

Crash tests make the broker SIGKILL itself at a named step of EndTxn
(``txn.after_prepare``, ``txn.after_first_marker``, ``txn.before_complete``) to prove
the roll-forward at start-up, and lower the coordinator snapshot interval to a few
records. Nothing in the product reads the environment for these: the broker process
builds one ``CrashPoints`` at start-up (:meth:`from_env`, called only by
``minibroker/app.py``) and passes it down; in-process tests pass their own. The
fault-injection issue replaces the environment with a proper interface.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass

import structlog

log = structlog.get_logger("minibroker.fault_injection")

CRASH_AT_VARIABLE = "MINIBROKER_CRASH_AT"
SNAPSHOT_RECORDS_VARIABLE = "MINIBROKER_TEST_SNAPSHOT_RECORDS"


@dataclass(frozen=True)
class CrashPoints:
    crash_at: str = ""
    snapshot_records: int | None = None  # None: the product's interval

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> CrashPoints:
        raw = environ.get(SNAPSHOT_RECORDS_VARIABLE, "")
        records = None
        if raw:
            try:
                records = int(raw) if int(raw) > 0 else None
            except ValueError:
                records = None
            if records is None:
                log.warning("snapshot.test_hook_ignored", variable=SNAPSHOT_RECORDS_VARIABLE,
                            value=raw, reason="not a positive integer")
        return cls(environ.get(CRASH_AT_VARIABLE, ""), records)

    def hit(self, point: str) -> None:
        """Die here, as a kill -9 would, if the test asked for this point."""
        if self.crash_at == point:
            log.warning("fault_injection.crash", point=point)
            os.kill(os.getpid(), signal.SIGKILL)


NO_CRASH_POINTS = CrashPoints()
