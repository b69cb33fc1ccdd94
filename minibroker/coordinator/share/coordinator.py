"""The share coordinator and the share partitions of this broker, on an event loop.

Theory of operation
-------------------
Kafka splits share groups over three parts: the group coordinator (membership, ShareGroupHeartbeat,
``__consumer_offsets`` records 10-15), the share coordinator (``__share_group_state``, the persisted
state of every share partition) and the SharePartitionManager on each partition leader (sessions,
acquisition locks, acknowledgements). With one minibroker process all three live here, around the
pure cores of this package:

* :class:`~.group.ShareGroups` answers heartbeats; its records are written through the group
  coordinator's ``__consumer_offsets`` appender and come back at start-up through
  :meth:`ShareCoordinator.replay_group_record`. The InitializeShareGroupState a heartbeat asks for
  is done at once, in process: a ShareSnapshot with start offset -1 (or 0 for partitions added to a
  known topic) is written unless the partition already has state, and the partitions become
  initialized. The first answer still carries an empty assignment, as Kafka's does.
* a :class:`~.partition.SharePartition` per (group, topic, partition) is built on first use from
  the replayed ``__share_group_state`` (an unknown start offset resolved with the group's
  ``share.auto.offset.reset`` against the log), and fed log reads (up to the LSO, with the aborted
  transactions, under ``share.isolation.level=read_committed``).
* every write of a share partition (acknowledgements, releases, lock expiries) appends a full
  ShareSnapshot of it to ``__share_group_state``. Kafka appends ShareUpdate deltas and folds them
  into a snapshot every 500; one snapshot per write is the same state at replay, and no delta
  combiner can disagree with the cache.
* ``__share_group_state`` is not compacted: Kafka creates it with ``cleanup.policy=delete`` and
  ``retention.ms=-1`` (ShareCoordinatorService.shareGroupStateTopicConfigs) and every
  ``share.coordinator.state.topic.prune.interval.ms`` (5 min) deletes the records below each
  partition's last redundant offset (ShareCoordinatorShard.lastRedundantOffset, through
  DeleteRecords): the lowest offset of a share partition's newest snapshot, or the log end when
  every share partition there is deleted. The same here, on the broker's clock, so the replay at
  start-up reads only newest snapshots and what came after them.
  What the snapshot holds is what Kafka's persister holds: acquired records as AVAILABLE with
  the count they had before their acquisition, so a crash gives them back.
* lock deadlines and session timeouts are deadlines on the broker's clock
  (:class:`~minibroker.coordinator.timers.Deadlines`), run from one loop timer.

As Kafka's, the persisted start offset is the one a write carries, from before the write moved
it: DescribeShareGroupOffsets reads the persisted state and so trails the partition by one write,
with the records in between kept as terminal state batches (a restart does not redeliver them).
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import dataclasses
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from minibroker_protocol import share_log as sl
from minibroker_protocol.batch import iter_headers
from minibroker_protocol.records import build_batch, decode_batch, parse_control_record
from minibroker_protocol.topics import SHARE_GROUP_STATE_TOPIC
from minibroker_storage.lazylog import get_logger

from ...core.clock import SYSTEM_CLOCK, Clock
from ...core.java_hash import java_string_hash
from .. import replay
from ..internal_topics import SHARE_STATE_PARTITIONS
from ..timers import Deadline, Deadlines
from .dlq import DeadLetterQueues
from .dlq import entries as dlq_entries
from .group import HeartbeatAnswer, Record, ShareGroups, ShareGroupSettings, TopicMetadata
from .partition import (
    AbortedTxn,
    AckBatch,
    Acquired,
    AcquireMode,
    Action,
    AutoOffsetReset,
    HistoryEvent,
    LogBatch,
    LogRead,
    Outcome,
    ShareConfig,
    SharePartition,
    ShareUpdate,
    StateBatch,
    merge_events,
)
from .record_state import RecordState
from .sessions import ShareSession, ShareSessionCache

log = get_logger("minibroker.share")

STATE_PARTITIONS = SHARE_STATE_PARTITIONS
PRUNE_INTERVAL_MS = 5 * 60 * 1000  # Kafka's share.coordinator.state.topic.prune.interval.ms
READ_MAX_BYTES = 8 * 1024 * 1024  # one partition's read per ShareFetch
FIRST_READ_BYTES = 256 * 1024  # tried first when that can acquire the same (see read)
_EMPTY_READ = memoryview(b"")


class History(Protocol):
    def record(self, group: str, topic: str, partition: int, events: list[HistoryEvent],
               delivery_limit: int | None = None) -> None: ...


class NoHistory:
    def record(self, group: str, topic: str, partition: int, events: list[HistoryEvent],
               delivery_limit: int | None = None) -> None:
        pass


@dataclass
class Persisted:
    """What ``__share_group_state`` holds for one share partition."""
    start_offset: int
    batches: tuple[StateBatch, ...] = ()
    snapshot_epoch: int = 0
    state_epoch: int = 0
    create_ms: int = 0
    # the DeliveryCompleteCount the last write carried (the share partition's in-memory count of
    # terminal records from the write's start offset on, SharePartition.deliveryCompleteCount);
    # -1 when no write said, then counted from the batches
    delivery_complete_count: int = -1


@dataclass
class SharePartitionView:
    """One share partition for the handlers: the machine and the topic id it belongs to."""
    sp: SharePartition
    topic_id: uuid.UUID
    waiting: set[Any] = field(default_factory=set)


def state_partition_for(group_id: str, topic_id: uuid.UUID, partition: int) -> int:
    """ShareCoordinator's partitionFor: the hash of the key ``group:topicId:partition``
    (SharePartitionKey.asCoordinatorKey) over the state topic's partitions."""
    # Kafka's Uuid.toString: URL-safe base64 without padding
    tid = base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()
    key = f"{group_id}:{tid}:{partition}"
    return (java_string_hash(key) & 0x7FFFFFFF) % STATE_PARTITIONS


class ShareCoordinator:
    """Share groups, share sessions and share partitions of one broker.

    ``logs``: the log manager; ``state_log(partition)``: a ``__share_group_state`` partition,
    created on first use; ``write_group_records(group_id, records)``: appends share records to
    ``__consumer_offsets`` through the group coordinator; ``group_config(group, name)``: the
    group's config or the broker default; ``notify(topic, partition)``: wakes waiting share
    fetches; ``history``: where every change of a record's state is told."""

    def __init__(self, *, logs: Any, state_log: Callable[[int], Any],
                 write_group_records: Callable[[str, list[tuple[bytes, bytes | None]]], None],
                 group_config: Callable[[str, str], str], clock: Clock = SYSTEM_CLOCK,
                 notify: Callable[[str, int], None] = lambda t, p: None,
                 is_other_group: Callable[[str], bool] = lambda g: False,
                 history: History | None = None, max_sessions: int = 2000,
                 prune_interval_ms: int = PRUNE_INTERVAL_MS,
                 dlq: DeadLetterQueues | None = None,
                 leads: Callable[[int | None, str, int], bool] = lambda node, t, p: True) -> None:
        self.logs = logs
        # leads(node, topic, partition): whether that broker leads the partition now (virtual
        # brokers); a session on a broker that lost the lead has nothing there to release
        self.leads = leads
        # where archived records go first when the group has a DLQ topic (share.version 2)
        self.dlq = dlq
        self.clock = clock
        self._state_log = state_log
        self._append_group_records = write_group_records
        self.group_config = group_config
        self.notify = notify
        self.history: History = history if history is not None else NoHistory()
        self.timers = Deadlines(clock.monotonic)
        self.groups = ShareGroups(clock=clock, timers=self.timers, topics=self._topic_metadata,
                                  settings=self._settings, is_other_group=is_other_group)
        self.sessions = ShareSessionCache(max_sessions)
        self.persisted: dict[tuple[str, uuid.UUID, int], Persisted] = {}
        self.partitions: dict[tuple[str, str, int], SharePartitionView] = {}
        self._lock_timers: dict[tuple[str, str, int], Deadline] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        # per __share_group_state partition: each live share partition's newest snapshot offset
        self._newest: dict[int, dict[tuple[str, uuid.UUID, int], int]] = {}
        self._prune_interval_ms = prune_interval_ms
        self._stopping = False  # stop_serving: a shutdown's disconnects release nothing

    # ---- configuration -------------------------------------------------------------------
    def _int(self, group_id: str, name: str) -> int:
        return int(self.group_config(group_id, name))

    def _settings(self, group_id: str) -> ShareGroupSettings:
        return ShareGroupSettings(
            session_timeout_ms=self._int(group_id, "share.session.timeout.ms"),
            heartbeat_interval_ms=self._int(group_id, "share.heartbeat.interval.ms"),
            assignment_interval_ms=self._int(group_id, "share.assignment.interval.ms"))

    def share_config(self, group_id: str) -> ShareConfig:
        return ShareConfig(
            record_lock_duration_ms=self._int(group_id, "share.record.lock.duration.ms"),
            delivery_count_limit=self._int(group_id, "share.delivery.count.limit"),
            max_record_locks=self._int(group_id, "share.partition.max.record.locks"),
            renew_enabled=self.group_config(group_id, "share.renew.acknowledge.enable").lower() == "true")

    def lock_duration_ms(self, group_id: str) -> int:
        return self._int(group_id, "share.record.lock.duration.ms")

    def read_committed(self, group_id: str) -> bool:
        return self.group_config(group_id, "share.isolation.level") == "read_committed"

    def _topic_metadata(self) -> TopicMetadata:
        return {t.name: (t.topic_id, t.partitions) for t in self.logs.topics()
                if not t.name.startswith("__")}

    # ---- time ----------------------------------------------------------------------------
    def start(self) -> None:
        self.groups.on_loaded()
        self.timers.call_later(self._prune_interval_ms, self._prune_timer)
        self._arm()

    def _prune_timer(self) -> None:
        self.prune()
        self.timers.call_later(self._prune_interval_ms, self._prune_timer)

    def prune(self) -> dict[int, int]:
        """Delete each ``__share_group_state`` partition's records below its last redundant
        offset; the partitions whose log start moved, with the new start."""
        targets: dict[tuple[str, int], int] = {}
        for p, newest in sorted(self._newest.items()):
            plog = self._state_log(p)
            redundant = min(newest.values()) if newest else plog.log_end_offset
            if redundant > plog.log_start_offset:
                targets[(SHARE_GROUP_STATE_TOPIC, p)] = redundant
            if not newest:
                del self._newest[p]
        # through the log manager: the new starts are checkpointed before anything relies on them
        moved = {p: o for (_, p), o in self.logs.delete_records(targets).items()} if targets else {}
        if moved:
            log.info("share_state.pruned", partitions=len(moved),
                     log_start_offsets={str(p): o for p, o in moved.items()})
        return moved

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._timer_at = None

    def poll(self) -> None:
        """Run what is due (loop timer, or the control plane moved the clock)."""
        self.timers.run_due()
        self._flush_group_records()
        self._arm()

    def _arm(self) -> None:
        at = self.timers.next_at()
        if at == self._timer_at and (at is None or self._timer is not None):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._timer_at = None
        if at is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._timer_at = at
        self._timer = loop.call_later(max(at - self.clock.monotonic(), 0.0), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = self._timer_at = None
        self.poll()

    def _flush_group_records(self) -> None:
        records = self.groups.take_records()
        if records:
            self._write_by_group(records)

    def _write_group_records(self, group_id: str, records: list[Record]) -> None:
        self._append_group_records(group_id, [
            (sl.encode_group_key(k), None if v is None else sl.encode_value(v)) for k, v in records])

    def _write_by_group(self, records: list[Record]) -> None:
        by_group: dict[str, list[Record]] = {}
        for key, value in records:
            by_group.setdefault(key.group_id, []).append((key, value))
        for gid, recs in by_group.items():
            self._write_group_records(gid, recs)

    # ---- replay at start-up ----------------------------------------------------------------
    def replay_group_record(self, key: bytes, value: bytes | None) -> str | None:
        """One share record of ``__consumer_offsets``; why it cannot be applied, if so."""
        try:
            k = sl.decode_key(key)
            if not isinstance(k, sl.ShareGroupKey):
                return "not a share group key"
            v = None if value is None else sl.decode_value(k.record_type, value)
        except (sl.ShareLogFormatError, ValueError) as e:
            return str(e)
        self.groups.replay(k, v, self.clock.wall_ms())
        return None

    def snapshot_records(self) -> list[tuple[bytes, bytes]]:
        """The share groups as the records that rebuild them, for the group coordinator's
        snapshot (a replay starting after it must still find them)."""
        out: list[Record] = []
        g_ = self.groups
        for gid, g in sorted(g_.groups.items()):
            out.append(g_._group_record(gid, g.group_epoch, g.metadata_hash))
            out.append((sl.ShareGroupKey(sl.SHARE_TARGET_ASSIGNMENT_METADATA, gid),
                        sl.TargetAssignmentMetadataValue(g.assignment_epoch, g.assignment_timestamp)))
            out.append(g_._state_record(gid, g.initializing, g.initialized, g.deleting))
            for mid in g.member_order.keys():
                m = g.members.get(mid)
                if m is None:
                    continue
                out.append(g_._member_record(gid, m))
                out.append(g_._current_record(gid, m))
            for mid, target in g.target.items():
                out.append((sl.ShareGroupKey(sl.SHARE_TARGET_ASSIGNMENT_MEMBER, gid, mid),
                            sl.TargetAssignmentMemberValue(
                                tuple((t, tuple(sorted(ps))) for t, ps in sorted(target.items())))))
        return [(sl.encode_group_key(k), sl.encode_value(v)) for k, v in out if v is not None]

    def load(self) -> None:
        """Replay ``__share_group_state``: the newest snapshot of each share partition (a
        tombstone forgets it)."""
        if self.logs.topic(SHARE_GROUP_STATE_TOPIC) is None:
            return
        info = self.logs.topic(SHARE_GROUP_STATE_TOPIC)
        skips = replay.Skips()
        count = 0
        for p in range(info.partitions):
            plog = self.logs.get_log(SHARE_GROUP_STATE_TOPIC, p)
            if plog is None:
                continue
            for h, recs in replay.batches(plog, SHARE_GROUP_STATE_TOPIC, p, plog.log_start_offset,
                                          "share_state.record_skipped", skips):
                if h.is_control:
                    continue
                for rec in recs:
                    try:
                        key = sl.decode_key(rec.key)
                        if not isinstance(key, sl.ShareStateKey):
                            raise sl.ShareLogFormatError("not a share state key")
                        value = None if rec.value is None else sl.decode_value(key.record_type, rec.value)
                    except (sl.ShareLogFormatError, ValueError) as e:
                        log.warning("share_state.record_skipped", partition=p, offset=rec.offset,
                                    reason=str(e))
                        continue
                    count += 1
                    self._apply_state(key, value)
                    self._track(p, key, rec.offset, value is None)
        log.info("share.state_loaded", partitions=len(self.persisted), records=count)

    def _track(self, state_partition: int, key: sl.ShareStateKey, offset: int, tombstone: bool) -> None:
        newest = self._newest.setdefault(state_partition, {})
        k = (key.group_id, key.topic_id, key.partition)
        if tombstone:
            newest.pop(k, None)
        elif key.record_type == sl.SHARE_SNAPSHOT:
            newest[k] = offset
        # an update (Kafka's) needs the snapshot before it: the newest snapshot stays the bound

    def _apply_state(self, key: sl.ShareStateKey, value: Any) -> None:
        k = (key.group_id, key.topic_id, key.partition)
        if value is None:
            self.persisted.pop(k, None)
            return
        if isinstance(value, sl.ShareSnapshotValue):
            self.persisted[k] = Persisted(
                value.start_offset,
                tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                      for b in value.state_batches),
                value.snapshot_epoch, value.state_epoch, value.create_timestamp,
                value.delivery_complete_count)
        elif isinstance(value, sl.ShareUpdateValue):
            # Written by Kafka, never by this broker: newer batches replace what they overlap.
            old = self.persisted.get(k)
            if old is None:
                return
            merged = _overlay(old.batches, value.state_batches)
            self.persisted[k] = Persisted(value.start_offset if value.start_offset >= 0 else old.start_offset,
                                          tuple(b for b in merged if b.last_offset >= value.start_offset),
                                          old.snapshot_epoch, old.state_epoch, old.create_ms,
                                          value.delivery_complete_count)

    # ---- writing __share_group_state --------------------------------------------------------
    def _write_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                     state: Persisted) -> None:
        now = self.clock.wall_ms()
        key = sl.ShareStateKey(sl.SHARE_SNAPSHOT, group_id, topic_id, partition)
        value = sl.ShareSnapshotValue(
            snapshot_epoch=state.snapshot_epoch, state_epoch=state.state_epoch, leader_epoch=0,
            start_offset=state.start_offset, create_timestamp=state.create_ms or now,
            write_timestamp=now, delivery_complete_count=state.delivery_complete_count,
            state_batches=tuple(sl.StateBatch(b.first_offset, b.last_offset, int(b.delivery_state),
                                              b.delivery_count) for b in state.batches))
        batch = build_batch([{"key": sl.encode_state_key(key), "value": sl.encode_value(value)}])
        p = state_partition_for(group_id, topic_id, partition)
        info = self._state_log(p).append(batch, origin="coordinator")
        self.persisted[(group_id, topic_id, partition)] = state
        self._track(p, key, info.base_offset, False)

    def _tombstone(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        # Kafka's DeleteShareGroupState writes tombstones for both key types; only snapshots
        # are written here, so one tombstone forgets the partition (and the next prune
        # deletes it with the snapshots before it)
        key = sl.ShareStateKey(sl.SHARE_SNAPSHOT, group_id, topic_id, partition)
        p = state_partition_for(group_id, topic_id, partition)
        self._state_log(p).append(
            build_batch([{"key": sl.encode_state_key(key), "value": None}]), origin="coordinator")
        self.persisted.pop((group_id, topic_id, partition), None)
        self._track(p, key, 0, True)

    def _persist(self, view: SharePartitionView, update: ShareUpdate | None = None) -> None:
        """Write the partition's state as Kafka's persister holds it after this write: the
        start offset the write carries (the one before the write moved it, so it trails the
        partition's by one write) and every state batch from there on, merged over what was
        persisted before."""
        sp = view.sp
        k = (sp.group_id, view.topic_id, sp.partition)
        old = self.persisted.get(k)
        start = update.start_offset if update is not None else sp.start_offset
        batches: Iterable[StateBatch] = sp.snapshot_batches()
        if old is not None and update is not None:
            batches = _overlay(_overlay(old.batches, update.state_batches), batches)
        kept = []
        for b in batches:
            if b.last_offset < start:
                continue
            if b.first_offset < start:
                b = StateBatch(start, b.last_offset, b.delivery_state, b.delivery_count)
            kept.append(b)
        # Kafka's write carries the partition's own count, which also covers records archived
        # without a write of their own (aborted transactions: 6-7 in the read_committed case)
        dcc = update.delivery_complete_count if update is not None else sp.delivery_complete_count()
        state = Persisted(start, tuple(kept), (old.snapshot_epoch + 1) if old else 1,
                          old.state_epoch if old else 0, old.create_ms if old else 0, dcc)
        self._write_state(sp.group_id, view.topic_id, sp.partition, state)

    # ---- ShareGroupHeartbeat ----------------------------------------------------------------
    def heartbeat(self, **kw: Any) -> HeartbeatAnswer:
        answer = self.groups.heartbeat(**kw)
        if answer.records:
            self._write_group_records(kw["group_id"], answer.records)
        if answer.initialize is not None:
            self._initialize(answer.initialize.group_id, answer.initialize.topics)
        # A leave (epoch -1) leaves the member's share session alone, as in Kafka: sessions live in
        # the broker's ShareSessionCache, not the group coordinator, and end only with an epoch -1
        # ShareFetch/ShareAcknowledge or the connection's close (ShareSessionCache.java). Clients
        # send their leave heartbeat and their final ShareAcknowledge at once (librdkafka's close),
        # so ending the session here answered that acknowledgement SHARE_SESSION_NOT_FOUND.
        self._flush_group_records()
        self._arm()
        return answer

    def _initialize(self, group_id: str, topics: dict[uuid.UUID, tuple[frozenset[int], int]] | Any) -> None:
        """InitializeShareGroupState, in process: a snapshot per partition without state."""
        done: dict[uuid.UUID, list[int]] = {}
        for tid, (parts, start) in topics.items():
            for p in sorted(parts):
                if (group_id, tid, p) not in self.persisted:
                    self._write_state(group_id, tid, p, Persisted(start, (), 1, 1))
                done.setdefault(tid, []).append(p)
        records = self.groups.initialized(group_id, done)
        if records:
            self._write_group_records(group_id, records)
        log.info("share.partitions_initialized", group=group_id,
                 partitions=sum(len(v) for v in done.values()))

    def _member_gone(self, group_id: str, member_id: str) -> None:
        """A member closed its share session (epoch -1): the session goes and what it holds is
        released."""
        try:
            session = self.sessions.release(group_id, member_id)
        except Exception:
            session = None
        if session is not None:
            self._release_session(session)

    # ---- share partitions --------------------------------------------------------------------
    def topic_id_of(self, name: str) -> uuid.UUID | None:
        info = self.logs.topic(name)
        return info.topic_id if info is not None else None

    def partition(self, group_id: str, topic: str, partition: int) -> SharePartitionView | None:
        """The share partition, loaded on first use; None when the topic-partition is gone."""
        key = (group_id, topic, partition)
        view = self.partitions.get(key)
        info = self.logs.topic(topic)
        if info is None or partition >= info.partitions:
            return None
        if view is not None and view.topic_id == info.topic_id:
            view.sp.config = self.share_config(group_id)
            return view
        plog = self.logs.get_log(topic, partition)
        persisted = self.persisted.get((group_id, info.topic_id, partition))
        start = persisted.start_offset if persisted is not None else -1
        reset = None
        if start == -1:
            reset = self._reset_offset(group_id, plog)
        elif start < plog.log_start_offset:
            start = plog.log_start_offset
        try:
            sp = SharePartition.load(group_id, topic, partition, start,
                                     persisted.batches if persisted is not None and start != -1 else (),
                                     reset_offset=reset, config=self.share_config(group_id))
        except ValueError as e:
            log.error("share.state_unusable", group=group_id, topic=topic, partition=partition,
                      reason=str(e), action="start from the log start offset")
            sp = SharePartition(group_id, topic, partition, self.share_config(group_id),
                                plog.log_start_offset)
        view = SharePartitionView(sp, info.topic_id)
        self.partitions[key] = view
        # As Kafka's, loading writes nothing: the persisted start offset stays -1 (resolved again
        # after a restart) until the first acknowledgement, release or lock expiry writes.
        log.info("share.partition_loaded", group=group_id, topic=topic, partition=partition,
                 start_offset=sp.start_offset)
        return view

    def _reset_offset(self, group_id: str, plog: Any) -> int:
        try:
            reset = AutoOffsetReset.parse(self.group_config(group_id, "share.auto.offset.reset"))
        except ValueError:
            reset = AutoOffsetReset("latest")
        if reset.kind == "earliest":
            return int(plog.log_start_offset)
        if reset.kind == "latest":
            return int(plog.high_watermark)
        found = plog.offset_for_timestamp(reset.timestamp(self.clock.wall_ms()))
        return int(found[0]) if found is not None else int(plog.high_watermark)

    def _after(self, view: SharePartitionView, outcome: Outcome) -> None:
        sp = view.sp
        if outcome.events:
            # SharePartition.initiateDLQAndArchive: the DLQ write comes before the ARCHIVED
            # state is persisted (and a failed one does not stop it); the history says where
            # the records went
            found = dlq_entries(outcome.events) if self.dlq is not None else []
            if found:
                assert self.dlq is not None
                written = self.dlq.write(sp.group_id, sp.topic, sp.partition, found)
                if written is not None:
                    outcome.events = [dataclasses.replace(e, dlq_topic=written) if e.dlq_cause else e
                                      for e in outcome.events]
            self.history.record(sp.group_id, sp.topic, sp.partition, outcome.events,
                                delivery_limit=sp.config.delivery_count_limit)
        if outcome.update is not None:
            self._persist(view, outcome.update)
        self._arm_lock(view)

    def _arm_lock(self, view: SharePartitionView) -> None:
        sp = view.sp
        key = (sp.group_id, sp.topic, sp.partition)
        old = self._lock_timers.pop(key, None)
        if old is not None:
            old.cancel()
        at = sp.next_deadline_ms()
        if at is not None:
            delay = max(at - self.clock.wall_ms(), 0)
            self._lock_timers[key] = self.timers.call_later(delay, self._expire, key)
        self._arm()

    def _expire(self, key: tuple[str, str, int]) -> None:
        self._lock_timers.pop(key, None)
        view = self.partitions.get(key)
        if view is None:
            return
        outcome = view.sp.expire(self.clock.wall_ms())
        if outcome.events:
            log.info("share.locks_expired", group=key[0], topic=key[1], partition=key[2],
                     records=sum(e.last_offset - e.first_offset + 1 for e in outcome.events))
        self._after(view, outcome)
        self.notify(key[1], key[2])

    def read(self, view: SharePartitionView, max_bytes: int,
             max_records: int = 0) -> tuple[LogRead, bytes]:
        """The log read acquisition works from, at the partition's next fetch offset; with
        ``max_records``, possibly a shorter one that acquires the same."""
        sp = view.sp
        plog = self.logs.get_log(sp.topic, sp.partition)
        if plog.log_start_offset > sp.start_offset:
            self._after(view, sp.update_log_start(plog.log_start_offset, self.clock.wall_ms()))
        offset = max(sp.next_fetch_offset(), plog.log_start_offset)
        committed = self.read_committed(sp.group_id)
        lso = plog.last_stable_offset
        upper = lso if committed else plog.high_watermark
        if offset >= upper:
            return LogRead((), committed, lso if committed else None), b""
        limit = max(1, min(max_bytes, READ_MAX_BYTES))
        data, after = _EMPTY_READ, offset
        if 0 < max_records and FIRST_READ_BYTES < limit and (sp.in_flight_count() == 0
                                                           or offset > sp.end_offset):
            # Only records never delivered from here on: acquisition takes at most max_records
            # of them, rounded up to the end of a log batch, so a read covering max_records
            # offsets (or everything up to the bound) acquires what the full read would, and
            # copies a fraction of it (issue 33: 8 MiB per ShareFetch for one 1 MiB batch).
            data, after = plog.read_to(offset, FIRST_READ_BYTES, upper_bound=upper)
            if after - offset < max_records and after < upper:
                data, after = _EMPTY_READ, offset
        if not len(data):
            data, after = plog.read_to(offset, limit, upper_bound=upper)
        raw = bytes(data)
        batches: list[LogBatch] = []
        for h in iter_headers(raw):
            abort = False
            if h.is_control:
                recs = decode_batch(raw, h.position)
                try:
                    abort = bool(recs) and parse_control_record(recs[0].key)[1] == 0
                except ValueError:
                    abort = False
            batches.append(LogBatch(h.base_offset, h.last_offset, h.producer_id,
                                    h.is_transactional, h.is_control, abort))
        aborted: Iterable[tuple[int, int]] = plog.aborted_transactions(offset, after) if committed else ()
        return LogRead(tuple(batches), committed, lso if committed else None,
                       tuple(AbortedTxn(pid, first) for pid, first in aborted)), raw

    def acquire(self, view: SharePartitionView, member: str, *, max_records: int, batch_size: int,
                max_bytes: int, mode: AcquireMode) -> tuple[Acquired, bytes]:
        read, raw = self.read(view, max_bytes, max_records)
        if not read.batches:
            return Acquired(), b""
        acquired = view.sp.acquire(member, read, max_records=max_records, batch_size=batch_size,
                                   now_ms=self.clock.wall_ms(), mode=mode)
        if acquired.events:
            self.history.record(view.sp.group_id, view.sp.topic, view.sp.partition, acquired.events,
                                delivery_limit=view.sp.config.delivery_count_limit)
        self._arm_lock(view)
        return acquired, _slice_to_acquired(raw, acquired) if acquired.records else b""

    def check_acknowledge(self, view: SharePartitionView, member: str, batches: list[AckBatch]) -> Outcome:
        """The acknowledgement's answer, nothing changed, persisted or recorded."""
        return view.sp.check_acknowledge(member, batches, self.clock.wall_ms())

    def acknowledge(self, view: SharePartitionView, member: str, batches: list[AckBatch]) -> Outcome:
        outcome = view.sp.acknowledge(member, batches, self.clock.wall_ms())
        self._after(view, outcome)
        if outcome.error is None:
            self.notify(view.sp.topic, view.sp.partition)
        return outcome

    # ---- sessions ------------------------------------------------------------------------
    def _release_session(self, session: ShareSession) -> None:
        now = self.clock.wall_ms()
        for tid_text, p in session.partitions:
            try:
                name = self._topic_name(uuid.UUID(tid_text))
            except ValueError:
                continue
            if name is None or not self.leads(session.node, name, p):
                # Kafka's old leader dropped the share partition when it lost the lead
                # (SharePartitionListener.onBecomingFollower): closing a session there
                # releases nothing the member holds on the new leader
                continue
            view = self.partitions.get((session.group_id, name, p))
            if view is None:
                continue
            outcome = view.sp.release_member(session.member_id, now)
            self._after(view, outcome)
            if outcome.events:
                self.notify(name, p)

    def release_session(self, group_id: str, member_id: str) -> None:
        self._member_gone(group_id, member_id)

    def stop_serving(self) -> None:
        """The broker is shutting down: the connections it closes now release nothing. Kafka
        4.4 writes no share state for the sessions a clean shutdown drops (seen: the persisted
        start offset after a SIGTERM restart is the one before it), so what a member held
        comes back with its persisted delivery count, as after a crash."""
        self._stopping = True

    def connection_closed(self, connection_id: str) -> None:
        if self._stopping:
            return
        session, _empty = self.sessions.on_disconnect(connection_id)
        if session is not None:
            log.info("share.session_closed_by_disconnect", group=session.group_id,
                     member=session.member_id)
            self._release_session(session)

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        info = self.logs.topic_by_id(topic_id)
        return info.name if info is not None else None

    # ---- offsets admin (DescribeShareGroupOffsets, Alter, Delete) ----------------------------
    def start_offset(self, group_id: str, topic_id: uuid.UUID, partition: int) -> tuple[int, int]:
        """(start offset, delivery complete count) as the share coordinator's state summary
        gives them (ReadShareGroupStateSummary: the persisted state); (-1, -1) without state."""
        persisted = self.persisted.get((group_id, topic_id, partition))
        if persisted is None:
            return -1, -1
        start = persisted.start_offset
        if persisted.delivery_complete_count >= 0:
            return start, persisted.delivery_complete_count
        done = sum(b.last_offset - max(b.first_offset, start) + 1 for b in persisted.batches
                   if b.delivery_state in (sl.ACKNOWLEDGED, sl.ARCHIVED) and b.last_offset >= start)
        return start, done

    def initialized_partitions(self, group_id: str) -> dict[uuid.UUID, tuple[str, frozenset[int]]]:
        group = self.groups.groups.get(group_id)
        if group is None:
            return {}
        return {tid: (it.name, it.partitions) for tid, it in group.initialized.items()}

    def create_group(self, group_id: str) -> None:
        """AlterShareGroupOffsets on a group that does not exist makes it, empty
        (GroupMetadataManager.alterShareGroupOffsets: getOrMaybeCreatePersistedShareGroup)."""
        if group_id in self.groups.groups:
            return
        records: list[Record] = [self.groups._group_record(group_id, 1, 0)]
        self.groups._apply(records, self.clock.wall_ms())
        self._write_group_records(group_id, records)
        log.info("share.group_created", group=group_id, by="AlterShareGroupOffsets")

    def alter_offset(self, group_id: str, topic_id: uuid.UUID, topic: str, partition: int,
                     start_offset: int) -> None:
        """AlterShareGroupOffsets for one partition: its state starts again at ``start_offset``."""
        old = self.persisted.get((group_id, topic_id, partition))
        self._write_state(group_id, topic_id, partition,
                          Persisted(start_offset, (), (old.snapshot_epoch + 1) if old else 1,
                                    (old.state_epoch + 1) if old else 1))
        self.partitions.pop((group_id, topic, partition), None)
        records = self.groups.initialized(group_id, {topic_id: [partition]})
        if records:
            self._write_group_records(group_id, records)

    def delete_offsets(self, group_id: str, topic_id: uuid.UUID, topic: str) -> bool:
        """DeleteShareGroupOffsets for one topic; False when it had no state."""
        gone = [k for k in self.persisted if k[0] == group_id and k[1] == topic_id]
        if not gone:
            return False
        for g, tid, p in gone:
            self._tombstone(g, tid, p)
            self.partitions.pop((g, topic, p), None)
        group = self.groups.groups.get(group_id)
        if group is not None:
            records = [self.groups._state_record(
                group_id, {t: v for t, v in group.initializing.items() if t != topic_id},
                {t: v for t, v in group.initialized.items() if t != topic_id}, group.deleting)]
            self.groups._apply(records, self.clock.wall_ms())
            self._write_group_records(group_id, records)
        return True

    def delete_group(self, group_id: str) -> list[Record]:
        records = self.groups.delete(group_id)
        self._write_group_records(group_id, records)
        for g, tid, p in [k for k in self.persisted if k[0] == group_id]:
            self._tombstone(g, tid, p)
        for k in [k for k in self.partitions if k[0] == group_id]:
            self.partitions.pop(k, None)
        return records

    def topic_deleted(self, topic_id: uuid.UUID, name: str) -> None:
        """A topic went: the groups forget its share state (GroupMetadataManager.
        maybeCleanupShareGroupState), its share partitions and persisted state go; a topic
        created again under the name is new to every group (a new id)."""
        records = self.groups.topics_deleted([topic_id])
        if records:
            self._write_by_group(records)
        for key in [k for k, v in self.partitions.items() if v.topic_id == topic_id]:
            self.partitions.pop(key, None)
            timer = self._lock_timers.pop(key, None)
            if timer is not None:
                timer.cancel()
        for g, tid, p in [k for k in self.persisted if k[1] == topic_id]:
            self._tombstone(g, tid, p)
        log.info("share.topic_forgotten", topic=name, topic_id=str(topic_id))
        self._arm()

    def leader_changed(self, topic: str, partition: int) -> None:
        """The partition's leader moved: as Kafka's SharePartitionManager drops the share
        partition from the old leader's cache (SharePartitionListener.onBecomingFollower) and
        the new leader loads it from the share coordinator, every group's cached share
        partition goes and the next ShareFetch loads the persisted state. Acquisitions are never
        persisted, so what was acquired and not yet acknowledged comes back AVAILABLE with its
        persisted delivery count, and acknowledging it against the new leader is refused."""
        dropped = [k for k in self.partitions if k[1] == topic and k[2] == partition]
        now = self.clock.wall_ms()
        for key in dropped:
            view = self.partitions.pop(key)
            timer = self._lock_timers.pop(key, None)
            if timer is not None:
                timer.cancel()
            self._tell_leader_moved(view, now)
            log.info("share.partition_unloaded", group=key[0], topic=topic, partition=partition,
                     reason="leader moved", start_offset=view.sp.start_offset)
        if dropped:
            self._arm()
            self.notify(topic, partition)

    def _tell_leader_moved(self, view: SharePartitionView, now: int) -> None:
        """The history's line for what was acquired when the leader moved: available again
        with the delivery count the new leader loads (the persisted one, 0 if none)."""
        sp = view.sp
        persisted = self.persisted.get((sp.group_id, view.topic_id, sp.partition))
        counts = {o: b.delivery_count for b in (persisted.batches if persisted is not None else ())
                  for o in range(b.first_offset, b.last_offset + 1)}
        events = [HistoryEvent(o, o, Action.LEADER_MOVED, member, now, RecordState.AVAILABLE,
                               counts.get(o, 0), deadline)
                  for first, last, state, _count, member, deadline in sp.in_flight()
                  if state is RecordState.ACQUIRED for o in range(first, last + 1)]
        if events:
            self.history.record(sp.group_id, sp.topic, sp.partition, merge_events(events),
                                delivery_limit=sp.config.delivery_count_limit)

    # ---- what the console and the broker read --------------------------------------------
    def share_partition(self, group: str, topic: str, partition: int) -> SharePartition | None:
        view = self.partitions.get((group, topic, partition))
        return view.sp if view is not None else None

    def share_groups(self) -> list[tuple[str, str]]:
        return self.groups.list_groups()


def _slice_to_acquired(raw: bytes, acquired: Acquired) -> bytes:
    """The log batches of ``raw`` from the one holding the first acquired offset to the last one
    starting at or before the last acquired offset, as Kafka 4.4 answers
    (ShareFetchUtils.maybeSliceFetchRecords): a read is up to 8 MiB, and a fetch acquiring one
    batch of it must not send the client (who parses and drops them) the batches it does not
    own (issue 33: 8 x the bytes to a share consumer, and 2.5 x its CPU)."""
    first = min(r.first_offset for r in acquired.records)
    last = max(r.last_offset for r in acquired.records)
    start = end = -1
    for h in iter_headers(raw):
        if h.last_offset < first:
            continue
        if h.base_offset > last:
            break
        if start < 0:
            start = h.position
        end = h.end
    if start < 0:
        return raw
    return raw if start == 0 and end == len(raw) else raw[start:end]


def _overlay(old: Iterable[StateBatch], new: Iterable[Any]) -> list[StateBatch]:
    """Newer state batches over older ones (PersisterStateBatchCombiner's outcome): every
    offset either covers takes the state of the last batch covering it (``new`` after ``old``,
    each in its order), and neighbours with the same state and count merge.

    Works on ranges, not offsets: it runs on every acknowledgement's write, and one batch can
    span the whole in-flight window (thousands of offsets), which per offset cost ~20 ms a
    write and stalled share fetches (issue 33)."""
    segs: list[StateBatch] = []  # disjoint, sorted by first offset
    firsts: list[int] = []
    for b in (*old, *new):
        lo, hi = b.first_offset, b.last_offset
        if hi < lo:
            continue
        i = bisect.bisect_right(firsts, lo) - 1
        if i < 0 or segs[i].last_offset < lo:
            i += 1
        j = i
        repl: list[StateBatch] = []
        tail: StateBatch | None = None
        while j < len(segs) and segs[j].first_offset <= hi:
            s = segs[j]
            if s.first_offset < lo:
                repl.append(StateBatch(s.first_offset, lo - 1, s.delivery_state, s.delivery_count))
            if s.last_offset > hi:
                tail = StateBatch(hi + 1, s.last_offset, s.delivery_state, s.delivery_count)
            j += 1
        repl.append(StateBatch(lo, hi, b.delivery_state, b.delivery_count))
        if tail is not None:
            repl.append(tail)
        segs[i:j] = repl
        firsts[i:j] = [r.first_offset for r in repl]
    out: list[StateBatch] = []
    for s in segs:
        prev = out[-1] if out else None
        if (prev is not None and prev.last_offset + 1 == s.first_offset
                and (prev.delivery_state, prev.delivery_count) == (s.delivery_state, s.delivery_count)):
            out[-1] = StateBatch(prev.first_offset, s.last_offset, s.delivery_state, s.delivery_count)
        else:
            out.append(s)
    return out
