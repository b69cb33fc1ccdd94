"""Producer state: Kafka's ProducerAppendInfo rules, expiry, retention, snapshots."""

import os

import pytest
import structlog
from structlog.testing import LogCapture

import minibroker_storage.log
import minibroker_storage.producer_state
from minibroker_protocol.batch import iter_headers, read_header
from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.records import build_batch, build_control_batch
from minibroker_storage import LogConfig, LogManager
from minibroker_storage.config import INT32_MAX
from minibroker_storage.errors import (
    InvalidProducerEpoch,
    InvalidRecord,
    InvalidTxnState,
    OutOfOrderSequence,
    ProducerStateError,
    TransactionCoordinatorFenced,
    UnknownProducerId,
)
from minibroker_storage.log import CLEAN_SHUTDOWN_FILE, AppendInfo
from minibroker_storage.producer_state import (
    BatchMetadata,
    CompletedTxn,
    CorruptSnapshot,
    ProducerStateEntry,
    decode_snapshot,
    encode_snapshot,
    list_snapshots,
)

from .batches import TS0, crash, make_batch

DAY = 86_400_000
CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=512)


def data(pid, epoch, seq, n=1, *, txn=False, ts=TS0, size=10, compression=0):
    records = [{"key": None, "value": b"x" * size, "timestamp": ts} for _ in range(n)]
    return build_batch(
        records,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=txn,
        compression=compression,
    )


def marker(pid, epoch, *, commit=True, coordinator_epoch=0, ts=TS0):
    return build_control_batch(
        producer_id=pid,
        producer_epoch=epoch,
        commit=commit,
        coordinator_epoch=coordinator_epoch,
        timestamp_ms=ts,
    )


def stored_headers(log):
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        view = log.read(offset, 1 << 20)
        headers = list(iter_headers(view))
        assert headers
        out.extend(headers)
        offset = headers[-1].next_offset
    return out


def state(log):
    return {pid: e.copy() for pid, e in log.producer_state.items()}


def snapshots(log):
    return list_snapshots(log.path)


@pytest.fixture
def events(monkeypatch):
    """Log events of logs opened from now on, whatever structlog's global
    configuration (the broker caches its loggers on first use)."""
    cap = LogCapture()
    logger = structlog.wrap_logger(
        structlog.ReturnLogger(),
        processors=[cap],
        wrapper_class=structlog.make_filtering_bound_logger(0),
        cache_logger_on_first_use=False,
    )
    monkeypatch.setattr(minibroker_storage.log, "_log", logger)
    monkeypatch.setattr(minibroker_storage.producer_state, "_log", logger)
    return cap.entries


def named(events, name):
    return [e for e in events if e["event"] == name]


# ------------------------------------------------------------------ rules


def test_duplicate_returns_original_offsets_and_is_not_appended(open_log, events):
    log = open_log(CONFIG)
    log.append(make_batch(2))
    first = log.append(data(7, 0, 0, 3))
    log.append(data(7, 0, 3, 2))
    end = log.log_end_offset
    size = log.size_bytes
    events.clear()
    again = log.append(data(7, 0, 0, 3))
    assert again == AppendInfo(first.base_offset, first.last_offset, -1, -1, True)
    assert again.duplicate and not first.duplicate
    assert (again.base_offset, again.last_offset) == (2, 4)
    assert log.log_end_offset == end and log.size_bytes == size
    assert len(stored_headers(log)) == 3
    [event] = named(events, "produce.duplicate_dropped")
    assert event["producer_id"] == 7 and event["original_base_offset"] == 2
    assert event["first_sequence"] == 0 and event["last_sequence"] == 2


def test_older_epoch_is_refused(open_log):
    log = open_log(CONFIG)
    log.append(data(7, 3, 0))
    with pytest.raises(InvalidProducerEpoch) as info:
        log.append(data(7, 2, 1))
    exc = info.value
    assert exc.error_code == ErrorCode.invalid_producer_epoch == 47
    assert (exc.producer_id, exc.epoch, exc.current_epoch) == (7, 2, 3)
    assert exc.partition == "t-0" and exc.log_start_offset == 0
    assert log.log_end_offset == 1
    # Even a retry of a batch the older epoch wrote is refused, not a duplicate.
    with pytest.raises(InvalidProducerEpoch):
        log.append(data(7, 2, 0))


def test_epoch_bump_must_start_at_sequence_zero(open_log):
    log = open_log(CONFIG)
    log.append(data(7, 0, 0, 5))
    with pytest.raises(OutOfOrderSequence) as info:
        log.append(data(7, 1, 5))
    exc = info.value
    assert exc.error_code == 45
    assert (exc.epoch, exc.current_epoch, exc.expected_sequence, exc.received_sequence) == (1, 0, 0, 5)
    info = log.append(data(7, 1, 0))
    assert info.base_offset == 5 and not info.duplicate
    entry = log.producer_state[7]
    assert entry.epoch == 1 and list(entry.batches) == [BatchMetadata(0, 0, 5, 5, TS0)]


def test_same_epoch_needs_the_next_sequence(open_log):
    log = open_log(CONFIG)
    log.append(data(7, 0, 0, 3))
    for bad in (4, 2, 1, 10):
        with pytest.raises(OutOfOrderSequence) as info:
            log.append(data(7, 0, bad))
        assert (info.value.expected_sequence, info.value.received_sequence) == (3, bad)
        assert info.value.error_code == ErrorCode.out_of_order_sequence_number
    assert log.append(data(7, 0, 3)).base_offset == 3
    fields = info.value.log_fields()
    assert fields["error"] == "out_of_order_sequence_number" and fields["partition"] == "t-0"


def test_sequence_wraps_at_int32_max(open_log):
    log = open_log(CONFIG)
    # Coordinator origin skips sequence checks: a quick way to a producer near the wrap.
    log.append(data(7, 0, INT32_MAX - 2, 3), origin="coordinator")
    assert log.producer_state[7].last_seq == INT32_MAX
    with pytest.raises(OutOfOrderSequence):
        log.append(data(7, 0, INT32_MAX))
    log.append(data(7, 0, 0, 2))
    assert log.producer_state[7].last_seq == 1
    # A batch may itself straddle the wrap; its last sequence wraps too.
    log.append(data(8, 0, INT32_MAX - 1, 3), origin="coordinator")
    assert log.producer_state[8].last_seq == 0  # MAX-1, MAX, 0
    assert log.append(data(8, 0, INT32_MAX - 1, 3)).duplicate
    log.append(data(8, 0, 1))


def test_unknown_producer_may_start_at_any_sequence(open_log):
    # Kafka >= 2.5 (KIP-360, ProducerAppendInfo.checkSequence): with no state for the
    # producer, any sequence is accepted; from then on the sequence must follow.
    log = open_log(CONFIG)
    log.append(make_batch(4))
    assert log.append(data(9, 0, 3)).base_offset == 4
    assert log.producer_state[9].last_seq == 3
    with pytest.raises(OutOfOrderSequence):
        log.append(data(9, 0, 5))
    assert log.append(data(9, 0, 4)).base_offset == 5


def test_duplicate_of_the_last_five_batches_only(open_log):
    log = open_log(CONFIG)
    sent = [log.append(data(7, 0, seq)) for seq in range(6)]
    assert [b.first_seq for b in log.producer_state[7].batches] == [1, 2, 3, 4, 5]
    for seq in range(1, 6):
        again = log.append(data(7, 0, seq))
        assert again.duplicate and again.base_offset == sent[seq].base_offset
    # The sixth-oldest is forgotten: its retry is out of order, as in Kafka.
    with pytest.raises(OutOfOrderSequence):
        log.append(data(7, 0, 0))
    # Same sequences but a different range is not a duplicate either.
    with pytest.raises(OutOfOrderSequence):
        log.append(data(7, 0, 5, 2))
    assert log.log_end_offset == 6


def test_non_transactional_batch_during_open_transaction(open_log):
    log = open_log(CONFIG)
    log.append(data(7, 0, 0, txn=True))
    with pytest.raises(InvalidTxnState) as info:
        log.append(data(7, 0, 1))
    assert info.value.error_code == 48
    log.append(data(7, 0, 1, txn=True))
    log.append(marker(7, 0), origin="coordinator")
    log.append(data(7, 0, 2))  # the transaction is over


def test_markers_end_transactions_and_take_no_sequence(open_log):
    log = open_log(CONFIG)
    log.append(make_batch(1))
    assert log.first_unstable_offset() is None
    log.append(data(7, 0, 0, 2, txn=True))
    log.append(data(8, 0, 0, txn=True))
    log.append(data(7, 0, 2, txn=True))
    entry = log.producer_state[7]
    assert entry.current_txn_first_offset == 1
    assert log.first_unstable_offset() == 1

    done = log.append(marker(7, 0, commit=False, coordinator_epoch=4), origin="coordinator")
    assert done.base_offset == done.last_offset == 5
    assert done.completed_txn == CompletedTxn(7, 1, 5, True)
    assert log.first_unstable_offset() == 3  # producer 8's transaction
    entry = log.producer_state[7]
    assert entry.current_txn_first_offset == -1 and entry.coordinator_epoch == 4
    assert entry.last_seq == 2  # the marker took an offset, not a sequence

    done = log.append(marker(8, 0, commit=True, coordinator_epoch=4), origin="coordinator")
    assert done.completed_txn == CompletedTxn(8, 3, 6, False)
    assert log.first_unstable_offset() is None
    # A marker with no open transaction completes nothing (Kafka emits no CompletedTxn).
    assert log.append(marker(8, 0, coordinator_epoch=4), origin="coordinator").completed_txn is None
    assert log.append(data(7, 0, 3, txn=True)).base_offset == 8
    assert log.first_unstable_offset() == 8


def test_marker_epoch_and_coordinator_epoch_fencing(open_log):
    log = open_log(CONFIG)
    log.append(data(7, 2, 0, txn=True))
    with pytest.raises(InvalidProducerEpoch):
        log.append(marker(7, 1, coordinator_epoch=5), origin="coordinator")
    log.append(marker(7, 2, coordinator_epoch=5), origin="coordinator")
    log.append(data(7, 2, 1, txn=True))
    with pytest.raises(TransactionCoordinatorFenced) as info:
        log.append(marker(7, 2, coordinator_epoch=4), origin="coordinator")
    assert info.value.error_code == 52
    assert (info.value.coordinator_epoch, info.value.current_coordinator_epoch) == (4, 5)
    assert log.first_unstable_offset() == 2
    # A coordinator that aborts with a bumped epoch (transaction timeout) fences the old one.
    log.append(marker(7, 3, commit=False, coordinator_epoch=5), origin="coordinator")
    assert log.producer_state[7].epoch == 3
    with pytest.raises(InvalidProducerEpoch):
        log.append(data(7, 2, 2, txn=True))
    log.append(data(7, 3, 0, txn=True))


def test_coordinator_origin_skips_sequence_checks_but_not_epochs(open_log):
    log = open_log(CONFIG)
    log.append(data(7, 1, 0))
    # A client could not send these: gap, unknown producer with sequence 5, -1.
    log.append(data(7, 1, 9), origin="coordinator")
    log.append(data(8, 0, 5), origin="coordinator")
    log.append(data(9, 0, -1), origin="coordinator")
    # The same batch twice is written twice: duplicates are a client matter.
    assert not log.append(data(9, 0, -1), origin="coordinator").duplicate
    assert log.log_end_offset == 5
    with pytest.raises(InvalidProducerEpoch):
        log.append(data(7, 0, 10), origin="coordinator")
    with pytest.raises(ValueError):
        log.append(data(7, 1, 10), origin="replication")


def test_non_idempotent_batches_skip_everything(open_log):
    log = open_log(CONFIG)
    batch = make_batch(2)
    assert log.append(batch).base_offset == 0
    assert log.append(batch).base_offset == 2
    assert dict(log.producer_state) == {}


def test_malformed_marker_is_refused(open_log):
    log = open_log(CONFIG)
    bad = bytearray(marker(7, 0))
    # The key's type field (ControlRecordType) says 7: not an end-transaction marker.
    key_at = bad.index(b"\x00\x00\x00\x01", 61)
    bad[key_at + 2 : key_at + 4] = b"\x00\x07"
    with pytest.raises(InvalidRecord):
        log.append(bytes(bad), origin="coordinator")
    assert log.log_end_offset == 0


def test_producer_state_is_read_only(open_log):
    log = open_log(CONFIG)
    log.append(data(7, 0, 0))
    with pytest.raises(TypeError):
        log.producer_state[8] = ProducerStateEntry(8)
    assert isinstance(UnknownProducerId("x", producer_id=1, epoch=0), ProducerStateError)


# ------------------------------------------------------- expiry, retention


def test_expiry(open_log, clock, events):
    log = open_log(CONFIG)
    log.append(data(7, 0, 0, ts=TS0))
    log.append(data(8, 0, 0, ts=TS0 + 10))
    log.append(data(9, 0, 0, ts=TS0, txn=True))
    assert log.expire_producers(TS0 + DAY - 1) == []
    events.clear()
    assert log.expire_producers(TS0 + DAY) == [7]
    assert [e["producer_id"] for e in named(events, "producer.expired")] == [7]
    # An open transaction keeps a producer however idle.
    assert log.expire_producers(TS0 + 100 * DAY) == [8]
    assert sorted(log.producer_state) == [9]
    # Its state is gone: it carries on where it was, as Kafka >= 2.5 lets it (KIP-360).
    assert not log.append(data(7, 0, 1)).duplicate
    assert log.producer_state[7].last_seq == 1
    assert log.expire_producers(TS0, expiration_ms=1) == []
    log.append(marker(9, 0), origin="coordinator")
    assert sorted(log.expire_producers(TS0 + 10, expiration_ms=10)) == [7, 9]


def test_expiry_uses_the_configured_time_and_manager_counts(tmp_path):
    config = LogConfig(segment_bytes=4096, producer_id_expiration_ms=1000)
    with LogManager(tmp_path / "data", config, clock=lambda: TS0) as m:
        m.create_topic("t", 2)
        m.get_log("t", 0).append(data(7, 0, 0, ts=TS0))
        m.get_log("t", 1).append(data(7, 0, 0, ts=TS0))
        m.get_log("t", 1).append(data(8, 0, 0, ts=TS0 + 500))
        assert m.expire_producers(TS0 + 999) == 0
        assert m.expire_producers(TS0 + 1000) == 2
        assert m.expire_producers(TS0 + 1500) == 1
        assert m.expire_producers() == 0
    with pytest.raises(Exception):
        LogConfig(producer_id_expiration_ms=0)


def test_expired_producers_are_not_loaded(tmp_path, open_log, clock):
    log = open_log(CONFIG)
    log.append(data(7, 0, 0, ts=TS0 - DAY))
    log.append(data(8, 0, 0, ts=TS0))
    log.close()
    log = open_log(CONFIG)
    assert sorted(log.producer_state) == [8]


def test_retention_removes_producers_whose_batches_are_gone(open_log, events):
    config = LogConfig(segment_bytes=4096, retention_bytes=0, retention_ms=-1)
    log = open_log(config)
    log.append(data(7, 0, 0, size=1500))
    log.append(data(8, 0, 0, size=1500))
    log.append(data(9, 0, 0, size=1500))  # rolls: segment [2..]
    log.append(data(8, 0, 1, size=1500))
    log.append(data(9, 0, 1, size=1500))  # rolls: segment [4..]
    assert [s.base_offset for s in log.segments] == [0, 2, 4]
    assert snapshots(log) == [2, 4]
    events.clear()
    assert log.apply_retention(TS0) == 2
    assert log.log_start_offset == 4
    # 7 and 8 wrote nothing at or after offset 4; 9's last batch is at 4.
    assert sorted(log.producer_state) == [9]
    [event] = named(events, "producer.removed_by_retention")
    assert event["count"] == 2 and event["log_start_offset"] == 4
    assert sorted(event["producer_ids"]) == [7, 8]
    assert snapshots(log) == [4]
    # 8's state went with its batches; it carries on at its own sequence (Kafka >= 2.5)
    assert not log.append(data(8, 0, 2)).duplicate
    log.append(data(8, 0, 3))


def test_retention_keeps_producers_with_batches_left(open_log):
    config = LogConfig(segment_bytes=4096, retention_bytes=0, retention_ms=-1)
    log = open_log(config)
    log.append(data(7, 0, 0, size=1500))
    log.append(data(8, 0, 0, size=1500))
    log.append(data(7, 0, 1, size=1500))  # new segment at 2
    assert log.apply_retention(TS0) == 1
    assert sorted(log.producer_state) == [7]
    log.close()
    log = open_log(config)
    assert sorted(log.producer_state) == [7]
    assert log.append(data(7, 0, 1, size=1500)).duplicate


# -------------------------------------------------------------- snapshots


def _busy_log(log):
    """Three producers, several segments, an open transaction, a wrapped sequence."""
    log.append(data(1, 0, 0, 3, size=300))
    for i in range(12):
        log.append(data(2, 0, i * 2, 2, size=300, ts=TS0 + i))
        if i % 3 == 0:
            log.append(make_batch(1, 200))
    log.append(data(3, 5, 0, txn=True, size=300, compression="zstd"))
    log.append(data(3, 5, 1, txn=True, size=300))
    log.append(marker(3, 5, coordinator_epoch=2), origin="coordinator")
    log.append(data(3, 5, 2, txn=True, size=300))
    log.append(data(1, 0, 3, 2, size=300))
    assert len(log.segments) > 2


def test_snapshot_and_replay_after_clean_close(tmp_path, open_log, events):
    log = open_log(CONFIG)
    _busy_log(log)
    before = state(log)
    end = log.log_end_offset
    log.close()
    assert snapshots(log)[-1] == end
    assert len(snapshots(log)) == 2  # the newest two
    events.clear()
    log = open_log(CONFIG)
    [event] = named(events, "producer_state.loaded")
    assert event["snapshot_offset"] == end and event["batches_replayed"] == 0
    assert event["producers"] == 3 and "ms" in event
    assert state(log) == before
    assert log.first_unstable_offset() == before[3].current_txn_first_offset
    # Retries of the last five batches of producer 2 are still duplicates.
    assert log.append(data(2, 0, 14, 2, size=300, ts=TS0 + 7)).duplicate
    assert log.append(data(1, 0, 3, 2, size=300)).base_offset == end - 2
    assert log.log_end_offset == end


def test_snapshot_and_replay_after_a_crash(open_log, events):
    log = open_log(CONFIG)
    _busy_log(log)
    before = state(log)
    roll_snapshot = snapshots(log)[-1]
    crash(log)
    events.clear()
    log = open_log(CONFIG)
    [event] = named(events, "producer_state.loaded")
    assert event["snapshot_offset"] == roll_snapshot
    assert event["batches_replayed"] > 0
    assert state(log) == before
    assert log.append(data(2, 0, 22, 2, size=300, ts=TS0 + 11)).duplicate
    assert log.append(data(3, 5, 2, txn=True, size=300)).duplicate
    assert log.append(data(2, 0, 24)).base_offset == log.log_end_offset - 1


@pytest.mark.parametrize("damage", ["delete", "flip", "truncate", "empty", "version"])
def test_lost_or_corrupt_snapshot_means_full_replay(tmp_path, open_log, damage, events):
    log = open_log(CONFIG)
    _busy_log(log)
    before = state(log)
    log.close()
    for offset in snapshots(log):
        path = os.path.join(log.path, f"{offset:020d}.snapshot")
        raw = bytearray(open(path, "rb").read())
        if damage == "delete":
            os.unlink(path)
            continue
        if damage == "flip":
            raw[-3] ^= 0x40
        elif damage == "truncate":
            raw = raw[:-7]
        elif damage == "empty":
            raw = b""
        else:
            raw[1] = 9
        open(path, "wb").write(raw)
    events.clear()
    log = open_log(CONFIG)
    [event] = named(events, "producer_state.loaded")
    assert event["snapshot_offset"] is None and event["replayed_from"] == 0
    assert state(log) == before
    assert snapshots(log) == []  # the corrupt ones are gone
    log.close()
    assert snapshots(log) == [log.log_end_offset]


def test_snapshot_above_the_log_end_is_not_used(tmp_path, open_log):
    log = open_log(CONFIG)
    log.append(data(7, 0, 0))
    log.append(data(7, 0, 1))
    log.close()
    assert snapshots(log) == [2]
    # The log loses its last batch (a crash that beat the page cache to disk).
    part = tmp_path / "t-0"
    seg = part / "00000000000000000000.log"
    first = read_header(seg.read_bytes())
    os.truncate(seg, first.size)
    os.unlink(part / CLEAN_SHUTDOWN_FILE)
    log = open_log(CONFIG)
    assert log.log_end_offset == 1
    assert snapshots(log) == []
    assert log.producer_state[7].last_seq == 0
    # The lost batch is sent again: not a duplicate, written anew.
    info = log.append(data(7, 0, 1))
    assert not info.duplicate and info.base_offset == 1


def test_replay_reads_headers_only(open_log, monkeypatch):
    import minibroker_protocol.records
    import minibroker_storage.producer_state

    log = open_log(CONFIG)
    _busy_log(log)
    before = state(log)
    for path in snapshots(log):
        os.unlink(os.path.join(log.path, f"{path:020d}.snapshot"))
    crash(log)

    def refuse(*args, **kwargs):
        raise AssertionError("records decoded during replay")

    monkeypatch.setattr(minibroker_protocol.records, "decode_batch", refuse)
    monkeypatch.setattr(minibroker_storage.producer_state, "decode_batch", refuse)
    log = open_log(CONFIG)
    assert state(log) == before


def test_snapshots_keep_the_newest_two(open_log):
    log = open_log(CONFIG)
    for i in range(6):
        log.append(data(7, 0, i))
        log.roll()
    assert snapshots(log) == [5, 6]
    log.append(data(7, 0, 6))
    log.close()
    assert snapshots(log) == [6, 7]


def test_clean_close_snapshots_a_log_without_producers(open_log):
    # As Kafka's UnifiedLog.close (producerStateManager.takeSnapshot() at every clean
    # stop): the next open then replays nothing, which matters for internal topics,
    # whose batches carry no producer.
    log = open_log(CONFIG)
    log.append(make_batch(3))
    log.close()
    assert snapshots(log) == [3]


def test_snapshot_format_round_trip():
    e = ProducerStateEntry(2**40, 3, coordinator_epoch=9, current_txn_first_offset=77, last_timestamp=TS0)
    for i in range(5):
        e.batches.append(BatchMetadata(i * 10, i * 10 + 9, 100 + i * 10, 109 + i * 10, TS0 + i))
    empty = ProducerStateEntry(5, 1)
    raw = encode_snapshot(123, [e, empty])
    assert decode_snapshot(raw, 123) == [e, empty]
    with pytest.raises(CorruptSnapshot):
        decode_snapshot(raw, 124)
    with pytest.raises(CorruptSnapshot):
        decode_snapshot(raw + b"\x00")


def test_transactions_v2_markers_need_a_bumped_epoch(open_log):
    """KIP-1228 (WriteTxnMarkers v2): a marker of transaction version 2 must carry an epoch above
    the producer's; the same epoch is a retry, allowed only once no transaction is open."""
    log = open_log(CONFIG)
    log.append(data(7, 3, 0, txn=True))
    with pytest.raises(InvalidProducerEpoch):  # the same epoch while the transaction is open
        log.append(marker(7, 3), origin="coordinator", transaction_version=2)
    log.append(marker(7, 3), origin="coordinator", transaction_version=1)  # lenient below 2
    log.append(marker(7, 3), origin="coordinator", transaction_version=2)  # a retry: none open now
    log.append(data(7, 3, 1, txn=True))
    info = log.append(marker(7, 4), origin="coordinator", transaction_version=2)
    assert info.completed_txn is not None
    with pytest.raises(InvalidProducerEpoch):
        log.append(marker(7, 3), origin="coordinator", transaction_version=2)
    log.append(data(7, 32767, 0, txn=True))
    log.append(marker(7, 32767), origin="coordinator", transaction_version=2)  # the last epoch
