"""KIP-848 consumer groups: ConsumerGroupHeartbeat as a synchronous state machine.

Theory of operation
-------------------
A consumer group (``group.protocol=consumer``) has no JoinGroup/SyncGroup round: each member
heartbeats its subscription and the partitions it owns, and the coordinator answers with its
member epoch and assignment. Three epochs move it (Kafka's ``GroupMetadataManager``):

* the **group epoch** is bumped when what the group must assign changes: a member's subscribed
  topic names change, a member leaves or is fenced, a subscribed topic regex resolves to other
  topics, or — checked when the group is new and whenever topics were created, deleted or grew
  since the last check — the subscribed topics' partitions changed;
* the **assignment epoch** catches up with the group epoch when the assignor (``uniform`` or
  ``range``, :mod:`.consumer_assignors`) computes a new target assignment. As Kafka 4.4 does
  (``group.consumer.assignment.interval.ms``, 1 s), a target that assigned partitions is not
  recomputed within the interval: the heartbeat after it does it;
* each **member epoch** reaches the assignment epoch through reconciliation
  (:mod:`.consumer_member`): revoke first, then take partitions others have released.

The group's state is derived, as Kafka's ``ConsumerGroup.state``: ``Empty`` (no members),
``Assigning`` (group epoch ahead of the assignment), ``Reconciling`` (a member not yet at the
assignment) or ``Stable``.

Timeouts are deadlines on the shared :class:`~..timers.Deadlines`: a member that sends no
heartbeat for ``group.consumer.session.timeout.ms`` (45 s) is fenced, and so is one that holds
partitions pending revocation past its rebalance timeout. A static member
(``group.instance.id``) that leaves with epoch -2 keeps its assignment until its session times
out, so a restarted instance takes its place without a rebalance.

A subscription by regex uses RE2 syntax, as Kafka's RE2J: resolved against every topic (internal
ones too, as Kafka) right after the heartbeat that brought it (a deadline due at once, as Kafka
resolves it off the request path: the group epoch moves, the next heartbeat gets the
assignment), and again at the first heartbeat after topics changed.

The group lives in the coordinator's shared ``groups`` dict as a
:class:`~.model.Group` whose ``consumer`` holds this state, so committed offsets,
transactional offsets and ``__consumer_offsets`` are shared with classic groups. Membership is
not written to ``__consumer_offsets``: after a restart a member's heartbeat is answered
UNKNOWN_MEMBER_ID and it rejoins (tests/differential/divergences.py).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from minibroker_protocol.errors import ErrorCode
from minibroker_storage.lazylog import get_logger

from ...core.clock import Clock
from ..timers import Deadlines
from . import consumer_assignors as assignors
from .consumer_member import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerMember,
    MemberState,
    is_subset,
    partitions_of,
    reconcile,
)
from .consumer_regex import RegexError, compile_regex
from .model import ConsumerGroupState, Group, GroupError
from .state import GroupState

log = get_logger("minibroker.group")

Owned = Mapping[uuid.UUID, frozenset[int]]


@dataclass(frozen=True)
class TopicView:
    name: str
    topic_id: uuid.UUID
    partitions: int


# The topics an assignment may use (internal ones too, as in Kafka), read at each heartbeat.
Topics = Callable[[], Iterable[TopicView]]


@dataclass(frozen=True)
class ConsumerGroupSettings:
    """Kafka's group.consumer.* broker settings."""
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    assignment_interval_ms: int = 1_000
    max_size: int = 2_147_483_647
    assignors: tuple[str, ...] = assignors.ASSIGNORS


# (group id, group config name) -> the group's value, else the broker default: the broker's
# GroupConfigs.group_int (IncrementalAlterConfigs on GROUP resources)
GroupConfigLookup = Callable[[str, str], int]
SESSION_TIMEOUT, HEARTBEAT_INTERVAL, ASSIGNMENT_INTERVAL = (
    "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "consumer.assignment.interval.ms")


class ConsumerGroupError(GroupError):
    """A refusal with Kafka's error message (ConsumerGroupHeartbeat answers carry it)."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(code, message or "")
        self.message = message


@dataclass(frozen=True)
class HeartbeatAnswer:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: assignors.Assignment | None  # None: unchanged, not sent


def _fenced_greater(got: int, known: int) -> ConsumerGroupError:
    return ConsumerGroupError(
        ErrorCode.fenced_member_epoch,
        f"The consumer group member has a greater member epoch ({got}) than the one known by the "
        f"group coordinator ({known}). The member must abandon all its partitions and rejoin.")


def _fenced_smaller(got: int, known: int) -> ConsumerGroupError:
    return ConsumerGroupError(
        ErrorCode.fenced_member_epoch,
        f"The consumer group member has a smaller member epoch ({got}) than the one known by the "
        f"group coordinator ({known}). The member must abandon all its partitions and rejoin.")


def _invalid(message: str) -> ConsumerGroupError:
    return ConsumerGroupError(ErrorCode.invalid_request, message)


class ConsumerGroups:
    def __init__(self, groups: dict[str, Group], *, clock: Clock, timers: Deadlines,
                 topics: Topics, settings: ConsumerGroupSettings | None = None,
                 new_member_id: Callable[[], str] | None = None,
                 group_config: GroupConfigLookup | None = None) -> None:
        self.groups = groups
        self.clock = clock
        self.timers = timers
        self.topics = topics
        self.settings = settings or ConsumerGroupSettings()
        self._new_member_id = new_member_id or _random_member_id
        self._group_config = group_config or self._broker_default

    def _broker_default(self, group_id: str, name: str) -> int:
        return {SESSION_TIMEOUT: self.settings.session_timeout_ms,
                HEARTBEAT_INTERVAL: self.settings.heartbeat_interval_ms,
                ASSIGNMENT_INTERVAL: self.settings.assignment_interval_ms}[name]

    # -- validation (GroupMetadataManager.throwIfConsumerGroupHeartbeatRequestIsInvalid) --------
    def _validate(self, version: int, group_id: str, member_id: str, member_epoch: int,
                  instance_id: str | None, rack_id: str | None, rebalance_timeout_ms: int,
                  names: tuple[str, ...] | None, regex: str | None, server_assignor: str | None,
                  owned: Owned | None) -> None:
        if group_id == "":
            raise _invalid("GroupId can't be empty.")
        if instance_id == "":
            raise _invalid("InstanceId can't be empty.")
        if rack_id == "":
            raise _invalid("RackId can't be empty.")
        if version >= 1 and member_id == "":
            raise _invalid("MemberId can't be empty.")
        if member_epoch > 0 or member_epoch == LEAVE_EPOCH:
            if member_id == "":
                raise _invalid("MemberId can't be empty.")
        elif member_epoch == JOIN_EPOCH:
            if rebalance_timeout_ms == -1:
                raise _invalid("RebalanceTimeoutMs must be provided in first request.")
            if owned is None or partitions_of(owned):
                raise _invalid("TopicPartitions must be empty when (re-)joining.")
            if names is None and regex is None:
                raise _invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be "
                               "non-null when (re-)joining.")
        elif member_epoch == STATIC_LEAVE_EPOCH:
            if member_id == "":
                raise _invalid("MemberId can't be empty.")
            if instance_id is None:
                raise _invalid("InstanceId can't be null.")
        else:
            raise _invalid("MemberEpoch is invalid.")
        if server_assignor is not None and server_assignor not in self.settings.assignors:
            raise ConsumerGroupError(
                ErrorCode.unsupported_assignor,
                f"ServerAssignor {server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self.settings.assignors)}.")
        if regex:
            try:
                compile_regex(regex)
            except RegexError as e:
                raise ConsumerGroupError(
                    ErrorCode.invalid_regular_expression,
                    f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {e}.") from None

    # -- ConsumerGroupHeartbeat -------------------------------------------------------------
    def heartbeat(self, *, version: int, group_id: str, member_id: str, member_epoch: int,
                  instance_id: str | None = None, rack_id: str | None = None,
                  rebalance_timeout_ms: int = -1, subscribed_names: tuple[str, ...] | None = None,
                  subscribed_regex: str | None = None, server_assignor: str | None = None,
                  owned: Owned | None = None, client_id: str = "",
                  client_host: str = "") -> HeartbeatAnswer:
        self._validate(version, group_id, member_id, member_epoch, instance_id, rack_id,
                       rebalance_timeout_ms, subscribed_names, subscribed_regex, server_assignor,
                       owned)
        if member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(group_id, member_id, member_epoch, instance_id)
        if member_id == "":
            member_id = self._new_member_id()  # v0: the coordinator names the member
        g, cg, new_group = self._group_for(group_id, create=member_epoch == JOIN_EPOCH)
        if member_id not in cg.members and len(cg.members) >= self.settings.max_size:
            raise ConsumerGroupError(ErrorCode.group_max_size_reached,
                                     f"The consumer group has reached its maximum capacity of "
                                     f"{self.settings.max_size} members.")
        member, is_new = self._member_for(group_id, cg, member_id, member_epoch, instance_id,
                                          owned)
        updated = replace(
            member,
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=rack_id if rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(rebalance_timeout_ms if rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            server_assignor=server_assignor if server_assignor is not None else member.server_assignor,
            subscribed_names=(tuple(sorted(set(subscribed_names))) if subscribed_names is not None
                              else member.subscribed_names),
            subscribed_regex=(subscribed_regex or None) if subscribed_regex is not None
            else member.subscribed_regex,
            client_id=client_id, client_host=client_host)
        now = self.clock.wall_ms()
        bumps = 0
        if updated.subscribed_names != member.subscribed_names:
            bumps += 1
        cg.members[member_id] = updated
        if updated.instance_id is not None:
            cg.static[updated.instance_id] = member_id
        # A new or changed regex resolves at the group's next heartbeat (Kafka resolves it in
        # the background); a resolution that changes the topics bumps the epoch then.
        fingerprint = self._topics_fingerprint()
        topics_changed = cg.topics_fingerprint is not None and fingerprint != cg.topics_fingerprint
        if self._resolve_regexes(cg, skip=updated.subscribed_regex
                                 if updated.subscribed_regex != member.subscribed_regex else None,
                                 refresh=topics_changed):
            bumps += 1
        if new_group:
            bumps += 1
            cg.subscription_metadata = self._subscription_metadata(cg)
        elif bumps or topics_changed:
            metadata = self._subscription_metadata(cg)
            if topics_changed and not bumps and metadata != cg.subscription_metadata:
                bumps += 1
            cg.subscription_metadata = metadata
        cg.topics_fingerprint = fingerprint
        if bumps:
            cg.group_epoch += bumps
            log.info("consumer_group.epoch_bumped", group_id=group_id, group_epoch=cg.group_epoch,
                     member_id=member_id, reason="new group" if new_group else "subscription")
        self._maybe_assign(group_id, cg, now)
        before = cg.members[member_id]
        after = reconcile(before, cg.assignment_epoch, cg.target.get(member_id, {}), owned,
                          cg.partition_epoch)
        if after is not before:
            self._replace_member(cg, before, after)
            self._arm_rebalance_timeout(group_id, cg, after)
            log.info("consumer_group.member_reconciled", group_id=group_id, member_id=member_id,
                     member_epoch=after.member_epoch, previous_epoch=after.previous_epoch,
                     state=str(after.state), assigned=_show(after.assigned),
                     revoking=_show(after.pending_revocation))
        self._arm_session_timeout(group_id, cg, member_id)
        regex = after.subscribed_regex
        if regex and regex not in cg.regex_topics and regex not in cg.regex_pending:
            # Kafka resolves a new regex off the request path: the group epoch moves without a
            # heartbeat, and the next heartbeat gets the assignment.
            cg.regex_pending.add(regex)
            self.timers.call_later(0, self._resolve_in_background, group_id)
        if is_new:
            log.info("consumer_group.member_joined", group_id=group_id, member_id=member_id,
                     instance_id=after.instance_id, member_epoch=after.member_epoch,
                     client_id=client_id)
        full = member_epoch == JOIN_EPOCH or (
            rebalance_timeout_ms != -1 and (subscribed_names is not None or subscribed_regex is not None)
            and owned is not None)
        changed = partitions_of(after.assigned) != partitions_of(member.assigned) or is_new
        # GroupMetadataManager.consumerGroupHeartbeatIntervalMs: the group's own config first
        interval = self._group_config(group_id, HEARTBEAT_INTERVAL)
        return HeartbeatAnswer(member_id, after.member_epoch, interval,
                               dict(after.assigned) if full or changed else None)

    def _group_for(self, group_id: str, create: bool) -> tuple[Group, ConsumerGroupState, bool]:
        g = self.groups.get(group_id)
        if g is not None and g.consumer is not None:
            return g, g.consumer, False
        if g is not None and (g.members or g.state not in (GroupState.EMPTY,)
                              or g.streams is not None):
            # a streams group, even empty, stays one (Kafka 4.4, tests/differential/
            # test_streams_groups.py)
            raise ConsumerGroupError(ErrorCode.group_id_not_found,
                                     f"Group {group_id} is not a consumer group.")
        if not create:
            if g is not None:
                # The group's offsets outlived its membership (a restart: membership is not
                # persisted): the member rejoins.
                raise ConsumerGroupError(ErrorCode.unknown_member_id,
                                         f"Group {group_id} has no member state; rejoin.")
            raise ConsumerGroupError(ErrorCode.group_id_not_found,
                                     f"Consumer group {group_id} not found.")
        if g is None:
            g = self.groups[group_id] = Group(group_id)
        else:
            g.protocol_type = g.protocol = g.leader = None  # an empty classic group converts
        g.consumer = ConsumerGroupState()
        log.info("consumer_group.created", group_id=group_id)
        return g, g.consumer, True

    def _member_for(self, group_id: str, cg: ConsumerGroupState, member_id: str, epoch: int,
                    instance_id: str | None, owned: Owned | None) -> tuple[ConsumerMember, bool]:
        if instance_id is None:
            member = cg.members.get(member_id)
            if epoch == JOIN_EPOCH:
                return (member, False) if member is not None else (ConsumerMember(member_id), True)
            if member is None:
                raise ConsumerGroupError(ErrorCode.unknown_member_id,
                                         f"Member {member_id} is not a member of group {group_id}.")
            self._check_epoch(member, epoch, owned)
            return member, False
        holder = cg.static.get(instance_id)
        if epoch == JOIN_EPOCH:
            if holder is None:
                member = cg.members.get(member_id)
                return (member, False) if member is not None else (
                    ConsumerMember(member_id, instance_id=instance_id), True)
            if holder == member_id:
                return cg.members[member_id], False
            previous = cg.members[holder]
            if previous.member_epoch != STATIC_LEAVE_EPOCH:
                raise ConsumerGroupError(
                    ErrorCode.unreleased_instance_id,
                    f"Static member {member_id} with instance id {instance_id} cannot join the "
                    f"group because the instance id is owned by {holder} member.")
            # The restarted instance takes over its predecessor's assignment, at epoch 0.
            successor = replace(previous, member_id=member_id, member_epoch=0, previous_epoch=0)
            self._remove_member(cg, previous)
            cg.target[member_id] = cg.target.pop(holder, {})
            self._add_partition_epochs(cg, successor)
            cg.members[member_id] = successor
            log.info("consumer_group.static_member_replaced", group_id=group_id,
                     instance_id=instance_id, member_id=member_id, previous_member_id=holder)
            return successor, False
        self._check_static_holder(holder, member_id, instance_id)
        member = cg.members[member_id]
        self._check_epoch(member, epoch, owned)
        return member, False

    @staticmethod
    def _check_static_holder(holder: str | None, member_id: str, instance_id: str) -> None:
        """The member must be the one holding the instance id (throwIfStaticMemberIsUnknown,
        throwIfInstanceIdIsFenced): on a heartbeat and on a leave alike."""
        if holder is None:
            raise ConsumerGroupError(ErrorCode.unknown_member_id,
                                     f"Instance id {instance_id} is unknown.")
        if holder != member_id:
            raise ConsumerGroupError(
                ErrorCode.fenced_instance_id,
                f"Static member {member_id} with instance id {instance_id} was fenced by member "
                f"{holder}.")

    @staticmethod
    def _check_epoch(member: ConsumerMember, epoch: int, owned: Owned | None) -> None:
        """A heartbeat one epoch behind is accepted when the answer that moved the member on may
        have been lost, and it owns nothing it should not (throwIfMemberEpochIsInvalid)."""
        if epoch > member.member_epoch:
            raise _fenced_greater(epoch, member.member_epoch)
        if epoch < member.member_epoch and (epoch != member.previous_epoch
                                            or not is_subset(owned, member.assigned)):
            raise _fenced_smaller(epoch, member.member_epoch)

    # -- leaving and fencing ---------------------------------------------------------------
    def _leave(self, group_id: str, member_id: str, epoch: int,
               instance_id: str | None) -> HeartbeatAnswer:
        g = self.groups.get(group_id)
        cg = g.consumer if g is not None else None
        if cg is None:
            raise ConsumerGroupError(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
        if instance_id is not None:
            self._check_static_holder(cg.static.get(instance_id), member_id, instance_id)
        member = cg.members.get(member_id)
        if member is None:
            raise ConsumerGroupError(ErrorCode.unknown_member_id,
                                     f"Member {member_id} is not a member of group {group_id}.")
        if epoch == STATIC_LEAVE_EPOCH:
            # It keeps its assignment (and its session deadline): a restart takes its place.
            self._replace_member(cg, member, replace(member, member_epoch=STATIC_LEAVE_EPOCH))
            log.info("consumer_group.static_member_left", group_id=group_id, member_id=member_id,
                     instance_id=member.instance_id)
        else:
            self._fence(group_id, cg, member, "left")
        return HeartbeatAnswer(member_id, epoch, 0, None)

    def _fence(self, group_id: str, cg: ConsumerGroupState, member: ConsumerMember,
               reason: str) -> None:
        self._remove_member(cg, member)
        cg.target.pop(member.member_id, None)
        cg.group_epoch += 1
        cg.subscription_metadata = self._subscription_metadata(cg)
        if not cg.members:
            cg.assignment_epoch = cg.group_epoch
        event = "consumer_group.member_left" if reason == "left" else "consumer_group.member_fenced"
        log.info(event, group_id=group_id, member_id=member.member_id,
                 instance_id=member.instance_id, member_epoch=member.member_epoch,
                 group_epoch=cg.group_epoch, reason=reason)

    def _remove_member(self, cg: ConsumerGroupState, member: ConsumerMember) -> None:
        cg.members.pop(member.member_id, None)
        if member.instance_id is not None and cg.static.get(member.instance_id) == member.member_id:
            del cg.static[member.instance_id]
        self._drop_partition_epochs(cg, member)
        for timers in (cg.session, cg.rebalance):
            d = timers.pop(member.member_id, None)
            if d is not None:
                d.cancel()

    def _session_expired(self, group_id: str, member_id: str) -> None:
        g = self.groups.get(group_id)
        cg = g.consumer if g is not None else None
        member = cg.members.get(member_id) if cg is not None else None
        if cg is None or member is None:
            return
        cg.session.pop(member_id, None)
        self._fence(group_id, cg, member, f"no heartbeat within the session timeout "
                                          f"({self._group_config(group_id, SESSION_TIMEOUT)} ms)")

    def _rebalance_expired(self, group_id: str, member_id: str, epoch: int) -> None:
        g = self.groups.get(group_id)
        cg = g.consumer if g is not None else None
        member = cg.members.get(member_id) if cg is not None else None
        if cg is None or member is None:
            return
        cg.rebalance.pop(member_id, None)
        if member.member_epoch == epoch and member.state == MemberState.UNREVOKED_PARTITIONS:
            self._fence(group_id, cg, member, f"partitions not revoked within the rebalance "
                                              f"timeout ({member.rebalance_timeout_ms} ms)")

    def _arm_session_timeout(self, group_id: str, cg: ConsumerGroupState, member_id: str) -> None:
        old = cg.session.pop(member_id, None)
        if old is not None:
            old.cancel()
        cg.session[member_id] = self.timers.call_later(self._group_config(group_id, SESSION_TIMEOUT),
                                                       self._session_expired, group_id, member_id)

    def _arm_rebalance_timeout(self, group_id: str, cg: ConsumerGroupState,
                               member: ConsumerMember) -> None:
        old = cg.rebalance.pop(member.member_id, None)
        if old is not None:
            old.cancel()
        if member.state == MemberState.UNREVOKED_PARTITIONS:
            cg.rebalance[member.member_id] = self.timers.call_later(
                member.rebalance_timeout_ms, self._rebalance_expired, group_id, member.member_id,
                member.member_epoch)

    # -- partition ownership -----------------------------------------------------------------
    def _replace_member(self, cg: ConsumerGroupState, before: ConsumerMember,
                        after: ConsumerMember) -> None:
        self._drop_partition_epochs(cg, before)
        self._add_partition_epochs(cg, after)
        cg.members[after.member_id] = after

    @staticmethod
    def _drop_partition_epochs(cg: ConsumerGroupState, m: ConsumerMember) -> None:
        for tp in partitions_of(m.assigned) | partitions_of(m.pending_revocation):
            cg.partition_epochs.pop(tp, None)  # one member holds a partition at a time

    @staticmethod
    def _add_partition_epochs(cg: ConsumerGroupState, m: ConsumerMember) -> None:
        for tp in partitions_of(m.assigned) | partitions_of(m.pending_revocation):
            cg.partition_epochs[tp] = m.member_epoch

    # -- subscriptions and the target assignment ---------------------------------------------
    def _topics_now(self) -> dict[str, TopicView]:
        return {t.name: t for t in self.topics()}

    def _topics_fingerprint(self) -> int:
        return hash(tuple(sorted((t.name, t.partitions, t.topic_id.int) for t in self.topics())))

    def _subscribed(self, cg: ConsumerGroupState, m: ConsumerMember) -> set[str]:
        names = set(m.subscribed_names)
        if m.subscribed_regex:
            names |= cg.regex_topics.get(m.subscribed_regex, frozenset())
        return names

    def _subscription_metadata(self, cg: ConsumerGroupState) -> dict[str, int]:
        topics = self._topics_now()
        names = set().union(*(self._subscribed(cg, m) for m in cg.members.values()))
        return {n: topics[n].partitions if n in topics else -1 for n in names}

    def _resolve_regexes(self, cg: ConsumerGroupState, skip: str | None, refresh: bool) -> bool:
        """Resolve the regexes not yet resolved (all of them after a topic change), except
        ``skip``, just introduced; whether any resolved to other topics than before."""
        wanted = {m.subscribed_regex for m in cg.members.values() if m.subscribed_regex}
        for gone in set(cg.regex_topics) - wanted:
            del cg.regex_topics[gone]
        cg.regex_pending &= wanted
        changed = False
        topics: list[str] | None = None
        for regex in sorted(wanted):
            if regex == skip or (regex in cg.regex_topics and not refresh):
                continue
            if topics is None:
                topics = sorted(self._topics_now())
            pattern = compile_regex(regex)
            resolved = frozenset(t for t in topics if pattern.fullmatch(t))
            if resolved != cg.regex_topics.get(regex, frozenset()):
                changed = True
            cg.regex_topics[regex] = resolved
        return changed

    def _resolve_in_background(self, group_id: str) -> None:
        g = self.groups.get(group_id)
        cg = g.consumer if g is not None else None
        if cg is None or not cg.regex_pending:
            return
        cg.regex_pending.clear()
        if self._resolve_regexes(cg, skip=None, refresh=False):
            cg.group_epoch += 1
            cg.subscription_metadata = self._subscription_metadata(cg)
            log.info("consumer_group.epoch_bumped", group_id=group_id, group_epoch=cg.group_epoch,
                     reason="regex resolved")

    def _maybe_assign(self, group_id: str, cg: ConsumerGroupState, now: int) -> None:
        if cg.group_epoch <= cg.assignment_epoch:
            return
        if (cg.last_assignment_ms is not None
                and now - cg.last_assignment_ms < self._group_config(group_id, ASSIGNMENT_INTERVAL)):
            return
        topics = self._topics_now()
        by_id = {t.topic_id: assignors.TopicSpec(t.topic_id, t.name, t.partitions)
                 for t in topics.values()}
        specs = [assignors.MemberSpec(
            m.member_id, m.instance_id,
            frozenset(topics[n].topic_id for n in self._subscribed(cg, m) if n in topics),
            cg.target.get(m.member_id, {})) for m in cg.members.values()]
        name = cg.preferred_assignor(self.settings.assignors[0])
        cg.target = assignors.assign(name, specs, by_id)
        cg.assignment_epoch = cg.group_epoch
        if any(partitions_of(a) for a in cg.target.values()):
            cg.last_assignment_ms = now
        log.info("consumer_group.target_assignment", group_id=group_id,
                 assignment_epoch=cg.assignment_epoch, assignor=name,
                 members={mid: _show(a) for mid, a in cg.target.items()})

    def topics_changed(self) -> None:
        """Nothing to do now: each group compares the topics at its next heartbeat."""

    # -- what other parts ask ----------------------------------------------------------------
    def describe(self, group_id: str) -> ConsumerGroupState:
        g = self.groups.get(group_id)
        if g is None or (g.consumer is None and g.state == GroupState.DEAD):
            raise ConsumerGroupError(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
        if g.consumer is None:
            raise ConsumerGroupError(ErrorCode.group_id_not_found,
                                     f"Group {group_id} is not a consumer group.")
        return g.consumer

    def assignor_name(self, cg: ConsumerGroupState) -> str:
        return cg.preferred_assignor(self.settings.assignors[0])


def subscribed_by_consumer_group(cg: ConsumerGroupState) -> set[str]:
    """Topics a member subscribes to, by name or through its resolved regex."""
    out: set[str] = set()
    for m in cg.members.values():
        out.update(m.subscribed_names)
        if m.subscribed_regex:
            out.update(cg.regex_topics.get(m.subscribed_regex, ()))
    return out


def validate_offset_commit(g: Group, member_id: str, instance_id: str | None, epoch: int,
                           transactional: bool, api_version: int) -> None:
    """Kafka's ConsumerGroup.validateOffsetCommit, for a group that has consumer state."""
    assert g.consumer is not None
    check_member_offset_commit(g, g.consumer.members, "modern", member_id, instance_id, epoch,
                               transactional, api_version)


def check_member_offset_commit(g: Group, members: Mapping[str, Any], protocol: str, member_id: str,
                               instance_id: str | None, epoch: int, transactional: bool,
                               api_version: int) -> None:
    """The commit rules ConsumerGroup and StreamsGroup.validateOffsetCommit share, over the
    group's ``members`` (each with a ``member_epoch``); ``protocol`` names it in the v<9 refusal."""
    if epoch < 0 and not members:
        return  # the admin client, or a consumer outside group management
    if transactional and epoch == -1 and member_id == "" and instance_id is None:
        return  # TxnOffsetCommit without group metadata
    member = members.get(member_id)
    if member is None:
        raise ConsumerGroupError(ErrorCode.unknown_member_id,
                                 f"Member {member_id} is not a member of group {g.group_id}.")
    if not transactional and api_version < 9:
        raise ConsumerGroupError(ErrorCode.unsupported_version,
                                 "OffsetCommit version 9 or above must be used by members using "
                                 f"the {protocol} group protocol")
    if epoch != member.member_epoch:
        raise ConsumerGroupError(ErrorCode.stale_member_epoch,
                                 f"The member epoch {epoch} is stale; the current one is "
                                 f"{member.member_epoch}.")


def validate_offset_fetch(g: Group, member_id: str | None, epoch: int) -> None:
    """Kafka's ConsumerGroup.validateOffsetFetch."""
    assert g.consumer is not None
    check_member_offset_fetch(g, g.consumer.members, member_id, epoch)


def check_member_offset_fetch(g: Group, members: Mapping[str, Any], member_id: str | None,
                              epoch: int) -> None:
    """The fetch rules ConsumerGroup and StreamsGroup.validateOffsetFetch share."""
    if member_id is None and epoch < 0:
        return
    member = members.get(member_id or "")
    if member is None:
        raise ConsumerGroupError(ErrorCode.unknown_member_id,
                                 f"Member {member_id} is not a member of group {g.group_id}.")
    if epoch != member.member_epoch:
        raise ConsumerGroupError(ErrorCode.stale_member_epoch,
                                 f"The member epoch {epoch} is stale; the current one is "
                                 f"{member.member_epoch}.")


def _random_member_id() -> str:
    # Kafka's Uuid.randomUuid().toString(): URL-safe base64 of 16 bytes, unpadded
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _show(a: Mapping[uuid.UUID, frozenset[int]]) -> dict[str, list[int]]:
    return {str(t): sorted(ps) for t, ps in a.items()}
