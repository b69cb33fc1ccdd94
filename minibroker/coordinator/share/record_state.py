"""The delivery states of a record in a share partition and the one table of their moves.

Kafka's ``RecordState`` (server/src/main/java/org/apache/kafka/server/share/fetch/RecordState.java):
the member's value is the id Kafka gives it, which is also the ``DeliveryState`` byte of the
state batches in ``__share_group_state`` (ShareSnapshotValue / ShareUpdateValue), so a decoded
batch's state is looked up, never translated.

``RecordState.validateTransition`` is the whole rule: ACKNOWLEDGED and ARCHIVED are terminal,
AVAILABLE only moves to ACQUIRED, ACQUIRED moves anywhere else, and a move to the same state is
refused. ARCHIVING (a dead-letter copy in flight, share.version 2 with a DLQ topic) follows the
same rule. One move bypasses the table in Kafka and therefore here too: ``InFlightState.archive``
(the log start offset moved past an AVAILABLE record, the log no longer holds it, or an acquired
record belongs to an aborted transaction) sets ARCHIVED directly.
"""

from __future__ import annotations

from enum import IntEnum


class RecordState(IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3
    ARCHIVED = 4

    @property
    def terminal(self) -> bool:
        """Done with for good: the start offset may move past it (SharePartition.isStateTerminal;
        ARCHIVING is not, its dead-letter copy may still fail)."""
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)

    @classmethod
    def for_id(cls, state_id: int) -> RecordState:
        try:
            return cls(state_id)
        except ValueError:
            # RecordState.forId's message
            raise ValueError(f"Unknown record state id: {state_id}") from None


S = RecordState
# state: the states it may move to (RecordState.validateTransition)
_NEXT: dict[RecordState, frozenset[RecordState]] = {
    S.AVAILABLE: frozenset({S.ACQUIRED}),
    S.ACQUIRED: frozenset({S.AVAILABLE, S.ACKNOWLEDGED, S.ARCHIVING, S.ARCHIVED}),
    S.ARCHIVING: frozenset({S.AVAILABLE, S.ACQUIRED, S.ACKNOWLEDGED, S.ARCHIVED}),
    S.ACKNOWLEDGED: frozenset(),
    S.ARCHIVED: frozenset(),
}
del S

assert set(_NEXT) == set(RecordState)


class IllegalRecordTransition(AssertionError):
    """A move the table does not allow: a share-partition bug, never a client's mistake."""


def check_transition(current: RecordState, to: RecordState) -> RecordState:
    if to not in _NEXT[current]:
        raise IllegalRecordTransition(f"illegal record state transition {current.name} -> {to.name}")
    return to


def may_move(current: RecordState, to: RecordState) -> bool:
    return to in _NEXT[current]

