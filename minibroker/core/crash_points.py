"""Named points of the broker's work where a crash rule may kill it, handed to the
coordinators and the produce path by the wiring.

Crash tests make the broker SIGKILL itself at a named step of EndTxn
(``txn.after_prepare``, ``txn.after_first_marker``, ``txn.before_complete``) or of Produce
(``produce.after_append``: the batch is in the log, the answer not sent) to prove the
roll-forward at start-up. The points fire for the ``crash`` rules of the fault book
(minibroker/control/faults/rules.py: over the control plane or from ``--faults FILE``; the test
handle's ``MiniBroker(crash_at=...)`` writes such a file). The one test hook still read from
the environment (only by ``minibroker/app.py``, through :meth:`from_env`) lowers the
coordinator snapshot interval to a few records. Points fire only
once the broker serves (:meth:`arm`): the roll-forward of a prepared transaction at start-up
passes the same steps, and a broker that killed itself there could never start again.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from minibroker_storage.lazylog import get_logger

log = get_logger("minibroker.faults")

SNAPSHOT_RECORDS_VARIABLE = "MINIBROKER_TEST_SNAPSHOT_RECORDS"


class FiredRule(Protocol):
    @property
    def id(self) -> int: ...


class PointRules(Protocol):
    """What a crash point asks of the fault rules (control.faults.rules.FaultBook): core
    imports no other area, so the book is described here and handed in by the broker."""

    def __bool__(self) -> bool: ...
    def at_point(self, point: str, transactional_id: str | None = None,
                 topic: str | None = None, partition: int | None = None) -> FiredRule | None: ...


@dataclass
class CrashPoints:
    """Where a broker under test crashes on purpose: fault rules at named points, snapshot interval."""
    snapshot_records: int | None = None  # None: the product's interval
    faults: PointRules | None = None
    armed: bool = False
    # The transaction whose markers are being written (the marker writer does not know it).
    current_txn: str | None = None

    def arm(self, faults: PointRules | None = None) -> None:
        if faults is not None:
            self.faults = faults
        self.armed = True

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
        return cls(records)

    def hit(self, point: str, transactional_id: str | None = None, topic: str | None = None,
            partition: int | None = None) -> None:
        """Die here, as a kill -9 would, if a crash rule asks for this point."""
        if not self.armed:
            return
        if not self.faults:  # none, or no rules
            return
        txn = transactional_id or self.current_txn
        rule = self.faults.at_point(point, txn, topic, partition)
        if rule is not None:
            kill_self(rule.id, point, transactional_id=txn, topic=topic, partition=partition)


def kill_self(rule_id: int, point: str, **fields: object) -> None:
    """Die as a kill -9 would (a crash rule fired), saying so first."""
    log.warning("fault.crash", id=rule_id, point=point, pid=os.getpid(), **fields,
                reason="a crash rule fired: the broker kills itself as kill -9 would")
    os.kill(os.getpid(), signal.SIGKILL)


NO_CRASH_POINTS = CrashPoints()
