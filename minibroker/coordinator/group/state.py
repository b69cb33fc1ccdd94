"""The states of a classic consumer group and the one table of their transitions.

Kafka's ``ClassicGroupState`` (group-coordinator, formerly ``GroupState`` in
``GroupMetadata.scala``): each state names the states it may be entered from, and a
group moves only through :func:`transition`, so an impossible move is a loud bug, not
a silently wrong group. Loading a group from ``__consumer_offsets`` is not a move: as
Kafka's ``GroupMetadata.loadGroup`` it starts in ``Stable`` (members) or ``Empty``.
"""

from __future__ import annotations

from enum import StrEnum


class GroupState(StrEnum):
    # The value is Kafka's name for the state: what DescribeGroups and ListGroups answer.
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @property
    def valid_previous(self) -> frozenset[GroupState]:
        return _VALID_PREVIOUS[self]


S = GroupState
_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    # the last member left or expired, or the first generation completed with nobody
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    # a member joined, rejoined with new metadata, left or timed out
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    # every expected member joined (or the rebalance timeout passed): waiting for the leader
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    # the leader's SyncGroup handed out the assignment
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    # DeleteGroups (only an Empty group here, but Kafka allows all)
    S.DEAD: frozenset({S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD}),
}
del S


class IllegalTransition(AssertionError):
    """A move the table does not allow: a coordinator bug."""


def transition(group, to: GroupState) -> None:
    """Move ``group`` (anything with a ``state``) to ``to``, as the table allows."""
    if group.state not in to.valid_previous:
        raise IllegalTransition(f"group {getattr(group, 'group_id', '?')}: "
                                f"{group.state} -> {to} is not a valid transition")
    group.state = to
