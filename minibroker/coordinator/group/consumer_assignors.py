"""Server-side assignors of KIP-848 consumer groups: Kafka's ``uniform`` and ``range``.

An assignor maps every member to the partitions it should own (the *target assignment*);
members then converge to it through reconciliation (:mod:`.consumer_member`). Both are pure
functions of the members' subscriptions, the topics' partition counts and (for ``uniform``)
the previous target, so tests call them with plain dicts.

``range`` follows Kafka's ``RangeAssignor`` (group-coordinator/.../assignor/RangeAssignor.java):
members sorted static-first by instance id, then by member id; for each topic, contiguous
ranges of ``partitions // members`` with the first ``partitions % members`` members taking one
more. Deterministic, so the differential suite compares it exactly.

``uniform`` follows ``UniformHomogeneousAssignmentBuilder`` when every member subscribes to the
same topics: each member keeps what it had up to its quota (``total // members``, plus one for
the first ``total % members`` members), and the freed and new partitions fill the members
below quota. Kafka walks members and topics in hash-map order; here members go in sorted
order and topics by name, so placements may differ from Kafka's while the balance and the
stickiness are the same. For differing subscriptions (Kafka's heterogeneous builder) the
same two steps run per topic in name order over the members subscribed to it, the fill going
to whoever holds fewest partitions overall; then partitions move from the most to the least
loaded member that subscribes to them while that narrows the gap.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

# topic id -> partitions
Assignment = dict[uuid.UUID, frozenset[int]]

UNIFORM, RANGE = "uniform", "range"
ASSIGNORS = (UNIFORM, RANGE)  # Kafka's group.consumer.assignors default, the first the default


@dataclass(frozen=True)
class MemberSpec:
    member_id: str
    instance_id: str | None
    topics: frozenset[uuid.UUID]  # subscribed topics that exist
    current: Mapping[uuid.UUID, frozenset[int]]  # its previous target assignment


@dataclass(frozen=True)
class TopicSpec:
    topic_id: uuid.UUID
    name: str
    partitions: int


def assign(assignor: str, members: list[MemberSpec],
           topics: Mapping[uuid.UUID, TopicSpec]) -> dict[str, Assignment]:
    if not members:
        return {}
    if assignor == RANGE:
        return _range(members, topics)
    return _uniform(members, topics)


def _sorted_members(members: list[MemberSpec]) -> list[MemberSpec]:
    # static members first, by instance id; then dynamic ones by member id
    return sorted(members, key=lambda m: (m.instance_id is None, m.instance_id or "", m.member_id))


def _range(members: list[MemberSpec], topics: Mapping[uuid.UUID, TopicSpec]) -> dict[str, Assignment]:
    order = _sorted_members(members)
    out: dict[str, dict[uuid.UUID, frozenset[int]]] = {m.member_id: {} for m in order}
    for tid in sorted(topics, key=lambda t: topics[t].name):
        subscribers = [m for m in order if tid in m.topics]
        if not subscribers:
            continue
        n = topics[tid].partitions
        quota, extra = divmod(n, len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            end = min(start + quota + (1 if i < extra else 0), n)
            if start < end:
                out[m.member_id][tid] = frozenset(range(start, end))
            start = end
    return out


def _uniform(members: list[MemberSpec], topics: Mapping[uuid.UUID, TopicSpec]) -> dict[str, Assignment]:
    order = _sorted_members(members)
    subscriptions = {m.topics for m in order}
    if len(subscriptions) == 1:
        return _uniform_homogeneous(order, topics, sorted(next(iter(subscriptions)),
                                                          key=lambda t: topics[t].name))
    return _uniform_heterogeneous(order, topics)


def _uniform_homogeneous(order: list[MemberSpec], topics: Mapping[uuid.UUID, TopicSpec],
                         topic_order: list[uuid.UUID]) -> dict[str, Assignment]:
    subscribed = set(topic_order)
    total = sum(topics[t].partitions for t in topic_order)
    quota, extra = divmod(total, len(order))
    taken: set[tuple[uuid.UUID, int]] = set()
    kept: dict[str, dict[uuid.UUID, set[int]]] = {}
    room: list[tuple[str, int]] = []
    for m in order:
        left = quota + (1 if extra > 0 else 0)
        extra -= 1 if extra > 0 else 0
        mine: dict[uuid.UUID, set[int]] = {}
        for tid in sorted(m.current, key=lambda t: topics[t].name if t in topics else ""):
            if tid not in subscribed:
                continue
            for p in sorted(m.current[tid]):
                if left > 0 and p < topics[tid].partitions and (tid, p) not in taken:
                    mine.setdefault(tid, set()).add(p)
                    taken.add((tid, p))
                    left -= 1
        kept[m.member_id] = mine
        if left > 0:
            room.append((m.member_id, left))
    free = [(t, p) for t in topic_order for p in range(topics[t].partitions) if (t, p) not in taken]
    i = 0
    for member_id, left in room:
        for _ in range(left):
            if i >= len(free):
                break
            t, p = free[i]
            i += 1
            kept[member_id].setdefault(t, set()).add(p)
    return {mid: {t: frozenset(ps) for t, ps in a.items()} for mid, a in kept.items()}


def _uniform_heterogeneous(order: list[MemberSpec],
                           topics: Mapping[uuid.UUID, TopicSpec]) -> dict[str, Assignment]:
    owned: dict[str, dict[uuid.UUID, set[int]]] = {m.member_id: {} for m in order}
    count = dict.fromkeys(owned, 0)
    rank = {m.member_id: i for i, m in enumerate(order)}
    for tid in sorted(topics, key=lambda t: topics[t].name):
        subscribers = [m for m in order if tid in m.topics]
        if not subscribers:
            continue
        n = topics[tid].partitions
        cap = -(-n // len(subscribers))  # nobody keeps more than an even share of one topic
        taken: set[int] = set()
        for m in subscribers:
            for p in sorted(m.current.get(tid, ())):
                if p < n and p not in taken and len(owned[m.member_id].get(tid, ())) < cap:
                    owned[m.member_id].setdefault(tid, set()).add(p)
                    count[m.member_id] += 1
                    taken.add(p)
        for p in range(n):
            if p in taken:
                continue
            m = min(subscribers, key=lambda s: (count[s.member_id], rank[s.member_id]))
            owned[m.member_id].setdefault(tid, set()).add(p)
            count[m.member_id] += 1
    # Narrow the gap between the most and the least loaded members where a subscription allows.
    subscribers_of = {tid: [m.member_id for m in order if tid in m.topics] for tid in topics}
    for _ in range(sum(count.values()) + 1):
        moved = False
        for giver in sorted(count, key=lambda x: (-count[x], rank[x])):
            for tid in sorted(owned[giver], key=lambda t: topics[t].name):
                takers = [x for x in subscribers_of.get(tid, ()) if count[x] + 1 < count[giver]]
                if not takers or not owned[giver][tid]:
                    continue
                taker = min(takers, key=lambda x: (count[x], rank[x]))
                p = max(owned[giver][tid])
                owned[giver][tid].discard(p)
                if not owned[giver][tid]:
                    del owned[giver][tid]
                owned[taker].setdefault(tid, set()).add(p)
                count[giver] -= 1
                count[taker] += 1
                moved = True
                break
            if moved:
                break
        if not moved:
            break
    return {mid: {t: frozenset(ps) for t, ps in a.items()} for mid, a in owned.items()}
