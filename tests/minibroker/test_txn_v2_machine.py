"""Transactions v2 (KIP-890 part 2) in the coordinator's core, with no I/O: implicit
registration, the epoch bump at every EndTxn v5, retries one epoch behind, the empty abort,
the producer-id rotation at the end of the epoch range, and what the log keeps of it.

The rules are Kafka's TransactionCoordinator.endTransaction (the table of KAFKA-14563 for the
resting states, judged by the request's version as Kafka 4.4 does); the differential suite
checks the same requests against Kafka 4.4 (tests/differential/test_transactions_v2.py)."""

from __future__ import annotations

import pytest

from minibroker.coordinator.txn.machine import MAX_EPOCH, TxnError
from minibroker.coordinator.txn.state import TxnState
from minibroker_protocol.errors import ErrorCode

from .test_txn_state_machine import machine

S = TxnState
TP = ("t", 0)


def tv2_machine(**kw):
    return machine(transaction_version=lambda: 2, **kw)


def code(fn, *args, **kw) -> ErrorCode:
    with pytest.raises(TxnError) as e:
        fn(*args, **kw)
    return e.value.code


def test_produce_v12_opens_the_transaction_and_end_txn_v5_bumps_the_epoch():
    m, clock, log, markers = tv2_machine()
    pid, ep = m.init_producer_id("x", 60_000)
    assert m.verify_produce(pid, ep, *TP, add=True) is None
    meta = m.txns["x"]
    assert (meta.state, meta.partitions, meta.client_tv) == (S.ONGOING, {TP}, 2)
    assert m.end_txn("x", pid, ep, True, client_tv=2) == (pid, ep + 1)
    # the markers carry the bumped epoch: a late batch of the old epoch is fenced by them
    assert markers.calls == [(pid, ep + 1, True, [TP])]
    assert (meta.state, meta.producer_epoch, meta.last_producer_epoch) == (S.COMPLETE_COMMIT, ep + 1, ep)
    # the log's value v1 keeps the client's transaction version
    assert log.records()[-1][1].client_transaction_version == 2
    # without add, a partition outside the transaction is still refused (KIP-890 part 1)
    assert m.verify_produce(pid, ep + 1, "t", 1) == ErrorCode.transaction_abortable


def test_end_txn_v4_does_not_bump_even_after_implicit_registration():
    m, _clock, _log, markers = tv2_machine()
    pid, ep = m.init_producer_id("x", 60_000)
    assert m.verify_produce(pid, ep, *TP, add=True) is None
    assert m.end_txn("x", pid, ep, False, client_tv=0) == (pid, ep)
    assert markers.calls == [(pid, ep, False, [TP])]


@pytest.mark.parametrize("commit", [True, False])
def test_a_retried_end_txn_gets_the_same_answer(commit):
    m, *_ = tv2_machine()
    pid, ep = m.init_producer_id("x", 60_000)
    m.verify_produce(pid, ep, *TP, add=True)
    first = m.end_txn("x", pid, ep, commit, client_tv=2)
    assert m.end_txn("x", pid, ep, commit, client_tv=2) == first
    # the other outcome, retried, is not what happened
    other = code(m.end_txn, "x", pid, ep, not commit, client_tv=2)
    assert other == ErrorCode.invalid_txn_state
    # two epochs behind: fenced
    assert code(m.end_txn, "x", pid, ep - 1, commit, client_tv=2) == ErrorCode.producer_fenced


def test_resting_states_at_the_current_epoch():
    m, _clock, _log, markers = tv2_machine()
    pid, ep = m.init_producer_id("x", 60_000)
    m.verify_produce(pid, ep, *TP, add=True)
    pid, ep = m.end_txn("x", pid, ep, True, client_tv=2)
    # a commit with nothing open is an invalid state; an abort is an empty abort: a bump, no markers
    assert code(m.end_txn, "x", pid, ep, True, client_tv=2) == ErrorCode.invalid_txn_state
    assert m.end_txn("x", pid, ep, False, client_tv=2) == (pid, ep + 1)
    assert len(markers.calls) == 2 and markers.calls[-1] == (pid, ep + 1, False, [])
    assert m.txns["x"].state == S.COMPLETE_ABORT


def test_empty_abort_right_after_init_producer_id():
    m, *_ = tv2_machine()
    pid, ep = m.init_producer_id("x", 60_000)
    assert m.end_txn("x", pid, ep, False, client_tv=2) == (pid, ep + 1)
    # ...but not for a client of transactions v1
    pid, ep = m.init_producer_id("y", 60_000)
    assert code(m.end_txn, "y", pid, ep, False, client_tv=0) == ErrorCode.invalid_txn_state


def test_implicit_registration_refuses_a_stale_epoch_and_an_unknown_producer():
    m, *_ = tv2_machine()
    pid, ep = m.init_producer_id("x", 60_000)
    assert m.verify_produce(pid, ep - 1, *TP, add=True) == ErrorCode.invalid_producer_epoch
    assert m.verify_produce(pid + 99, 0, *TP, add=True) == ErrorCode.invalid_producer_id_mapping
    assert m.txns["x"].state == S.EMPTY


def test_the_epoch_range_ends_with_a_new_producer_id():
    m, _clock, log, markers = tv2_machine()
    pid, _ = m.init_producer_id("x", 60_000)
    m.txns["x"].producer_epoch = ep = MAX_EPOCH - 1  # as if bumped that many times
    m.verify_produce(pid, ep, *TP, add=True)
    new_pid, new_ep = m.end_txn("x", pid, ep, True, client_tv=2)
    assert new_pid != pid and new_ep == 0
    assert markers.calls == [(pid, MAX_EPOCH, True, [TP])]  # the last marker of the old id
    # PrepareCommit recorded where the producer goes next, CompleteCommit where it came from
    prepare, complete = log.records()[-2][1], log.records()[-1][1]
    assert (prepare.next_producer_id, prepare.producer_epoch) == (new_pid, MAX_EPOCH)
    assert (complete.producer_id, complete.previous_producer_id, complete.next_producer_id) == (new_pid, pid, -1)
    # a retry with the old id and epoch is recognised; the new id works
    assert m.end_txn("x", pid, ep, True, client_tv=2) == (new_pid, 0)
    assert m.verify_produce(new_pid, 0, *TP, add=True) is None
    assert m.verify_produce(pid, ep, "t", 1, add=True) == ErrorCode.invalid_producer_id_mapping


def test_a_commit_overtaken_by_a_timeout_abort():
    m, clock, _log, _markers = tv2_machine()
    pid, ep = m.init_producer_id("x", 1_000)
    m.verify_produce(pid, ep, *TP, add=True)
    clock.advance(2_000)
    assert m.abort_timed_out() == 1
    meta = m.txns["x"]
    # one bump only (KAFKA-19367), the abort acted at the cluster's level
    assert (meta.state, meta.producer_epoch, meta.client_tv) == (S.COMPLETE_ABORT, ep + 1, 2)
    # Kafka 4.4: a v2 client's commit one epoch behind is taken for a retry, and a retried commit
    # of an aborted transaction is an invalid state (fatal to the client; KAFKA-20785 changes it
    # later); a v1 client's is fenced.
    assert code(m.end_txn, "x", pid, ep, True, client_tv=2) == ErrorCode.invalid_txn_state
    assert code(m.end_txn, "x", pid, ep, True, client_tv=0) == ErrorCode.producer_fenced


def test_replay_restores_the_v2_fields():
    m, _clock, log, _markers = tv2_machine()
    pid, _ = m.init_producer_id("x", 60_000)
    m.txns["x"].producer_epoch = ep = MAX_EPOCH - 1
    m.verify_produce(pid, ep, *TP, add=True)
    new_pid, _ = m.end_txn("x", pid, ep, True, client_tv=2)
    again, *_ = tv2_machine()
    for key, value in log.records():
        from minibroker_protocol import txn_log as tl
        assert again.replay(tl.encode_key(key), tl.encode_value(value, 1)) is None
    meta = again.txns["x"]
    assert (meta.producer_id, meta.last_producer_id, meta.client_tv) == (new_pid, pid, 2)
    # so a retry after a restart is still recognised
    assert again.end_txn("x", pid, ep, True, client_tv=2) == (new_pid, 0)


def test_the_log_value_version_follows_the_cluster_level():
    for level, version in [(0, 0), (1, 1), (2, 1)]:
        m, _clock, log, _markers = machine(transaction_version=lambda level=level: level)
        m.init_producer_id("x", 60_000)
        assert log.batches and _value_version(log) == version


def _value_version(log) -> int:
    from minibroker_protocol.records import decode_batch
    value = next(iter(decode_batch(memoryview(log.batches[-1])))).value
    return int.from_bytes(value[:2], "big")
