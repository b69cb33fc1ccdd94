"""SharePartition rule by rule (docs/design/share-groups.md §3), each case with Kafka 4.4's
answer: the states, counts and messages of kafka.server.share.SharePartition, and the answers
seen on the reference Kafka where the note records them (§10)."""

from __future__ import annotations

import pytest

from minibroker.coordinator.share.partition import (
    BATCH_NOT_ACQUIRED,
    FIRST_PAST,
    LAST_PAST,
    NOT_FOUND,
    NOT_OWNER_BATCH,
    NOT_OWNER_OFFSET,
    OFFSET_NOT_ACQUIRED,
    RENEW_DISABLED,
    AbortedTxn,
    AckBatch,
    AcquiredRange,
    AcquireMode,
    Action,
    AutoOffsetReset,
    LogBatch,
    LogRead,
    ShareConfig,
    SharePartition,
    StateBatch,
    ack_batches_valid,
)
from minibroker.coordinator.share.record_state import (
    IllegalRecordTransition,
    RecordState,
    check_transition,
)
from minibroker_protocol import share_log as sl
from minibroker_protocol.errors import ErrorCode

A, Q, K, ARCHIVING, X = (RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED,
                         RecordState.ARCHIVING, RecordState.ARCHIVED)
LOCK = 30_000


def log(*ranges: tuple[int, int]) -> LogRead:
    return LogRead([LogBatch(f, last) for f, last in ranges])


def sp_with(config: ShareConfig | None = None) -> SharePartition:
    return SharePartition("g", "t", 0, config)


def acquire(sp: SharePartition, member: str, read: LogRead, now: int = 0, max_records: int = 500,
            batch_size: int = 500, mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED) -> list[tuple[int, int, int]]:
    got = sp.acquire(member, read, max_records=max_records, batch_size=batch_size, now_ms=now, mode=mode)
    return [(r.first_offset, r.last_offset, r.delivery_count) for r in got.records]


def ack(sp: SharePartition, member: str, first: int, last: int, *types: int, now: int = 1):
    return sp.acknowledge(member, [AckBatch(first, last, tuple(types))], now)


def runs(sp: SharePartition) -> list[tuple[int, int, RecordState, int, str]]:
    return [r[:5] for r in sp.in_flight()]


# ---------------------------------------------------------------------- the transition table

@pytest.mark.parametrize("current,to,ok", [
    (A, Q, True), (A, K, False), (A, X, False), (A, A, False),
    (Q, A, True), (Q, K, True), (Q, X, True), (Q, ARCHIVING, True), (Q, Q, False),
    (K, A, False), (K, Q, False), (X, A, False), (X, Q, False),
    (ARCHIVING, X, True), (ARCHIVING, ARCHIVING, False),
])
def test_transition_table_is_kafkas(current, to, ok):
    if ok:
        assert check_transition(current, to) is to
    else:
        with pytest.raises(IllegalRecordTransition):
            check_transition(current, to)


def test_state_ids_are_kafkas():
    assert [(s.name, int(s)) for s in RecordState] == [
        ("AVAILABLE", 0), ("ACQUIRED", 1), ("ACKNOWLEDGED", 2), ("ARCHIVING", 3), ("ARCHIVED", 4)]
    with pytest.raises(ValueError, match="Unknown record state id: 9"):
        RecordState.for_id(9)


# ---------------------------------------------------------------------- acquire, expiry, limit

def test_first_acquire_and_seen_release_then_redelivery():
    # §10: ack 0-9 with [2,2,2,2,2,1,1,1,1,1] -> 0-4 acquired again with DeliveryCount 2
    sp = sp_with()
    assert acquire(sp, "m", log((0, 9))) == [(0, 9, 1)]
    assert (sp.start_offset, sp.end_offset) == (0, 9)
    out = ack(sp, "m", 0, 9, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1)
    assert out.error is None
    assert out.update is not None
    assert out.update.start_offset == 0
    assert out.update.state_batches == (StateBatch(0, 4, A, 1), StateBatch(5, 9, K, 1))
    assert out.update.delivery_complete_count == 5
    assert sp.next_fetch_offset() == 0
    assert acquire(sp, "m", log((0, 9)), now=2) == [(0, 4, 2)]


def test_lock_expiry_makes_records_available_with_count_two():
    sp = sp_with()
    acquire(sp, "m1", log((0, 4)), now=1000)
    assert sp.next_deadline_ms() == 1000 + LOCK
    assert sp.expire(1000 + LOCK - 1).update is None
    out = sp.expire(1000 + LOCK)
    assert out.update is not None and out.update.state_batches == (StateBatch(0, 4, A, 1),)
    [ev] = out.events
    assert (ev.action, ev.member, ev.state, ev.delivery_count, ev.lock_deadline_ms) == (
        Action.LOCK_EXPIRED, "m1", A, 1, 1000 + LOCK)
    assert acquire(sp, "m2", log((0, 4)), now=40_000) == [(0, 4, 2)]
    assert sp.record_state(3) == (Q, 2, "m2", 40_000 + LOCK)


def test_delivery_limit_archives_instead_of_releasing():
    sp = sp_with(config=ShareConfig(delivery_count_limit=2))
    assert acquire(sp, "m", log((0, 2))) == [(0, 2, 1)]
    assert ack(sp, "m", 0, 2, 2).update.state_batches == (StateBatch(0, 2, A, 1),)
    assert acquire(sp, "m", log((0, 2))) == [(0, 2, 2)]
    out = ack(sp, "m", 0, 2, 2)  # RELEASE at the limit -> ARCHIVED, count kept
    assert out.update.state_batches == (StateBatch(0, 2, X, 2),)
    assert out.events[0].state is X
    assert (sp.start_offset, sp.end_offset) == (3, 3)
    assert acquire(sp, "m", log((0, 2))) == []


def test_delivery_limit_also_applies_to_lock_expiry_and_member_release():
    sp = sp_with(config=ShareConfig(delivery_count_limit=2))
    acquire(sp, "m", log((0, 1)))
    sp.expire(LOCK)
    acquire(sp, "m", log((0, 1)), now=LOCK)
    assert sp.release_member("m", LOCK + 1).update.state_batches == (StateBatch(0, 1, X, 2),)
    assert sp.start_offset == 2


def test_release_keeps_count_and_reject_archives():
    sp = sp_with()
    acquire(sp, "m", log((0, 9)))
    out = sp.acknowledge("m", [AckBatch(0, 4, (2,)), AckBatch(5, 9, (3,))], 5)
    assert out.error is None
    assert runs(sp) == [(0, 4, A, 1, ""), (5, 9, X, 1, "")]
    assert [(e.first_offset, e.last_offset, e.action) for e in out.events] == [
        (0, 4, Action.RELEASED), (5, 9, Action.REJECTED)]


def test_gap_acknowledgement_archives():
    sp = sp_with()
    acquire(sp, "m", log((0, 3)))
    out = ack(sp, "m", 0, 3, 1, 0, 0, 1)
    assert out.update.state_batches == (StateBatch(0, 0, K, 1), StateBatch(1, 2, X, 1), StateBatch(3, 3, K, 1))
    assert sp.start_offset == 4 and runs(sp) == []


# ---------------------------------------------------------------------- acknowledgement refusals

def test_ack_by_another_member_is_refused():
    sp = sp_with()
    acquire(sp, "m1", log((0, 9)))
    out = ack(sp, "m2", 0, 9, 1)
    assert (out.error.code, out.error.message) == (ErrorCode.invalid_record_state, NOT_OWNER_BATCH)
    ack(sp, "m1", 0, 0, 1)  # now split per offset
    out = ack(sp, "m2", 1, 1, 1)
    assert (out.error.code, out.error.message) == (ErrorCode.invalid_record_state, NOT_OWNER_OFFSET)
    assert sp.record_state(1)[:3] == (Q, 1, "m1")


def test_ack_of_unacquired_and_acknowledged_offsets():
    sp = sp_with()
    acquire(sp, "m", log((0, 9)))
    assert ack(sp, "m", 0, 9, 2).error is None  # whole batch AVAILABLE now
    out = ack(sp, "m", 0, 9, 1)
    assert (out.error.code, out.error.message) == (ErrorCode.invalid_record_state, BATCH_NOT_ACQUIRED)
    out = ack(sp, "m", 2, 3, 1)
    assert (out.error.code, out.error.message) == (ErrorCode.invalid_record_state, BATCH_NOT_ACQUIRED)
    # §10: offset 7 already ACCEPTed -> "The offset cannot be acknowledged. The offset is not acquired."
    acquire(sp, "m", log((0, 9)))
    assert ack(sp, "m", 5, 9, 1).error is None
    out = ack(sp, "m", 7, 7, 1)
    assert (out.error.code, out.error.message) == (ErrorCode.invalid_record_state, OFFSET_NOT_ACQUIRED)


def test_ack_subset_of_a_batch_not_acquired():
    sp = sp_with()
    acquire(sp, "m", log((0, 9)))
    ack(sp, "m", 0, 9, 2)
    # the batch is AVAILABLE and still whole, owned by nobody -> the empty-member message first
    assert ack(sp, "m", 0, 4, 1).error.message == BATCH_NOT_ACQUIRED
    # (Kafka's "subset batch is not in the acquired state" needs a whole batch with an owner
    # that is not ACQUIRED: every move out of ACQUIRED clears the owner, so it cannot happen)


def test_ack_past_the_cache():
    sp = sp_with()
    out = ack(sp, "m", 0, 0, 1)
    assert (out.error.code, out.error.message) == (ErrorCode.invalid_record_state, NOT_FOUND)
    acquire(sp, "m", log((0, 9)))
    out = ack(sp, "m", 50, 50, 1)  # §10: offset 50 -> INVALID_REQUEST
    assert (out.error.code, out.error.message) == (ErrorCode.invalid_request, FIRST_PAST)
    out = ack(sp, "m", 5, 15, 1)
    assert (out.error.code, out.error.message) == (ErrorCode.invalid_request, LAST_PAST)


def test_ack_is_all_or_nothing_per_partition():
    sp = sp_with()
    acquire(sp, "m", log((0, 9)))
    before = runs(sp)
    out = sp.acknowledge("m", [AckBatch(0, 4, (1,)), AckBatch(5, 6, (3, 1)), AckBatch(50, 50, (1,))], 1)
    assert out.error.code == ErrorCode.invalid_request and out.update is None and out.events == []
    assert [r for r in runs(sp) if r[2] is not Q] == []
    assert {(r[2], r[3], r[4]) for r in runs(sp)} == {(Q, 1, "m")}
    assert sum(r[1] - r[0] + 1 for r in runs(sp)) == sum(r[1] - r[0] + 1 for r in before)


def test_invalid_ack_type_is_invalid_request():
    sp = sp_with()
    acquire(sp, "m", log((0, 1)))
    out = ack(sp, "m", 0, 1, 5)
    assert (out.error.code, out.error.message) == (ErrorCode.invalid_request, "Invalid acknowledge type: [5]")


def test_ack_below_start_offset_is_skipped():
    sp = sp_with()
    acquire(sp, "m", log((0, 9)))
    ack(sp, "m", 0, 9, 1)
    assert sp.start_offset == 10
    out = ack(sp, "m", 3, 4, 1)
    assert out.error is None and out.update is None


def test_partial_ack_splits_the_batch_and_start_moves_over_terminal_prefix():
    sp = sp_with()
    acquire(sp, "m", log((0, 9)))
    out = ack(sp, "m", 2, 4, 1)
    assert out.update.state_batches == (StateBatch(2, 4, K, 1),)
    assert sp.start_offset == 0
    assert runs(sp) == [(0, 1, Q, 1, "m"), (2, 4, K, 1, ""), (5, 9, Q, 1, "m")]
    out = ack(sp, "m", 0, 1, 1)
    assert out.update.start_offset == 0  # Kafka sends the start offset before this write moves it
    assert sp.start_offset == 5
    assert runs(sp) == [(5, 9, Q, 1, "m")]


def test_renew_restarts_the_lock_and_persists_nothing():
    sp = sp_with()
    acquire(sp, "m", log((0, 4)), now=0)
    out = ack(sp, "m", 0, 4, 4, now=20_000)
    assert out.error is None and out.update is None
    assert out.events[0].action == Action.RENEWED
    assert sp.record_state(0)[3] == 20_000 + LOCK
    assert sp.expire(LOCK).update is None
    assert sp.expire(20_000 + LOCK).update is not None


def test_renew_disabled():
    sp = sp_with(config=ShareConfig(renew_enabled=False))
    acquire(sp, "m", log((0, 4)))
    out = ack(sp, "m", 0, 4, 4)
    assert (out.error.code, out.error.message) == (ErrorCode.invalid_record_state, RENEW_DISABLED)


# ---------------------------------------------------------------------- acquisition shapes

def test_in_flight_limit():
    sp = sp_with(config=ShareConfig(max_record_locks=100))
    read = LogRead([LogBatch(i, i + 9) for i in range(0, 500, 10)])
    assert acquire(sp, "m", read) == [(0, 99, 1)]
    assert acquire(sp, "m", read) == []
    assert not sp.can_acquire()
    ack(sp, "m", 0, 49, 1)
    assert sp.start_offset == 50 and sp.can_acquire()
    later = LogRead([b for b in read.batches if b.base_offset >= 100])
    assert acquire(sp, "m", later) == [(100, 149, 1)]
    # at the limit, records inside the cached range can still be acquired again
    ack(sp, "m", 50, 59, 2)
    assert acquire(sp, "m", LogRead([b for b in read.batches if b.base_offset >= 50])) == [(50, 59, 2)]


def test_batch_optimized_splits_at_batch_size_on_log_batch_boundaries():
    sp = sp_with()
    read = LogRead([LogBatch(i, i + 9) for i in range(0, 50, 10)])
    assert acquire(sp, "m", read, batch_size=20) == [(0, 19, 1), (20, 39, 1), (40, 49, 1)]
    sp2 = sp_with()
    # 25 records rounds up to the end of the log batch holding the 25th
    assert acquire(sp2, "m", read, max_records=25, batch_size=20) == [(0, 19, 1), (20, 29, 1)]


def test_record_limit_mode_never_exceeds_max_records():
    sp = sp_with()
    read = log((0, 99))
    assert acquire(sp, "m", read, max_records=10, mode=AcquireMode.RECORD_LIMIT) == [(0, 9, 1)]
    assert sp.record_state(10) == (A, 0, "", None)
    assert sp.next_fetch_offset() == 10
    assert acquire(sp, "n", read, max_records=10, mode=AcquireMode.RECORD_LIMIT) == [(10, 19, 1)]


def test_throttled_redelivery_halves_then_goes_one_by_one():
    # limit 10: throttling from count 5 (max(2, ceil(10/2)))
    sp = sp_with(config=ShareConfig(delivery_count_limit=10))
    read = log((0, 99))
    for count in range(1, 6):
        assert acquire(sp, "m", read) == [(0, 99, count)]
        ack(sp, "m", 0, 99, 2)
    # count 5 reached: 100 >> 1 = 50 records
    assert acquire(sp, "m", read) == [(0, 49, 6)]
    # the rest (count 5) is throttled too, alone in its fetch: 100 >> 1 of the batch's offsets
    assert acquire(sp, "m", read) == [(50, 99, 6)]
    ack(sp, "m", 0, 99, 2)
    assert acquire(sp, "m", read) == [(0, 24, 7)]  # 100 >> 2


def test_last_delivery_attempt_goes_alone():
    sp = sp_with(config=ShareConfig(delivery_count_limit=3))
    read = log((0, 3))
    assert acquire(sp, "m", read) == [(0, 3, 1)]
    ack(sp, "m", 0, 3, 2)
    # count 1 -> throttle from max(2, 2) = 2 not reached: whole batch
    assert acquire(sp, "m", read) == [(0, 3, 2)]
    ack(sp, "m", 0, 3, 2)
    assert acquire(sp, "m", read) == [(0, 0, 3)]  # count 2 == limit-1: one record per fetch
    assert acquire(sp, "m", read) == [(1, 1, 3)]


# ---------------------------------------------------------------------- read_committed

def test_read_committed_archives_aborted_and_stops_at_lso():
    sp = sp_with()
    batches = [
        LogBatch(0, 4, producer_id=1, transactional=True),
        LogBatch(5, 5, producer_id=1, transactional=True, control=True, abort_marker=True),
        LogBatch(6, 9),
        LogBatch(10, 14, producer_id=2, transactional=True),  # open: the LSO is 10
    ]
    read = LogRead(batches, read_committed=True, last_stable_offset=10, aborted=[AbortedTxn(1, 0)])
    got = sp.acquire("m", read, max_records=500, batch_size=500, now_ms=0)
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got.records] == [(5, 9, 1)]
    assert [(e.first_offset, e.last_offset, e.action) for e in got.events if e.action != Action.ACQUIRED] == [
        (0, 4, Action.ABORTED_TXN)]
    assert runs(sp)[0] == (0, 4, X, 1, "")
    assert sp.end_offset == 9
    ack(sp, "m", 5, 9, 1)
    assert sp.start_offset == 10
    # the transaction commits later: its records and the marker become deliverable
    committed = batches[3:] + [LogBatch(15, 15, producer_id=2, transactional=True, control=True)]
    read = LogRead(committed, read_committed=True, last_stable_offset=16)
    assert acquire(sp, "m", read) == [(10, 15, 1)]


def test_read_uncommitted_ignores_aborted_list():
    sp = sp_with()
    read = LogRead([LogBatch(0, 4, producer_id=1, transactional=True)], aborted=[AbortedTxn(1, 0)])
    assert acquire(sp, "m", read) == [(0, 4, 1)]


# ---------------------------------------------------------------------- offsets, members, loading

def test_release_member_gives_back_only_its_records():
    sp = sp_with()
    acquire(sp, "m1", log((0, 9)))
    acquire(sp, "m2", log((10, 19)))
    out = sp.release_member("m1", 5)
    assert out.update.state_batches == (StateBatch(0, 9, A, 1),)
    assert runs(sp) == [(0, 9, A, 1, ""), (10, 19, Q, 1, "m2")]
    assert [(e.action, e.member) for e in out.events] == [(Action.MEMBER_RELEASED, "m1")]


def test_log_start_move_archives_available_records_below_it():
    sp = sp_with()
    acquire(sp, "m", log((0, 9)))
    ack(sp, "m", 0, 9, 2)
    out = sp.update_log_start(5, 10)
    assert out.update is None  # Kafka writes the new start with the next state write
    assert sp.start_offset == 5 and sp.next_fetch_offset() == 5
    assert [r[:3] for r in sp.in_flight()] == [(5, 9, A)]
    assert sp.record_state(4)[0] is X
    assert [(e.first_offset, e.last_offset, e.action) for e in out.events] == [(0, 4, Action.LOG_START_MOVED)]


def test_stale_records_missing_from_the_log_are_archived():
    sp = sp_with()
    acquire(sp, "m", log((0, 9)))
    ack(sp, "m", 0, 9, 2)
    # the log lost 0-4 (retention); the read at fetch offset 0 begins at 5
    got = sp.acquire("m", log((5, 9)), max_records=100, batch_size=100, now_ms=3, fetch_offset=0)
    assert [(r.first_offset, r.last_offset) for r in got.records] == [(5, 9)]
    assert got.events[0].action == Action.NOT_IN_LOG
    assert sp.record_state(2)[0] is X


def replay(updates, start: int = -1) -> tuple[int, list[StateBatch]]:
    """What a share coordinator would hand back: the updates applied in order over ``start``
    (-1: none yet), merged. test_share_partition_machine replays with it too."""
    persisted: dict[int, tuple[int, int]] = {}
    for u in updates:
        start = u.start_offset
        for b in u.state_batches:
            for o in range(b.first_offset, b.last_offset + 1):
                persisted[o] = (b.delivery_state, b.delivery_count)
    merged: list[StateBatch] = []
    for o, (s, c) in sorted(persisted.items()):
        if o < start:
            continue
        p = merged[-1] if merged else None
        if p is not None and p.last_offset + 1 == o and (p.delivery_state, p.delivery_count) == (s, c):
            merged[-1] = StateBatch(p.first_offset, o, s, c)
        else:
            merged.append(StateBatch(o, o, s, c))
    return start, merged


def test_load_keeps_terminal_states_and_acquired_come_back_with_persisted_count():
    sp = sp_with()
    acquire(sp, "m", log((0, 9)))
    updates = [ack(sp, "m", 0, 4, 2).update]  # 0-4 AVAILABLE count 1
    assert acquire(sp, "m", log((0, 9))) == [(0, 4, 2)]  # count 2, not persisted
    updates.append(ack(sp, "m", 5, 7, 1, 1, 3).update)
    start, batches = replay(updates)
    assert (start, batches) == (0, [StateBatch(0, 4, A, 1), StateBatch(5, 6, K, 1), StateBatch(7, 7, X, 1)])
    again = SharePartition.load("g", "t", 0, start, batches)
    assert again.start_offset == 0 and again.end_offset == 7
    assert again.record_state(0) == (A, 1, "", None)
    assert again.record_state(7) == (X, 1, "", None)
    assert again.next_fetch_offset() == 0
    # 0-4 again at count 2 (1 persisted + 1), 8-9 were never persisted: new, count 1
    assert acquire(again, "n", log((0, 9))) == [(0, 4, 2), (8, 9, 1)]
    assert [r[:4] for r in again.in_flight()] == [(0, 4, Q, 2), (5, 6, K, 1), (7, 7, X, 1), (8, 9, Q, 1)]


def test_an_update_goes_into_a_share_update_record_as_it_is():
    # The partition's StateBatch is the records' (PersisterStateBatch): no conversion between
    # what SharePartition persists and what __share_group_state carries.
    sp = sp_with()
    acquire(sp, "m", log((0, 9)))
    u = ack(sp, "m", 5, 7, 1, 1, 3).update
    assert u is not None and u.state_batches and all(type(b) is sl.StateBatch for b in u.state_batches)
    value = sl.ShareUpdateValue(1, 0, u.start_offset, u.state_batches, u.delivery_complete_count)
    back = sl.decode_value(sl.SHARE_UPDATE, sl.encode_value(value))
    assert back == value


def test_load_from_reset_offset_and_validation():
    sp = SharePartition.load("g", "t", 0, -1, [], reset_offset=42)
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (42, 42, 42)
    with pytest.raises(ValueError, match="no reset offset"):
        SharePartition.load("g", "t", 0, -1, [])
    with pytest.raises(ValueError, match="less than the start offset"):
        SharePartition.load("g", "t", 0, 10, [StateBatch(5, 12, 2, 1)])
    with pytest.raises(ValueError, match="less than the first offset"):
        SharePartition.load("g", "t", 0, 10, [StateBatch(12, 11, 2, 1)])
    with pytest.raises(ValueError, match="persisted as ACQUIRED"):
        SharePartition.load("g", "t", 0, 10, [StateBatch(12, 13, 1, 1)])


def test_load_gap_window_offsets_are_delivered_as_new():
    sp = SharePartition.load("g", "t", 0, 0, [StateBatch(3, 4, K, 1), StateBatch(8, 9, A, 2)])
    assert sp.next_fetch_offset() == 0
    assert acquire(sp, "m", log((0, 12))) == [(0, 2, 1), (5, 7, 1), (8, 9, 3), (10, 12, 1)]
    ack(sp, "m", 0, 2, 1)
    assert sp.start_offset == 5


def test_persisted_start_trails_by_one_write():
    # §10: after all ten were terminal, DescribeShareGroupOffsets showed StartOffset 0
    sp = sp_with()
    acquire(sp, "m", log((0, 9)))
    out = ack(sp, "m", 0, 9, 1)
    assert out.update.start_offset == 0 and sp.start_offset == 10


@pytest.mark.parametrize("value,kind,ms", [
    ("latest", "latest", 0), ("EARLIEST", "earliest", 0),
    ("by_duration:PT1H", "by_duration", 3_600_000), ("by_duration:P1DT2H3M4.5S", "by_duration", 93_784_500),
    ("by_duration:PT0S", "by_duration", 0),
])
def test_auto_offset_reset(value, kind, ms):
    r = AutoOffsetReset.parse(value)
    assert (r.kind, r.duration_ms) == (kind, ms)
    assert r.timestamp(10_000_000) == 10_000_000 - ms


@pytest.mark.parametrize("value", ["none", "by_duration:", "by_duration:-PT1H", "by_duration:PT", "by_duration:1H"])
def test_auto_offset_reset_refusals(value):
    with pytest.raises(ValueError, match="must be either 'earliest', 'latest' or of the format"):
        AutoOffsetReset.parse(value)


def test_acquired_range_count():
    assert AcquiredRange(3, 7, 1).count == 5


def test_start_offset_stops_at_a_never_delivered_hole():
    sp = SharePartition.load("g", "t", 0, 0, [StateBatch(0, 2, K, 1), StateBatch(5, 6, K, 1)])
    assert sp.next_fetch_offset() == 3
    one_by_one = LogRead([LogBatch(o, o) for o in range(3, 10)])
    assert acquire(sp, "m", one_by_one, max_records=1, batch_size=1) == [(3, 3, 1)]
    ack(sp, "m", 3, 3, 1)
    assert sp.start_offset == 4 and sp.next_fetch_offset() == 4


@pytest.mark.parametrize("batches,renew_supported,is_renew,ok", [
    ([AckBatch(0, 4, (1,))], False, False, True),
    ([AckBatch(0, 1, (1, 2)), AckBatch(1, 3, (3,))], False, False, True),  # may start on the last one's end
    ([AckBatch(5, 4, (1,))], False, False, False),  # first > last
    ([AckBatch(3, 4, (1,)), AckBatch(0, 1, (1,))], False, False, False),  # not ascending
    ([AckBatch(0, 4, ())], False, False, False),  # no types
    ([AckBatch(0, 4, (1, 2))], False, False, False),  # types do not match the range
    ([AckBatch(0, 0, (5,))], True, True, False),
    ([AckBatch(0, 0, (4,))], False, True, False),  # §10: type 4 on v1
    ([AckBatch(0, 0, (4,))], True, False, False),  # RENEW without IsRenewAck
    ([AckBatch(0, 0, (4,))], True, True, True),
])
def test_ack_batch_validation_is_kafkaapis(batches, renew_supported, is_renew, ok):
    assert ack_batches_valid(batches, renew_supported=renew_supported, is_renew_ack=is_renew) is ok


def test_history_tells_the_story_of_a_record():
    # the example: acquired by A, lock expired; acquired by B, RELEASED; by C, ACCEPTED
    sp = sp_with()
    read = log((40, 49))
    sp.update_log_start(40, 0)
    story = []
    story += sp.acquire("A", read, max_records=10, batch_size=10, now_ms=1_000).events
    story += sp.expire(1_000 + LOCK).events
    story += sp.acquire("B", read, max_records=10, batch_size=10, now_ms=40_000).events
    story += ack(sp, "B", 42, 42, 2, now=41_000).events
    story += sp.acquire("C", read, max_records=10, batch_size=10, now_ms=42_000).events
    story += ack(sp, "C", 42, 42, 1, now=43_000).events
    about_42 = [(e.action, e.member, e.at_ms, e.delivery_count, e.lock_deadline_ms, e.state)
                for e in story if e.first_offset <= 42 <= e.last_offset]
    assert about_42 == [
        (Action.ACQUIRED, "A", 1_000, 1, 1_000 + LOCK, Q),
        (Action.LOCK_EXPIRED, "A", 1_000 + LOCK, 1, 1_000 + LOCK, A),
        (Action.ACQUIRED, "B", 40_000, 2, 40_000 + LOCK, Q),
        (Action.RELEASED, "B", 41_000, 2, 40_000 + LOCK, A),
        (Action.ACQUIRED, "C", 42_000, 3, 42_000 + LOCK, Q),
        (Action.ACCEPTED, "C", 43_000, 3, 42_000 + LOCK, K),
    ]


def test_load_moves_past_a_terminal_prefix():
    # maybeInitialize ends with maybeUpdateCachedStateAndOffsets (tests/differential/
    # test_share_restart.py: the first write after a restart carries the moved start offset)
    sp = SharePartition.load("g", "t", 0, 0, [StateBatch(0, 2, K, 1), StateBatch(3, 4, A, 1),
                                              StateBatch(5, 6, X, 1)])
    assert (sp.start_offset, sp.end_offset) == (3, 6)
    assert acquire(sp, "m", log((0, 9))) == [(3, 4, 2), (7, 9, 1)]
    assert ack(sp, "m", 3, 4, 1).update.start_offset == 3
    done = SharePartition.load("g", "t", 0, 0, [StateBatch(0, 4, K, 1), StateBatch(5, 6, X, 2)])
    assert (done.start_offset, done.end_offset, done.in_flight()) == (7, 7, [])


def test_check_acknowledge_answers_as_acknowledge_and_changes_nothing():
    sp = sp_with()
    acquire(sp, "m", log((0, 9)))
    before = sp.in_flight()
    for batches in ([AckBatch(0, 4, (2,)), AckBatch(5, 9, (1,))],       # fine
                    [AckBatch(0, 4, (1,)), AckBatch(50, 50, (1,))],     # past the acquired records
                    [AckBatch(0, 1, (1, 3))]):                          # per offset, splits
        checked = sp.check_acknowledge("m", batches, 1)
        assert sp.in_flight() == before and sp.start_offset == 0
        assert checked.update is None and checked.events == []
        assert checked.error == sp_with_copy_error(batches)
    assert sp.check_acknowledge("other", [AckBatch(0, 0, (1,))], 1).error.code == ErrorCode.invalid_record_state
    assert ack(sp, "m", 0, 9, 1).error is None  # still all acquired by m


def sp_with_copy_error(batches):
    """The error a fresh partition in the same state answers when really acknowledging."""
    sp = sp_with()
    acquire(sp, "m", log((0, 9)))
    return sp.acknowledge("m", batches, 1).error
