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

Order. Kafka walks hash maps and hash sets: members in the order of their ids' Java hash, the
homogeneous builder's partitions in TopicIdPartition hash order. Here members go in the order
the caller gives (the group passes them sorted by member id) and partitions in (topic id,
partition) order, which is Kafka's own order for the heterogeneous builder's partition numbers
(small Integer keys iterate ascending in a Java HashMap). So quotas, sharing and stickiness are
Kafka's; which member gets which partition may differ from a Kafka broker's choice.
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


def _fill(by_partition: dict, sharing: int, unfilled: list[int],
          give, held: dict[int, set], quota) -> None:
    """Step 4, shared by both builders (their ``assignRemainingPartitions``)."""
    if not unfilled:
        return
    rr = _RoundRobin(unfilled)
    assigned_this_round = False
    for partition, holders in by_partition.items():
        to_make = sharing - len(holders)
        while to_make > 0:
            if not rr.has_next():
                # One full pass gave nothing: every unfilled member already has this partition.
                if not assigned_this_round or not rr.members:
                    break
                rr.restart()
                assigned_this_round = False
            member = rr.next()
            if member in holders:
                continue
            give(member, partition)
            held.setdefault(member, set()).add(partition)
            to_make -= 1
            assigned_this_round = True
            if len(held[member]) >= quota(member):
                rr.remove_current()
        if not rr.members:
            break


class _Homogeneous:
    def __init__(self, ids: list[str], members: Mapping[str, MemberSpec],
                 partition_counts: Mapping[uuid.UUID, int],
                 assignable: Mapping[uuid.UUID, Set[int]] | None) -> None:
        self.ids = ids
        self.topics = members[ids[0]].subscribed_topic_ids
        self.targets = [tp for t in sorted(self.topics)
                        for tp in _target_partitions(t, partition_counts, assignable)]
        n = len(self.targets)
        self.sharing = 0 if n == 0 else -(-len(ids) // n)
        self.quota = _quotas(self.sharing, n, len(ids))
        self.old = [members[m].assignment for m in ids]
        self.new: dict[int, dict[uuid.UUID, set[int]]] = {}
        self.by_partition: dict[TopicPartition, set[int]] = {}
        self.by_member: dict[int, set[TopicPartition]] = {}
        self.unfilled: set[int] = set()
        self.overfilled: set[int] = set()

    def build(self) -> dict[str, Assignment]:
        if not self.topics:
            return {}
        self._keep_previous()
        self._revoke_overfilled_members()
        self._revoke_overshared_partitions()
        for tp in self.targets:
            self.by_partition.setdefault(tp, set())
        self.by_partition = dict(sorted(self.by_partition.items()))
        _fill(self.by_partition, self.sharing, sorted(self.unfilled), self._give, self.by_member,
              lambda i: self.quota[i])
        return _result(self.ids, self.old, self.new)

    def _new_of(self, i: int) -> dict[uuid.UUID, set[int]]:
        if i not in self.new:
            self.new[i] = _copy(self.old[i])
        return self.new[i]

    def _give(self, i: int, tp: TopicPartition) -> None:
        self.by_partition[tp].add(i)
        self._new_of(i).setdefault(tp[0], set()).add(tp[1])

    def _keep_previous(self) -> None:
        for i, old in enumerate(self.old):
            kept = 0
            for topic in sorted(old):
                if topic not in self.topics:
                    self._new_of(i).pop(topic, None)
                    continue
                for p in sorted(old[topic]):
                    self.by_partition.setdefault((topic, p), set()).add(i)
                    self.by_member.setdefault(i, set()).add((topic, p))
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
            held = self.by_member[i]
            for tp in sorted(held):
                if len(held) <= self.quota[i]:
                    break
                self.new[i][tp[0]].discard(tp[1])
                self.by_partition[tp].discard(i)
                held.discard(tp)

    def _revoke_overshared_partitions(self) -> None:
        for tp in sorted(self.by_partition):
            holders = self.by_partition[tp]
            for i in sorted(holders):
                if len(holders) <= self.sharing:
                    break
                partitions = self._new_of(i).get(tp[0])
                if partitions is not None and tp[1] in partitions:
                    partitions.discard(tp[1])
                    holders.discard(i)
                    self.by_member[i].discard(tp)
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
        by_partition: dict[int, set[int]] = {}
        by_member: dict[int, set[int]] = {}
        # Step 1: a previous holder of this topic keeps it for now, subscribed or not; step 2
        # takes it back from a non-subscriber, whose quota for the topic is 0.
        for i, old in enumerate(self.old):
            for p in sorted(old.get(topic, ())):
                by_partition.setdefault(p, set()).add(i)
                by_member.setdefault(i, set()).add(p)
        for i in sorted(by_member):
            held = by_member[i]
            for p in sorted(held):
                if len(held) <= quota[i]:
                    break
                by_partition[p].discard(i)
                held.discard(p)
                self._new_of(i)[topic].discard(p)
        for p in sorted(by_partition):
            holders = by_partition[p]
            for i in sorted(holders):
                if len(holders) <= sharing:
                    break
                partitions = self._new_of(i).get(topic)
                if partitions is not None and p in partitions:
                    partitions.discard(p)
                    holders.discard(i)
                    by_member[i].discard(p)
        for p in targets:
            by_partition.setdefault(p, set())
        by_partition = dict(sorted(by_partition.items()))
        unfilled = [i for i in sorted(subscribers) if len(by_member.get(i, ())) < quota[i]]

        def give(i: int, p: int) -> None:
            by_partition[p].add(i)
            self._new_of(i).setdefault(topic, set()).add(p)

        _fill(by_partition, sharing, unfilled, give, by_member, lambda i: quota[i])


def _result(ids: list[str], old: list[Mapping[uuid.UUID, Set[int]]],
            new: dict[int, dict[uuid.UUID, set[int]]]) -> dict[str, Assignment]:
    out = {}
    for i, member in enumerate(ids):
        source = new.get(i, old[i])
        # Kafka's maps may keep a topic whose set was emptied by a revocation; an empty set
        # assigns nothing, so it is dropped here to make results comparable.
        out[member] = {t: frozenset(ps) for t, ps in source.items() if ps}
    return out
