"""Kafka's ``simple`` assignor for share groups (KIP-932), as a pure function.

Theory of operation
-------------------
In a share group several members may consume one partition at once (the share partition hands
out records, not partitions), so the assignor's job is balance, not exclusivity. Kafka 4.4's
SimpleAssignor (group-coordinator/…/assignor/SimpleAssignor.java) picks one of two builders:
SimpleHomogeneousAssignmentBuilder when every member subscribes to the same topics, else
SimpleHeterogeneousAssignmentBuilder, which runs the same steps topic by topic over the members
subscribed to that topic.

The numbers, for ``m`` members over ``n`` assignable partitions:

* ``desired_sharing = ceil(m / n)``: how many members share each partition (1 while there are
  at least as many partitions as members; 3 members and 1 partition: all three share it);
* member ``i``'s quota is ``ceil(p·(i+1)) − ceil(p·i)`` with ``p = desired_sharing·n / m``
  (Java doubles; the quotas add up to ``desired_sharing·n``).

The steps, sticky to the previous target:

1. keep each member's previous partitions of topics it still subscribes to (drop the others);
2. revoke from members holding more than their quota;
3. revoke from partitions shared by more than ``desired_sharing`` members;
4. hand out what is missing: partitions below ``desired_sharing``, round-robin over the members
   still below quota, skipping a member that already has the partition.

Only *assignable* partitions are targets: in a share group, those whose share state is
initialized (GroupSpec.isPartitionAssignable; ``assignable=None`` means all). A subscribed topic
absent from the metadata is Kafka's PartitionAssignorException, :class:`AssignorError` here.
Quirks kept from Kafka: a previous partition of a still-subscribed topic is kept in step 1 even
when it is not assignable (the homogeneous builder checks only the topic); a topic nobody
subscribes to any more is left in the heterogeneous result (the share group's assignment
builder filters a member's assignment by its own subscription afterwards).

Order. Which member loses a partition and which partition is filled first follow the iteration
order of Kafka's HashMaps and HashSets, so the builders walk their collections in that order
(``_JHash``: Java's hash codes of Uuid, TopicIdPartition and Integer, table growth, and where
put and computeIfAbsent insert in a bucket). Members go in the order the caller gives: Kafka's
is its own HashMap of member ids (:func:`java_member_order`). With the same inputs in the same
order, the result is Kafka's to the partition: tests/minibroker/share_assignor_golden holds
600 random cases run through Kafka 4.4's own SimpleAssignor. Where Kafka's homogeneous builder
throws (its round robin runs an empty iterator, when previous assignments hold partitions that
are no longer assignable), this one stops handing out and answers what it has.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Set
from dataclasses import dataclass, field

NAME = "simple"

# topic id -> partitions
Assignment = dict[uuid.UUID, frozenset[int]]
TopicPartition = tuple[uuid.UUID, int]


class AssignorError(Exception):
    """Kafka's PartitionAssignorException: no target assignment can be computed."""


@dataclass(frozen=True)
class MemberSpec:
    subscribed_topic_ids: frozenset[uuid.UUID]
    assignment: Mapping[uuid.UUID, Set[int]] = field(default_factory=dict)


def assign(members: Mapping[str, MemberSpec], partition_counts: Mapping[uuid.UUID, int],
           assignable: Mapping[uuid.UUID, Set[int]] | None = None, *,
           homogeneous: bool | None = None) -> dict[str, Assignment]:
    """The new target assignment of every member (topics left with no partitions dropped, see
    ``_result``). ``partition_counts`` is the topic metadata; ``assignable`` the partitions per
    topic that may be assigned (None: all). ``homogeneous`` is the group's subscription type;
    Kafka derives it from subscribed topic *names* (ModernGroup.subscriptionType, a name that
    matches no topic counts), so a group passes it; None derives it from the topic ids."""
    if not members:
        return {}
    ids = list(members)
    if homogeneous is None:
        homogeneous = len({members[m].subscribed_topic_ids for m in ids}) == 1
    if homogeneous:
        return _Homogeneous(ids, members, partition_counts, assignable).build()
    return _Heterogeneous(ids, members, partition_counts, assignable).build()


def _is_assignable(assignable: Mapping[uuid.UUID, Set[int]] | None, topic: uuid.UUID,
                   partition: int) -> bool:
    return assignable is None or partition in assignable.get(topic, ())


def _target_partitions(topic: uuid.UUID, partition_counts: Mapping[uuid.UUID, int],
                       assignable: Mapping[uuid.UUID, Set[int]] | None) -> list[TopicPartition]:
    count = partition_counts.get(topic)
    if count is None:
        raise AssignorError(f"Members are subscribed to topic {topic} which doesn't exist in "
                            "the topic metadata.")
    return [(topic, p) for p in range(count) if _is_assignable(assignable, topic, p)]


def _quotas(sharing: int, n_partitions: int, n_members: int) -> list[int]:
    # Java computes in doubles: (double)(sharing * n) / m, then Math.ceil of multiples.
    if n_members == 0:
        return []
    precise = float(sharing * n_partitions) / float(n_members)
    return [math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i in range(n_members)]


def _copy(assignment: Mapping[uuid.UUID, Set[int]]) -> dict[uuid.UUID, set[int]]:
    return {t: set(ps) for t, ps in assignment.items()}


# ---- Java's hash iteration order ------------------------------------------------------------
# Which member is revoked first and which partition is filled first follow the iteration order
# of Kafka's HashMaps and HashSets, so the builders below walk their collections in that order:
# by bucket of the final table, then by position in the bucket's chain. java.util.HashMap's
# put appends to the chain and grows the table right after; computeIfAbsent grows the table
# first (whether or not the key is there) and inserts at the chain's head; a resize splits
# chains in order.
# (Treeified bins, 8+ keys in one bucket of a table of 64+, are not modelled.)

_MASK32 = 0xFFFFFFFF


def _i32(x: int) -> int:
    x &= _MASK32
    return x - (1 << 32) if x >= 1 << 31 else x


def java_uuid_hash(u: uuid.UUID) -> int:
    """org.apache.kafka.common.Uuid.hashCode."""
    h = (u.int >> 64) ^ (u.int & 0xFFFFFFFFFFFFFFFF)
    return _i32((h >> 32) ^ h)


def _tp_hash(tp: TopicPartition) -> int:
    # TopicIdPartition is a Java record: 31 * topicId.hashCode() + partitionId.
    return _i32(31 * java_uuid_hash(tp[0]) + tp[1])


def _int_hash(i: int) -> int:
    return _i32(i)


def _helper_capacity(n: int) -> int:
    """The initial capacity AssignorHelpers.newHashMap/newHashSet ask for."""
    return int((n + 1) / 0.75 + 1.0)


class _JHash:
    """The keys (and values) of a java.util.HashMap/HashSet, iterated in Java's order."""

    __slots__ = ("_hash", "cap", "_thr", "_items", "_seq")

    def __init__(self, hash_fn, initial_capacity: int | None = None) -> None:
        self._hash = hash_fn
        cap = 16
        if initial_capacity is not None:
            cap = 1
            while cap < initial_capacity:
                cap <<= 1
        self.cap, self._thr = cap, int(cap * 0.75)
        self._items: dict = {}  # key -> [spread hash, position in its chain, value]
        self._seq = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key) -> bool:
        return key in self._items

    def get(self, key):
        e = self._items.get(key)
        return None if e is None else e[2]

    def _grow(self) -> None:
        self.cap <<= 1
        self._thr = int(self.cap * 0.75)

    def _insert(self, key, value, at_head: bool) -> None:
        self._seq += 1
        h = self._hash(key) & _MASK32
        self._items[key] = [h ^ (h >> 16), -self._seq if at_head else self._seq, value]

    def put(self, key, value=None) -> None:
        """HashMap.put / HashSet.add."""
        e = self._items.get(key)
        if e is not None:
            e[2] = value
            return
        self._insert(key, value, at_head=False)
        if len(self._items) > self._thr:
            self._grow()

    def setdefault(self, key, factory):
        """HashMap.computeIfAbsent, which checks the size before looking the key up, so even a
        call that finds its key may grow the table."""
        if len(self._items) > self._thr:
            self._grow()
        if key not in self._items:
            self._insert(key, factory(), at_head=True)
        return self._items[key][2]

    def remove(self, key) -> bool:
        return self._items.pop(key, None) is not None

    def keys(self) -> list:
        mask = self.cap - 1
        return sorted(self._items, key=lambda k: (self._items[k][0] & mask, self._items[k][1]))


def java_string_hash(s: str) -> int:
    """java.lang.String.hashCode, over UTF-16 code units."""
    h = 0
    b = s.encode("utf-16-be")
    for i in range(0, len(b), 2):
        h = (31 * h + ((b[i] << 8) | b[i + 1])) & _MASK32
    return _i32(h)


def java_member_order(member_ids) -> list[str]:
    """The order of TargetAssignmentBuilder's member map (a HashMap filled by put) for these
    ids put in the order given."""
    js = _JHash(java_string_hash)
    for m in member_ids:
        js.put(m)
    return js.keys()


class TimelineOrder:
    """The iteration order of Kafka's TimelineHashMap (server-common/…/timeline/
    BaseHashTable.java), which holds a group's members: open slots chosen by a multiplicative
    hash of the key's hashCode, keys of one slot in insertion order, the table doubling (and
    re-slotting in slot order) before an insertion that would pass a load of 0.75."""

    __slots__ = ("_slots", "_size")

    def __init__(self) -> None:
        self._slots: list[list[str]] = [[], []]  # ModernGroup's members: TimelineHashMap(0)
        self._size = 0

    @staticmethod
    def _slot(key: str, n: int) -> int:
        shift = 65 - n.bit_length()
        return ((java_string_hash(key) * -7046029254386353131) & 0xFFFFFFFFFFFFFFFF) >> shift

    def add(self, key: str) -> None:
        if (self._size + 1) * 0.75 > len(self._slots):
            old, self._slots = self._slots, [[] for _ in range(2 * len(self._slots))]
            for chain in old:
                for k in chain:
                    self._slots[self._slot(k, len(self._slots))].append(k)
        chain = self._slots[self._slot(key, len(self._slots))]
        if key not in chain:
            chain.append(key)
            self._size += 1

    def remove(self, key: str) -> None:
        chain = self._slots[self._slot(key, len(self._slots))]
        if key in chain:
            chain.remove(key)
            self._size -= 1

    def keys(self) -> list[str]:
        return [k for chain in self._slots for k in chain]


def _java_topics(topics) -> list[uuid.UUID]:
    js = _JHash(java_uuid_hash)
    for t in sorted(topics):
        js.put(t)
    return js.keys()


def _java_ints(values) -> list[int]:
    js = _JHash(_int_hash)
    for v in sorted(values):
        js.put(v)
    return js.keys()


class _RoundRobin:
    """Java's ``Iterator`` over the unfilled-members set, restarted when it runs out and
    shrinking as members reach their quota (``iterator.remove``)."""

    def __init__(self, members: list[int]) -> None:
        self.members = members
        self.pos = 0

    def has_next(self) -> bool:
        return self.pos < len(self.members)

    def next(self) -> int:
        self.pos += 1
        return self.members[self.pos - 1]

    def remove_current(self) -> None:
        self.pos -= 1
        del self.members[self.pos]

    def restart(self) -> None:
        self.pos = 0


def _fill(by_partition: _JHash, sharing: int, unfilled: list[int], give, held: _JHash,
          new_held, quota) -> None:
    """Step 4, both builders' ``assignRemainingPartitions``. As in Kafka, a member given a
    partition is not added to that partition's holders, only to its own partitions."""
    if not unfilled:
        return
    rr = _RoundRobin(unfilled)
    assigned_this_round = False
    for partition in by_partition.keys():
        holders = by_partition.get(partition)
        to_make = sharing - len(holders)
        while to_make > 0:
            if not rr.has_next():
                # A whole pass gave nothing: every unfilled member already has this partition.
                # (Kafka's iterator would fail on an empty set; none is left to give here.)
                if not assigned_this_round or not rr.members:
                    break
                rr.restart()
                assigned_this_round = False
            member = rr.next()
            if member in holders:
                continue
            give(member, partition)
            mine = held.setdefault(member, new_held)
            mine.put(partition)
            to_make -= 1
            assigned_this_round = True
            if len(mine) >= quota(member):
                rr.remove_current()
        if not rr.members:
            break


class _Homogeneous:
    def __init__(self, ids: list[str], members: Mapping[str, MemberSpec],
                 partition_counts: Mapping[uuid.UUID, int],
                 assignable: Mapping[uuid.UUID, Set[int]] | None) -> None:
        self.ids = ids
        self.topics = members[ids[0]].subscribed_topic_ids
        self.targets = [tp for t in _java_topics(self.topics)
                        for tp in _target_partitions(t, partition_counts, assignable)]
        n = len(self.targets)
        self.sharing = 0 if n == 0 else -(-len(ids) // n)
        self.quota = _quotas(self.sharing, n, len(ids))
        self.old = [members[m].assignment for m in ids]
        self.new: dict[int, dict[uuid.UUID, set[int]]] = {}
        self.by_partition = _JHash(_tp_hash, _helper_capacity(n))
        self.by_member = _JHash(_int_hash, _helper_capacity(len(ids)))
        self.unfilled: set[int] = set()
        self.overfilled: set[int] = set()

    def build(self) -> dict[str, Assignment]:
        if not self.topics:
            return {}
        self._keep_previous()
        self._revoke_overfilled_members()
        self._revoke_overshared_partitions()
        for tp in self.targets:
            self.by_partition.setdefault(tp, lambda: _JHash(_int_hash))
        # newHashSet(members) holds every index below its capacity: ascending order.
        _fill(self.by_partition, self.sharing, sorted(self.unfilled), self._give, self.by_member,
              lambda: _JHash(_tp_hash), lambda i: self.quota[i])
        return _result(self.ids, self.old, self.new)

    def _new_of(self, i: int) -> dict[uuid.UUID, set[int]]:
        if i not in self.new:
            self.new[i] = _copy(self.old[i])
        return self.new[i]

    def _give(self, i: int, tp: TopicPartition) -> None:
        self._new_of(i).setdefault(tp[0], set()).add(tp[1])

    def _keep_previous(self) -> None:
        for i, old in enumerate(self.old):
            kept = 0
            for topic in _java_topics(old):
                if topic not in self.topics:
                    self._new_of(i).pop(topic, None)
                    continue
                for p in _java_ints(old[topic]):
                    self.by_partition.setdefault((topic, p), lambda: _JHash(_int_hash)).put(i)
                    self.by_member.setdefault(i, lambda: _JHash(_tp_hash)).put((topic, p))
                    kept += 1
                    if kept >= self.quota[i]:
                        # Kafka copies the assignment once the member reaches its quota, so
                        # that step 2 can revoke from the copy.
                        self._new_of(i)
            if kept < self.quota[i]:
                self.unfilled.add(i)
            elif kept > self.quota[i]:
                self.overfilled.add(i)

    def _revoke_overfilled_members(self) -> None:
        for i in sorted(self.overfilled):
            held = self.by_member.get(i)
            for tp in held.keys():
                if len(held) <= self.quota[i]:
                    break
                self.new[i][tp[0]].discard(tp[1])
                self.by_partition.get(tp).remove(i)
                held.remove(tp)

    def _revoke_overshared_partitions(self) -> None:
        for tp in self.by_partition.keys():
            holders = self.by_partition.get(tp)
            for i in holders.keys():
                if len(holders) <= self.sharing:
                    break
                partitions = self._new_of(i).get(tp[0])
                if partitions is not None and tp[1] in partitions:
                    partitions.discard(tp[1])
                    holders.remove(i)
                    self.by_member.get(i).remove(tp)
                    self.unfilled.add(i)


class _Heterogeneous:
    def __init__(self, ids: list[str], members: Mapping[str, MemberSpec],
                 partition_counts: Mapping[uuid.UUID, int],
                 assignable: Mapping[uuid.UUID, Set[int]] | None) -> None:
        self.ids = ids
        self.topics = sorted({t for m in ids for t in members[m].subscribed_topic_ids})
        self.targets = {t: [p for _, p in _target_partitions(t, partition_counts, assignable)]
                        for t in self.topics}
        self.subscribers = {t: [i for i, m in enumerate(ids) if t in members[m].subscribed_topic_ids]
                            for t in self.topics}
        self.old = [members[m].assignment for m in ids]
        self.new: dict[int, dict[uuid.UUID, set[int]]] = {}

    def build(self) -> dict[str, Assignment]:
        if not self.topics:
            return {}
        # Each topic touches only its own entries, so the order of topics does not matter.
        for topic in self.topics:
            self._build_topic(topic)
        return _result(self.ids, self.old, self.new)

    def _new_of(self, i: int) -> dict[uuid.UUID, set[int]]:
        if i not in self.new:
            self.new[i] = _copy(self.old[i])
        return self.new[i]

    def _build_topic(self, topic: uuid.UUID) -> None:
        targets, subscribers = self.targets[topic], self.subscribers[topic]
        n = len(targets)
        sharing = 0 if n == 0 else -(-len(subscribers) // n)
        quota = [0] * len(self.ids)
        for rank, q in enumerate(_quotas(sharing, n, len(subscribers))):
            quota[subscribers[rank]] = q
        by_partition = _JHash(_int_hash, _helper_capacity(n))
        by_member = _JHash(_int_hash, _helper_capacity(len(subscribers)))
        # Step 1: a previous holder of this topic keeps it for now, subscribed or not; step 2
        # takes it back from a non-subscriber, whose quota for the topic is 0.
        for i, old in enumerate(self.old):
            for p in _java_ints(old.get(topic, ())):
                by_partition.setdefault(p, lambda: _JHash(_int_hash)).put(i)
                by_member.setdefault(i, lambda: _JHash(_int_hash)).put(p)
        for i in by_member.keys():
            held = by_member.get(i)
            for p in held.keys():
                if len(held) <= quota[i]:
                    break
                by_partition.get(p).remove(i)
                held.remove(p)
                self._new_of(i)[topic].discard(p)
        for p in by_partition.keys():
            holders = by_partition.get(p)
            for i in holders.keys():
                if len(holders) <= sharing:
                    break
                partitions = self._new_of(i).get(topic)
                if partitions is not None and p in partitions:
                    partitions.discard(p)
                    holders.remove(i)
                    by_member.get(i).remove(p)
        for p in targets:
            by_partition.setdefault(p, lambda: _JHash(_int_hash, _helper_capacity(len(subscribers))))
        unfilled = [i for i in subscribers if len(by_member.get(i) or ()) < quota[i]]

        def give(i: int, p: int) -> None:
            self._new_of(i).setdefault(topic, set()).add(p)

        _fill(by_partition, sharing, unfilled, give, by_member, lambda: _JHash(_int_hash),
              lambda i: quota[i])


def _result(ids: list[str], old: list[Mapping[uuid.UUID, Set[int]]],
            new: dict[int, dict[uuid.UUID, set[int]]]) -> dict[str, Assignment]:
    out = {}
    for i, member in enumerate(ids):
        source = new.get(i, old[i])
        # Kafka's maps may keep a topic whose set was emptied by a revocation; an empty set
        # assigns nothing, so it is dropped here to make results comparable.
        out[member] = {t: frozenset(ps) for t, ps in source.items() if ps}
    return out
