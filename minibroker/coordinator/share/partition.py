"""One share partition — (share group, topic-partition) on the partition's leader — as a pure
state machine.

Theory of operation
-------------------
Kafka's ``SharePartition`` (core/src/main/java/kafka/server/share/SharePartition.java, with
server/.../share/fetch/InFlightBatch.java and InFlightState.java), without locks, timers,
futures or a persister. Every call runs to the end and says what changed; the caller reads the
log, persists, schedules and answers.

The partition tracks the records between ``start_offset`` (the first one not yet done with) and
``end_offset`` (the last one handed out so far) in a cache of in-flight batches, sorted by first
offset. A batch holds one state, delivery count, owner and lock deadline for all its offsets until
something needs them apart (a partial acknowledgement, per-offset acknowledge types, the start
offset inside it, a throttled or record-limited acquisition, a lock expiring under a moved start
offset); then it splits for good into one state per offset (Kafka's
``maybeInitializeOffsetStateUpdate``). Each record moves through ``record_state``'s table::

    AVAILABLE -acquire (count+1, lock)-> ACQUIRED -ACCEPT-> ACKNOWLEDGED
                                                  -REJECT / gap-> ARCHIVED
                                                  -RELEASE / lock expiry / member gone-> AVAILABLE,
                                                   or ARCHIVED once the count reached the limit

- :meth:`SharePartition.acquire` takes the batch descriptors the caller read from the log at
  :meth:`SharePartition.next_fetch_offset` (and, for read_committed, the last stable offset and
  the aborted transactions of the read) and hands out AVAILABLE records and records new to the
  cache to one member, bounded by the fetch's max records, the in-flight limit
  (``share.partition.max.record.locks``), the acquire mode and the throttling of records close to
  the delivery limit. Acquisition persists nothing (as in Kafka: a crash forgets it).
- :meth:`SharePartition.acknowledge` applies a request's acknowledgement batches for one member:
  all of them or none (``rollbackOrProcessStateUpdates``), with Kafka's error code and message
  for the first refused batch.
- :meth:`SharePartition.expire` (lock deadlines, ``share.record.lock.duration.ms``) and
  :meth:`SharePartition.release_member` (session closed, member left) give records back.
- After every write the start offset moves over the longest terminal prefix, and batches
  entirely before it leave the cache (``maybeUpdateCachedStateAndOffsets``); it also jumps to a
  new log start offset (:meth:`SharePartition.update_log_start`).

Every mutating call returns an :class:`Outcome`: the :class:`ShareUpdate` to append to
``__share_group_state`` (state batches as Kafka's WriteShareGroupState carries them, with the
start offset *before* this write moved it, as Kafka sends it — so the persisted start offset
trails by one write) or None, and the :class:`HistoryEvent` list that explains each redelivery.
:meth:`SharePartition.load` rebuilds the partition from the persisted start offset and batches
(or the ``share.auto.offset.reset`` offset the caller resolved); acquired records come back
AVAILABLE with their last persisted delivery count.

Differences from Kafka, all because persistence here is synchronous and in-process: there is no
"transition in flight" (``hasOngoingStateTransition``) and no failed write to roll back from, so
the messages that only those produce ("The record state is invalid…", "Unable to acknowledge
records for the batch") never occur. The dead-letter queue (share.version 2) has no ARCHIVING
state here: the events of records Kafka would move to ARCHIVING carry a ``dlq_cause``, and the
coordinator writes them to the group's DLQ topic (dlq.py) in the same step that persists them
ARCHIVED. The gap window Kafka keeps after a load (offsets between persisted batches that were
never delivered) is the general rule here: any offset inside ``[start_offset, end_offset]``
that no cached batch covers is acquired as a new record.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.share_log import StateBatch  # PersisterStateBatch, as the records carry it

from .record_state import RecordState, check_transition

NO_MEMBER = ""  # InFlightState.EMPTY_MEMBER_ID

# Kafka's defaults (GroupConfig / ShareGroupConfig)
DEFAULT_RECORD_LOCK_DURATION_MS = 30_000
DEFAULT_DELIVERY_COUNT_LIMIT = 5
DEFAULT_MAX_RECORD_LOCKS = 2000


class AckType(IntEnum):
    """AcknowledgeType ids on the wire; 0 is a gap (offsets the client found no record at)."""
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class AcquireMode(IntEnum):
    """ShareFetch v2 ``ShareAcquireMode`` (KIP-1206)."""
    BATCH_OPTIMIZED = 0
    RECORD_LIMIT = 1


# SharePartition.ACK_TYPE_TO_RECORD_STATE (without a DLQ)
_ACK_TARGET = {
    AckType.GAP: RecordState.ARCHIVED,
    AckType.ACCEPT: RecordState.ACKNOWLEDGED,
    AckType.RELEASE: RecordState.AVAILABLE,
    AckType.REJECT: RecordState.ARCHIVED,
}


class Action:
    """What happened to a range of records, for the history ("explain every redelivery")."""
    ACQUIRED = "acquired"
    RENEWED = "renewed"
    ACCEPTED = "accepted"
    RELEASED = "released"
    REJECTED = "rejected"
    GAP = "gap"
    LOCK_EXPIRED = "lock_expired"
    MEMBER_RELEASED = "member_released"
    ABORTED_TXN = "archived_aborted_transaction"
    LOG_START_MOVED = "archived_log_start_moved"
    NOT_IN_LOG = "archived_not_in_log"
    # the partition's leader moved: the new leader loads the persisted state, where no
    # acquisition is kept (SharePartitionListener.onBecomingFollower)
    LEADER_MOVED = "leader_moved"


_VALID_ACK_TYPES = frozenset(int(t) for t in AckType)

_ACK_ACTION = {
    AckType.GAP: Action.GAP,
    AckType.ACCEPT: Action.ACCEPTED,
    AckType.RELEASE: Action.RELEASED,
    AckType.REJECT: Action.REJECTED,
}


@dataclass(frozen=True)
class ShareConfig:
    """The group configs a share partition obeys (GroupConfig, read per call in Kafka)."""
    record_lock_duration_ms: int = DEFAULT_RECORD_LOCK_DURATION_MS
    delivery_count_limit: int = DEFAULT_DELIVERY_COUNT_LIMIT
    max_record_locks: int = DEFAULT_MAX_RECORD_LOCKS
    renew_enabled: bool = True

    @property
    def throttle_from(self) -> int:
        """The delivery count from which redeliveries are throttled
        (SharePartition.throttleRecordsDeliveryLimit)."""
        return max(2, math.ceil(self.delivery_count_limit / 2))


@dataclass(frozen=True)
class LogBatch:
    """One record batch of the caller's log read: what acquisition needs of it."""
    base_offset: int
    last_offset: int
    producer_id: int = -1
    transactional: bool = False
    control: bool = False
    abort_marker: bool = False  # a control batch whose record is an ABORT marker


@dataclass(frozen=True)
class AbortedTxn:
    """FetchResponse's AbortedTransaction: a producer's aborted transaction starting there."""
    producer_id: int
    first_offset: int


@dataclass(frozen=True)
class LogRead:
    """The log read a fetch acquires from (Kafka's FetchPartitionData). With ``read_committed``
    the read stops at ``last_stable_offset`` and ``aborted`` lists the aborted transactions it
    overlaps (``storage.txn_index``)."""
    batches: Sequence[LogBatch]
    read_committed: bool = False
    last_stable_offset: int | None = None
    aborted: Sequence[AbortedTxn] = ()


@dataclass(frozen=True)
class AckBatch:
    """One ShareFetch/ShareAcknowledge AcknowledgementBatch, already validated by the handler
    (``KafkaApis.validateAcknowledgementBatches``): one type for the range, or one per offset."""
    first_offset: int
    last_offset: int
    types: tuple[int, ...]


@dataclass(frozen=True)
class AcquiredRange:
    """ShareFetch's AcquiredRecords."""
    first_offset: int
    last_offset: int
    delivery_count: int

    @property
    def count(self) -> int:
        return self.last_offset - self.first_offset + 1


@dataclass(frozen=True)
class ShareUpdate:
    """What one WriteShareGroupState carries for this partition."""
    start_offset: int
    delivery_complete_count: int
    state_batches: tuple[StateBatch, ...]


@dataclass(frozen=True)
class HistoryEvent:
    first_offset: int
    last_offset: int
    action: str
    member: str
    at_ms: int
    state: RecordState  # the state the records are in afterwards
    delivery_count: int
    # the lock deadline after an acquisition or renewal, else the one given up
    lock_deadline_ms: int | None = None
    # why the records went to ARCHIVED where Kafka would hand them to the group's dead-letter
    # queue first (SharePartition's dlqCause: REJECT, or the delivery count limit on a way back
    # to AVAILABLE); None for every other archiving (gaps, below the start offset, aborted)
    dlq_cause: str | None = None
    # the DLQ topic the records were written to (set by the coordinator once written)
    dlq_topic: str | None = None


@dataclass(frozen=True)
class ShareError:
    """A per-partition error of an acknowledgement (AcknowledgeErrorCode/ErrorCode)."""
    code: ErrorCode
    message: str


@dataclass
class Outcome:
    update: ShareUpdate | None = None
    events: list[HistoryEvent] = field(default_factory=list)
    error: ShareError | None = None


@dataclass
class Acquired:
    records: list[AcquiredRange] = field(default_factory=list)
    events: list[HistoryEvent] = field(default_factory=list)

    @property
    def count(self) -> int:
        return sum(r.count for r in self.records)


# The messages Kafka answers with, word for word (SharePartition)
NOT_FOUND = "Batch record not found. The request batch offsets are not found in the cache."
FIRST_PAST = "Batch record not found. The first offset in request is past acquired records."
LAST_PAST = "Batch record not found. The last offset in request is past acquired records."
BATCH_NOT_ACQUIRED = "The batch cannot be acknowledged. The batch is not in the acquired state."
SUBSET_NOT_ACQUIRED = "The batch cannot be acknowledged. The subset batch is not in the acquired state."
OFFSET_NOT_ACQUIRED = "The offset cannot be acknowledged. The offset is not acquired."
NOT_OWNER_BATCH = "Member is not the owner of batch record"
NOT_OWNER_OFFSET = "Member is not the owner of offset"
RENEW_DISABLED = "Renewing acquisition locks is not enabled for the group."
# ShareGroupDLQManager.CLIENT_REJECT / DELIVERY_COUNT_EXCEEDED, the DLQ records' message header
DLQ_CLIENT_REJECT = "Offset rejected by client."
DLQ_DELIVERY_COUNT_EXCEEDED = "Offset delivery count exceeded the threshold."


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = ShareError(code, message)


def _refuse_state(message: str) -> _Refused:
    return _Refused(ErrorCode.invalid_record_state, message)


@dataclass
class _State:
    """InFlightState: one record's (or a whole batch's) state."""
    state: RecordState
    delivery_count: int
    member: str = NO_MEMBER
    deadline_ms: int | None = None

    def copy(self) -> _State:
        return _State(self.state, self.delivery_count, self.member, self.deadline_ms)

    def move(self, to: RecordState, limit: int) -> RecordState:
        """InFlightState.tryUpdateState with DeliveryCountOps.NO_OP: a record going back to
        AVAILABLE whose count reached the limit is archived instead."""
        if to is RecordState.AVAILABLE and self.delivery_count >= limit:
            to = RecordState.ARCHIVED
        self.state = check_transition(self.state, to)
        self.member = NO_MEMBER
        self.deadline_ms = None
        return to

    def acquire(self, member: str, deadline_ms: int) -> None:
        self.state = check_transition(self.state, RecordState.ACQUIRED)
        self.delivery_count += 1  # DeliveryCountOps.INCREASE
        self.member = member
        self.deadline_ms = deadline_ms

    def archive(self) -> None:
        """InFlightState.archive: outside the transition table on purpose."""
        self.state = RecordState.ARCHIVED
        self.member = NO_MEMBER
        self.deadline_ms = None


@dataclass
class _Batch:
    """InFlightBatch: ``whole`` until split, then ``offsets`` (one _State per offset)."""
    first: int
    last: int
    whole: _State | None
    offsets: dict[int, _State] | None = None

    def split(self) -> dict[int, _State]:
        if self.offsets is None:
            assert self.whole is not None
            self.offsets = {o: self.whole.copy() for o in range(self.first, self.last + 1)}
            self.whole = None
        return self.offsets

    def states(self) -> Iterable[tuple[int, int, _State]]:
        """(first, last, state) runs: the whole batch or each offset."""
        if self.offsets is None:
            assert self.whole is not None
            yield self.first, self.last, self.whole
        else:
            for o, st in self.offsets.items():
                yield o, o, st


def ack_batches_valid(batches: Sequence[AckBatch], *, renew_supported: bool, is_renew_ack: bool) -> bool:
    """KafkaApis.validateAcknowledgementBatches, before any share partition sees them: a
    partition whose batches fail gets INVALID_REQUEST with no message and its acknowledgements
    are dropped. ``renew_supported``: ShareFetch/ShareAcknowledge v2+ (type 4 exists);
    ``is_renew_ack``: the request's IsRenewAck."""
    prev_last = -1
    max_type = AckType.RENEW if renew_supported else AckType.REJECT
    for b in batches:
        if b.first_offset > b.last_offset:
            return False
        if b.first_offset < prev_last:  # Kafka lets a batch begin on the previous one's last offset
            return False
        if not b.types:
            return False
        if len(b.types) > 1 and b.last_offset - b.first_offset != len(b.types) - 1:
            return False
        if any(t < 0 or t > max_type for t in b.types):
            return False
        if AckType.RENEW in b.types and not is_renew_ack:
            return False
        prev_last = b.last_offset
    return True


def merge_ranges(ranges: Iterable[AcquiredRange]) -> list[AcquiredRange]:
    """ShareFetchUtils.accumulateAcquiredRecords: adjacent offsets with one delivery count join."""
    out: list[AcquiredRange] = []
    for r in ranges:
        if out and out[-1].last_offset + 1 == r.first_offset and out[-1].delivery_count == r.delivery_count:
            out[-1] = AcquiredRange(out[-1].first_offset, r.last_offset, r.delivery_count)
        else:
            out.append(r)
    return out


def merge_events(events: list[HistoryEvent]) -> list[HistoryEvent]:
    """Adjacent per-offset events alike but for the offset, as ranges."""
    out: list[HistoryEvent] = []
    for e in events:
        if out:
            p = out[-1]
            if (p.last_offset + 1 == e.first_offset and p.action == e.action and p.member == e.member
                    and p.at_ms == e.at_ms and p.state == e.state
                    and p.delivery_count == e.delivery_count and p.lock_deadline_ms == e.lock_deadline_ms
                    and p.dlq_cause == e.dlq_cause):
                out[-1] = HistoryEvent(p.first_offset, e.last_offset, p.action, p.member, p.at_ms,
                                       p.state, p.delivery_count, p.lock_deadline_ms, p.dlq_cause)
                continue
        out.append(e)
    return out


def _merge_state_batches(batches: list[StateBatch]) -> tuple[StateBatch, ...]:
    out: list[StateBatch] = []
    for b in batches:
        if out:
            p = out[-1]
            if (p.last_offset + 1 == b.first_offset and p.delivery_state == b.delivery_state
                    and p.delivery_count == b.delivery_count):
                out[-1] = StateBatch(p.first_offset, b.last_offset, p.delivery_state, p.delivery_count)
                continue
        out.append(b)
    return tuple(out)


class SharePartition:
    """One (group, topic-partition): see the module docstring."""

    def __init__(self, group_id: str, topic: str, partition: int, config: ShareConfig | None = None,
                 start_offset: int = 0) -> None:
        self.group_id = group_id
        self.topic = topic
        self.partition = partition
        self.config = config if config is not None else ShareConfig()
        self.start_offset = start_offset
        self.end_offset = start_offset
        self._batches: list[_Batch] = []
        self._firsts: list[int] = []

    # ------------------------------------------------------------------ loading

    @classmethod
    def load(cls, group_id: str, topic: str, partition: int, persisted_start_offset: int,
             state_batches: Sequence[StateBatch], *, reset_offset: int | None = None,
             config: ShareConfig | None = None) -> SharePartition:
        """``maybeInitialize`` after ReadShareGroupState: a persisted start offset of -1 (a
        partition new to the group) takes ``reset_offset``, the offset the caller resolved from
        ``share.auto.offset.reset`` (``startOffsetDuringInitialization``); the persisted batches
        come back with their state and delivery count and no owner."""
        if persisted_start_offset == -1:
            if reset_offset is None:
                raise ValueError("share partition start offset is -1 and no reset offset was given")
            start = reset_offset
        else:
            start = persisted_start_offset
        sp = cls(group_id, topic, partition, config, start)
        prev_last = start - 1
        for b in sorted(state_batches, key=lambda b: b.first_offset):
            # Kafka fails the load for the same two (SharePartition.maybeInitialize)
            if b.first_offset < start:
                raise ValueError(f"invalid state batch for {sp.key}: base offset {b.first_offset} "
                                 f"is less than the start offset {start}")
            if b.last_offset < b.first_offset:
                raise ValueError(f"invalid state batch for {sp.key}: last offset {b.last_offset} "
                                 f"is less than the first offset {b.first_offset}")
            if b.first_offset <= prev_last:
                raise ValueError(f"invalid state batch for {sp.key}: offsets {b.first_offset}-"
                                 f"{b.last_offset} overlap the previous batch")
            state = RecordState.for_id(b.delivery_state)
            # Acquisition is never persisted, so an ACQUIRED batch is a corrupt record; Kafka
            # would keep it acquired by nobody, forever.
            if state is RecordState.ACQUIRED:
                raise ValueError(f"invalid state batch for {sp.key}: offsets {b.first_offset}-"
                                 f"{b.last_offset} persisted as ACQUIRED")
            sp._insert(_Batch(b.first_offset, b.last_offset, _State(state, b.delivery_count)))
            prev_last = b.last_offset
        if sp._batches:
            sp.end_offset = sp._batches[-1].last
        # past a terminal prefix at once, as maybeInitialize ends with
        # maybeUpdateCachedStateAndOffsets (seen in the 4.4 bytecode): the next write carries
        # the moved start offset
        sp._move_start()
        return sp

    @property
    def key(self) -> str:
        return f"{self.group_id}:{self.topic}-{self.partition}"

    # ------------------------------------------------------------------ views

    def in_flight_count(self) -> int:
        """numInFlightRecords: what counts against share.partition.max.record.locks."""
        return 0 if not self._batches else self.end_offset - self.start_offset + 1

    def delivery_complete_count(self) -> int:
        """Terminal records at or past the start offset (Kafka's deliveryCompleteCount)."""
        n = 0
        for b in self._batches:
            for first, last, st in b.states():
                if st.state.terminal:
                    lo = max(first, self.start_offset)
                    if last >= lo:
                        n += last - lo + 1
        return n

    def record_state(self, offset: int) -> tuple[RecordState, int, str, int | None] | None:
        """(state, delivery count, member, lock deadline) of a cached offset, else None."""
        b = self._batch_at(offset)
        if b is None:
            return None
        st = b.whole if b.offsets is None else b.offsets[offset]
        assert st is not None
        return st.state, st.delivery_count, st.member, st.deadline_ms

    def in_flight(self) -> list[tuple[int, int, RecordState, int, str, int | None]]:
        """The cache from the start offset as runs (first, last, state, delivery count, member,
        lock deadline): what the console and ``share explain`` show."""
        out: list[tuple[int, int, RecordState, int, str, int | None]] = []
        for b in self._batches:
            for first, last, st in b.states():
                if last < self.start_offset:
                    continue
                first = max(first, self.start_offset)
                row = (first, last, st.state, st.delivery_count, st.member, st.deadline_ms)
                if out and out[-1][1] + 1 == first and out[-1][2:] == row[2:]:
                    out[-1] = (out[-1][0], last) + row[2:]
                else:
                    out.append(row)
        return out

    def snapshot_batches(self) -> tuple[StateBatch, ...]:
        """The full state as a ShareSnapshot would carry it. Acquisitions are not persisted
        (the persister only ever sees what the last write left), so an ACQUIRED record is written
        as AVAILABLE with the count it had before this acquisition."""
        out: list[StateBatch] = []
        for b in self._batches:
            for first, last, st in b.states():
                lo = max(first, self.start_offset)
                if last < lo:
                    continue
                if st.state is RecordState.ACQUIRED:
                    out.append(StateBatch(lo, last, RecordState.AVAILABLE, st.delivery_count - 1))
                else:
                    out.append(StateBatch(lo, last, st.state, st.delivery_count))
        return _merge_state_batches(out)

    def next_deadline_ms(self) -> int | None:
        """The earliest lock deadline, for the caller's timer."""
        best: int | None = None
        for b in self._batches:
            for _f, _l, st in b.states():
                if st.state is RecordState.ACQUIRED and st.deadline_ms is not None:
                    if best is None or st.deadline_ms < best:
                        best = st.deadline_ms
        return best

    def next_fetch_offset(self) -> int:
        """Where the next log read starts (SharePartition.nextFetchOffset): the first AVAILABLE
        or never-delivered offset from the start offset, else past everything in flight."""
        if not self._batches or self.start_offset > self._batches[-1].last:
            return self.end_offset
        cursor = self.start_offset
        for b in self._batches:
            if b.last < cursor:
                continue
            if b.first > cursor:
                return cursor  # a never-delivered hole (Kafka's gap window after a load)
            for first, last, st in b.states():
                if last >= cursor and st.state is RecordState.AVAILABLE:
                    return max(first, cursor)
            cursor = b.last + 1
        return self.end_offset + 1

    def can_acquire(self) -> bool:
        """canAcquireRecords: something is acquirable inside the cache, or the in-flight limit
        leaves room for new records."""
        if self.next_fetch_offset() != self.end_offset + 1:
            return True
        return self.in_flight_count() < self.config.max_record_locks

    # ------------------------------------------------------------------ cache plumbing

    def _insert(self, b: _Batch) -> None:
        i = bisect.bisect_left(self._firsts, b.first)
        assert i == len(self._firsts) or self._firsts[i] != b.first, "batch overlap"
        self._firsts.insert(i, b.first)
        self._batches.insert(i, b)

    def _floor(self, offset: int) -> _Batch | None:
        i = bisect.bisect_right(self._firsts, offset) - 1
        return self._batches[i] if i >= 0 else None

    def _batch_at(self, offset: int) -> _Batch | None:
        b = self._floor(offset)
        return b if b is not None and b.last >= offset else None

    def _sub(self, lo_key: int, hi_key: int) -> list[_Batch]:
        """Batches whose first offset is in [lo_key, hi_key] (NavigableMap.subMap, inclusive)."""
        i = bisect.bisect_left(self._firsts, lo_key)
        j = bisect.bisect_right(self._firsts, hi_key)
        return self._batches[i:j]

    def _event(self, events: list[HistoryEvent], first: int, last: int, action: str, member: str,
               now_ms: int, st: _State) -> None:
        events.append(HistoryEvent(first, last, action, member, now_ms, st.state, st.delivery_count,
                                   st.deadline_ms))

    # ------------------------------------------------------------------ acquire

    def acquire(self, member: str, read: LogRead, *, max_records: int, batch_size: int,
                now_ms: int, fetch_offset: int | None = None,
                mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED) -> Acquired:
        """SharePartition.acquire over the caller's read at ``fetch_offset`` (by default
        :meth:`next_fetch_offset`)."""
        if fetch_offset is None:
            fetch_offset = self.next_fetch_offset()
        out = Acquired()
        batches = list(read.batches)
        if read.read_committed and read.last_stable_offset is not None:
            # the read stops at the LSO (FetchIsolation.TXN_COMMITTED): nothing at or past it
            batches = [b for b in batches if b.base_offset < read.last_stable_offset]
        if max_records <= 0 or not batches:
            return out
        last_batch = batches[-1]
        if last_batch.last_offset < self.start_offset:
            return out
        record_limit = mode is AcquireMode.RECORD_LIMIT
        last_to_acquire, max_to_acquire = self._limits(fetch_offset, max_records, last_batch.last_offset)
        if max_to_acquire <= 0:
            return out
        first_base = batches[0].base_offset
        self._archive_stale(fetch_offset, first_base, now_ms, out.events)
        base = first_base
        floor = self._floor(base)
        if floor is None:
            if base < self.start_offset:
                base = self.start_offset
        elif floor.last >= base:
            base = floor.first
        sub = self._sub(min(first_base, base), last_to_acquire)
        if not sub:
            self._acquire_new(member, batches, record_limit, base, last_to_acquire, batch_size,
                              max_to_acquire, now_ms, out)
            self._filter_aborted(read, batches, out, now_ms)
            out.events = merge_events(out.events)
            return out

        result: list[AcquiredRange] = []
        acquired = 0
        gap_cursor = base
        for b in sub:
            if acquired >= max_to_acquire:
                break
            # an offset range inside the cache that no batch covers: never delivered
            hole_first = max(gap_cursor, self.start_offset)
            if hole_first < b.first:
                got = Acquired()
                self._acquire_new(member, batches, record_limit, hole_first, b.first - 1, batch_size,
                                  max_to_acquire - acquired, now_ms, got)
                result.extend(got.records)
                out.events.extend(got.events)
                acquired += got.count
            gap_cursor = b.last + 1
            if acquired >= max_to_acquire:
                break
            full = b.first >= first_base and b.last <= last_to_acquire
            remaining = max_to_acquire - acquired
            subset_limit = record_limit and (b.last - b.first + 1) > remaining
            throttle = self._should_throttle(b, first_base, last_to_acquire)
            if throttle and acquired > 0:
                # a record close to the limit goes out in a fetch of its own (shouldThrottleRecordsDelivery)
                max_to_acquire = 0
                break
            if not full or b.offsets is not None or subset_limit or throttle:
                if b.offsets is None:
                    assert b.whole is not None
                    if b.whole.state is not RecordState.AVAILABLE:
                        continue
                    b.split()
                n = self._acquire_subset(member, record_limit, remaining, first_base, last_to_acquire,
                                         b, result, now_ms, out.events)
                acquired += n
                if throttle and n > 0:
                    max_to_acquire = 0
                    break
                continue
            assert b.whole is not None
            if b.whole.state is not RecordState.AVAILABLE:
                continue
            b.whole.acquire(member, now_ms + self.config.record_lock_duration_ms)
            result.append(AcquiredRange(b.first, b.last, b.whole.delivery_count))
            self._event(out.events, b.first, b.last, Action.ACQUIRED, member, now_ms, b.whole)
            acquired += b.last - b.first + 1
        if acquired < max_to_acquire and sub[-1].last < last_to_acquire:
            got = Acquired()
            self._acquire_new(member, batches, record_limit, sub[-1].last + 1, last_to_acquire,
                              batch_size, max_to_acquire - acquired, now_ms, got)
            result.extend(got.records)
            out.events.extend(got.events)
        out.records = result
        if result:
            self._filter_aborted(read, batches, out, now_ms)
        out.events = merge_events(out.events)
        return out

    def _limits(self, fetch_offset: int, max_records: int, last_offset: int) -> tuple[int, int]:
        """lastOffsetAndMaxRecordsToAcquire: the in-flight limit caps new records; at the limit
        only records inside the cached range can be acquired again."""
        last = last_offset
        n = min(max_records, self.config.max_record_locks - self.in_flight_count())
        if n <= 0 and fetch_offset <= self.end_offset:
            n = min(max_records, self.end_offset - fetch_offset + 1)
            last = min(last_offset, self.end_offset)
        return last, n

    def _acquire_new(self, member: str, batches: Sequence[LogBatch], record_limit: bool, first: int,
                     last: int, batch_size: int, max_records: int, now_ms: int, out: Acquired) -> None:
        """acquireNewBatchRecords + createBatches: records no cached batch covers."""
        if not self._batches and self.end_offset > first:
            first = self.end_offset
        if first > last:
            return
        last_acquired = last
        if max_records < last - first + 1:
            # batch_optimized rounds up to the end of the log batch holding the max-th record
            # (lastOffsetFromBatchWithRequestOffset); record_limit cuts below
            last_acquired = _last_of_batch_holding(batches, first + max_records - 1)
            if last_acquired > last:
                last_acquired = last
        deadline = now_ms + self.config.record_lock_duration_ms
        ranges: list[tuple[int, int]] = []
        cur = first
        if not record_limit and last_acquired - first + 1 > batch_size:
            for lb in batches:
                if lb.base_offset > last_acquired:
                    break
                if lb.base_offset - cur >= batch_size:
                    ranges.append((cur, lb.base_offset - 1))
                    cur = lb.base_offset
        ranges.append((cur, last_acquired))
        if record_limit and last_acquired - first + 1 > max_records:
            # one cached batch: the first max_records acquired, the rest AVAILABLE with count 0
            # (InFlightBatch.maybeInitializeOffsetStateUpdate(lastOffset, delayMs))
            cut = first + max_records - 1
            b = _Batch(first, last_acquired, None, {})
            assert b.offsets is not None
            for o in range(first, last_acquired + 1):
                b.offsets[o] = (_State(RecordState.ACQUIRED, 1, member, deadline) if o <= cut
                                else _State(RecordState.AVAILABLE, 0))
            self._insert(b)
            out.records.append(AcquiredRange(first, cut, 1))
            out.events.append(HistoryEvent(first, cut, Action.ACQUIRED, member, now_ms,
                                           RecordState.ACQUIRED, 1, deadline))
        else:
            for lo, hi in ranges:
                st = _State(RecordState.ACQUIRED, 1, member, deadline)
                self._insert(_Batch(lo, hi, st))
                out.records.append(AcquiredRange(lo, hi, 1))
                self._event(out.events, lo, hi, Action.ACQUIRED, member, now_ms, st)
        if self._firsts[0] == first:
            # the cache begins here: a fresh start past holes in the log
            self.start_offset = first
        if last_acquired > self.end_offset:
            self.end_offset = last_acquired

    def _should_throttle(self, b: _Batch, req_first: int, req_last: int) -> bool:
        limit = self.config.throttle_from
        if b.offsets is None:
            assert b.whole is not None
            return b.whole.state is RecordState.AVAILABLE and b.whole.delivery_count >= limit
        counts = [st.delivery_count for o, st in b.offsets.items()
                  if req_first <= o <= req_last and st.state is RecordState.AVAILABLE]
        return max(counts, default=0) >= limit

    def _acquire_subset(self, member: str, record_limit: bool, max_records: int, req_first: int,
                        req_last: int, b: _Batch, result: list[AcquiredRange], now_ms: int,
                        events: list[HistoryEvent]) -> int:
        """acquireSubsetBatchRecords: per offset, with Kafka's throttling — from the throttle
        count on, at most ``len(batch) >> (count - throttle + 1)`` records (at least one), and a
        record on its last attempt (limit > 2) alone."""
        assert b.offsets is not None
        limit = self.config.delivery_count_limit
        throttle_from = self.config.throttle_from
        acquired = 0
        cap = -1
        throttled = False
        got: list[AcquiredRange] = []
        deadline = now_ms + self.config.record_lock_duration_ms
        for o, st in b.offsets.items():
            if o < req_first:
                continue
            if o > req_last:
                break
            if st.state is not RecordState.AVAILABLE:
                continue
            count = st.delivery_count
            if limit > 2 and count == limit - 1 and acquired > 0:
                break  # its last attempt goes out alone, in the next fetch
            if count >= throttle_from and cap < 0:
                cap = max(1, len(b.offsets) >> (count - throttle_from + 1))
                throttled = True
            st.acquire(member, deadline)
            got.append(AcquiredRange(o, o, st.delivery_count))
            self._event(events, o, o, Action.ACQUIRED, member, now_ms, st)
            acquired += 1
            if st.delivery_count == limit and limit > 2:
                break
            if record_limit and acquired == max_records:
                break
            if throttled and acquired == cap:
                break
        result.extend(merge_ranges(got))
        return acquired

    def _archive_stale(self, fetch_offset: int, base: int, now_ms: int, events: list[HistoryEvent]) -> None:
        """maybeArchiveStaleBatches: the log read began past the fetch offset (the records in
        between are gone from the log), so AVAILABLE records there can never be delivered."""
        if not self._batches or fetch_offset >= base:
            return
        self._archive_range(fetch_offset, base - 1, RecordState.AVAILABLE, Action.NOT_IN_LOG, now_ms, events)

    def _archive_range(self, first: int, last: int, initial: RecordState, action: str, now_ms: int,
                       events: list[HistoryEvent]) -> None:
        """archiveRecords: records of ``initial`` state in [first, last] become ARCHIVED."""
        floor = self._floor(first)
        lo = floor.first if floor is not None and floor.last >= first else first
        for b in self._sub(lo, last):
            if b.offsets is None and b.first >= first and b.last <= last:
                assert b.whole is not None
                if b.whole.state is initial:
                    member = b.whole.member
                    b.whole.archive()
                    self._event(events, b.first, b.last, action, member, now_ms, b.whole)
                continue
            if b.offsets is None:
                assert b.whole is not None
                if b.whole.state is not initial:
                    continue
                b.split()
            assert b.offsets is not None
            for o, st in b.offsets.items():
                if first <= o <= last and st.state is initial:
                    member = st.member
                    st.archive()
                    self._event(events, o, o, action, member, now_ms, st)

    def _filter_aborted(self, read: LogRead, batches: Sequence[LogBatch], out: Acquired, now_ms: int) -> None:
        """maybeFilterAbortedTransactionalAcquiredRecords: under read_committed, acquired records
        of aborted transactions are archived at once and left out of AcquiredRecords."""
        if not read.read_committed or not read.aborted or not out.records:
            return
        pending = sorted(read.aborted, key=lambda a: a.first_offset)
        i = 0
        aborted_pids: set[int] = set()
        to_archive: list[LogBatch] = []
        for lb in batches:
            if lb.producer_id < 0:
                continue
            while i < len(pending) and pending[i].first_offset <= lb.last_offset:
                aborted_pids.add(pending[i].producer_id)
                i += 1
            if lb.control and lb.abort_marker:
                aborted_pids.discard(lb.producer_id)
                continue
            if lb.transactional and lb.producer_id in aborted_pids:
                to_archive.append(lb)
        if not to_archive:
            return
        for lb in to_archive:
            self._archive_range(lb.base_offset, lb.last_offset, RecordState.ACQUIRED, Action.ABORTED_TXN,
                                now_ms, out.events)
        kept: list[AcquiredRange] = []
        for r in out.records:
            pieces = [(r.first_offset, r.last_offset)]
            for lb in to_archive:
                nxt: list[tuple[int, int]] = []
                for lo, hi in pieces:
                    if hi < lb.base_offset or lo > lb.last_offset:
                        nxt.append((lo, hi))
                        continue
                    if lo < lb.base_offset:
                        nxt.append((lo, lb.base_offset - 1))
                    if hi > lb.last_offset:
                        nxt.append((lb.last_offset + 1, hi))
                pieces = nxt
            kept.extend(AcquiredRange(lo, hi, r.delivery_count) for lo, hi in pieces)
        out.records = kept

    # ------------------------------------------------------------------ acknowledge

    def check_acknowledge(self, member: str, batches: Sequence[AckBatch], now_ms: int) -> Outcome:
        """What :meth:`acknowledge` would answer, changing no record state (a batch may split,
        as the acknowledgement itself would split it)."""
        return self.acknowledge(member, batches, now_ms, dry_run=True)

    def acknowledge(self, member: str, batches: Sequence[AckBatch], now_ms: int, *,
                    dry_run: bool = False) -> Outcome:
        """SharePartition.acknowledge: every batch of the request or none. Batches entirely
        below the start offset are skipped silently (their records are already done with)."""
        undo: list[tuple[_State, _State]] = []
        persist: list[StateBatch] = []
        events: list[HistoryEvent] = []
        try:
            for ab in batches:
                for t in ab.types:
                    if t not in _VALID_ACK_TYPES:
                        raise _Refused(ErrorCode.invalid_request,
                                       "Invalid acknowledge type: [" + ", ".join(map(str, ab.types)) + "]")
                if ab.last_offset < self.start_offset:
                    continue
                sub = self._sub_for_ack(ab)
                self._ack_batch(member, ab, sub, now_ms, undo, persist, events, dry_run)
        except _Refused as refused:
            _roll_back(undo)
            return Outcome(error=refused.error)
        if dry_run:
            _roll_back(undo)
            return Outcome()
        return self._commit(persist, events)

    def _sub_for_ack(self, ab: AckBatch) -> list[_Batch]:
        """fetchSubMapForAcknowledgementBatch."""
        floor = self._floor(ab.first_offset)
        if floor is None:
            if ab.first_offset < self.start_offset <= ab.last_offset:
                floor = self._floor(self.start_offset)
            if floor is None:
                raise _refuse_state(NOT_FOUND)
        sub = self._sub(floor.first, ab.last_offset)
        if sub[-1].last < ab.first_offset:
            raise _Refused(ErrorCode.invalid_request, FIRST_PAST)
        if ab.last_offset > sub[-1].last:
            raise _Refused(ErrorCode.invalid_request, LAST_PAST)
        return sub

    def _ack_batch(self, member: str, ab: AckBatch, sub: list[_Batch], now_ms: int,
                   undo: list[tuple[_State, _State]], persist: list[StateBatch],
                   events: list[HistoryEvent], dry_run: bool = False) -> None:
        """acknowledgeBatchRecords."""
        for b in sub:
            if b.last < self.start_offset:
                continue
            if b.offsets is None:
                assert b.whole is not None
                if b.whole.member == NO_MEMBER:
                    raise _refuse_state(BATCH_NOT_ACQUIRED)
                if b.whole.member != member:
                    raise _refuse_state(NOT_OWNER_BATCH)
            full = b.first >= ab.first_offset and b.last <= ab.last_offset
            per_offset = len(ab.types) > 1
            start_inside = b.first < self.start_offset <= b.last
            if not full or b.offsets is not None or per_offset or start_inside:
                if b.offsets is None:
                    assert b.whole is not None
                    if b.whole.state is not RecordState.ACQUIRED:
                        raise _refuse_state(SUBSET_NOT_ACQUIRED)
                    b.split()
                assert b.offsets is not None
                for o, st in b.offsets.items():
                    if o < ab.first_offset or o < self.start_offset:
                        continue
                    if o > ab.last_offset:
                        break
                    if st.state is not RecordState.ACQUIRED:
                        raise _refuse_state(OFFSET_NOT_ACQUIRED)
                    if st.member != member:
                        raise _refuse_state(NOT_OWNER_OFFSET)
                    t = ab.types[o - ab.first_offset] if per_offset else ab.types[0]
                    self._ack_one(member, o, o, st, t, now_ms, undo, persist, events, dry_run)
            else:
                assert b.whole is not None
                if b.whole.state is not RecordState.ACQUIRED:
                    raise _refuse_state(BATCH_NOT_ACQUIRED)
                self._ack_one(member, b.first, b.last, b.whole, ab.types[0], now_ms, undo, persist, events,
                              dry_run)

    def _ack_one(self, member: str, first: int, last: int, st: _State, ack_type: int, now_ms: int,
                 undo: list[tuple[_State, _State]], persist: list[StateBatch],
                 events: list[HistoryEvent], dry_run: bool = False) -> None:
        if ack_type == AckType.RENEW:
            if not self.config.renew_enabled:
                raise _refuse_state(RENEW_DISABLED)
            if dry_run:
                return
            # Kafka restarts the lock timer at once and a later refusal in the same request
            # does not undo it (only the persister batches roll back); nothing is persisted
            st.deadline_ms = now_ms + self.config.record_lock_duration_ms
            self._event(events, first, last, Action.RENEWED, member, now_ms, st)
            return
        before = st.copy()
        undo.append((st, before))
        target = _ACK_TARGET[AckType(ack_type)]
        st.move(target, self.config.delivery_count_limit)
        persist.append(StateBatch(first, last, st.state, st.delivery_count))
        # SharePartition.acknowledgeBatchRecords: REJECT is CLIENT_REJECT; a RELEASE turned
        # into ARCHIVED by the limit is DELIVERY_COUNT_EXCEEDED (GAP is neither)
        cause = (DLQ_CLIENT_REJECT if ack_type == AckType.REJECT
                 else DLQ_DELIVERY_COUNT_EXCEEDED
                 if target is RecordState.AVAILABLE and st.state is RecordState.ARCHIVED else None)
        events.append(HistoryEvent(first, last, _ACK_ACTION[AckType(ack_type)], member, now_ms, st.state,
                                   st.delivery_count, before.deadline_ms, cause))

    # ------------------------------------------------------------------ release, expiry

    def release_member(self, member: str, now_ms: int) -> Outcome:
        """releaseAcquiredRecords: the member's session closed or it left the group; what it
        holds goes back (or to ARCHIVED at the delivery limit, or below the start offset)."""
        return self._give_back(now_ms, Action.MEMBER_RELEASED,
                               lambda st: st.state is RecordState.ACQUIRED and st.member == member)

    def expire(self, now_ms: int) -> Outcome:
        """releaseAcquisitionLockOnTimeout for every lock whose deadline has passed."""
        def due(st: _State) -> bool:
            return (st.state is RecordState.ACQUIRED and st.deadline_ms is not None
                    and st.deadline_ms <= now_ms)
        return self._give_back(now_ms, Action.LOCK_EXPIRED, due)

    def _give_back(self, now_ms: int, action: str, pick: Callable[[_State], bool]) -> Outcome:
        persist: list[StateBatch] = []
        events: list[HistoryEvent] = []
        limit = self.config.delivery_count_limit
        for b in self._batches:
            if (b.offsets is None and b.whole is not None and pick(b.whole)
                    and b.first < self.start_offset <= b.last):
                b.split()
            for first, last, st in list(b.states()):
                if not pick(st):
                    continue
                member, deadline = st.member, st.deadline_ms
                below = last < self.start_offset
                st.move(RecordState.ARCHIVED if below else RecordState.AVAILABLE, limit)
                persist.append(StateBatch(first, last, st.state, st.delivery_count))
                # InFlightState.tryUpdateState: only the limit on the way back to AVAILABLE
                # goes through the dead-letter queue, not an offset below the start
                cause = (DLQ_DELIVERY_COUNT_EXCEEDED
                         if not below and st.state is RecordState.ARCHIVED else None)
                # the event keeps the lock deadline that was given up, for "expired at …"
                events.append(HistoryEvent(first, last, action, member, now_ms, st.state,
                                           st.delivery_count, deadline, cause))
        return self._commit(persist, events)

    # ------------------------------------------------------------------ offsets

    def update_log_start(self, log_start_offset: int, now_ms: int) -> Outcome:
        """updateCacheAndOffsets: the log's start moved past the share partition's (retention,
        DeleteRecords); AVAILABLE records below it are archived, nothing is persisted (Kafka
        writes the new start offset with the next state write)."""
        out = Outcome()
        if log_start_offset <= self.start_offset:
            return out
        if not self._batches:
            self.start_offset = self.end_offset = log_start_offset
            return out
        self._archive_range(self.start_offset, log_start_offset - 1, RecordState.AVAILABLE,
                            Action.LOG_START_MOVED, now_ms, out.events)
        self.start_offset = log_start_offset
        if self.end_offset < self.start_offset:
            self.end_offset = self.start_offset
        out.events = merge_events(out.events)
        return out

    def _commit(self, persist: list[StateBatch], events: list[HistoryEvent]) -> Outcome:
        out = Outcome(events=merge_events(events))
        if persist:
            out.update = ShareUpdate(self.start_offset, self.delivery_complete_count(),
                                     _merge_state_batches(sorted(persist, key=lambda s: s.first_offset)))
            self._move_start()
        return out

    def _move_start(self) -> None:
        """maybeUpdateCachedStateAndOffsets: past the longest terminal prefix of the cache."""
        if not self._batches:
            return
        at = self._batch_at(self.start_offset)
        if at is None:
            return  # a never-delivered hole at the start
        st = at.whole if at.offsets is None else at.offsets[self.start_offset]
        assert st is not None
        if not st.state.terminal:
            return
        last_done = -1
        expect = self._batches[0].first
        for b in self._batches:
            if b.first != expect:
                break  # a hole stops it (Kafka's gap window)
            stop = False
            for _first, last, s in b.states():
                if not s.state.terminal:
                    stop = True
                    break
                last_done = last
            if stop:
                break
            expect = b.last + 1
        if last_done == -1:
            return
        if last_done == self._batches[-1].last:
            self.start_offset = self.end_offset = last_done + 1
            self._batches.clear()
            self._firsts.clear()
            return
        if last_done + 1 > self.start_offset:
            self.start_offset = last_done + 1
        keep = [b for b in self._batches if b.last > last_done]
        self._batches = keep
        self._firsts = [b.first for b in keep]


def _roll_back(undo: list[tuple[_State, _State]]) -> None:
    for st, before in reversed(undo):
        st.state, st.delivery_count, st.member, st.deadline_ms = (
            before.state, before.delivery_count, before.member, before.deadline_ms)


def _last_of_batch_holding(batches: Sequence[LogBatch], offset: int) -> int:
    """lastOffsetFromBatchWithRequestOffset."""
    prev: LogBatch | None = None
    for lb in batches:
        if offset < lb.base_offset:
            break
        prev = lb
    if prev is not None and offset <= prev.last_offset:
        return prev.last_offset
    return offset


# ---------------------------------------------------------------------- share.auto.offset.reset

_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
    r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)


@dataclass(frozen=True)
class AutoOffsetReset:
    """``share.auto.offset.reset`` (group-coordinator ShareGroupAutoOffsetResetStrategy):
    ``latest`` (the default), ``earliest`` or ``by_duration:<ISO-8601 duration>``."""
    kind: str  # "latest" | "earliest" | "by_duration"
    duration_ms: int = 0

    def timestamp(self, now_ms: int) -> int:
        """by_duration: the timestamp whose offset the caller looks up (ListOffsets semantics)."""
        return now_ms - self.duration_ms

    @classmethod
    def parse(cls, value: str) -> AutoOffsetReset:
        text = value.strip().lower()
        if text in ("latest", "earliest"):
            return cls(text)
        if text.startswith("by_duration:"):
            ms = _parse_duration_ms(value.strip()[len("by_duration:"):])
            if ms is not None and ms >= 0:
                return cls("by_duration", ms)
        raise ValueError(f"Invalid value `{value}` for configuration share.auto.offset.reset. The value "
                         "must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


def _parse_duration_ms(text: str) -> int | None:
    """java.time.Duration.parse (PnDTnHnMn.nS), in milliseconds; None when it is not one."""
    m = _DURATION.fullmatch(text)
    if m is None:
        return None
    sign, days, time_part, hours, minutes, secs, frac = m.groups()
    if time_part is not None and not any((hours, minutes, secs)):
        return None  # "PT" with nothing after it
    if not any((days, hours, minutes, secs)):
        return None
    total_ms = (int(days or 0) * 86_400_000 + int(hours or 0) * 3_600_000
                + int(minutes or 0) * 60_000 + int(secs or 0) * 1000)
    if frac:
        frac_ms = int((frac + "000")[:3])
        total_ms += -frac_ms if (secs or "").startswith("-") else frac_ms
    return -total_ms if sign == "-" else total_ms
