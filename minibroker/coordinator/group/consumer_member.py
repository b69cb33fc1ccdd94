"""A member of a KIP-848 consumer group and how it converges to its target assignment.

Kafka's ``ConsumerGroupMember`` and ``CurrentAssignmentBuilder``
(group-coordinator/.../modern/consumer/). A member owns *assigned* partitions at its *member
epoch*; when the group's target assignment moves to a newer epoch, the member walks to it
without two members ever owning one partition:

* partitions it must give up are *pending revocation*: it stays at its epoch in
  ``UNREVOKED_PARTITIONS`` until a heartbeat's owned partitions no longer list them (a
  heartbeat without the owned list proves nothing);
* partitions it should get but another member still holds (or has pending revocation) are
  *unreleased*: it moves to the target epoch in ``UNRELEASED_PARTITIONS`` and gets them once
  they are free;
* otherwise it moves to the target epoch, ``STABLE``.

:func:`reconcile` is that one step, a pure function: the member, the target and who holds what
in, the next member out.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from .consumer_assignors import Assignment

# Epochs a heartbeat may carry besides a real one (ConsumerGroupHeartbeatRequest.json).
JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH = 0, -1, -2


class MemberState(StrEnum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass(frozen=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    server_assignor: str | None = None
    subscribed_names: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    member_epoch: int = 0
    previous_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    pending_revocation: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)

    def reconciled_to(self, epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == epoch

    def at_epoch(self, epoch: int, **changes) -> ConsumerMember:
        return replace(self, previous_epoch=self.member_epoch, member_epoch=epoch, **changes)


def partitions_of(a: Mapping[uuid.UUID, frozenset[int]]) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in a.items() for p in ps}


def is_subset(owned: Mapping[uuid.UUID, frozenset[int]] | None,
              assigned: Mapping[uuid.UUID, frozenset[int]]) -> bool:
    """Kafka's isSubset: an absent owned list is not a subset of anything."""
    return owned is not None and partitions_of(owned) <= partitions_of(assigned)


def reconcile(member: ConsumerMember, target_epoch: int, target: Assignment,
              owned: Mapping[uuid.UUID, frozenset[int]] | None,
              partition_epoch: Callable[[uuid.UUID, int], int]) -> ConsumerMember:
    """One step of ``member`` towards ``target`` (CurrentAssignmentBuilder.build)."""
    if member.reconciled_to(target_epoch):
        return member
    if member.state == MemberState.STABLE:
        return _next(member, member.member_epoch, member.assigned, target_epoch, target, owned,
                     partition_epoch)
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if owned is None or _owns_any(owned, member.pending_revocation):
            return member
        # Revoked: on to the next epoch (not past the target's), then towards the target.
        return _next(member, min(member.member_epoch + 1, target_epoch), member.assigned,
                     target_epoch, target, owned, partition_epoch)
    return _next(member, member.member_epoch, member.assigned, target_epoch, target, owned,
                 partition_epoch)


def _owns_any(owned: Mapping[uuid.UUID, frozenset[int]] | None,
              partitions: Mapping[uuid.UUID, frozenset[int]]) -> bool:
    if owned is None:
        return True  # it did not say: assume it still holds them
    return bool(partitions_of(owned) & partitions_of(partitions))


def _next(member: ConsumerMember, epoch: int, assigned: Mapping[uuid.UUID, frozenset[int]],
          target_epoch: int, target: Assignment, owned, partition_epoch) -> ConsumerMember:
    new_assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoke: dict[uuid.UUID, frozenset[int]] = {}
    to_assign: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for tid in set(target) | set(assigned):
        want = target.get(tid, frozenset())
        have = assigned.get(tid, frozenset())
        keep = have & want
        gone = have - keep
        pending = member.pending_revocation.get(tid, frozenset())
        # A partition another member still holds is unreleased; one this member itself has
        # pending revocation is not (only one member can hold a partition).
        free = frozenset(p for p in want - keep
                         if partition_epoch(tid, p) == -1 or p in pending)
        unreleased = unreleased or len(free) < len(want - keep)
        if keep:
            new_assigned[tid] = keep
        if gone:
            revoke[tid] = gone
        if free:
            to_assign[tid] = free
    if revoke and _owns_any(owned, revoke):
        return replace(member, previous_epoch=member.member_epoch, member_epoch=epoch,
                       state=MemberState.UNREVOKED_PARTITIONS, assigned=new_assigned,
                       pending_revocation=revoke)
    for tid, ps in to_assign.items():
        new_assigned[tid] = new_assigned.get(tid, frozenset()) | ps
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return replace(member, previous_epoch=member.member_epoch, member_epoch=target_epoch,
                   state=state, assigned=new_assigned, pending_revocation={})
