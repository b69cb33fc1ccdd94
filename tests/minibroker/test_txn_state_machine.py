"""The transaction coordinator's core, driven synchronously: no broker, no sockets, no
sleeps. Time moves only by ManualClock.advance; the log and the markers are fakes that
record what the core asked for."""

from __future__ import annotations

import pytest

from minibroker.coordinator.txn.machine import TransactionMachine, TxnError
from minibroker.coordinator.txn.state import IllegalTransition, TxnState, check_transition
from minibroker.core.clock import ManualClock
from minibroker.core.crash_points import CrashPoints
from minibroker_protocol import txn_log as tl
from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.records import decode_batch

S = TxnState


class FakeLog:
    def __init__(self) -> None:
        self.batches: list[bytes] = []

    def __call__(self, batch: bytes) -> int:
        self.batches.append(batch)
        return len(self.batches) - 1

    def records(self) -> list[tuple[str, tl.TxnLogValue | None]]:
        out = []
        for batch in self.batches:
            for r in decode_batch(memoryview(batch)):
                out.append((tl.decode_key(r.key),
                            tl.decode_value(r.value) if r.value is not None else None))
        return out


class FakeIds:
    def __init__(self) -> None:
        self.next = 1000

    def next_id(self) -> int:
        self.next += 1
        return self.next


class FakeMarkers:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int, bool, list]] = []

    def __call__(self, pid, epoch, commit, coordinator_epoch, partitions):
        self.calls.append((pid, epoch, commit, list(partitions)))
        return {tp: ErrorCode.none for tp in partitions}


def machine(clock=None, **kw):
    clock = clock or ManualClock()
    log, markers = FakeLog(), FakeMarkers()
    m = TransactionMachine(clock=clock, append=log, producer_ids=FakeIds(), markers=markers,
                           max_timeout_ms=kw.pop("max_timeout_ms", 900_000),
                           id_expiration_ms=kw.pop("id_expiration_ms", 604_800_000), **kw)
    return m, clock, log, markers


def states(log: FakeLog, tid: str) -> list[str]:
    return [S(v.state).kafka_name if v is not None else "tombstone"
            for k, v in log.records() if k == tid]


# -- the table -----------------------------------------------------------------------------
def test_each_state_carries_kafkas_name_and_wire_code():
    assert [(int(s), s.kafka_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"),
        (4, "CompleteCommit"), (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert S.by_name("PrepareEpochFence") is S.PREPARE_EPOCH_FENCE and S.by_name("x") is None


def test_only_resting_states_may_expire():
    assert {s for s in S if s.may_expire} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert {s for s in S if s.is_completing} == {S.PREPARE_COMMIT, S.PREPARE_ABORT,
                                                S.PREPARE_EPOCH_FENCE}


def test_check_transition_refuses_what_the_table_does_not_allow():
    check_transition("t", S.ONGOING, S.PREPARE_COMMIT)
    with pytest.raises(IllegalTransition):
        check_transition("t", S.EMPTY, S.COMPLETE_COMMIT)
    with pytest.raises(IllegalTransition):
        check_transition("t", S.PREPARE_COMMIT, S.ONGOING)


# -- requests ------------------------------------------------------------------------------
def test_commit_walks_the_happy_path_and_writes_markers():
    m, clock, log, markers = machine()
    pid, epoch = m.init_producer_id("t", 60_000)
    assert (pid, epoch) == (1001, 0)
    m.add_partitions("t", pid, epoch, [("a", 0), ("b", 1)])
    assert m.verify_produce(pid, epoch, "a", 0) is None
    # the coordinator's verdict; the Produce handler turns it into INVALID_TXN_STATE below v11
    assert m.verify_produce(pid, epoch, "a", 1) == ErrorCode.transaction_abortable
    clock.advance(50)
    m.end_txn("t", pid, epoch, commit=True)
    assert states(log, "t") == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
    assert markers.calls == [(pid, epoch, True, [("a", 0), ("b", 1)])]
    meta = m.txns["t"]
    assert meta.state is S.COMPLETE_COMMIT and meta.partitions == set()
    assert meta.last_update_ms == clock.wall_ms()
    m.end_txn("t", pid, epoch, commit=True)  # a retry: answered, nothing written
    assert len(log.batches) == 4


def test_transaction_start_time_comes_from_the_clock():
    m, clock, log, _ = machine(ManualClock(wall_ms=5_000))
    pid, epoch = m.init_producer_id("t", 60_000)
    clock.advance(7)
    m.add_partitions("t", pid, epoch, [("a", 0)])
    assert m.txns["t"].start_ms == 5_007
    assert log.records()[-1][1].start_ms == 5_007


def test_a_stale_epoch_is_fenced_and_a_wrong_pid_is_unmapped():
    m, _clock, _log, _ = machine()
    pid, epoch = m.init_producer_id("t", 60_000)
    pid2, epoch2 = m.init_producer_id("t", 60_000)  # a new instance bumps the epoch
    assert (pid2, epoch2) == (pid, epoch + 1)
    with pytest.raises(TxnError) as e:
        m.add_partitions("t", pid, epoch, [("a", 0)])
    assert e.value.code == ErrorCode.producer_fenced
    with pytest.raises(TxnError) as e:
        m.end_txn("t", pid + 1, epoch2, commit=True)
    assert e.value.code == ErrorCode.invalid_producer_id_mapping


def test_ending_an_empty_transaction_is_an_invalid_state():
    m, _clock, _log, _ = machine()
    pid, epoch = m.init_producer_id("t", 60_000)
    with pytest.raises(TxnError) as e:
        m.end_txn("t", pid, epoch, commit=False)
    assert e.value.code == ErrorCode.invalid_txn_state


def test_timeout_out_of_range_is_refused():
    m, _clock, _log, _ = machine(max_timeout_ms=1000)
    with pytest.raises(TxnError) as e:
        m.init_producer_id("t", 1001)
    assert e.value.code == ErrorCode.invalid_transaction_timeout


def test_new_instance_aborts_the_open_transaction_with_a_fencing_epoch():
    m, _clock, log, markers = machine()
    pid, epoch = m.init_producer_id("t", 60_000)
    m.add_partitions("t", pid, epoch, [("a", 0)])
    pid2, epoch2 = m.init_producer_id("t", 60_000)
    assert (pid2, epoch2) == (pid, epoch + 2)  # +1 for the fence, +1 for the new instance
    assert states(log, "t") == ["Empty", "Ongoing", "PrepareEpochFence", "PrepareAbort",
                                "CompleteAbort", "Empty"]
    assert markers.calls == [(pid, epoch + 1, False, [("a", 0)])]


# -- timers, driven by the clock -------------------------------------------------------------
def test_an_open_transaction_times_out_only_after_its_timeout():
    m, clock, log, markers = machine()
    pid, epoch = m.init_producer_id("t", 10_000)
    m.add_partitions("t", pid, epoch, [("a", 0)])
    clock.advance(10_000)
    assert m.abort_timed_out() == 0  # Kafka: strictly more than the timeout
    clock.advance(1)
    assert m.abort_timed_out() == 1
    meta = m.txns["t"]
    assert meta.state is S.COMPLETE_ABORT and meta.producer_epoch == epoch + 1
    assert markers.calls == [(pid, epoch + 1, False, [("a", 0)])]
    with pytest.raises(TxnError) as e:
        m.end_txn("t", pid, epoch, commit=True)
    assert e.value.code == ErrorCode.producer_fenced
    assert m.abort_timed_out() == 0


def test_an_idle_id_expires_and_is_forgotten():
    m, clock, log, _ = machine(id_expiration_ms=1_000)
    pid, _epoch = m.init_producer_id("t", 10_000)
    clock.advance(999)
    assert m.expire_ids() == 0
    clock.advance(1)
    assert m.expire_ids() == 1
    assert "t" not in m.txns and m.verify_produce(pid, 0, "a", 0) == \
        ErrorCode.invalid_producer_id_mapping
    assert states(log, "t")[-1] == "tombstone"


def test_an_open_transaction_never_expires():
    m, clock, _log, _ = machine(id_expiration_ms=1_000)
    pid, epoch = m.init_producer_id("t", 900_000)
    m.add_partitions("t", pid, epoch, [("a", 0)])
    clock.advance(10_000)
    assert m.expire_ids() == 0 and m.txns["t"].state is S.ONGOING


# -- replay and roll forward ---------------------------------------------------------------
def test_replay_then_roll_forward_completes_a_prepared_commit():
    m, _clock, log, _ = machine()
    pid, epoch = m.init_producer_id("t", 60_000)
    m.add_partitions("t", pid, epoch, [("a", 0)])
    m._persist(m.txns["t"], S.PREPARE_COMMIT)  # the broker stopped here
    written = list(log.batches)

    m2, _clock2, log2, markers2 = machine()
    for batch in written:
        for r in decode_batch(memoryview(batch)):
            assert m2.replay(r.key, r.value) is None
    assert m2.txns["t"].state is S.PREPARE_COMMIT
    assert m2.roll_forward() == 1
    assert m2.txns["t"].state is S.COMPLETE_COMMIT
    assert markers2.calls == [(pid, epoch, True, [("a", 0)])]


def test_replay_reports_a_record_it_cannot_apply():
    m, _clock, _log, _ = machine()
    assert m.replay(b"\x00", b"") is not None


def test_crash_points_are_a_collaborator_not_the_environment(monkeypatch):
    monkeypatch.setenv("MINIBROKER_CRASH_AT", "txn.after_prepare")
    hit = []

    class Recording(CrashPoints):
        def hit(self, point: str, transactional_id=None, topic=None, partition=None) -> None:
            hit.append(point)

    m, _clock, _log, _ = machine(crash=Recording())
    pid, epoch = m.init_producer_id("t", 60_000)
    m.add_partitions("t", pid, epoch, [("a", 0)])
    m.end_txn("t", pid, epoch, commit=True)  # the environment is not read: no kill
    assert hit == ["txn.after_prepare", "txn.before_complete"]
    assert CrashPoints.from_env({"MINIBROKER_CRASH_AT": "txn.after_prepare",
                                 "MINIBROKER_TEST_SNAPSHOT_RECORDS": "6"}) == CrashPoints(6)
    assert CrashPoints.from_env({"MINIBROKER_TEST_SNAPSHOT_RECORDS": "no"}).snapshot_records \
        is None
