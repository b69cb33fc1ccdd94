"""The group coordinator: Kafka's classic consumer-group protocol, on an event loop.

Theory of operation
-------------------
A group is a small state machine (:mod:`.state`, Kafka's ``ClassicGroupState``,
whose one table lists each state's valid predecessors)::

    Empty ----------------- a member joins ------------------> PreparingRebalance
    PreparingRebalance ---- all known members joined, or the
                            rebalance timeout passed ---------> CompletingRebalance
                            (nobody is left) -----------------> Empty
    CompletingRebalance --- the leader's SyncGroup -----------> Stable
    Stable, Completing- --- a join with new metadata, the
      Rebalance             leader's rejoin, a leave, an expiry -> PreparingRebalance
    Empty ----------------- DeleteGroups ---------------------> Dead

JoinGroup gathers members until every known member has rejoined or the rebalance
timeout passes (a new group first waits ``initial_rebalance_delay_ms``, extended once
per newcomer, as Kafka's ``InitialDelayedJoin``); the leader's SyncGroup hands out the
assignment; heartbeats (and offset commits) keep members alive within their session
timeout. Assignment is the clients' business: protocols and metadata are relayed
untouched. Committed offsets and group generations are records in
``__consumer_offsets`` (Kafka's layout), replayed at start-up; offsets committed inside
a transaction stay pending until the transaction's marker lands.

The work is split in two:

* the core, :class:`~.machine.GroupMachine` — synchronous, no loop, time from the
  ``Clock`` it is given. A call either answers at once or returns ``Waiting`` (a JoinGroup
  or SyncGroup that needs the other members); answers for waiting callers come out of
  ``take_answers()`` when the group moves on. Timeouts (session, rebalance, the initial
  delay, a pending member id's) are deadlines the core keeps and runs in ``run_due()``.
* this adapter, :class:`GroupCoordinator` — owns what needs a loop: one loop timer armed
  for the core's next deadline, and a future per waiting caller, settled from the
  answers after every call into the core.

Modules: ``state`` (the enum and its table), ``model`` (Group, Member,
Offset, GroupError), ``membership`` (join/sync/heartbeat/leave and their
timeouts), ``offsets`` (commits, fetches, deletes, transactional offsets),
``store`` (``__consumer_offsets``: writes, replay, snapshots), ``..timers``
(deadlines), ``machine`` (the core composing them), this module (the adapter).

A test drives the core alone with a ``ManualClock`` (tests/minibroker/
test_group_state_machine.py); the broker builds this adapter.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

from minibroker_protocol.errors import ErrorCode

from ...core.clock import SYSTEM_CLOCK, Clock
from .consumer_group import (
    ConsumerGroups,
    ConsumerGroupSettings,
    GroupConfigLookup,
    HeartbeatAnswer,
    Topics,
)
from .machine import GroupMachine
from .membership import Waiting
from .model import Group, GroupError, Member, Offset
from .offsets import VerifyProduce
from .state import GroupState
from .store import SNAPSHOT_FILE, BrokerOffsetsTopic, OffsetsTopic
from .streams_group import CreateTopic, StreamsAnswer, StreamsGroups, StreamsHeartbeat

__all__ = ["GroupCoordinator", "GroupError", "GroupState", "Group", "Member", "Offset"]


class GroupCoordinator:
    SNAPSHOT_FILE = SNAPSHOT_FILE

    def __init__(self, broker=None, *, offsets_topic: OffsetsTopic | None = None,
                 data_dir: str | os.PathLike | None = None,
                 verify_produce: VerifyProduce | None = None, clock: Clock = SYSTEM_CLOCK,
                 initial_rebalance_delay_ms: int = 3000, topics: Topics | None = None,
                 consumer_settings: ConsumerGroupSettings | None = None,
                 group_config: GroupConfigLookup | None = None,
                 create_topic: CreateTopic | None = None) -> None:
        if broker is not None:
            # The older call, GroupCoordinator(broker, ...): take the collaborators from it.
            offsets_topic, data_dir, verify_produce, topics = _from_broker(broker)
        if offsets_topic is None:
            raise TypeError("GroupCoordinator needs offsets_topic (or a broker)")
        self.clock = clock
        self.machine = GroupMachine(offsets_topic, clock=clock, data_dir=data_dir,
                                    verify_produce=verify_produce,
                                    initial_rebalance_delay_ms=initial_rebalance_delay_ms,
                                    topics=topics, consumer_settings=consumer_settings,
                                    group_config=group_config, create_topic=create_topic)
        self._waiting: dict[tuple[str, Member], asyncio.Future] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None

    @classmethod
    def from_broker(cls, broker, *, clock: Clock = SYSTEM_CLOCK,
                    initial_rebalance_delay_ms: int = 3000,
                    consumer_settings: ConsumerGroupSettings | None = None) -> GroupCoordinator:
        offsets_topic, data_dir, verify_produce, topics = _from_broker(broker)
        return cls(offsets_topic=offsets_topic, data_dir=data_dir, verify_produce=verify_produce,
                   clock=clock, initial_rebalance_delay_ms=initial_rebalance_delay_ms,
                   topics=topics, consumer_settings=consumer_settings)

    # -- what the broker and handlers read -------------------------------------------------
    @property
    def groups(self) -> dict[str, Group]:
        return self.machine.groups

    @property
    def snapshots(self):
        return self.machine.store.snapshots

    @property
    def initial_rebalance_delay_ms(self) -> int:
        return self.machine.membership.initial_rebalance_delay_ms

    def now_ms(self) -> int:
        return self.clock.wall_ms()

    def snapshot_path(self) -> str:
        return self.machine.store.snapshot_path()

    def capture_snapshot(self):
        return self.machine.capture_snapshot()

    # -- time and waiting callers ---------------------------------------------------------
    def start(self) -> None:
        """Arm the timer for the deadlines so far (``load`` outside a loop cannot)."""
        self._settle()

    def close(self) -> None:
        """Stop the timer: a closed broker's groups must not time out into its closed logs."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = None

    def poll(self) -> None:
        """Run the timeouts that have come by the clock (a manual clock's test calls this)."""
        self.machine.run_due()
        self._settle()

    def _settle(self) -> None:
        for kind, member, value in self.machine.take_answers():
            fut = self._waiting.pop((kind, member), None)
            if fut is None or fut.done():
                continue
            if isinstance(value, GroupError):
                fut.set_exception(value)
            else:
                fut.set_result(value)
        self._arm()

    def _arm(self) -> None:
        at = self.machine.next_deadline()
        if at == self._timer_at and (at is None or self._timer is not None):
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = None
        if at is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop yet (a load at start-up): start() or the first call arms it
        self._timer_at = at
        self._timer = loop.call_later(max(at - self.clock.monotonic(), 0.0), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        self.poll()

    def _call(self, fn: Callable, **kw):
        """Call the core; a future when the answer comes later."""
        try:
            result = fn(**kw)
        except BaseException:
            self._settle()
            raise
        if isinstance(result, Waiting):
            fut = asyncio.get_running_loop().create_future()
            self._waiting[(result.kind, result.member)] = fut
            self._settle()
            return fut
        self._settle()
        return result

    # -- persistence -------------------------------------------------------------------------
    def load(self) -> None:
        """Replay ``__consumer_offsets`` (no running loop needed)."""
        self.machine.load()
        self._arm()

    def on_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        self.machine.on_marker(partition, producer_id, commit)

    # -- share groups (their records live in __consumer_offsets too) ----------------------
    def set_share_hooks(self, replay: Callable[[bytes, bytes | None], str | None],
                        snapshot_entries: Callable[[], list[tuple[bytes, bytes]]]) -> None:
        """The share coordinator's replay of key types 10-15 and its records for snapshots;
        set before :meth:`load`."""
        self.machine.store.share_replay = replay
        self.machine.store.share_snapshot = snapshot_entries

    def write_share_records(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> None:
        self.machine.store.append(group_id, [{"key": k, "value": v} for k, v in records])

    # -- membership -------------------------------------------------------------------------
    async def join(self, **kw) -> dict:
        result = self._call(self.machine.join, **kw)
        return await result if isinstance(result, asyncio.Future) else result

    async def sync(self, **kw) -> tuple[bytes, str | None, str | None]:
        result = self._call(self.machine.sync, **kw)
        return await result if isinstance(result, asyncio.Future) else result

    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  instance_id: str | None) -> None:
        try:
            self.machine.heartbeat(group_id, generation, member_id, instance_id)
        finally:
            self._settle()

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> list[ErrorCode]:
        try:
            return self.machine.leave(group_id, members)
        finally:
            self._settle()

    # -- KIP-848 consumer groups -----------------------------------------------------------
    @property
    def consumer(self) -> ConsumerGroups:
        return self.machine.consumer

    def consumer_heartbeat(self, **kw) -> HeartbeatAnswer:
        try:
            return self.machine.consumer_heartbeat(**kw)
        finally:
            self._settle()

    # -- KIP-1071 streams groups ----------------------------------------------------------
    @property
    def streams(self) -> StreamsGroups:
        return self.machine.streams

    def streams_heartbeat(self, hb: StreamsHeartbeat, **kw) -> StreamsAnswer:
        try:
            return self.machine.streams_heartbeat(hb, **kw)
        finally:
            self._settle()

    # -- offsets ------------------------------------------------------------------------------
    def commit_offsets(self, group_id: str, generation: int, member_id: str,
                       instance_id: str | None, offsets: dict[tuple[str, int], Offset],
                       api_version: int = 0) -> None:
        try:
            self.machine.commit_offsets(group_id, generation, member_id, instance_id, offsets,
                                        api_version)
        finally:
            self._settle()

    def verify_txn_producer(self, group_id: str, producer_id: int,
                            producer_epoch: int, add: bool = False) -> ErrorCode | None:
        return self.machine.verify_txn_producer(group_id, producer_id, producer_epoch, add)

    def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                           generation: int, member_id: str, instance_id: str | None,
                           offsets: dict[tuple[str, int], Offset], api_version: int = 0) -> None:
        self.machine.txn_commit_offsets(group_id, producer_id, producer_epoch, generation,
                                        member_id, instance_id, offsets, api_version)

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None,
                      require_stable: bool, member_id: str | None = None,
                      member_epoch: int = -1) -> tuple[ErrorCode, list]:
        return self.machine.fetch_offsets(group_id, partitions, require_stable, member_id,
                                          member_epoch)

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> dict:
        return self.machine.delete_offsets(group_id, partitions)

    # -- admin ----------------------------------------------------------------------------
    def list_groups(self) -> list[Group]:
        return self.machine.list_groups()

    def delete_group(self, group_id: str) -> ErrorCode:
        return self.machine.delete_group(group_id)


def _from_broker(broker) -> tuple[OffsetsTopic, os.PathLike, VerifyProduce, Topics]:
    """The collaborators a broker holds: its log manager and internal-log appender for
    ``__consumer_offsets``, its data directory, its transaction coordinator's check, and its
    topics (what a consumer group's assignment is made of)."""
    topic = BrokerOffsetsTopic(broker.logs, broker.internal_log, broker.offsets_partition_for)

    def verify_produce(pid: int, epoch: int, topic_name: str, partition: int, add: bool = False):
        # late-bound: the transaction coordinator may be built after this one
        return broker.txn_coordinator.verify_produce(pid, epoch, topic_name, partition, add)

    return topic, broker.config.data_dir, verify_produce, broker.assignable_topics
