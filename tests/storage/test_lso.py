"""Last stable offset: open transactions hold it, markers move it, restarts keep it."""

import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker_storage import LogConfig, PartitionLog
from minibroker_storage.errors import InvalidProducerEpoch, TransactionCoordinatorFenced
from minibroker_storage.producer_state import list_snapshots
from minibroker_storage.txn_index import AbortedTxn

from .batches import TS0, crash
from .txns import Writer, read_headers

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=256, retention_ms=-1)


def committed_view(log, start=None):
    """What a READ_COMMITTED reader gets: base offsets of the batches below the LSO."""
    return [h.base_offset for h in read_headers(log, start, upper_bound=log.last_stable_offset)]


def test_without_transactions_the_lso_is_the_high_watermark(open_log):
    log = open_log(CONFIG)
    assert log.last_stable_offset == 0
    w = Writer(log)
    w.plain()
    w.plain(7, 3)
    assert log.last_stable_offset == log.high_watermark == log.log_end_offset == 4
    assert log.first_unstable_offset() is None


def test_one_open_transaction_holds_back_later_data(open_log):
    log = open_log(CONFIG)
    w = Writer(log)
    w.plain()  # 0
    w.data(7, 2)  # 1..2
    w.plain()  # 3: plain data after the open transaction
    w.plain(8)  # 4: an idempotent producer
    w.data(7)  # 5
    assert log.last_stable_offset == 1
    assert committed_view(log) == [0]
    assert committed_view(log, 1) == []
    assert len(log.read(3, 1 << 20, upper_bound=log.last_stable_offset)) == 0
    w.commit(7)  # 6
    assert log.last_stable_offset == log.log_end_offset == 7
    assert committed_view(log) == [0, 1, 3, 4, 5, 6]
    assert log.aborted_transactions(0, 7) == []


def test_two_open_transactions(open_log):
    log = open_log(CONFIG)
    w = Writer(log)
    w.data(1)  # 0
    w.data(2)  # 1
    w.plain()  # 2
    assert log.last_stable_offset == 0
    w.commit(1)  # 3
    assert log.last_stable_offset == 1
    assert committed_view(log) == [0]
    w.abort(2)  # 4
    assert log.last_stable_offset == 5
    assert log.aborted_txns() == [AbortedTxn(2, 1, 4, 5)]
    assert log.aborted_transactions(0, 5) == [(2, 1)]


def test_interleaved_transactions_across_producers(open_log):
    log = open_log(CONFIG)
    w = Writer(log)
    history = []
    w.data(1)  # 0  A
    w.data(2)  # 1  B
    w.data(1)  # 2  A
    w.plain()  # 3
    w.commit(2)  # 4: B is done, but A is older
    history.append(log.last_stable_offset)
    w.data(3)  # 5  C
    w.data(1)  # 6  A
    w.abort(1)  # 7: A aborted, C now the oldest open
    history.append(log.last_stable_offset)
    w.plain()  # 8
    w.abort(3)  # 9
    history.append(log.last_stable_offset)
    assert history == [0, 5, 10]
    assert log.aborted_txns() == [AbortedTxn(1, 0, 7, 5), AbortedTxn(3, 5, 9, 10)]
    assert log.aborted_transactions(0, 10) == [(1, 0), (3, 5)]
    assert log.aborted_transactions(8, 10) == [(3, 5)]
    assert log.aborted_transactions(0, 5) == [(1, 0)]


def test_read_committed_stops_at_the_lso_not_inside_a_batch(open_log):
    log = open_log(LogConfig(segment_bytes=1 << 20, index_interval_bytes=100))
    w = Writer(log)
    for _ in range(30):
        w.plain(-1, 3)  # 0..89
    w.data(7, 2)  # 90..91
    for _ in range(30):
        w.plain(-1, 3)
    lso = log.last_stable_offset
    assert lso == 90
    headers = read_headers(log, upper_bound=lso)
    assert headers[-1].last_offset == 89 and all(h.last_offset < lso for h in headers)
    for start in (0, 1, 45, 88, 89):
        got = read_headers(log, start, upper_bound=lso)
        assert got and all(h.last_offset < lso for h in got)
    assert len(log.read(90, 1 << 20, upper_bound=lso)) == 0
    # A bound inside a batch (88 is in 87..89) leaves that whole batch out.
    assert read_headers(log, upper_bound=88)[-1].last_offset == 86
    assert len(log.read(88, 1 << 20, upper_bound=88)) == 0


def _open_transaction_across_segments(log):
    w = Writer(log, size=300)
    w.plain()  # 0
    w.data(7)  # 1: stays open
    w.data(8)  # 2: aborted below
    for _ in range(20):
        w.plain(9)
    w.abort(8)
    w.data(7)
    w.plain()
    assert len(log.segments) >= 3
    return w


@pytest.mark.parametrize("how", ["clean", "crash", "crash_without_snapshots"])
def test_open_transaction_holds_the_lso_after_a_restart(open_log, how):
    log = open_log(CONFIG)
    w = _open_transaction_across_segments(log)
    end = log.log_end_offset
    aborted = log.aborted_txns()
    assert log.last_stable_offset == 1
    if how == "clean":
        log.close()
    else:
        crash(log)
        if how == "crash_without_snapshots":
            for offset in list_snapshots(log.path):
                os.unlink(os.path.join(log.path, f"{offset:020d}.snapshot"))
    log = open_log(CONFIG)
    assert log.log_end_offset == end
    assert log.last_stable_offset == 1
    assert log.producer_state_manager.ongoing_transactions == {7: 1}
    assert log.aborted_txns() == aborted
    assert committed_view(log) == [0]
    w.log = log
    w.plain()
    assert log.last_stable_offset == 1
    w.commit(7)
    assert log.last_stable_offset == log.log_end_offset


def test_coordinator_markers_check_epochs_and_move_the_lso(open_log):
    log = open_log(CONFIG)
    w = Writer(log)
    w.data(7, epoch=2)  # 0
    w.data(8)  # 1
    before = (log.log_end_offset, log.last_stable_offset, log.aborted_txns())
    with pytest.raises(InvalidProducerEpoch):
        w.abort(7, epoch=1, coordinator_epoch=5)
    assert (log.log_end_offset, log.last_stable_offset, log.aborted_txns()) == before
    w.commit(8, coordinator_epoch=5)  # 2
    assert log.last_stable_offset == 0
    w.abort(7, epoch=2, coordinator_epoch=5)  # 3
    assert log.last_stable_offset == 4
    w.data(7, epoch=2)  # 4
    with pytest.raises(TransactionCoordinatorFenced):
        w.abort(7, epoch=2, coordinator_epoch=4)
    assert log.last_stable_offset == 4 and log.log_end_offset == 5
    # The coordinator aborting a timed-out transaction with a bumped epoch.
    info = w.abort(7, epoch=3, coordinator_epoch=5)  # 5
    assert info.completed_txn == (7, 4, 5, True)
    assert log.aborted_txns() == [AbortedTxn(7, 0, 3, 4), AbortedTxn(7, 4, 5, 6)]
    assert log.last_stable_offset == 6
    assert log.aborted_transactions(0, 6) == [(7, 0), (7, 4)]


def test_marker_for_a_producer_without_open_transaction_leaves_the_lso(open_log):
    log = open_log(CONFIG)
    w = Writer(log)
    w.plain()  # 0
    w.data(7)  # 1
    w.commit(9, coordinator_epoch=1)  # 2: producer 9 never wrote here
    w.abort(10)  # 3
    assert log.last_stable_offset == 1
    assert log.aborted_txns() == []
    w.abort(7)
    assert log.aborted_txns() == [AbortedTxn(7, 1, 4, 5)]


def test_lso_is_never_below_the_log_start(open_log):
    log = open_log(LogConfig(segment_bytes=4096, retention_bytes=1, retention_ms=-1))
    w = Writer(log, size=300)
    w.data(7)  # 0: the transaction starts in the first segment
    for _ in range(15):
        w.plain()
    w.data(7)  # its last batch stays
    assert log.last_stable_offset == 0
    assert log.apply_retention(TS0) >= 1
    assert log.log_start_offset > 0
    # Kafka's UnifiedLog.maybeIncrementFirstUnstableOffset: max(first unstable, log start).
    assert log.last_stable_offset == log.log_start_offset
    assert log.first_unstable_offset() == 0


# --------------------------------------------------------------- property

TXN_PIDS = (21, 22, 23)
PLAIN_PIDS = (-1, 31)

txn_data = st.tuples(st.just("txn"), st.sampled_from(TXN_PIDS), st.integers(1, 3))
end_txn = st.tuples(st.just("end"), st.sampled_from(TXN_PIDS), st.booleans())
plain = st.tuples(st.just("plain"), st.sampled_from(PLAIN_PIDS), st.integers(1, 3))
roll = st.tuples(st.just("roll"), st.just(0), st.just(0))
reopen = st.tuples(
    st.just("reopen"), st.sampled_from(["clean", "crash", "lose_txnindex", "lose_snapshots"]), st.just(0)
)
operations = st.lists(
    st.one_of(txn_data, txn_data, txn_data, end_txn, end_txn, end_txn, plain, roll, reopen),
    min_size=1,
    max_size=60,
)


def _reopen(log, how, config):
    if how == "crash":
        crash(log)
    else:
        log.close()
    if how == "lose_txnindex":
        for seg in log.segments:
            os.unlink(seg.txn_index.path)
    elif how == "lose_snapshots":
        for offset in list_snapshots(log.path):
            os.unlink(os.path.join(log.path, f"{offset:020d}.snapshot"))
    return PartitionLog.open(log.path, config, now_ms=TS0)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations)
def test_lso_and_aborted_ranges_follow_the_model(ops):
    config = LogConfig(segment_bytes=2048, index_interval_bytes=128, retention_ms=-1)
    tmp = tempfile.mkdtemp()
    log = PartitionLog.open(os.path.join(tmp, "p-0"), config, now_ms=TS0)
    w = Writer(log, size=60)
    open_txns: dict[int, int] = {}  # pid -> first offset
    aborted: list[tuple[int, int, int]] = []  # (pid, first, marker offset), marker order
    last_lso = 0
    try:
        for op, a, b in ops:
            if op == "txn":
                info = w.data(a, b)
                open_txns.setdefault(a, info.base_offset)
            elif op == "end":
                info = w.end(a, commit=b)
                first = open_txns.pop(a, None)
                if first is None:
                    assert info.completed_txn is None
                else:
                    assert info.completed_txn == (a, first, info.base_offset, not b)
                    if not b:
                        aborted.append((a, first, info.base_offset))
            elif op == "plain":
                w.plain(a, b)
            elif op == "roll":
                log.roll()
            else:
                before = log.aborted_txns()
                log = w.log = _reopen(log, a, config)
                assert log.aborted_txns() == before  # rebuilt entries carry the same LSOs

            end = log.log_end_offset
            lso = log.last_stable_offset
            assert lso == min(open_txns.values(), default=end)
            assert lso >= last_lso
            last_lso = lso
            assert dict(log.producer_state_manager.ongoing_transactions) == open_txns
            assert log.aborted_transactions(0, end) == [(p, f) for p, f, _ in aborted]
            for lo, hi in ((0, lso), (lso, end), (end // 2, end), (end // 3, 2 * end // 3)):
                want = [(p, f) for p, f, last in aborted if last >= lo and f < hi] if hi > lo else []
                assert log.aborted_transactions(lo, hi) == want, (lo, hi)
            # Each entry's LSO is no more than the marker + 1 and no less than
            # what the LSO was before the marker.
            for e in log.aborted_txns():
                assert e.last_stable_offset <= e.last_offset + 1
            headers = read_headers(log, upper_bound=lso)
            assert all(h.last_offset < lso for h in headers)
            assert (headers[-1].next_offset if headers else 0) == lso

        # Every range between interesting offsets, against the model.
        end = log.log_end_offset
        points = {0, end}
        for p, f, last in aborted:
            points.update((f, last))
        points = sorted({q + d for q in points for d in (-1, 0, 1) if 0 <= q + d <= end})
        for lo in points:
            for hi in points:
                want = [(p, f) for p, f, last in aborted if last >= lo and f < hi] if hi > lo else []
                assert log.aborted_transactions(lo, hi) == want, (lo, hi)
    finally:
        log.release()
        shutil.rmtree(tmp, ignore_errors=True)
