""".txnindex: Kafka's format, what the log records, the read side, recovery."""

import os
import struct

import pytest
import structlog
from structlog.testing import LogCapture

import minibroker_storage.log
from minibroker_storage import LogConfig
from minibroker_storage.producer_state import list_snapshots
from minibroker_storage.sync_job import SyncJob
from minibroker_storage.txn_index import ABORTED_TXN_SIZE, AbortedTxn, TxnIndex

from .batches import TS0, crash, make_batch
from .txns import Writer

DAY = 86_400_000
CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=512, retention_ms=-1)


def entry_bytes(pid, first, last, lso, version=0):
    return struct.pack(">hqqqq", version, pid, first, last, lso)


def txnindex_files(log):
    return sorted(n for n in os.listdir(log.path) if n.endswith(".txnindex"))


def file_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def all_files(log):
    return {s.base_offset: file_bytes(s.txn_index.path) for s in log.segments}


@pytest.fixture
def events(monkeypatch):
    cap = LogCapture()
    logger = structlog.wrap_logger(
        structlog.ReturnLogger(),
        processors=[cap],
        wrapper_class=structlog.make_filtering_bound_logger(0),
        cache_logger_on_first_use=False,
    )
    monkeypatch.setattr(minibroker_storage.log, "_log", logger)
    return cap.entries


# ------------------------------------------------------------------ format


def test_entry_is_kafkas_34_bytes_big_endian():
    e = AbortedTxn(0x0102030405060708, 0x1112131415161718, 0x2122232425262728, 0x3132333435363738)
    raw = e.to_bytes()
    assert len(raw) == ABORTED_TXN_SIZE == 34
    assert raw == bytes.fromhex(
        "0000" "0102030405060708" "1112131415161718" "2122232425262728" "3132333435363738"
    )
    assert AbortedTxn(7, 1, 4, 3).to_bytes() == (
        b"\x00\x00" + b"\x00" * 7 + b"\x07" + b"\x00" * 7 + b"\x01" + b"\x00" * 7 + b"\x04" + b"\x00" * 7 + b"\x03"
    )


def test_index_round_trip(tmp_path):
    path = str(tmp_path / "00000000000000000100.txnindex")
    index = TxnIndex(path, 100)
    index.create()
    assert file_bytes(path) == b""
    entries = [AbortedTxn(7, 90, 100, 95), AbortedTxn(8, 101, 120, 121), AbortedTxn(2**40, 110, 130, 105)]
    for e in entries:
        index.append(e)
    assert file_bytes(path) == b"".join(entry_bytes(*e) for e in entries)
    assert index.to_bytes() == file_bytes(path)
    with pytest.raises(ValueError):
        index.append(AbortedTxn(9, 125, 130, 131))  # not after the last marker
    job = SyncJob()
    index.add_sync(job)
    job.wait()
    loaded = TxnIndex.load(path, 100, 131)
    assert loaded.stale is None and loaded.entries == entries and loaded.last_offset == 130
    # Entries whose marker is past the segment's end (a torn tail) are cut.
    loaded = TxnIndex.load(path, 100, 130)
    assert loaded.entries == entries[:2]
    assert file_bytes(path) == b"".join(entry_bytes(*e) for e in entries[:2])
    assert loaded.truncate_to(0) == 2 and file_bytes(path) == b""


@pytest.mark.parametrize(
    "data, reason",
    [
        (None, "missing"),
        (entry_bytes(7, 100, 101, 102)[:33], "whole number"),
        (entry_bytes(7, 100, 101, 102, version=1), "version"),
        (entry_bytes(7, 100, 105, 106) + entry_bytes(8, 100, 104, 105), "increasing"),
        (entry_bytes(7, 10, 50, 51), "below the segment"),
        (entry_bytes(7, 103, 101, 102), "impossible"),
        (entry_bytes(7, 100, 101, 200), "impossible"),
    ],
)
def test_unusable_files_are_stale(tmp_path, data, reason):
    path = str(tmp_path / "00000000000000000100.txnindex")
    if data is not None:
        with open(path, "wb") as f:
            f.write(data)
    index = TxnIndex.load(path, 100, 1000)
    assert index.entries == [] and reason in index.stale


def test_collect_is_kafkas_search(tmp_path):
    index = TxnIndex(str(tmp_path / "0.txnindex"), 0)
    index.create()
    for e in [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 10, 11), AbortedTxn(3, 12, 20, 12), AbortedTxn(4, 14, 30, 12)]:
        index.append(e)

    def collect(a, b):
        out = []
        return out, index.collect(a, b, out)

    assert collect(0, 3) == ([(1, 0)], True)  # LSO 6 >= 3: nothing later can start below 3
    assert collect(6, 12) == ([(2, 3)], True)  # pid 3's entry (LSO 12) ends the search
    assert collect(6, 13) == ([(2, 3), (3, 12)], False)
    assert collect(21, 40) == ([(4, 14)], False)
    assert collect(31, 40) == ([], False)


# ------------------------------------------------------- what the log writes


def test_abort_writes_an_entry_to_the_markers_segment(open_log):
    log = open_log(CONFIG)
    w = Writer(log)
    w.plain()  # 0
    w.data(7, 2)  # 1..2
    w.data(8)  # 3, still open after 7's abort
    done = w.abort(7)  # 4
    assert done.completed_txn == (7, 1, 4, True)
    index = log.active_segment.txn_index
    assert index.path == os.path.join(log.path, "00000000000000000000.txnindex")
    # LSO right after the marker: producer 8's open transaction.
    assert file_bytes(index.path) == entry_bytes(7, 1, 4, 3)
    assert log.aborted_txns() == [AbortedTxn(7, 1, 4, 3)]
    w.abort(8)  # 5: nothing open any more, the LSO is the marker + 1
    assert file_bytes(index.path) == entry_bytes(7, 1, 4, 3) + entry_bytes(8, 3, 5, 6)


def test_commit_leaves_no_entry(open_log):
    log = open_log(CONFIG)
    w = Writer(log)
    w.data(7, 3)
    assert w.commit(7).completed_txn == (7, 0, 3, False)
    w.data(7)
    w.commit(7)
    assert log.aborted_txns() == []
    assert log.aborted_transactions(0, log.log_end_offset) == []
    assert file_bytes(log.active_segment.txn_index.path) == b""


def test_marker_without_open_transaction_is_harmless(open_log):
    log = open_log(CONFIG)
    w = Writer(log)
    w.plain()
    # Kafka writes markers to every partition of a transaction, also those
    # the producer never wrote to.
    info = w.abort(9, coordinator_epoch=3)
    assert info.base_offset == 1 and info.completed_txn is None
    w.plain(7)
    assert w.abort(7).completed_txn is None  # an idempotent producer, no transaction
    assert log.aborted_txns() == []
    assert log.last_stable_offset == log.log_end_offset == 4


def test_entries_go_to_the_segment_the_marker_is_in(open_log):
    log = open_log(CONFIG)
    w = Writer(log, size=600)
    w.data(7)  # 0, segment 0
    for _ in range(8):
        w.plain()
    assert len(log.segments) >= 2
    w.abort(7)
    marker_seg = log.segments[-1]
    assert [e.producer_id for e in marker_seg.txn_index.entries] == [7]
    assert all(not s.txn_index.entries for s in log.segments[:-1])
    assert log.aborted_transactions(0, 1) == [(7, 0)]


# ------------------------------------------------- aborted_transactions


def _three_segment_history(log):
    """Aborted transactions across segments; returns their (pid, first, last)."""
    w = Writer(log, size=200)
    w.plain()  # 0
    w.data(1, 2)  # 1..2   txn A (pid 1), aborted at 5
    w.data(2)  # 3      txn B (pid 2), aborted much later
    w.plain()  # 4
    w.abort(1)  # 5
    w.data(3)  # 6      txn C (pid 3), committed
    w.commit(3)  # 7
    log.roll()
    w.data(1)  # 8      txn D (pid 1), aborted at 10
    w.plain()  # 9
    w.abort(1)  # 10
    w.plain()  # 11
    log.roll()
    w.plain()  # 12
    w.abort(2)  # 13: B spans three segments
    w.data(4)  # 14     txn E, aborted at 16
    w.data(4)  # 15
    w.abort(4)  # 16
    w.plain()  # 17
    assert [s.base_offset for s in log.segments] == [0, 8, 12]
    return {"A": (1, 1, 5), "D": (1, 8, 10), "B": (2, 3, 13), "E": (4, 14, 16)}, w


def _expected(txns, a, b):
    if b <= a:
        return []
    hits = sorted((t for t in txns.values() if t[2] >= a and t[1] < b), key=lambda t: t[2])
    return [(pid, first) for pid, first, _ in hits]


def test_aborted_transactions_for_ranges(open_log):
    log = open_log(CONFIG)
    txns, _ = _three_segment_history(log)
    A, B, D, E = ((txns[k][0], txns[k][1]) for k in "ABDE")
    end = log.log_end_offset
    assert log.last_stable_offset == end == 18
    got = log.aborted_transactions
    assert got(0, end) == [A, D, B, E]
    assert got(0, 1) == []  # before any
    assert got(0, 2) == [A]
    assert got(1, 3) == [A]  # inside A
    assert got(3, 4) == [A, B]  # A and B both open at 3
    assert got(6, 8) == [B]  # only B is open over C's commit
    assert got(8, 9) == [D, B]  # D aborted in segment 8, B in segment 12
    assert got(11, 12) == [B]
    assert got(13, 14) == [B]  # the marker itself is in B's range
    assert got(14, 18) == [E]
    assert got(17, 18) == []  # after all of them
    assert got(5, 5) == []
    for a in range(end + 1):
        for b in range(a, end + 2):
            assert got(a, b) == _expected(txns, a, b), (a, b)


def test_aborted_transactions_after_retention(open_log):
    log = open_log(CONFIG)
    _three_segment_history(log)
    files = txnindex_files(log)
    assert files == [f"{b:020d}.txnindex" for b in (0, 8, 12)]
    log.config = LogConfig(segment_bytes=4096, retention_bytes=1, retention_ms=-1)
    assert log.apply_retention(TS0) == 2
    # Each segment's .txnindex goes with it.
    assert txnindex_files(log) == ["00000000000000000012.txnindex"]
    end = log.log_end_offset
    assert log.aborted_transactions(12, end) == [(2, 3), (4, 14)]
    assert log.aborted_transactions(0, end) == [(2, 3), (4, 14)]
    # Producer state is unaffected by the files going.
    assert log.last_stable_offset == end
    log.close()
    log = open_log(CONFIG)
    assert log.aborted_transactions(12, end) == [(2, 3), (4, 14)]


# ------------------------------------------------------------- recovery


def _history_with_open_txn(log):
    txns, w = _three_segment_history(log)
    w.data(5)  # 18: open across the restart
    w.data(6)  # 19
    w.abort(6)  # 20: LSO after it is 18
    return txns, w


def test_round_trip_across_clean_close(open_log, events):
    log = open_log(CONFIG)
    _history_with_open_txn(log)
    before = log.aborted_txns()
    assert before[-1] == AbortedTxn(6, 19, 20, 18)
    files = all_files(log)
    log.close()
    events.clear()
    log = open_log(CONFIG)
    assert not [e for e in events if e["event"] == "txn_index.rebuilt"]
    assert log.aborted_txns() == before
    assert all_files(log) == files
    assert log.last_stable_offset == 18


@pytest.mark.parametrize("damage", ["delete", "partial", "version", "garbage"])
@pytest.mark.parametrize("victim", [0, 1, 2, "all"])
def test_rebuilt_from_the_log_when_lost_or_corrupt(open_log, events, damage, victim):
    log = open_log(CONFIG)
    _history_with_open_txn(log)
    before = log.aborted_txns()
    files = all_files(log)
    log.close()
    segments = log.segments if victim == "all" else [log.segments[victim]]
    for seg in segments:
        path = seg.txn_index.path
        if damage == "delete":
            os.unlink(path)
        elif damage == "partial":
            with open(path, "ab") as f:
                f.write(b"\x00" * 20)
        elif damage == "version":
            with open(path, "wb") as f:
                f.write(entry_bytes(1, 1, seg.base_offset, 2, version=3))
        else:
            with open(path, "wb") as f:
                f.write(os.urandom(34 * 2))
    events.clear()
    log = open_log(CONFIG)
    [event] = [e for e in events if e["event"] == "txn_index.rebuilt"]
    assert event["segments"] == [s.base_offset for s in segments]
    assert log.aborted_txns() == before  # LSOs included
    assert all_files(log) == files
    assert log.last_stable_offset == 18
    log.close()
    events.clear()
    log = open_log(CONFIG)
    assert not [e for e in events if e["event"] == "txn_index.rebuilt"]
    assert log.aborted_txns() == before


def test_rebuild_uses_a_snapshot_at_or_below_the_damaged_segment(open_log, events):
    log = open_log(CONFIG)
    _history_with_open_txn(log)
    before = log.aborted_txns()
    log.close()
    os.unlink(log.segments[2].txn_index.path)
    events.clear()
    log = open_log(CONFIG)
    [event] = [e for e in events if e["event"] == "txn_index.rebuilt"]
    # The roll snapshot at 12 is used, not the newer one written at close.
    assert event["replayed_from"] == 12 and event["entries_restored"] == 3
    assert 21 in list_snapshots(log.path)
    assert log.aborted_txns() == before


def test_unclean_reopen_keeps_entries(open_log, events):
    log = open_log(CONFIG)
    _history_with_open_txn(log)
    before = log.aborted_txns()
    crash(log)
    events.clear()
    log = open_log(CONFIG)
    assert log.aborted_txns() == before
    assert log.last_stable_offset == 18


def test_entries_lost_in_a_crash_are_restored_by_the_replay(open_log, events):
    log = open_log(CONFIG)
    _, w = _history_with_open_txn(log)
    before = log.aborted_txns()
    active = log.active_segment
    crash(log)
    # The marker reached the log, its entry never reached the file.
    with open(active.txn_index.path, "wb"):
        pass
    events.clear()
    log = open_log(CONFIG)
    [event] = [e for e in events if e["event"] == "txn_index.rebuilt"]
    assert event["entries_restored"] == 3 and event["segments"] == []
    assert log.aborted_txns() == before


def test_entry_of_a_torn_marker_goes(open_log):
    log = open_log(CONFIG)
    _, w = _history_with_open_txn(log)
    w.plain()  # 21
    w.data(7)  # 22
    last = w.abort(7)  # 23
    assert log.aborted_txns()[-1] == AbortedTxn(7, 22, 23, 18)
    active = log.active_segment
    crash(log)
    with open(active.path, "r+b") as f:
        f.truncate(last.start_position + 30)
    log = open_log(CONFIG)
    assert log.log_end_offset == 23
    assert log.aborted_txns()[-1] == AbortedTxn(6, 19, 20, 18)
    assert file_bytes(active.txn_index.path)[-34:] == entry_bytes(6, 19, 20, 18)
    # The transaction is open again (its abort was lost with the tail).
    assert log.producer_state_manager.ongoing_transactions == {5: 18, 7: 22}
    assert log.last_stable_offset == 18
    w.log = log
    w.abort(7)
    assert log.aborted_txns()[-1] == AbortedTxn(7, 22, 23, 18)


def test_orphan_txnindex_is_removed(tmp_path, open_log):
    log = open_log(CONFIG)
    log.append(make_batch(1))
    log.close()
    orphan = tmp_path / "t-0" / "00000000000000000777.txnindex"
    orphan.write_bytes(entry_bytes(1, 777, 778, 779))
    log = open_log(CONFIG)
    assert not orphan.exists()
    assert log.aborted_txns() == []

