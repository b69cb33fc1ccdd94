"""The states of a transactional id and the one table of their transitions.

Kafka's ``TransactionState`` (transaction-coordinator, ``TransactionState.java``): each
state carries its name (what DescribeTransactions and ListTransactions answer), the
states it may be entered from, and whether an id resting in it may expire
(``transactional.id.expiration.ms``). The member's value is the wire code of
``__transaction_state`` (``minibroker_protocol.txn_log``), so a decoded record's state
is looked up, never translated.

A move is checked by :func:`check_transition`; an impossible move is a coordinator bug
and fails loudly instead of writing a record a restart would replay wrongly.
"""

from __future__ import annotations

from enum import IntEnum

from minibroker_protocol import txn_log as tl


class TxnState(IntEnum):
    EMPTY = tl.EMPTY
    ONGOING = tl.ONGOING
    PREPARE_COMMIT = tl.PREPARE_COMMIT
    PREPARE_ABORT = tl.PREPARE_ABORT
    COMPLETE_COMMIT = tl.COMPLETE_COMMIT
    COMPLETE_ABORT = tl.COMPLETE_ABORT
    DEAD = tl.DEAD
    PREPARE_EPOCH_FENCE = tl.PREPARE_EPOCH_FENCE

    @property
    def kafka_name(self) -> str:
        return _TABLE[self][0]

    @property
    def valid_previous(self) -> frozenset[TxnState]:
        return _TABLE[self][1]

    @property
    def may_expire(self) -> bool:
        """An id resting here is forgotten after transactional.id.expiration.ms idle
        (Kafka's TransactionStateManager: only ids with no transaction in flight)."""
        return _TABLE[self][2]

    @property
    def is_completing(self) -> bool:
        """Markers are being (or about to be) written; requests wait for the end."""
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                        TxnState.PREPARE_EPOCH_FENCE)

    @classmethod
    def by_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)


S = TxnState
_RESTING = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
# state: (Kafka's name, valid previous states, may expire)
_TABLE: dict[TxnState, tuple[str, frozenset[TxnState], bool]] = {
    # InitProducerId; Empty -> Empty is the epoch bump of a new instance
    S.EMPTY: ("Empty", _RESTING, True),
    # AddPartitionsToTxn / AddOffsetsToTxn: the first opens the transaction
    S.ONGOING: ("Ongoing", _RESTING | {S.ONGOING}, False),
    # EndTxn(commit)
    S.PREPARE_COMMIT: ("PrepareCommit", frozenset({S.ONGOING}), False),
    # EndTxn(abort), or the abort after an epoch fence; with transactions v2 also an abort
    # outside a transaction, which only bumps the epoch (TransactionMetadata: "In V2, we allow
    # state transits from Empty, CompleteCommit and CompleteAbort to PrepareAbort")
    S.PREPARE_ABORT: ("PrepareAbort", _RESTING | {S.ONGOING, S.PREPARE_EPOCH_FENCE}, False),
    # every marker written
    S.COMPLETE_COMMIT: ("CompleteCommit", frozenset({S.PREPARE_COMMIT}), True),
    S.COMPLETE_ABORT: ("CompleteAbort", frozenset({S.PREPARE_ABORT}), True),
    # expiry: the id is forgotten (a tombstone in the log)
    S.DEAD: ("Dead", _RESTING, False),
    # a timeout or a new instance fences the open transaction with a bumped epoch
    S.PREPARE_EPOCH_FENCE: ("PrepareEpochFence", frozenset({S.ONGOING}), False),
}
_BY_NAME = {name: state for state, (name, _prev, _exp) in _TABLE.items()}
del S

assert set(_TABLE) == set(TxnState) and {int(s) for s in TxnState} == set(tl.STATE_CODES)


class IllegalTransition(AssertionError):
    """A move the table does not allow: a coordinator bug."""


def check_transition(transactional_id: str, current: TxnState, to: TxnState) -> None:
    if current not in to.valid_previous:
        raise IllegalTransition(f"illegal transaction transition {current.kafka_name} -> "
                                f"{to.kafka_name} for {transactional_id}")
