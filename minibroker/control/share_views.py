"""What the console, ``/metrics`` and ``minibroker share explain --control`` read of share
groups: the live partitions through the broker's lookups, the story through
``coordinator/share/explain.py``.

The broker offers ``share_groups()`` (the share groups it coordinates: ids, or objects with a
``group_id``), ``share_partition(group, topic, partition)`` (the live
:class:`~minibroker.coordinator.share.partition.SharePartition` this node leads, or None) and
``share_history`` (the :class:`~minibroker.coordinator.share.history.ShareHistory`). A broker
without them (no share coordinator) answers with what the history knows, or nothing: every
function here reads them with ``getattr``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..coordinator.share.explain import ShareExplanation, explain
from ..coordinator.share.record_state import RecordState
from . import views

STATES = tuple(s.name.lower() for s in RecordState if s is not RecordState.ARCHIVING)


def history(broker: Any) -> Any:
    return getattr(broker, "share_history", None)


def _lookup(broker: Any) -> Callable[[str, str, int], Any] | None:
    return getattr(broker, "share_partition", None)


def served(broker: Any) -> bool:
    """A share coordinator runs behind this broker."""
    return _lookup(broker) is not None


def group_ids(broker: Any) -> list[str]:
    ids: set[str] = set()
    groups = getattr(broker, "share_groups", None)
    if groups is not None:
        for g in groups():
            gid = g if isinstance(g, str) else getattr(g, "group_id", None)
            if isinstance(gid, str):
                ids.add(gid)
    h = history(broker)
    if h is not None:
        ids.update(g for g, _t, _p in h.partitions())
    return sorted(ids)


def _partitions_of(broker: Any, group: str) -> list[tuple[str, int, Any]]:
    """(topic, partition, live SharePartition or None): every partition of the broker's topics
    the group has a share partition on, and every one the history remembers."""
    found: dict[tuple[str, int], Any] = {}
    lookup = _lookup(broker)
    if lookup is not None:
        for topic, p, _plog in views._logs(broker, False):
            sp = lookup(group, topic, p)
            if sp is not None:
                found[(topic, p)] = sp
    h = history(broker)
    if h is not None:
        for g, topic, p in h.partitions():
            if g == group:
                found.setdefault((topic, p), None)
    return [(t, p, sp) for (t, p), sp in sorted(found.items())]


def counts(sp: Any) -> dict[str, int]:
    """Records in flight by state (the cache from the start offset)."""
    out = dict.fromkeys(STATES, 0)
    for first, last, state, _count, _member, _deadline in sp.in_flight():
        name = state.name.lower()
        out[name] = out.get(name, 0) + last - first + 1
    return out


def partition_row(broker: Any, group: str, topic: str, p: int, sp: Any) -> dict[str, Any]:
    h = history(broker)
    key = (group, topic, p)
    row: dict[str, Any] = {"topic": topic, "partition": p, "live": sp is not None,
                           "deliveries": h.acquisitions.get(key, 0) if h is not None else 0,
                           "redeliveries": h.redeliveries.get(key, 0) if h is not None else 0,
                           "archived": h.archived.get(key, 0) if h is not None else 0}
    if sp is not None:
        row.update(start_offset=sp.start_offset, end_offset=sp.end_offset,
                   delivery_limit=sp.config.delivery_count_limit,
                   lock_duration_ms=sp.config.record_lock_duration_ms, in_flight=counts(sp))
    return row


def groups(broker: Any) -> dict[str, Any]:
    """``GET /v1/share/groups``."""
    out = [{"group_id": g, "partitions": [partition_row(broker, g, t, p, sp)
                                          for t, p, sp in _partitions_of(broker, g)]}
           for g in group_ids(broker)]
    note = None if served(broker) else "this broker runs no share coordinator"
    return {"served": served(broker), "note": note, "groups": out}


def explanation(broker: Any, group: str, topic: str, p: int, offset: int | None = None) -> ShareExplanation:
    lookup = _lookup(broker)
    sp = lookup(group, topic, p) if lookup is not None else None
    h = history(broker)
    events = h.events(group, topic, p, offset) if h is not None else []
    starts = h.broker_starts() if h is not None else []
    if sp is None:
        return explain(group, topic, p, events, broker_starts=starts, offset=offset)
    return explain(group, topic, p, events, in_flight=sp.in_flight(), start_offset=sp.start_offset,
                   delivery_limit=sp.config.delivery_count_limit, broker_starts=starts, offset=offset)


def partition(broker: Any, group: str, topic: str, p: int, offset: int | None = None) -> dict[str, Any]:
    """``GET /v1/share/{group}/{topic}/{partition}``: the in-flight records and the story."""
    lookup = _lookup(broker)
    sp = lookup(group, topic, p) if lookup is not None else None
    x = explanation(broker, group, topic, p, offset)
    out = x.as_dict()
    out["text"] = x.text()
    out["state"] = partition_row(broker, group, topic, p, sp)
    return out
