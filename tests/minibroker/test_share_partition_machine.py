"""SharePartition under random sequences of acquisitions, acknowledgements, lock expiries,
member releases and restarts from what was persisted, checking the invariants of KIP-932:

- a record once acknowledged or archived is never acquired again, not even after a restart;
- a delivery count never exceeds share.delivery.count.limit, and a record is delivered more often
  than the limit only across a crash (acquisition persists nothing, as in Kafka);
- the start offset never moves back while the partition runs;
- the persisted updates, replayed, give back the same visible state (done or deliverable with
  the same count), Kafka's restart;
- a refused acknowledgement changes nothing.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from minibroker.coordinator.share.partition import (
    AckBatch,
    AcquireMode,
    LogBatch,
    LogRead,
    ShareConfig,
    SharePartition,
    ShareUpdate,
)
from minibroker.coordinator.share.record_state import RecordState

from .test_share_partition import replay

LIMIT = 3
N = 40
LOCK_MS = 1000
SIZES = [1, 4, 2, 6, 3, 1, 5, 2, 7, 4, 5]


def _log() -> list[LogBatch]:
    out, o, i = [], 0, 0
    while o < N:
        last = min(o + SIZES[i % len(SIZES)] - 1, N - 1)
        out.append(LogBatch(o, last))
        o, i = last + 1, i + 1
    return out


LOG = _log()


def visible(sp: SharePartition, offset: int) -> tuple[str, int]:
    """What a restart must keep: done, or deliverable with the count the next delivery adds to."""
    if offset < sp.start_offset:
        return ("done", 0)
    rs = sp.record_state(offset)
    if rs is None:
        return ("deliverable", 0)
    state, count = rs[0], rs[1]
    if state.terminal:
        return ("done", 0)
    if state is RecordState.ACQUIRED:
        return ("deliverable", count - 1)
    return ("deliverable", count)


def shape(sp: SharePartition) -> tuple[object, ...]:
    """Everything but lock deadlines (a renewal inside a refused request is not undone, as in Kafka)."""
    return (sp.start_offset, sp.end_offset,
            tuple(sp.record_state(o)[:3] if sp.record_state(o) else None for o in range(N)))


class SharePartitionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.config = ShareConfig(record_lock_duration_ms=LOCK_MS, delivery_count_limit=LIMIT,
                                  max_record_locks=25)
        self.sp = SharePartition("g", "t", 0, self.config)
        self.now = 0
        self.updates: list[ShareUpdate] = []
        self.done: set[int] = set()
        self.deliveries: dict[int, int] = {}
        self.restarts = 0
        self.last_start = 0

    def _record(self, update: ShareUpdate | None) -> None:
        if update is None:
            return
        self.updates.append(update)
        for b in update.state_batches:
            if RecordState(b.delivery_state).terminal:
                self.done.update(range(b.first_offset, b.last_offset + 1))

    @rule(member=st.sampled_from("abc"), max_records=st.integers(1, 30), record_limit=st.booleans(),
          batch_size=st.integers(1, 20))
    def acquire(self, member: str, max_records: int, record_limit: bool, batch_size: int) -> None:
        fetch = self.sp.next_fetch_offset()
        read = LogRead([b for b in LOG if b.last_offset >= fetch])
        mode = AcquireMode.RECORD_LIMIT if record_limit else AcquireMode.BATCH_OPTIMIZED
        got = self.sp.acquire(member, read, max_records=max_records, batch_size=batch_size,
                              now_ms=self.now, fetch_offset=fetch, mode=mode)
        if record_limit:
            assert got.count <= max_records
        for r in got.records:
            for o in range(r.first_offset, r.last_offset + 1):
                assert o not in self.done, f"offset {o} was done with and got acquired again"
                state, count, owner, deadline = self.sp.record_state(o)
                assert (state, count, owner, deadline) == (RecordState.ACQUIRED, r.delivery_count, member,
                                                           self.now + LOCK_MS)
                self.deliveries[o] = self.deliveries.get(o, 0) + 1
                assert self.deliveries[o] <= LIMIT * (self.restarts + 1)

    @rule(data=st.data(), n_batches=st.integers(1, 3), aim=st.booleans())
    def acknowledge(self, data: st.DataObject, n_batches: int, aim: bool) -> None:
        """One request of up to three ascending batches; ``aim`` starts them where some member
        holds records, so that most requests get past the first check."""
        held = [r for r in self.sp.in_flight() if r[2] is RecordState.ACQUIRED]
        if aim and held:
            run = data.draw(st.sampled_from(held))
            member, cursor = run[4], data.draw(st.integers(run[0], run[1]))
        else:
            member, cursor = data.draw(st.sampled_from("abc")), data.draw(st.integers(0, N - 1))
        batches: list[AckBatch] = []
        for _ in range(n_batches):
            if cursor >= N:
                break
            last = min(cursor + data.draw(st.integers(0, 7)), N - 1)
            n = last - cursor + 1
            if n > 1 and data.draw(st.booleans()):
                types = tuple(data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)))
            else:
                types = (data.draw(st.integers(0, 4)),)
            batches.append(AckBatch(cursor, last, types))
            cursor = last + 1 + data.draw(st.integers(0, 3))
        before = shape(self.sp)
        out = self.sp.acknowledge(member, batches, self.now)
        if out.error is not None:
            assert out.update is None and out.events == []
            assert shape(self.sp) == before, "a refused acknowledgement changed the partition"
            return
        self._record(out.update)

    @rule(ms=st.integers(0, 1500))
    def tick(self, ms: int) -> None:
        self.now += ms
        out = self.sp.expire(self.now)
        self._record(out.update)
        assert self.sp.next_deadline_ms() is None or self.sp.next_deadline_ms() > self.now

    @rule(member=st.sampled_from("abc"))
    def member_leaves(self, member: str) -> None:
        self._record(self.sp.release_member(member, self.now).update)
        assert all(r[4] != member for r in self.sp.in_flight())

    @rule()
    def restart(self) -> None:
        start, batches = replay(self.updates, start=0)  # the partition began at 0
        again = SharePartition.load("g", "t", 0, start, batches, config=self.config)
        for o in range(N):
            assert visible(again, o) == visible(self.sp, o), f"offset {o} differs after a restart"
        self.sp = again
        self.restarts += 1
        self.last_start = again.start_offset

    @invariant()
    def consistent(self) -> None:
        sp = self.sp
        assert sp.start_offset >= self.last_start, "the start offset moved back"
        self.last_start = sp.start_offset
        assert sp.next_fetch_offset() >= sp.start_offset
        assert sp.in_flight_count() <= N
        for first, last, state, count, owner, deadline in sp.in_flight():
            assert first <= last and first >= sp.start_offset
            assert 0 <= count <= LIMIT
            if state is RecordState.ACQUIRED:
                assert owner and deadline is not None and count >= 1
            else:
                assert owner == "" and deadline is None
        for o in self.done:
            if o >= sp.start_offset:
                rs = sp.record_state(o)
                assert rs is not None and rs[0].terminal, f"offset {o} was done with and is {rs}"


SharePartitionMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestSharePartitionMachine = SharePartitionMachine.TestCase
