"""What happened to each record of each share partition: the share coordinator hands every
:class:`~.partition.HistoryEvent` list its partitions return to :meth:`ShareHistory.record`;
``share explain``, the console and ``/metrics`` read it back.

The file is ``minibroker_storage.share_history`` (JSONL in the data dir, bounded per partition
and in partitions, read back at start-up). Besides the events, the history counts since the
broker started what ``/metrics`` exposes as counters (deliveries, redeliveries and archived
records per partition): counting from the kept events would go down when old ones are dropped,
and a counter must not.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from minibroker_storage.share_history import (
    BROKER_KEY,
    ShareHistoryFile,
    parse_key,
    partition_key,
    read_share_history,
)

from .explain import as_dict as encode
from .partition import Action, HistoryEvent
from .record_state import RecordState

Key = tuple[str, str, int]


def decode(d: dict[str, Any]) -> HistoryEvent | None:
    """A kept line back as an event; None for one this version cannot read."""
    try:
        lock = d.get("lock_ms")
        return HistoryEvent(int(d["first"]), int(d["last"]), str(d["action"]), str(d.get("member", "")),
                            int(d["ts"]), RecordState[str(d["state"])], int(d["count"]),
                            int(lock) if lock is not None else None,
                            dlq_topic=str(d["dlq"]) if d.get("dlq") else None)
    except (KeyError, TypeError, ValueError):
        return None


class ShareHistory:
    def __init__(self, data_dir: str | os.PathLike, **bounds: int) -> None:
        self.file = ShareHistoryFile(data_dir, **bounds)
        # (group, topic, partition) -> records redelivered / acquired since this broker started
        self.redeliveries: dict[Key, int] = {}
        self.acquisitions: dict[Key, int] = {}
        self.archived: dict[Key, int] = {}

    @property
    def path(self) -> str:
        return self.file.path

    @property
    def skipped(self) -> int:
        return self.file.skipped

    def open(self, now_ms: int | None = None,
             schedule_flush: Callable[[Callable[[], None]], Any] | None = None) -> None:
        """Load the file; with ``now_ms``, note that the broker starts now (acquisitions
        held before it are gone)."""
        self.file.open()
        if schedule_flush is not None:
            self.file.schedule_flush = schedule_flush
        if now_ms is not None:
            self.file.append(BROKER_KEY, {"ts": now_ms, "kind": "started"})

    def close(self) -> None:
        self.file.close()

    def record(self, group: str, topic: str, partition: int, events: Sequence[HistoryEvent],
               delivery_limit: int | None = None) -> None:
        if not events:
            return
        key = (group, topic, partition)
        file_key = partition_key(group, topic, partition)
        for e in events:
            if e.action == Action.ACQUIRED:
                n = e.last_offset - e.first_offset + 1
                self.acquisitions[key] = self.acquisitions.get(key, 0) + n
                if e.delivery_count > 1:
                    self.redeliveries[key] = self.redeliveries.get(key, 0) + n
            elif e.state is RecordState.ARCHIVED:
                # ARCHIVED is terminal: a record reaches it in one event only
                self.archived[key] = self.archived.get(key, 0) + e.last_offset - e.first_offset + 1
            self.file.append(file_key, encode(e, delivery_limit))

    # -- reading -------------------------------------------------------------------------
    def partitions(self) -> list[Key]:
        return sorted(k for k in (parse_key(key) for key in self.file.keys()) if k is not None)

    def events(self, group: str, topic: str, partition: int,
               offset: int | None = None) -> list[dict[str, Any]]:
        return select(self.file.events(partition_key(group, topic, partition)), offset)

    def broker_starts(self) -> list[int]:
        return starts(self.file.events(BROKER_KEY))


def select(events: Iterable[dict[str, Any]], offset: int | None) -> list[dict[str, Any]]:
    """The events of a partition, or of those that touch ``offset``."""
    if offset is None:
        return list(events)
    return [e for e in events if isinstance(e.get("first"), int) and isinstance(e.get("last"), int)
            and e["first"] <= offset <= e["last"]]


def starts(broker_events: Iterable[dict[str, Any]]) -> list[int]:
    return [e["ts"] for e in broker_events if e.get("kind") == "started" and isinstance(e.get("ts"), int)]


def read(data_dir: str | os.PathLike) -> tuple[dict[Key, list[dict[str, Any]]], list[int]]:
    """A data directory's share history without writing: per partition its events, and the
    broker's starts."""
    raw = read_share_history(data_dir)
    out: dict[Key, list[dict[str, Any]]] = {}
    for key, events in raw.items():
        k = parse_key(key)
        if k is not None:
            out[k] = events
    return out, starts(raw.get(BROKER_KEY, []))
