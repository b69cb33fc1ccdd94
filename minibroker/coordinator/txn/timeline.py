"""What the transaction coordinator decided, per transactional id and per idempotent producer
id, in order, with who asked: the record ``minibroker txn explain`` tells its story from.

The coordinator (``coordinator/txn/machine.py``) calls :meth:`Timeline.record` at each decision —
an InitProducerId and why its epoch moved, partitions and offsets joining, EndTxn, the prepare,
each marker (partition and offset), the completion, a fence and by whom, an abort by timeout with
its deadline, a refusal with its error — and the handlers pass who sent the request
(:class:`Requester`: client id, software, address). Events are plain dicts with ``ts`` (the
broker's clock, milliseconds), ``ts_us`` (the same in microseconds) and ``kind``;
:mod:`minibroker_storage.txn_history` keeps them on disk, bounded. ``NO_TIMELINE`` records
nothing (unit tests of the coordinator, offline tools).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minibroker_storage.txn_history import TxnHistory

from ...core.clock import SYSTEM_CLOCK, Clock


def txn_key(transactional_id: str) -> str:
    return "txn:" + transactional_id


def pid_key(producer_id: int) -> str:
    return f"pid:{producer_id}"


# The broker's own starts and stops: an outage a transaction outlived belongs in its story.
BROKER_KEY = "broker"


@dataclass(frozen=True)
class Requester:
    """Who sent a request: what a story names when it says "fenced by"."""
    client_id: str | None = None
    software: str | None = None
    address: str | None = None

    def fields(self, prefix: str = "") -> dict[str, Any]:
        return {f"{prefix}client_id": self.client_id, f"{prefix}software": self.software,
                f"{prefix}address": self.address}


UNKNOWN_REQUESTER = Requester()


def requester_of(ctx: Any) -> Requester:
    """The requester of a handler's RequestContext (its connection's peer and KIP-511 name)."""
    conn = getattr(ctx, "connection", None)
    peer = getattr(conn, "peer", None)
    address = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else None
    software = getattr(conn, "client_software", None)
    name = "/".join(software) if isinstance(software, tuple) and software[0] != "unknown" else None
    return Requester(getattr(ctx, "client_id", None), name, address)


class Timeline:
    def __init__(self, history: TxnHistory | None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.history = history
        self.clock = clock

    def record(self, transactional_id: str, kind: str, /, **fields: Any) -> None:
        if self.history is not None:
            self.history.append(txn_key(transactional_id), self._event(kind, fields))

    def record_producer(self, producer_id: int, kind: str, /, **fields: Any) -> None:
        if self.history is not None:
            self.history.append(pid_key(producer_id), self._event(kind, fields))

    def _event(self, kind: str, fields: dict[str, Any]) -> dict[str, Any]:
        # ts_us places events finer than a millisecond apart (a fast transaction's picture)
        event: dict[str, Any] = {"ts": self.clock.wall_ms(), "ts_us": self.clock.wall_us(), "kind": kind}
        event.update((k, v) for k, v in fields.items() if v is not None)
        return event

    def broker_started(self) -> None:
        """Record a start; when the last record is a start too, the run before ended without a
        stop (kill -9, a crash), and the outage is dated from its last event of any kind."""
        if self.history is None:
            return
        before = self.history.events(BROKER_KEY)
        crashed = bool(before) and before[-1].get("kind") == "started"
        last = self.history.last_ts() if crashed else None
        self.history.append(BROKER_KEY, self._event("started", {"after_crash": crashed or None,
                                                              "last_activity_ms": last}))

    def broker_stopped(self) -> None:
        if self.history is not None:
            self.history.append(BROKER_KEY, self._event("stopped", {}))

    def broker_events(self) -> list[dict[str, Any]]:
        return self.history.events(BROKER_KEY) if self.history is not None else []

    def events(self, transactional_id: str) -> list[dict[str, Any]]:
        return self.history.events(txn_key(transactional_id)) if self.history is not None else []

    def producer_events(self, producer_id: int) -> list[dict[str, Any]]:
        return self.history.events(pid_key(producer_id)) if self.history is not None else []


NO_TIMELINE = Timeline(None)
