"""Turn a broker's answer into plain data that is equal for Kafka and minibroker when they agree.

Dropped everywhere (they differ between any two brokers and say nothing about the protocol):
throttle times, free-text error messages, node/leader ids, cluster ids, hosts and ports,
topic ids (each broker makes its own), timestamps and durations, member ids (generated).
Producer ids are renamed ``P0``, ``P1``... in the order each broker first showed them, so
two brokers that hand out different numbers in the same order compare equal. Record data
(Fetch) is decoded into batches: offsets, producer id/epoch/sequence, flags and records'
keys and values, or the control type of a marker. Then the on-purpose divergences of
tests/differential/divergences.py are removed from both sides.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid

from minibroker_protocol.batch import iter_headers
from minibroker_protocol.records import decode_batch, parse_control_record

from .divergences import applicable

DROPPED = frozenset({
    "throttle_time", "throttle_time_ms", "error_message", "node_id", "leader_id", "coordinator_id",
    "cluster_id", "controller_id", "host", "port", "topic_id", "log_append_time", "log_append_time_ms",
    "timestamp", "transaction_start_time_ms", "last_timestamp", "member_id", "leader", "members",
    "brokers", "current_leader", "node_endpoints", "leader_epoch", "committed_leader_epoch",
    "transaction_start_time",
})
PRODUCER_ID_FIELDS = frozenset({"producer_id", "producer_ids"})


class ProducerIds:
    """Real producer id -> a name by order of first appearance, for one broker."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}

    def name(self, pid: int, register: bool = True) -> object:
        """``register`` False: the id is in an answer with an error, where it is whatever the
        schema's default is (DescribeTransactions' TRANSACTIONAL_ID_NOT_FOUND says 0): never
        named, so a 0 that one broker happened to give a producer is not compared as that
        producer's."""
        if pid is None or pid < 0:
            return pid
        if not register:
            return "unnamed"
        if pid not in self.names:
            self.names[pid] = f"P{len(self.names)}"
        return self.names[pid]


def _records(blob, pids: ProducerIds) -> list[dict]:
    if blob is None:
        return None
    data = bytes(blob)
    out = []
    for h in iter_headers(data):
        batch = {"base_offset": h.base_offset, "last_offset_delta": h.last_offset_delta,
                 "producer_id": pids.name(h.producer_id), "producer_epoch": h.producer_epoch,
                 "base_sequence": h.base_sequence, "transactional": h.is_transactional,
                 "control": h.is_control, "count": h.record_count}
        recs = decode_batch(data, h.position)
        if h.is_control:
            batch["markers"] = [parse_control_record(r.key)[1] for r in recs]
        else:
            batch["records"] = [(r.offset, r.key, r.value) for r in recs]
        out.append(batch)
    return out


def plain(value, pids: ProducerIds, name: str = "", register: bool = True):
    """Recursively: entities to dicts, without the dropped fields, producer ids renamed.

    A producer id in an entry that carries an error is filler (Kafka answers 0 for a
    transactional id it does not know): it is shown by name if known, but does not count as
    the id's first appearance.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        register = register and not getattr(value, "error_code", 0)
        return {f.name: plain(getattr(value, f.name), pids, f.name, register) for f in dataclasses.fields(value)
                if f.name not in DROPPED}
    if name == "records":
        return _records(value, pids)
    if isinstance(value, (tuple, list)):
        return [plain(v, pids, name, register) for v in value]
    if name in PRODUCER_ID_FIELDS and isinstance(value, int):
        return pids.name(value, register)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (datetime.timedelta, datetime.datetime, uuid.UUID)):
        return str(value)
    return value


# A list of entries keyed by one of these is a map in Kafka's answers: its order means nothing
# (Kafka answers partitions in hash order).
SORT_KEYS = ("name", "partition_index", "index", "partition", "transactional_id", "group_id", "topic",
             "topic_name")


def _sorted(tree):
    if isinstance(tree, dict):
        return {k: _sorted(v) for k, v in tree.items()}
    if isinstance(tree, list):
        items = [_sorted(v) for v in tree]
        if items and all(isinstance(v, dict) for v in items):
            for key in SORT_KEYS:
                if all(key in v for v in items):
                    return sorted(items, key=lambda v: repr(v[key]))
        return items
    return tree


def _drop(tree, path: tuple[str, ...], replace: dict) -> None:
    """Remove the field at ``path`` (or, with ``replace``, rewrite the listed values there)."""
    if not path or tree is None:
        return
    head, rest = path[0], path[1:]
    if head == "*":
        for item in tree if isinstance(tree, list) else ():
            _drop(item, rest, replace)
    elif isinstance(tree, dict) and head in tree:
        if rest:
            _drop(tree[head], rest, replace)
        elif replace:
            tree[head] = replace.get(tree[head], tree[head])
        else:
            del tree[head]


def normalise(entity, pids: ProducerIds):
    tree = _sorted(plain(entity, pids))
    for d in applicable(entity.__api_key__):
        _drop(tree, d.path, dict(d.replace))
    return tree


def diff(a, b, path: str = "") -> list[str]:
    """Human-readable differences between two normalised answers."""
    if type(a) is not type(b):
        return [f"{path or '.'}: kafka={a!r} minibroker={b!r}"]
    if isinstance(a, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: kafka={a.get(k, '<absent>')!r} minibroker={b.get(k, '<absent>')!r}")
            else:
                out += diff(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items from kafka, {len(b)} from minibroker: kafka={a!r} minibroker={b!r}"]
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [f"{path or '.'}: kafka={a!r} minibroker={b!r}"]
