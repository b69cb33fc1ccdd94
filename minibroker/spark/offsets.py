"""Offsets and offset ranges: parsing Spark's offset JSON, planning and splitting ranges.

Pure functions, no Kafka client: the driver plans with them and the tests check them
directly. A partition is ``(topic, partition)``; offsets JSON is Spark's Kafka source
format, ``{"topic": {"0": 23, "1": -1}}`` with -2 for earliest and -1 for latest.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass, field

TopicPartition = tuple[str, int]
EARLIEST = -2
LATEST = -1
# Extra key in a streaming end offset: the concrete start the first micro-batch resolved.
# '@' cannot occur in a topic name, so it never clashes with one.
START_KEY = "@start"


class DataLoss(RuntimeError):
    """Planned offsets are gone from the log (retention, a recreated topic, a cut tail)."""


@dataclass(frozen=True)
class OffsetSpec:
    """``startingOffsets`` / ``endingOffsets``: earliest, latest, or per-partition JSON."""

    kind: str  # "earliest" | "latest" | "json"
    offsets: dict[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Watermarks:
    """Where a partition's readable offsets begin and end for one isolation level."""

    earliest: int
    latest: int  # the LSO under read_committed, else the high watermark


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one partition: one Spark input partition's work."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)


def parse_offset_json(text: str, what: str = "offsets") -> dict[TopicPartition, int]:
    try:
        doc = json.loads(text)
        out = {(str(t), int(p)): int(o) for t, parts in doc.items() for p, o in parts.items()}
    except (ValueError, TypeError, AttributeError):
        raise ValueError(f'{what} must be earliest, latest or JSON like {{"topic":{{"0":23}}}}, '
                         f"got {text!r}") from None
    bad = {tp: o for tp, o in out.items() if o < EARLIEST}
    if bad:
        raise ValueError(f"{what}: offsets below -2 are meaningless: {bad}")
    return out


def parse_offset_spec(text: str, what: str) -> OffsetSpec:
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        return OffsetSpec(word)
    return OffsetSpec("json", parse_offset_json(text, what))


def to_json_dict(offsets: dict[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The checkpoint form of an offset map (JSON-able, key order fixed)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_json_dict(doc: dict) -> dict[TopicPartition, int]:
    return {(str(t), int(p)): int(o) for t, parts in (doc or {}).items() if not t.startswith("@")
            for p, o in parts.items()}


def symbolic(spec: OffsetSpec, partitions) -> dict[TopicPartition, int]:
    """``spec`` for ``partitions`` with earliest/latest left as -2/-1, resolved later."""
    partitions = sorted(partitions)
    if spec.kind != "json":
        return {tp: EARLIEST if spec.kind == "earliest" else LATEST for tp in partitions}
    unknown = sorted(set(spec.offsets) - set(partitions))
    if unknown:
        raise ValueError(f"startingOffsets names partitions that are not read: {unknown}")
    return {tp: spec.offsets.get(tp, EARLIEST) for tp in partitions}


def resolve(spec: OffsetSpec, partitions, earliest: dict[TopicPartition, int],
            latest: dict[TopicPartition, int], what: str) -> dict[TopicPartition, int]:
    """Concrete offsets for ``partitions``; JSON entries of -2/-1 mean earliest/latest and
    partitions the JSON leaves out default to earliest (start) or latest (end)."""
    partitions = sorted(partitions)
    if spec.kind == "earliest":
        return {tp: earliest[tp] for tp in partitions}
    if spec.kind == "latest":
        return {tp: latest[tp] for tp in partitions}
    unknown = sorted(set(spec.offsets) - set(partitions))
    if unknown:
        raise ValueError(f"{what} names partitions that are not read: {unknown}")
    default = earliest if what.startswith("starting") else latest
    out = {}
    for tp in partitions:
        o = spec.offsets.get(tp)
        if o is None:
            out[tp] = default[tp]
        elif o == EARLIEST:
            out[tp] = earliest[tp]
        elif o == LATEST:
            out[tp] = latest[tp]
        else:
            out[tp] = o
    return out


def plan_ranges(start: dict[TopicPartition, int], end: dict[TopicPartition, int]) -> list[OffsetRange]:
    """One range per partition that is in both maps and has offsets between them; a start
    past the end (a stale start after data loss) gives no range."""
    out = []
    for tp in sorted(end):
        s = start.get(tp)
        if s is None:
            continue
        e = end[tp]
        if e > s:
            out.append(OffsetRange(tp[0], tp[1], s, e))
    return out


def split_ranges(ranges: list[OffsetRange], *, max_records: int | None = None,
                 min_partitions: int | None = None) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator, in spirit: no range holds more than
    ``max_records`` offsets, then the largest ranges are halved until there are at least
    ``min_partitions``. Deterministic for given inputs."""
    out: list[OffsetRange] = []
    for r in ranges:
        if max_records and r.size > max_records:
            parts = -(-r.size // max_records)
            out.extend(_cut(r, parts))
        elif r.size > 0:
            out.append(r)
    if min_partitions and len(out) < min_partitions:
        # Max-heap on size; ties broken by position so the result does not depend on luck.
        heap = [(-r.size, i, r) for i, r in enumerate(out)]
        heapq.heapify(heap)
        serial = len(out)
        while len(heap) < min_partitions and heap and -heap[0][0] > 1:
            _, _, r = heapq.heappop(heap)
            for piece in _cut(r, 2):
                heapq.heappush(heap, (-piece.size, serial, piece))
                serial += 1
        out = [r for _, _, r in heap]
    out.sort(key=lambda r: (r.topic, r.partition, r.start))
    return out


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    size = r.size
    bounds = [r.start + size * i // parts for i in range(parts + 1)]
    return [OffsetRange(r.topic, r.partition, a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def rate_limit(start: dict[TopicPartition, int], latest: dict[TopicPartition, int],
               max_offsets: int) -> dict[TopicPartition, int]:
    """End offsets that advance at most ``max_offsets`` offsets in all from ``start``, shared
    out in proportion to each partition's backlog (Spark's maxOffsetsPerTrigger). Largest
    remainders get the leftover units, so the total is exactly min(backlog, max_offsets).
    ``start`` must hold every partition of ``latest``. A partition whose latest offset is
    below its start (data loss) keeps that latest offset, as in Spark's rateLimit, so the
    planner sees and reports the drop."""
    backlog = {tp: max(latest[tp] - start[tp], 0) for tp in latest}
    total = sum(backlog.values())
    if total <= max_offsets:
        return dict(latest)
    share = {}
    remainders = []
    for tp in sorted(backlog):
        exact = backlog[tp] * max_offsets
        share[tp] = exact // total
        remainders.append((-(exact % total), tp))
    for _, tp in sorted(remainders)[: max_offsets - sum(share.values())]:
        share[tp] += 1
    return {tp: start[tp] + share[tp] if backlog[tp] else latest[tp] for tp in latest}
