"""The group coordinator's core: every group's state, driven synchronously.

Composes what the coordinator holds — membership (:mod:`.membership`), committed
offsets (:mod:`.offsets`), their log (:mod:`.store`) — over one dict of
groups, one clock and one schedule of deadlines. No event loop, no futures: a test
builds it on a fake ``__consumer_offsets`` and a ``ManualClock``, calls it, advances
the clock, calls :meth:`run_due` and reads :meth:`take_answers`.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from minibroker_protocol import group_log as gl
from minibroker_protocol.errors import ErrorCode
from minibroker_storage.lazylog import get_logger

from ...core.clock import SYSTEM_CLOCK, Clock
from ..timers import Deadlines
from .consumer_group import (
    ConsumerGroups,
    ConsumerGroupSettings,
    GroupConfigLookup,
    HeartbeatAnswer,
    Topics,
)
from .membership import Membership, Waiting
from .model import Group, Member, Offset
from .offsets import Offsets, VerifyProduce
from .state import GroupState, transition
from .store import GroupStore, OffsetsTopic
from .streams_group import CreateTopic, StreamsAnswer, StreamsGroups, StreamsHeartbeat

log = get_logger("minibroker.group")


class GroupMachine:
    def __init__(self, offsets_topic: OffsetsTopic, *, clock: Clock = SYSTEM_CLOCK,
                 data_dir: str | os.PathLike | None = None,
                 verify_produce: VerifyProduce | None = None,
                 initial_rebalance_delay_ms: int = 3000, topics: Topics | None = None,
                 consumer_settings: ConsumerGroupSettings | None = None,
                 group_config: GroupConfigLookup | None = None,
                 create_topic: CreateTopic | None = None) -> None:
        self.groups: dict[str, Group] = {}  # shared by the parts below, never replaced
        self.clock = clock
        self.timers = Deadlines(clock.monotonic)
        self.store = GroupStore(offsets_topic, self.groups, wall_ms=clock.wall_ms,
                                data_dir=data_dir)
        self.membership = Membership(self.groups, clock=clock, timers=self.timers,
                                     persist=self.store.persist_group,
                                     initial_rebalance_delay_ms=initial_rebalance_delay_ms)
        self.offsets = Offsets(self.groups, self.store, self.membership.touch, verify_produce)
        self.consumer = ConsumerGroups(self.groups, clock=clock, timers=self.timers,
                                       topics=topics or (lambda: ()), settings=consumer_settings,
                                       group_config=group_config)
        self.streams = StreamsGroups(self.groups, clock=clock, timers=self.timers,
                                     topics=topics or (lambda: ()), group_config=group_config,
                                     create_topic=create_topic)

    # -- time and answers --------------------------------------------------------------
    def run_due(self) -> int:
        """Run the timeouts that have come by the clock; how many ran."""
        return self.timers.run_due()

    def next_deadline(self) -> float | None:
        """When (the clock's monotonic time) the next timeout comes."""
        return self.timers.next_at()

    def take_answers(self) -> list[tuple[str, Member, object]]:
        """Answers to the JoinGroup/SyncGroup calls that returned Waiting, since the last take."""
        return self.membership.take_answers()

    # -- persistence ---------------------------------------------------------------------
    def load(self) -> None:
        if self.store.load():
            self.membership.loaded()

    def on_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT/ABORT marker reached ``__consumer_offsets``-partition (it is the
        partition's last record: the state now covers the log up to its end)."""
        self.store.complete_txn_offsets(producer_id, commit, partition, log_it=True)
        self.store.marker_written(partition)

    def capture_snapshot(self) -> tuple[str, Callable[[], bytes], dict] | None:
        return self.store.capture_snapshot()

    # -- membership ----------------------------------------------------------------------
    def join(self, **kw) -> dict | Waiting:
        return self.membership.join(**kw)

    def sync(self, **kw) -> tuple[bytes, str | None, str | None] | Waiting:
        return self.membership.sync(**kw)

    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  instance_id: str | None) -> None:
        self.membership.heartbeat(group_id, generation, member_id, instance_id)

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> list[ErrorCode]:
        return self.membership.leave(group_id, members)

    # -- KIP-848 consumer groups --------------------------------------------------------
    def consumer_heartbeat(self, **kw) -> HeartbeatAnswer:
        return self.consumer.heartbeat(**kw)

    # -- KIP-1071 streams groups --------------------------------------------------------
    def streams_heartbeat(self, hb: StreamsHeartbeat, **kw) -> StreamsAnswer:
        return self.streams.heartbeat(hb, **kw)

    # -- offsets -------------------------------------------------------------------------
    def commit_offsets(self, group_id: str, generation: int, member_id: str,
                       instance_id: str | None, offsets: dict[tuple[str, int], Offset],
                       api_version: int = 0) -> None:
        self.offsets.commit(group_id, generation, member_id, instance_id, offsets, api_version)

    def verify_txn_producer(self, group_id: str, producer_id: int,
                            producer_epoch: int, add: bool = False) -> ErrorCode | None:
        return self.offsets.verify_txn_producer(group_id, producer_id, producer_epoch, add)

    def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                           generation: int, member_id: str, instance_id: str | None,
                           offsets: dict[tuple[str, int], Offset], api_version: int = 0) -> None:
        self.offsets.txn_commit(group_id, producer_id, producer_epoch, generation, member_id,
                                instance_id, offsets, api_version)

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None,
                      require_stable: bool, member_id: str | None = None,
                      member_epoch: int = -1) -> tuple[ErrorCode, list]:
        return self.offsets.fetch(group_id, partitions, require_stable, member_id, member_epoch)

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> dict:
        return self.offsets.delete(group_id, partitions)

    # -- admin ---------------------------------------------------------------------------
    def list_groups(self) -> list[Group]:
        return [g for g in self.groups.values() if g.state != GroupState.DEAD]

    def delete_group(self, group_id: str) -> ErrorCode:
        g = self.groups.get(group_id)
        if g is None or g.state == GroupState.DEAD:
            return ErrorCode.group_id_not_found
        if g.state != GroupState.EMPTY or g.members or (g.consumer is not None and g.consumer.members) \
                or (g.streams is not None and g.streams.members):
            return ErrorCode.non_empty_group
        records = [{"key": gl.offset_key(group_id, t, p), "value": None} for t, p in g.offsets]
        records.append({"key": gl.group_key(group_id), "value": None})
        self.store.append(group_id, records)
        transition(g, GroupState.DEAD)
        del self.groups[group_id]
        log.info("group.deleted", group_id=group_id, offsets=len(g.offsets), group_type=g.group_type)
        return ErrorCode.none
