"""What a decoded request names — transactional ids, groups, topic-partitions — for fault
rules and the request log to match on.

Read by field name, the same way for every API and version (kio's generated classes and
protocol/produce.py's ProduceRequest), so a new API needs nothing here unless it names those
things under new field names.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from minibroker_protocol.api_keys import ApiKey

_TXN_ID_FIELDS = ("transactional_id", "v3_and_below_transactional_id")
_TOPIC_LIST_FIELDS = ("topics", "v3_and_below_topics", "topic_data")
_TOPIC_NAME_FIELDS = ("name", "topic", "topic_name")
_PARTITION_LIST_FIELDS = ("partitions", "partition_indexes", "partition_data")
_PARTITION_FIELDS = ("index", "partition_index", "partition")


def _first(obj: Any, names: tuple[str, ...]) -> Any:
    for n in names:
        value = getattr(obj, n, None)
        if value is not None:
            return value
    return None


def transactional_ids(api_key: int, request: Any) -> frozenset[str]:
    ids = {v for v in (getattr(request, n, None) for n in _TXN_ID_FIELDS) if v}
    for t in getattr(request, "transactions", None) or ():  # AddPartitionsToTxn v4+
        if getattr(t, "transactional_id", None):
            ids.add(t.transactional_id)
    if api_key == ApiKey.FindCoordinator and getattr(request, "key_type", 0) == 1:
        ids.update(_coordinator_keys(request))
    return frozenset(ids)


def groups(api_key: int, request: Any) -> frozenset[str]:
    found = set()
    gid = getattr(request, "group_id", None)
    if gid:
        found.add(gid)
    for g in getattr(request, "groups", None) or ():  # OffsetFetch v8+, DescribeGroups, DeleteGroups
        name = g if isinstance(g, str) else getattr(g, "group_id", None)
        if name:
            found.add(name)
    for name in getattr(request, "group_ids", None) or ():  # ConsumerGroupDescribe, ShareGroupDescribe
        if isinstance(name, str) and name:
            found.add(name)
    if api_key == ApiKey.FindCoordinator and getattr(request, "key_type", 0) == 0:
        found.update(_coordinator_keys(request))
    return frozenset(found)


def _coordinator_keys(request: Any) -> set[str]:
    keys = set(getattr(request, "coordinator_keys", None) or ())
    key = getattr(request, "key", None)
    if key:
        keys.add(key)
    return keys


def topic_partitions(request: Any, topic_name: Callable[[uuid.UUID], str | None] | None = None
                     ) -> frozenset[tuple[str, int]]:
    """The (topic, partition) pairs a request names; a topic named by its id only (Produce v13,
    Fetch v13+) is named through ``topic_name``, so a rule or a query by topic name matches
    whichever version the client chose."""
    out: set[tuple[str, int]] = set()
    topics = _first(request, _TOPIC_LIST_FIELDS)
    if not isinstance(topics, (list, tuple)):
        # DescribeShareGroupOffsets names its topics per group
        topics = [t for g in (getattr(request, "groups", None) or ()) if not isinstance(g, str)
                  for t in (getattr(g, "topics", None) or ())]
    for t in topics:
        name = _first(t, _TOPIC_NAME_FIELDS)
        if not name and topic_name is not None and isinstance(getattr(t, "topic_id", None), uuid.UUID):
            name = topic_name(t.topic_id)
        if not isinstance(name, str) or not name:
            continue
        parts = _first(t, _PARTITION_LIST_FIELDS) or ()
        if not parts:
            out.add((name, -1))  # a topic named without partitions (Metadata, DeleteTopics)
        for p in parts:
            index = p if isinstance(p, int) else _first(p, _PARTITION_FIELDS)
            if isinstance(index, int):
                out.add((name, index))
    return frozenset(out)
