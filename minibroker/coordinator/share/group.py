"""Share groups (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe as a synchronous state machine.

Theory of operation
-------------------
A share group's members do not own partitions: each is told which partitions to fetch from, and
the share partitions on the leaders hand out records. So the heartbeat is KIP-848's without the
reconciliation: no revocation, a member moves straight to the target assignment. Three epochs
move (group-coordinator/…/GroupMetadataManager.java ``shareGroupHeartbeat``):

* the **group epoch** is bumped when a member's subscribed topic names change, when the hash of
  the subscribed topics' metadata changes (a topic created, deleted or grown), when a member
  leaves or is fenced, and when partitions whose share state was initialized are not yet in the
  target assignment (``initializedAssignmentPending``);
* the **assignment epoch** catches up with the group epoch when the ``simple`` assignor
  (:mod:`.assignor`) computes a new target, at most once per assignment interval
  (``share.assignment.interval.ms``, 1 s: ``canComputeNextTargetAssignment``);
* each **member epoch** jumps to the assignment epoch at its next heartbeat, its assignment the
  target filtered to the topics it subscribes to (``ShareGroupAssignmentBuilder``).

**Initialization.** Only partitions whose share state exists may be assigned. When a heartbeat's
group subscribes to topics with partitions neither initialized nor being initialized (or whose
initialization is older than ``group.share.initialize.retry.interval.ms``, 30 s), the answer
carries an :class:`InitializeRequest` — Kafka's InitializeShareGroupState to the share
coordinator, start offset -1 for a topic new to the group (resolved by
``share.auto.offset.reset`` when the partition is first loaded) and 0 for new partitions of a
known one — and the records mark those partitions *initializing*. The caller performs it and
calls :meth:`ShareGroups.initialized` (or :meth:`ShareGroups.initialize_failed`); the partitions
become *initialized*, the next heartbeat bumps the group epoch, and the one after the assignment
interval assigns them. That is why a new member's first answer has an empty, non-null assignment.

One transition table: a heartbeat (join with epoch 0, then the epoch it was given), a leave
(epoch -1) or a session expiry (no heartbeat for ``share.session.timeout.ms``, 45 s, a deadline
on the shared :class:`~minibroker.coordinator.timers.Deadlines`) are the only moves of a member::

    (absent) --epoch 0--> member(epoch = assignment epoch) --heartbeat--> member(...)
    member --epoch -1 | session expired--> (absent)       [group epoch + 1]

and the group's state is derived: ``Empty`` without members, else ``Stable``
(``ShareGroup.maybeUpdateGroupState``; ``Dead`` is never shown for a live group: a deleted one is
GROUP_ID_NOT_FOUND).

**Records.** Every change is a list of ``__consumer_offsets`` records (types 10-15,
:mod:`minibroker_protocol.share_log`) computed from the state before the call, then applied to
the state by :meth:`ShareGroups.replay` — the same function a broker runs over the topic at
start-up — so what is written is by construction what is held. Calls return their records;
records of session expiries wait in :meth:`ShareGroups.take_records`.

Seen on a Kafka 4.4 reference (tests/reference, raw requests, its ``__consumer_offsets`` read
back with share_log): the same answers, messages and records, in the same order, for a join,
its initialization, the assignment and a leave; the same assignment for every member of groups
of seven random-UUID members over two topics (the assignor and the member order are Kafka's,
see :mod:`.assignor`).

The group's ``MetadataHash`` is Kafka's XXH3 value (:mod:`minibroker_protocol.xxh3`), recomputed
at every heartbeat instead of when Kafka's metadata image says a subscribed topic changed (the
same bumps, since it covers only subscribed topics). Lists in answers (topics, partitions,
subscribed names) are sorted where Kafka's follow its hash maps. Authorization (GROUP READ,
TOPIC DESCRIBE) and the ``share.version`` gate are the handler's, between the checks of
:func:`validate_heartbeat`.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from minibroker_protocol import share_log as sl
from minibroker_protocol import xxh3
from minibroker_protocol.errors import ErrorCode
from minibroker_storage.lazylog import get_logger

from ...core.clock import Clock
from ..timers import Deadline, Deadlines
from . import assignor

log = get_logger("minibroker.share")

JOIN_EPOCH, LEAVE_EPOCH = 0, -1
MEMBER_STABLE = 0  # Kafka's MemberState.STABLE, the only state a share member has
EMPTY, STABLE, DEAD = "Empty", "Stable", "Dead"
MAX_MEMBER_ID_CHARS = 36  # KafkaApis.isMemberIdValid

# topic name -> (topic id, partition count): the metadata the group sees.
TopicMetadata = Mapping[str, tuple[uuid.UUID, int]]
Assignment = dict[uuid.UUID, frozenset[int]]
Record = tuple[sl.ShareGroupKey, sl.ShareValue | None]


@dataclass(frozen=True)
class ShareGroupSettings:
    """The broker's group.share.* settings, or a group's share.* overrides of them."""
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    assignment_interval_ms: int = 1_000
    max_size: int = 200
    initialize_retry_interval_ms: int = 30_000


class ShareGroupError(Exception):
    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code, self.message = code, message


@dataclass(frozen=True)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = MEMBER_STABLE
    assigned: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class InitTopic:
    name: str
    partitions: frozenset[int]
    timestamp: int


@dataclass
class ShareGroup:
    group_id: str
    # A new group starts at epoch 1 with an assignment of epoch 1 (ModernGroup's constructor,
    # TargetAssignmentMetadata.INITIAL), so its first member gets epoch 2 — seen on Kafka 4.4.
    group_epoch: int = 1
    metadata_hash: int = 0
    assignment_epoch: int = 1
    assignment_timestamp: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    # ShareGroupStatePartitionMetadata: the topics whose share state is being/has been created,
    # and those whose state is being deleted (id -> name).
    initializing: dict[uuid.UUID, InitTopic] = field(default_factory=dict)
    initialized: dict[uuid.UUID, InitTopic] = field(default_factory=dict)
    deleting: dict[uuid.UUID, str] = field(default_factory=dict)
    # The order Kafka's members map iterates in, which decides ties in the assignor's member
    # order; kept by replay as members come and go, left out of comparisons.
    member_order: assignor.TimelineOrder = field(default_factory=assignor.TimelineOrder,
                                                 compare=False, repr=False)

    @property
    def state(self) -> str:
        return STABLE if self.members else EMPTY

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}


@dataclass(frozen=True)
class InitializeRequest:
    """Kafka's InitializeShareGroupState for one group: per topic, the partitions to create and
    the start offset (-1: resolve with share.auto.offset.reset; 0: from the log's start)."""
    group_id: str
    group_epoch: int
    topics: Mapping[uuid.UUID, tuple[frozenset[int], int]]


@dataclass
class HeartbeatAnswer:
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    # None: unchanged (the response's null); else (topic id, sorted partitions) pairs.
    assignment: tuple[tuple[uuid.UUID, tuple[int, ...]], ...] | None = None
    records: list[Record] = field(default_factory=list)
    initialize: InitializeRequest | None = None


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    # (topic id, topic name, sorted partitions); topics gone from the metadata are left out
    assignment: tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]


@dataclass(frozen=True)
class DescribedGroup:
    group_id: str
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    state: str = DEAD
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = assignor.NAME
    members: tuple[DescribedMember, ...] = ()


# ---- request checks -----------------------------------------------------------------------

def _java_length(s: str) -> int:
    # Java's String.length counts UTF-16 units; a character outside the BMP counts two.
    return len(s.encode("utf-16-le")) // 2


def _java_blank(s: str | None) -> bool:
    # Java's trim() strips every char <= U+0020, not Unicode whitespace.
    return s is not None and all(ord(c) <= 0x20 for c in s)


def validate_heartbeat(group_id: str, member_id: str | None, member_epoch: int,
                       rack_id: str | None, subscribed_topic_names: list[str] | None
                       ) -> tuple[ErrorCode, str | None] | None:
    """The request's own errors, in Kafka's order, or None. The member id check is KafkaApis'
    (its error response drops the message, hence None); the rest are
    GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid, whose answers keep the
    message. A handler checks GROUP READ before the first and TOPIC DESCRIBE after it."""
    if member_id is None or member_id == "" or _java_length(member_id) > MAX_MEMBER_ID_CHARS:
        return ErrorCode.invalid_request, None
    if _java_blank(member_id):
        return ErrorCode.invalid_request, "MemberId can't be empty."
    if _java_blank(group_id):
        return ErrorCode.invalid_request, "GroupId can't be empty."
    if _java_blank(rack_id):
        return ErrorCode.invalid_request, "RackId can't be empty."
    if member_epoch == JOIN_EPOCH:
        if not subscribed_topic_names:
            return ErrorCode.invalid_request, "SubscribedTopicNames must be set in first request."
    elif member_epoch < LEAVE_EPOCH:
        return ErrorCode.invalid_request, "MemberEpoch is invalid."
    return None


def _check_epoch(member: ShareMember, received: int) -> None:
    # GroupMetadataManager.throwIfShareGroupMemberEpochIsInvalid: the previous epoch is accepted
    # (the answer that moved the member may have been lost), nothing else that differs.
    if received == JOIN_EPOCH:
        return
    if received > member.member_epoch:
        raise ShareGroupError(ErrorCode.fenced_member_epoch,
                              f"The share group member has a greater member epoch ({received}) "
                              "than the one known by the group coordinator "
                              f"({member.member_epoch}). The member must abandon all its "
                              "partitions and rejoin.")
    if received < member.member_epoch and received != member.previous_member_epoch:
        raise ShareGroupError(ErrorCode.fenced_member_epoch,
                              f"The share group member has a smaller member epoch ({received}) "
                              "than the one known by the group coordinator "
                              f"({member.member_epoch}), and it does not match the previous "
                              f"member epoch ({member.previous_member_epoch}). The member must "
                              "abandon all its partitions and rejoin.")


def can_compute_target(assignment_timestamp: int, interval_ms: int, now_ms: int) -> bool:
    """GroupMetadataManager.canComputeNextTargetAssignment."""
    return assignment_timestamp == 0 or interval_ms == 0 or now_ms >= assignment_timestamp + interval_ms


def metadata_hash(topic_names: Iterable[str], topics: TopicMetadata) -> int:
    """Kafka's group MetadataHash (ModernGroup.computeMetadataHash): XXH3 over the subscribed
    topics that exist; 0 when none does. Partition racks are not in the metadata the caller
    gives, as with brokers without broker.rack."""
    return xxh3.group_hash({n: _topic_hash(*topics[n], n) for n in set(topic_names) if n in topics})


@functools.lru_cache(maxsize=1024)
def _topic_hash(topic_id: uuid.UUID, partitions: int, name: str) -> int:
    # Kafka keeps a cache of topic hashes too (topicHashCache); these inputs are its key.
    return xxh3.topic_hash(topic_id, name, partitions)


def _combine(initialized: Mapping[uuid.UUID, InitTopic],
             initializing: Mapping[uuid.UUID, InitTopic]) -> dict[uuid.UUID, InitTopic]:
    """GroupMetadataManager.combineInitMaps: the union per topic, the second's name and
    timestamp winning."""
    out = {}
    for tid in sorted(set(initialized) | set(initializing)):
        a, b = initialized.get(tid), initializing.get(tid)
        parts = (a.partitions if a else frozenset()) | (b.partitions if b else frozenset())
        src = b or a
        assert src is not None
        out[tid] = InitTopic(src.name, parts, src.timestamp)
    return out


def _tps(assignment: Mapping[uuid.UUID, frozenset[int]]) -> sl.TopicPartitions:
    return tuple((tid, tuple(sorted(ps))) for tid, ps in sorted(assignment.items()) if ps)


def _infos(m: Mapping[uuid.UUID, InitTopic]) -> tuple[sl.TopicPartitionsInfo, ...]:
    return tuple(sl.TopicPartitionsInfo(tid, it.name, tuple(sorted(it.partitions)))
                 for tid, it in sorted(m.items()))


class ShareGroups:
    """Every share group of one coordinator. ``topics`` gives the current topic metadata;
    ``is_other_group`` says whether an id belongs to a group of another type (classic,
    consumer, streams), which a share group's requests must refuse."""

    def __init__(self, *, clock: Clock, timers: Deadlines, topics: Callable[[], TopicMetadata],
                 settings: ShareGroupSettings | Callable[[str], ShareGroupSettings] = ShareGroupSettings(),
                 is_other_group: Callable[[str], bool] = lambda group_id: False) -> None:
        self.groups: dict[str, ShareGroup] = {}
        self.clock = clock
        self.timers = timers
        self._topics = topics
        self._settings = settings if callable(settings) else (lambda _g, s=settings: s)
        self._is_other_group = is_other_group
        self._sessions: dict[tuple[str, str], Deadline] = {}
        self._outbox: list[Record] = []

    # ---- ShareGroupHeartbeat ----------------------------------------------------------------
    def heartbeat(self, *, group_id: str, member_id: str | None, member_epoch: int,
                  rack_id: str | None = None, subscribed_topic_names: list[str] | None = None,
                  client_id: str = "", client_host: str = "") -> HeartbeatAnswer:
        bad = validate_heartbeat(group_id, member_id, member_epoch, rack_id, subscribed_topic_names)
        if bad is not None:
            return HeartbeatAnswer(error_code=bad[0], error_message=bad[1])
        assert member_id is not None
        try:
            if member_epoch == LEAVE_EPOCH:
                return self._leave(group_id, member_id)
            return self._heartbeat(group_id, member_id, member_epoch, rack_id,
                                   subscribed_topic_names, client_id, client_host)
        except ShareGroupError as e:
            return HeartbeatAnswer(error_code=e.code, error_message=e.message)

    def _group_for(self, group_id: str, create: bool) -> ShareGroup:
        # GroupMetadataManager.getOrMaybeCreateShareGroup: a new group exists only once its
        # records are applied, so a refused join leaves nothing behind.
        if self._is_other_group(group_id):
            raise ShareGroupError(ErrorCode.group_id_not_found,
                                  f"Group {group_id} is not a share group.")
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                raise ShareGroupError(ErrorCode.group_id_not_found,
                                      f"Share group {group_id} not found.")
            group = ShareGroup(group_id)
        return group

    def _heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                   names: list[str] | None, client_id: str, client_host: str) -> HeartbeatAnswer:
        now = self.clock.wall_ms()
        settings = self._settings(group_id)
        topics = self._topics()
        records: list[Record] = []
        joining = member_epoch == JOIN_EPOCH
        group = self._group_for(group_id, joining)
        if len(group.members) >= settings.max_size and member_id not in group.members:
            raise ShareGroupError(ErrorCode.group_max_size_reached,
                                  "The share group has reached its maximum capacity of "
                                  f"{settings.max_size} members.")
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise ShareGroupError(ErrorCode.unknown_member_id,
                                      f"Member {member_id} is not a member of group {group_id}.")
            member = ShareMember(member_id)
            log.info("share.member_joins", group=group_id, member=member_id)
        _check_epoch(member, member_epoch)

        updated = replace(
            member,
            rack_id=rack_id if rack_id is not None else member.rack_id,
            subscribed_topic_names=(frozenset(names) if names is not None
                                    else member.subscribed_topic_names),
            client_id=client_id, client_host=client_host)
        bump = False
        if updated != member:
            records.append(self._member_record(group_id, updated))
            bump = updated.subscribed_topic_names != member.subscribed_topic_names
        group_epoch = group.group_epoch
        if group.assignment_epoch >= group_epoch:
            bump |= self._initialized_assignment_pending(group)

        members = dict(group.members)
        members[member_id] = updated
        subscribed = {t for m in members.values() for t in m.subscribed_topic_names}
        new_hash = metadata_hash(subscribed, topics)
        if new_hash != group.metadata_hash:
            bump = True
        if bump:
            group_epoch += 1
            records.append(self._group_record(group_id, group_epoch, new_hash))
            log.info("share.group_epoch_bumped", group=group_id, epoch=group_epoch)

        target_epoch, target = self._maybe_update_target(group, group_epoch, members, member_id,
                                                         topics, now, settings, records)
        reconciled = self._reconcile(updated, target_epoch, target, bump, topics)
        if reconciled != updated:
            records.append(self._current_record(group_id, reconciled))

        answer = HeartbeatAnswer(member_id=member_id, member_epoch=reconciled.member_epoch,
                                 heartbeat_interval_ms=settings.heartbeat_interval_ms)
        if joining or names is not None or dict(reconciled.assigned) != dict(member.assigned):
            answer.assignment = _tps(reconciled.assigned)
        answer.initialize = self._maybe_initialize(group, group_epoch, subscribed, topics, now,
                                                   settings, records)
        self._apply(records, now)
        self._arm_session(group_id, member_id, settings.session_timeout_ms)
        answer.records = records
        return answer

    def _initialized_assignment_pending(self, group: ShareGroup) -> bool:
        """Initialized partitions of subscribed topics not all in the target assignment."""
        if not group.members or not group.initialized:
            return False
        names = group.subscribed_topic_names()
        if not names:
            return False
        assigned: dict[uuid.UUID, set[int]] = {}
        for a in group.target.values():
            for tid, ps in a.items():
                assigned.setdefault(tid, set()).update(ps)
        return any(it.name in names and assigned.get(tid) != set(it.partitions)
                   for tid, it in group.initialized.items())

    def _maybe_update_target(self, group: ShareGroup, group_epoch: int,
                             members: Mapping[str, ShareMember], member_id: str,
                             topics: TopicMetadata, now: int, settings: ShareGroupSettings,
                             records: list[Record]) -> tuple[int, Assignment]:
        if group.assignment_epoch >= group_epoch or not can_compute_target(
                group.assignment_timestamp, settings.assignment_interval_ms, now):
            return group.assignment_epoch, group.target.get(member_id, {})
        names_count: dict[str, int] = {}
        for m in members.values():
            for t in m.subscribed_topic_names:
                names_count[t] = names_count.get(t, 0) + 1
        # ModernGroup.subscriptionType counts names, existing or not.
        homogeneous = all(c == len(members) for c in names_count.values())
        specs = {
            mid: assignor.MemberSpec(
                frozenset(topics[t][0] for t in members[mid].subscribed_topic_names if t in topics),
                group.target.get(mid, {}))
            # Kafka's member map is a HashMap filled from the group's members map, where a
            # joining member is already in place (getOrMaybeCreateMember puts it there).
            for mid in assignor.java_member_order(self._member_iteration(group, members))
        }
        counts = {tid: count for tid, count in topics.values()}
        assignable = {tid: set(it.partitions) for tid, it in group.initialized.items()}
        try:
            result = assignor.assign(specs, counts, assignable, homogeneous=homogeneous)
        except assignor.AssignorError as e:
            raise ShareGroupError(ErrorCode.unknown_server_error,
                                  f"Failed to compute a new target assignment for epoch "
                                  f"{group_epoch}: {e}") from None
        for mid in specs:
            new = result.get(mid, {})
            if mid not in group.target or group.target[mid] != new:
                records.append((sl.ShareGroupKey(sl.SHARE_TARGET_ASSIGNMENT_MEMBER, group.group_id, mid),
                                sl.TargetAssignmentMemberValue(_tps(new))))
        records.append((sl.ShareGroupKey(sl.SHARE_TARGET_ASSIGNMENT_METADATA, group.group_id),
                        sl.TargetAssignmentMetadataValue(group_epoch, now)))
        log.info("share.target_assigned", group=group.group_id, epoch=group_epoch)
        return group_epoch, result.get(member_id, {})

    @staticmethod
    def _member_iteration(group: ShareGroup, members: Mapping[str, ShareMember]) -> list[str]:
        order = group.member_order.keys()
        if any(m not in group.members for m in members):
            scratch = assignor.TimelineOrder()
            for m in order:
                scratch.add(m)
            for m in sorted(members):
                if m not in group.members:
                    scratch.add(m)
            order = scratch.keys()
        return [m for m in order if m in members]

    @staticmethod
    def _reconcile(member: ShareMember, target_epoch: int, target: Assignment,
                   subscription_changed: bool, topics: TopicMetadata) -> ShareMember:
        # GroupMetadataManager.maybeReconcile + ShareGroupAssignmentBuilder.build.
        if not subscription_changed and member.state == MEMBER_STABLE \
                and member.member_epoch == target_epoch:
            return member
        ids = {topics[t][0] for t in member.subscribed_topic_names if t in topics}
        filtered = {tid: ps for tid, ps in target.items() if tid in ids}
        if target_epoch != member.member_epoch:
            return replace(member, state=MEMBER_STABLE, assigned=filtered,
                           member_epoch=target_epoch, previous_member_epoch=member.member_epoch)
        if subscription_changed:
            return replace(member, assigned=filtered)
        return member

    def _maybe_initialize(self, group: ShareGroup, group_epoch: int, subscribed: set[str],
                          topics: TopicMetadata, now: int, settings: ShareGroupSettings,
                          records: list[Record]) -> InitializeRequest | None:
        # GroupMetadataManager.maybeCreateInitializeShareGroupStateRequest and
        # subscribedTopicsChangeMap: what is initialized, or initializing for less than the
        # retry interval, is not asked again.
        if not subscribed:
            return None
        fresh = {tid: it for tid, it in group.initializing.items()
                 if now - it.timestamp < settings.initialize_retry_interval_ms}
        already = _combine(group.initialized, fresh)
        change: dict[uuid.UUID, InitTopic] = {}
        for name in sorted(subscribed):
            if name not in topics:
                continue
            tid, count = topics[name]
            have = already[tid].partitions if tid in already else frozenset()
            if not have or len(have) < count:
                change[tid] = InitTopic(name, frozenset(range(count)) - have, now)
        if not change:
            return None
        initializing = _combine(group.initializing, change)
        deleting = {tid: n for tid, n in group.deleting.items() if tid not in initializing}
        records.append(self._state_record(group.group_id, initializing, group.initialized, deleting))
        known = set(group.initialized) | set(group.initializing)
        return InitializeRequest(group.group_id, group_epoch, {
            tid: (it.partitions, 0 if tid in known else -1) for tid, it in change.items()})

    # ---- initialization outcome ---------------------------------------------------------
    def initialized(self, group_id: str, done: Mapping[uuid.UUID, Iterable[int]]) -> list[Record]:
        """The share state of ``done`` partitions now exists (GroupMetadataManager.
        initializeShareGroupState): they move from initializing to initialized."""
        group = self.groups.get(group_id)
        if group is None or not done:
            return []
        now = self.clock.wall_ms()
        names = {tid: n for n, (tid, _) in self._topics().items()}
        enriched = {tid: InitTopic(names.get(tid, "<UNKNOWN>"), frozenset(ps), now)
                    for tid, ps in done.items()}
        initialized = _combine(group.initialized, enriched)
        initializing = self._without(group.initializing, done)
        records = [self._state_record(group_id, initializing, initialized, group.deleting)]
        self._apply(records, now)
        return records

    def initialize_failed(self, group_id: str, failed: Mapping[uuid.UUID, Iterable[int]]) -> list[Record]:
        """The share coordinator refused: the partitions leave initializing, so the next
        heartbeat asks again (GroupMetadataManager.uninitializeShareGroupState)."""
        group = self.groups.get(group_id)
        if group is None or not group.initializing or not failed:
            return []
        records = [self._state_record(group_id, self._without(group.initializing, failed),
                                      group.initialized, group.deleting)]
        self._apply(records, self.clock.wall_ms())
        return records

    @staticmethod
    def _without(m: Mapping[uuid.UUID, InitTopic],
                 drop: Mapping[uuid.UUID, Iterable[int]]) -> dict[uuid.UUID, InitTopic]:
        out = {}
        for tid, it in m.items():
            left = it.partitions - frozenset(drop.get(tid, ()))
            if left:
                out[tid] = InitTopic(it.name, left, it.timestamp)
        return out

    def topics_deleted(self, topic_ids: Iterable[uuid.UUID]) -> list[Record]:
        """Forget the share state of deleted topics in every group
        (GroupMetadataManager.maybeCleanupShareGroupState)."""
        gone = set(topic_ids)
        records: list[Record] = []
        for group_id in sorted(self.groups):
            g = self.groups[group_id]
            if not (gone & (set(g.initializing) | set(g.initialized) | set(g.deleting))):
                continue
            records.append(self._state_record(
                group_id, {t: v for t, v in g.initializing.items() if t not in gone},
                {t: v for t, v in g.initialized.items() if t not in gone},
                {t: n for t, n in g.deleting.items() if t not in gone}))
        self._apply(records, self.clock.wall_ms())
        return records

    # ---- leave, expiry, deletion --------------------------------------------------------
    def _leave(self, group_id: str, member_id: str) -> HeartbeatAnswer:
        if self._is_other_group(group_id):
            raise ShareGroupError(ErrorCode.group_id_not_found,
                                  f"Group {group_id} is not a share group.")
        group = self.groups.get(group_id)
        if group is None:
            raise ShareGroupError(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
        if member_id not in group.members:
            raise ShareGroupError(ErrorCode.unknown_member_id,
                                  f"Member {member_id} is not a member of group {group_id}.")
        log.info("share.member_left", group=group_id, member=member_id)
        # The answer echoes the epoch; the heartbeat interval stays 0 (seen on Kafka 4.4).
        return HeartbeatAnswer(member_id=member_id, member_epoch=LEAVE_EPOCH,
                               records=self._fence(group, member_id))

    def _fence(self, group: ShareGroup, member_id: str) -> list[Record]:
        # GroupMetadataManager.shareGroupFenceMember.
        gid = group.group_id
        records: list[Record] = [
            (sl.ShareGroupKey(sl.SHARE_CURRENT_MEMBER_ASSIGNMENT, gid, member_id), None),
            (sl.ShareGroupKey(sl.SHARE_TARGET_ASSIGNMENT_MEMBER, gid, member_id), None),
            (sl.ShareGroupKey(sl.SHARE_MEMBER_METADATA, gid, member_id), None),
        ]
        rest = {t for m in group.members.values() if m.member_id != member_id
                for t in m.subscribed_topic_names}
        epoch = group.group_epoch + 1
        records.append(self._group_record(gid, epoch, metadata_hash(rest, self._topics())))
        if len(group.members) == 1:
            records.append((sl.ShareGroupKey(sl.SHARE_TARGET_ASSIGNMENT_METADATA, gid),
                            sl.TargetAssignmentMetadataValue(epoch, 0)))
        session = self._sessions.pop((gid, member_id), None)
        if session is not None:
            session.cancel()
        self._apply(records, self.clock.wall_ms())
        return records

    def _arm_session(self, group_id: str, member_id: str, timeout_ms: int) -> None:
        old = self._sessions.get((group_id, member_id))
        if old is not None:
            old.cancel()
        self._sessions[(group_id, member_id)] = self.timers.call_later(
            timeout_ms, self._session_expired, group_id, member_id)

    def _session_expired(self, group_id: str, member_id: str) -> None:
        self._sessions.pop((group_id, member_id), None)
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return
        log.info("share.member_expired", group=group_id, member=member_id)
        self._outbox.extend(self._fence(group, member_id))

    def take_records(self) -> list[Record]:
        """Records of the session expiries run since the last call, to be written."""
        out, self._outbox = self._outbox, []
        return out

    def on_loaded(self) -> None:
        """After :meth:`replay` of the topic at start-up: every member's session starts now,
        as Kafka's onLoaded schedules them."""
        for group_id, group in self.groups.items():
            timeout = self._settings(group_id).session_timeout_ms
            for member_id in group.members:
                self._arm_session(group_id, member_id, timeout)

    def delete(self, group_id: str) -> list[Record]:
        """DeleteGroups on a share group: refused unless Empty (ShareGroup.validateDeleteGroup),
        then the tombstones of ShareGroup.createGroupTombstoneRecords."""
        if self._is_other_group(group_id) or group_id not in self.groups:
            raise ShareGroupError(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
        group = self.groups[group_id]
        if group.state != EMPTY:
            raise ShareGroupError(ErrorCode.non_empty_group, "The group is not empty.")
        keys = [sl.ShareGroupKey(sl.SHARE_TARGET_ASSIGNMENT_METADATA, group_id),
                sl.ShareGroupKey(sl.SHARE_STATE_PARTITION_METADATA, group_id),
                sl.ShareGroupKey(sl.SHARE_GROUP_METADATA, group_id)]
        records: list[Record] = [(k, None) for k in keys]
        self._apply(records, self.clock.wall_ms())
        return records

    # ---- ShareGroupDescribe, ListGroups -------------------------------------------------
    def describe(self, group_ids: Iterable[str]) -> list[DescribedGroup]:
        names = {tid: n for n, (tid, _) in self._topics().items()}
        out = []
        for gid in group_ids:
            group = self.groups.get(gid)
            if self._is_other_group(gid):
                out.append(DescribedGroup(gid, ErrorCode.group_id_not_found,
                                          f"Group {gid} is not a share group."))
                continue
            if group is None:
                out.append(DescribedGroup(gid, ErrorCode.group_id_not_found,
                                          f"Group {gid} not found."))
                continue
            members = tuple(
                DescribedMember(m.member_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
                                tuple(sorted(m.subscribed_topic_names)),
                                tuple((tid, names[tid], tuple(sorted(ps)))
                                      for tid, ps in sorted(m.assigned.items()) if tid in names))
                for _, m in sorted(group.members.items()))
            out.append(DescribedGroup(gid, state=group.state, group_epoch=group.group_epoch,
                                      assignment_epoch=group.assignment_epoch, members=members))
        return out

    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of every share group, for ListGroups (type "share")."""
        return [(gid, g.state) for gid, g in sorted(self.groups.items())]

    # ---- records --------------------------------------------------------------------------
    @staticmethod
    def _member_record(group_id: str, m: ShareMember) -> Record:
        return (sl.ShareGroupKey(sl.SHARE_MEMBER_METADATA, group_id, m.member_id),
                sl.MemberMetadataValue(m.rack_id, m.client_id, m.client_host,
                                       tuple(sorted(m.subscribed_topic_names))))

    @staticmethod
    def _group_record(group_id: str, epoch: int, hash_: int) -> Record:
        return (sl.ShareGroupKey(sl.SHARE_GROUP_METADATA, group_id),
                sl.GroupMetadataValue(epoch, hash_))

    @staticmethod
    def _current_record(group_id: str, m: ShareMember) -> Record:
        return (sl.ShareGroupKey(sl.SHARE_CURRENT_MEMBER_ASSIGNMENT, group_id, m.member_id),
                sl.CurrentMemberAssignmentValue(m.member_epoch, m.previous_member_epoch, m.state,
                                                _tps(m.assigned)))

    @staticmethod
    def _state_record(group_id: str, initializing: Mapping[uuid.UUID, InitTopic],
                      initialized: Mapping[uuid.UUID, InitTopic],
                      deleting: Mapping[uuid.UUID, str]) -> Record:
        return (sl.ShareGroupKey(sl.SHARE_STATE_PARTITION_METADATA, group_id),
                sl.StatePartitionMetadataValue(
                    _infos(initializing), _infos(initialized),
                    tuple(sl.TopicInfo(tid, n) for tid, n in sorted(deleting.items()))))

    def _apply(self, records: list[Record], now: int) -> None:
        for key, value in records:
            self.replay(key, value, now)

    def replay(self, key: sl.ShareGroupKey, value: sl.ShareValue | None, now_ms: int) -> None:
        """Apply one record, from this machine or read back from ``__consumer_offsets``
        (GroupMetadataManager.replay for the share record types). A tombstone for a group
        or member that does not exist is ignored, as Kafka's replay does."""
        gid = key.group_id
        group = self.groups.get(gid)
        if group is None:
            if value is None:
                return
            group = self.groups[gid] = ShareGroup(gid)
        match key.record_type:
            case sl.SHARE_MEMBER_METADATA:
                assert key.member_id is not None
                if value is None:
                    if group.members.pop(key.member_id, None) is not None:
                        group.member_order.remove(key.member_id)
                    return
                assert isinstance(value, sl.MemberMetadataValue)
                group.member_order.add(key.member_id)
                m = group.members.get(key.member_id) or ShareMember(key.member_id)
                group.members[key.member_id] = replace(
                    m, rack_id=value.rack_id, client_id=value.client_id,
                    client_host=value.client_host,
                    subscribed_topic_names=frozenset(value.subscribed_topic_names))
            case sl.SHARE_GROUP_METADATA:
                if value is None:
                    del self.groups[gid]
                    for k in [k for k in self._sessions if k[0] == gid]:
                        self._sessions.pop(k).cancel()
                    return
                assert isinstance(value, sl.GroupMetadataValue)
                group.group_epoch, group.metadata_hash = value.epoch, value.metadata_hash
            case sl.SHARE_TARGET_ASSIGNMENT_METADATA:
                if value is None:
                    group.assignment_epoch, group.assignment_timestamp = -1, 0
                    return
                assert isinstance(value, sl.TargetAssignmentMetadataValue)
                group.assignment_epoch = value.assignment_epoch
                group.assignment_timestamp = value.assignment_timestamp
            case sl.SHARE_TARGET_ASSIGNMENT_MEMBER:
                assert key.member_id is not None
                if value is None:
                    group.target.pop(key.member_id, None)
                    return
                assert isinstance(value, sl.TargetAssignmentMemberValue)
                group.target[key.member_id] = {tid: frozenset(ps)
                                               for tid, ps in value.topic_partitions}
            case sl.SHARE_CURRENT_MEMBER_ASSIGNMENT:
                assert key.member_id is not None
                cur = group.members.get(key.member_id)
                if value is None:
                    if cur is not None:
                        group.members[key.member_id] = replace(
                            cur, member_epoch=LEAVE_EPOCH, previous_member_epoch=LEAVE_EPOCH,
                            assigned={})
                    return
                assert isinstance(value, sl.CurrentMemberAssignmentValue)
                group.member_order.add(key.member_id)
                group.members[key.member_id] = replace(
                    cur or ShareMember(key.member_id), member_epoch=value.member_epoch,
                    previous_member_epoch=value.previous_member_epoch, state=value.state,
                    assigned={tid: frozenset(ps) for tid, ps in value.assigned_partitions})
            case sl.SHARE_STATE_PARTITION_METADATA:
                if value is None:
                    group.initializing, group.initialized, group.deleting = {}, {}, {}
                    return
                assert isinstance(value, sl.StatePartitionMetadataValue)
                # Kafka stamps replayed entries with the replay time: the retry interval of an
                # initialization read back at start-up counts from the load.
                group.initializing = {t.topic_id: InitTopic(t.topic_name, frozenset(t.partitions),
                                                            now_ms)
                                      for t in value.initializing_topics}
                group.initialized = {t.topic_id: InitTopic(t.topic_name, frozenset(t.partitions),
                                                           now_ms)
                                     for t in value.initialized_topics}
                group.deleting = {t.topic_id: t.topic_name for t in value.deleting_topics}
