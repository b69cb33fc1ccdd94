"""KIP-1071 streams groups: StreamsGroupHeartbeat as a synchronous state machine.

Theory of operation
-------------------
Kafka Streams with ``group.protocol=streams`` heartbeats its topology, the tasks each stream
thread (one member each, grouped by process id) owns, and its endpoint; the coordinator owns
the task assignment. It works like the KIP-848 consumer groups (:mod:`.consumer_group`), with
tasks in place of partitions (Kafka's ``GroupMetadataManager.streamsGroupHeartbeat``):

* the **group epoch** moves when a member joins or leaves (or is fenced), when the topology is
  first set (a group with members refuses another topology epoch: "Topology updates are not
  supported yet.", as Kafka 4.4), and when the topics make the configured
  topology (:mod:`.streams_topology`) come out differently — checked at each heartbeat after a
  topic changed;
* the **assignment epoch** catches up when the sticky task assignor (:mod:`.streams_assignor`)
  computes a new target. A new group waits ``streams.initial.rebalance.delay.ms`` (3 s) before
  assigning tasks (status ASSIGNMENT_DELAYED), as Kafka 4.4 does; a topology that cannot be
  configured (missing source topics, internal topics not yet created) assigns nothing;
* each **member epoch** reaches the assignment epoch by reconciliation: active tasks to move are
  revoked first; a task still held (or being revoked) by another member is handed over only once
  that member let it go.

Internal topics (repartition and changelog) that do not exist are created by the coordinator
with the partitions, replication factor and configs the topology asks for, and the heartbeat that
found them missing reports MISSING_INTERNAL_TOPICS, as Kafka's coordinator does through its
AutoTopicCreationManager.

State: ``Empty`` (no members), ``NotReady`` (the topology is not configured), ``Assigning``,
``Reconciling``, ``Stable`` (Kafka's ``StreamsGroup.StreamsGroupState``). Membership is not
persisted, as for consumer groups here: after a restart a member's heartbeat is answered
UNKNOWN_MEMBER_ID and it rejoins (tests/differential/divergences.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from minibroker_protocol.errors import ErrorCode
from minibroker_storage.lazylog import get_logger

from ...core.clock import Clock
from ..timers import Deadlines
from . import streams_assignor as sa
from . import streams_topology as st
from .consumer_group import (
    ConsumerGroupError,
    GroupConfigLookup,
    Topics,
    check_member_offset_commit,
    check_member_offset_fetch,
)
from .model import Group
from .state import GroupState
from .streams_state import StreamsGroupState, StreamsMember

log = get_logger("minibroker.group")

JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH = 0, -1, -2
SESSION_TIMEOUT = "streams.session.timeout.ms"
HEARTBEAT_INTERVAL = "streams.heartbeat.interval.ms"
NUM_STANDBY = "streams.num.standby.replicas"
INITIAL_DELAY = "streams.initial.rebalance.delay.ms"
TASK_OFFSET_INTERVAL = "streams.task.offset.interval.ms"
ACCEPTABLE_LAG = "streams.acceptable.recovery.lag"
ASSIGNMENT_INTERVAL = "streams.assignment.interval.ms"
# Kafka 4.4's group.streams.* defaults, for a coordinator built without the broker's GroupConfigs
DEFAULTS = {SESSION_TIMEOUT: 45_000, HEARTBEAT_INTERVAL: 5_000, NUM_STANDBY: 0,
            INITIAL_DELAY: 3_000, TASK_OFFSET_INTERVAL: 60_000, ACCEPTABLE_LAG: 10_000,
            ASSIGNMENT_INTERVAL: 1_000}

# (name, partitions, replication factor, configs) -> None; may raise to refuse
CreateTopic = Callable[[str, int, int, dict[str, str]], None]
Tasks = dict[str, frozenset[int]]


@dataclass(frozen=True)
class StreamsHeartbeat:
    """What a StreamsGroupHeartbeat carries (None: unchanged since the last heartbeat)."""
    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: st.Topology | None = None
    active: Tasks | None = None
    standby: Tasks | None = None
    warmup: Tasks | None = None
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    task_offsets: tuple[tuple[str, int, int], ...] | None = None
    task_end_offsets: tuple[tuple[str, int, int], ...] | None = None
    shutdown_application: bool = False


@dataclass(frozen=True)
class StreamsAnswer:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    task_offset_interval_ms: int
    acceptable_recovery_lag: int
    statuses: tuple[tuple[int, str], ...]
    active: Tasks | None
    standby: Tasks | None
    warmup: Tasks | None
    endpoint_information_epoch: int
    # ((host, port), active {topic: partitions}, standby {topic: partitions}) per member endpoint
    partitions_by_endpoint: tuple | None


def _invalid(message: str) -> ConsumerGroupError:
    return ConsumerGroupError(ErrorCode.invalid_request, message)


class StreamsGroups:
    def __init__(self, groups: dict[str, Group], *, clock: Clock, timers: Deadlines,
                 topics: Topics, group_config: GroupConfigLookup | None = None,
                 create_topic: CreateTopic | None = None) -> None:
        self.groups = groups
        self.clock = clock
        self.timers = timers
        self.topics = topics
        self._group_config = group_config or (lambda _group, name: DEFAULTS[name])
        self.create_topic = create_topic

    # -- validation (GroupMetadataManager.throwIfStreamsGroupHeartbeatRequestIsInvalid) -------
    def _validate(self, hb: StreamsHeartbeat) -> None:
        if hb.group_id == "":
            raise _invalid("GroupId can't be empty.")
        if hb.instance_id == "":
            raise _invalid("InstanceId can't be empty.")
        if hb.rack_id == "":
            raise _invalid("RackId can't be empty.")
        if hb.member_id == "":
            raise _invalid("MemberId can't be empty.")
        if hb.member_epoch < STATIC_LEAVE_EPOCH:
            raise _invalid(f"MemberEpoch is {hb.member_epoch}, but must be greater than or equal "
                           f"to -2.")
        if len({hb.active is None, hb.standby is None, hb.warmup is None}) > 1:
            raise _invalid("If one task-type is non-null, all must be non-null.")
        if hb.member_epoch == JOIN_EPOCH:
            if hb.rebalance_timeout_ms == -1:
                raise _invalid("RebalanceTimeoutMs must be provided in first request.")
            if hb.topology is None:
                raise _invalid("Topology must be non-null when (re-)joining.")
            if hb.active is None or any(hb.active.values()):
                raise _invalid("ActiveTasks must be empty when (re-)joining.")
            if hb.standby is None or any(hb.standby.values()):
                raise _invalid("StandbyTasks must be empty when (re-)joining.")
            if hb.warmup is None or any(hb.warmup.values()):
                raise _invalid("WarmupTasks must be empty when (re-)joining.")
            if hb.process_id is None:
                raise _invalid("ProcessId can't be null.")
        elif hb.member_epoch == STATIC_LEAVE_EPOCH:
            if hb.instance_id is None:
                raise _invalid("InstanceId can't be null.")

    # -- StreamsGroupHeartbeat ---------------------------------------------------------------
    def heartbeat(self, hb: StreamsHeartbeat, *, client_id: str = "",
                  client_host: str = "") -> StreamsAnswer:
        self._validate(hb)
        gid, mid = hb.group_id, hb.member_id
        if hb.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(hb)
        g, sg, new_group = self._group_for(gid, create=hb.member_epoch == JOIN_EPOCH)
        now = self.clock.wall_ms()
        if new_group:
            sg.created_ms = now
        if (hb.topology is not None and sg.topology is not None and sg.members
                and hb.topology.epoch != sg.topology.epoch):
            # Kafka 4.4 (seen on the reference): a group keeps the topology it was made with
            raise _invalid("Topology updates are not supported yet.")
        member, is_new = self._member_for(gid, sg, hb)
        statuses: list[tuple[int, str]] = []
        bump = new_group or is_new
        topology_changed = False
        if hb.topology is not None:
            if sg.topology is None or hb.topology.epoch != sg.topology.epoch:
                # a new group, or an empty one taking a new topology
                topology_changed = sg.topology != hb.topology
                sg.topology = hb.topology
            topology_epoch = hb.topology.epoch
        else:
            topology_epoch = member.topology_epoch
        updated = replace(
            member,
            instance_id=hb.instance_id if hb.instance_id is not None else member.instance_id,
            rack_id=hb.rack_id if hb.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(hb.rebalance_timeout_ms if hb.rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            process_id=hb.process_id if hb.process_id is not None else member.process_id,
            user_endpoint=hb.user_endpoint if hb.user_endpoint is not None else member.user_endpoint,
            client_tags=hb.client_tags if hb.client_tags is not None else member.client_tags,
            task_offsets=hb.task_offsets if hb.task_offsets is not None else member.task_offsets,
            task_end_offsets=(hb.task_end_offsets if hb.task_end_offsets is not None
                              else member.task_end_offsets),
            topology_epoch=topology_epoch, client_id=client_id, client_host=client_host)
        if (updated.process_id, updated.user_endpoint, updated.client_tags, updated.rack_id,
                updated.instance_id) != (member.process_id, member.user_endpoint,
                                         member.client_tags, member.rack_id, member.instance_id):
            bump = True  # what the assignor reads of the member changed
        sg.members[mid] = updated
        if updated.instance_id is not None:
            sg.static[updated.instance_id] = mid
        assert sg.topology is not None
        if self._reconfigure(gid, sg, force=topology_changed or new_group):
            bump = True
        if bump:
            sg.group_epoch += 1
            log.info("streams_group.epoch_bumped", group_id=gid, group_epoch=sg.group_epoch,
                     member_id=mid, reason="new group" if new_group else
                     "new member" if is_new else "topology or member metadata")
        configured = sg.configured
        assert configured is not None
        if configured.missing_internal:
            self._create_internal_topics(gid, configured)
        statuses.extend(configured.statuses)
        delay_ms = self._group_config(gid, INITIAL_DELAY)
        delayed = now < sg.created_ms + delay_ms
        if delayed:
            statuses.insert(0, (st.ASSIGNMENT_DELAYED,
                                "Assignment delayed due to the configured initial rebalance delay."))
        if not self._maybe_assign(gid, sg, delayed, now) and not delayed:
            statuses.insert(0, (st.ASSIGNMENT_DELAYED,
                                "Assignment delayed due to the configured assignment interval."))
        if hb.shutdown_application and sg.shutdown_requested_by is None:
            sg.shutdown_requested_by = mid
            log.info("streams_group.shutdown_requested", group_id=gid, member_id=mid)
        if sg.shutdown_requested_by is not None:
            statuses.append((st.SHUTDOWN_APPLICATION,
                             f"Streams group member {sg.shutdown_requested_by} encountered a fatal "
                             f"error and requested a shutdown for the entire application."))
        before = sg.members[mid]
        after = self._reconcile(sg, before, hb.active)
        if after is not before:
            sg.members[mid] = after
            self._arm_rebalance_timeout(gid, sg, after)
            log.info("streams_group.member_reconciled", group_id=gid, member_id=mid,
                     member_epoch=after.member_epoch, state=after.state,
                     active=_show(after.active), standby=_show(after.standby),
                     revoking=_show(after.revoking))
        self._arm_session_timeout(gid, sg, mid)
        if is_new:
            log.info("streams_group.member_joined", group_id=gid, member_id=mid,
                     process_id=after.process_id, member_epoch=after.member_epoch,
                     client_id=client_id)
        changed = (is_new or hb.member_epoch == JOIN_EPOCH
                   or (after.active, after.standby, after.warmup)
                   != (member.active, member.standby, member.warmup))
        endpoints = None
        if any(m.user_endpoint is not None for m in sg.members.values()) and (
                hb.member_epoch == JOIN_EPOCH or hb.endpoint_information_epoch != sg.endpoint_epoch):
            endpoints = self._endpoints(sg)
        return StreamsAnswer(
            mid, after.member_epoch, self._group_config(gid, HEARTBEAT_INTERVAL),
            self._group_config(gid, TASK_OFFSET_INTERVAL), self._group_config(gid, ACCEPTABLE_LAG),
            tuple(statuses),
            dict(after.active) if changed else None, dict(after.standby) if changed else None,
            dict(after.warmup) if changed else None, sg.endpoint_epoch, endpoints)

    # -- groups and members ------------------------------------------------------------------
    def _group_for(self, group_id: str, create: bool) -> tuple[Group, StreamsGroupState, bool]:
        g = self.groups.get(group_id)
        if g is not None and g.streams is not None:
            return g, g.streams, False
        if g is not None and (g.members or g.consumer is not None
                              or g.state not in (GroupState.EMPTY,)):
            raise ConsumerGroupError(ErrorCode.group_id_not_found,
                                     f"Group {group_id} is not a streams group.")
        if not create:
            if g is not None:
                raise ConsumerGroupError(ErrorCode.unknown_member_id,
                                         f"Group {group_id} has no member state; rejoin.")
            raise ConsumerGroupError(ErrorCode.group_id_not_found,
                                     f"Streams group {group_id} not found.")
        if g is None:
            g = self.groups[group_id] = Group(group_id)
        else:
            g.protocol_type = g.protocol = g.leader = None
        g.streams = StreamsGroupState()
        log.info("streams_group.created", group_id=group_id)
        return g, g.streams, True

    def _member_for(self, group_id: str, sg: StreamsGroupState,
                    hb: StreamsHeartbeat) -> tuple[StreamsMember, bool]:
        mid, epoch = hb.member_id, hb.member_epoch
        if hb.instance_id is not None and epoch == JOIN_EPOCH:
            holder = sg.static.get(hb.instance_id)
            if holder is not None and holder != mid:
                previous = sg.members.get(holder)
                if previous is not None and previous.member_epoch != STATIC_LEAVE_EPOCH:
                    raise ConsumerGroupError(
                        ErrorCode.unreleased_instance_id,
                        f"Static member {mid} with instance id {hb.instance_id} cannot join the "
                        f"group because the instance id is owned by {holder} member.")
                if previous is not None:
                    # the restarted instance takes its predecessor's place and target
                    self._remove_member(sg, previous)
                    if holder in sg.target:
                        sg.target[mid] = sg.target.pop(holder)
                    successor = StreamsMember(mid, instance_id=hb.instance_id,
                                              process_id=previous.process_id)
                    sg.members[mid] = successor
                    log.info("streams_group.static_member_replaced", group_id=group_id,
                             instance_id=hb.instance_id, member_id=mid, previous_member_id=holder)
                    return successor, False
        member = sg.members.get(mid)
        if epoch == JOIN_EPOCH:
            if member is None:
                return StreamsMember(mid), True
            # a rejoin: the member lost its tasks (Kafka resets it to epoch 0 and reassigns)
            return replace(member, member_epoch=0, active={}, standby={}, warmup={},
                           revoking={}), False
        if member is None:
            raise ConsumerGroupError(ErrorCode.unknown_member_id,
                                     f"Member {mid} is not a member of group {group_id}.")
        if epoch > member.member_epoch:
            raise ConsumerGroupError(
                ErrorCode.fenced_member_epoch,
                f"The streams group member has a greater member epoch ({epoch}) than the one "
                f"known by the group coordinator ({member.member_epoch}). The member must abandon "
                f"all its partitions and rejoin.")  # sic, Kafka 4.4's words
        if epoch < member.member_epoch and (epoch != member.previous_epoch
                                            or not _subset(hb.active, member.active)):
            raise ConsumerGroupError(
                ErrorCode.fenced_member_epoch,
                f"The streams group member has a smaller member epoch ({epoch}) than the one "
                f"known by the group coordinator ({member.member_epoch}). The member must abandon "
                f"all its partitions and rejoin.")  # sic, Kafka 4.4's words
        return member, False

    def _leave(self, hb: StreamsHeartbeat) -> StreamsAnswer:
        g = self.groups.get(hb.group_id)
        sg = g.streams if g is not None else None
        if sg is None:
            if g is not None and not g.members and g.consumer is None:
                # The group's offsets outlived its membership (a restart: membership is not
                # persisted). On Kafka the member would still be known and its leave succeed;
                # Kafka Streams leaves this way to rejoin after a TaskMigratedException, and
                # takes GROUP_ID_NOT_FOUND as fatal.
                log.info("streams_group.member_left", group_id=hb.group_id,
                         member_id=hb.member_id, reason="left a group without member state")
                return StreamsAnswer(hb.member_id, hb.member_epoch, 0, 0, -1, (), None, None, None,
                                     0, None)
            raise ConsumerGroupError(ErrorCode.group_id_not_found,
                                     f"Streams group {hb.group_id} not found.")
        member = sg.members.get(hb.member_id)
        if member is None:
            raise ConsumerGroupError(ErrorCode.unknown_member_id,
                                     f"Member {hb.member_id} is not a member of group "
                                     f"{hb.group_id}.")
        if hb.member_epoch == STATIC_LEAVE_EPOCH:
            sg.members[member.member_id] = replace(member, member_epoch=STATIC_LEAVE_EPOCH)
            log.info("streams_group.static_member_left", group_id=hb.group_id,
                     member_id=member.member_id, instance_id=member.instance_id)
        else:
            self._fence(hb.group_id, sg, member, "left")
        return StreamsAnswer(hb.member_id, hb.member_epoch, 0, 0, -1, (), None, None, None,
                             sg.endpoint_epoch, None)

    def _fence(self, group_id: str, sg: StreamsGroupState, member: StreamsMember,
               reason: str) -> None:
        self._remove_member(sg, member)
        sg.target.pop(member.member_id, None)
        sg.group_epoch += 1
        if not sg.members:
            sg.assignment_epoch = sg.group_epoch
            sg.shutdown_requested_by = None
        event = "streams_group.member_left" if reason == "left" else "streams_group.member_fenced"
        log.info(event, group_id=group_id, member_id=member.member_id,
                 member_epoch=member.member_epoch, group_epoch=sg.group_epoch, reason=reason)

    def _remove_member(self, sg: StreamsGroupState, member: StreamsMember) -> None:
        sg.members.pop(member.member_id, None)
        if member.instance_id is not None and sg.static.get(member.instance_id) == member.member_id:
            del sg.static[member.instance_id]
        for timers in (sg.session, sg.rebalance):
            d = timers.pop(member.member_id, None)
            if d is not None:
                d.cancel()

    def _session_expired(self, group_id: str, member_id: str) -> None:
        g = self.groups.get(group_id)
        sg = g.streams if g is not None else None
        member = sg.members.get(member_id) if sg is not None else None
        if sg is None or member is None:
            return
        sg.session.pop(member_id, None)
        self._fence(group_id, sg, member, f"no heartbeat within the session timeout "
                                          f"({self._group_config(group_id, SESSION_TIMEOUT)} ms)")

    def _rebalance_expired(self, group_id: str, member_id: str, epoch: int) -> None:
        g = self.groups.get(group_id)
        sg = g.streams if g is not None else None
        member = sg.members.get(member_id) if sg is not None else None
        if sg is None or member is None:
            return
        sg.rebalance.pop(member_id, None)
        if member.member_epoch == epoch and member.state == "UNREVOKED_TASKS":
            self._fence(group_id, sg, member, f"tasks not revoked within the rebalance timeout "
                                              f"({member.rebalance_timeout_ms} ms)")

    def _arm_session_timeout(self, group_id: str, sg: StreamsGroupState, member_id: str) -> None:
        old = sg.session.pop(member_id, None)
        if old is not None:
            old.cancel()
        sg.session[member_id] = self.timers.call_later(
            self._group_config(group_id, SESSION_TIMEOUT), self._session_expired, group_id,
            member_id)

    def _arm_rebalance_timeout(self, group_id: str, sg: StreamsGroupState,
                               member: StreamsMember) -> None:
        old = sg.rebalance.pop(member.member_id, None)
        if old is not None:
            old.cancel()
        if member.state == "UNREVOKED_TASKS" and member.rebalance_timeout_ms > 0:
            sg.rebalance[member.member_id] = self.timers.call_later(
                member.rebalance_timeout_ms, self._rebalance_expired, group_id, member.member_id,
                member.member_epoch)

    # -- topology, topics, assignment ------------------------------------------------------------
    def _partitions_now(self) -> dict[str, int]:
        return {t.name: t.partitions for t in self.topics()}

    def _reconfigure(self, group_id: str, sg: StreamsGroupState, force: bool) -> bool:
        """Configure the topology against the topics when they (or it) changed; whether the
        outcome changed what is to be assigned."""
        partitions = self._partitions_now()
        fingerprint = hash(tuple(sorted(partitions.items())))
        if not force and fingerprint == sg.topics_fingerprint and sg.configured is not None:
            return False
        sg.topics_fingerprint = fingerprint
        assert sg.topology is not None
        before = sg.configured
        sg.configured = st.configure(sg.topology, partitions)
        if before is None:
            return False  # the new group's own bump covers it
        return (before.tasks, before.ready) != (sg.configured.tasks, sg.configured.ready)

    def _create_internal_topics(self, group_id: str, configured: st.Configured) -> None:
        if self.create_topic is None:
            return
        for name, (partitions, rf, configs) in configured.missing_internal.items():
            try:
                self.create_topic(name, partitions, rf, configs)
            except Exception as e:  # an existing topic (a race) or a refused config
                log.warning("streams_group.internal_topic_not_created", group_id=group_id,
                            topic=name, error=str(e))
                continue
            log.info("streams_group.internal_topic_created", group_id=group_id, topic=name,
                     partitions=partitions)

    def _maybe_assign(self, group_id: str, sg: StreamsGroupState, delayed: bool,
                      now: int) -> bool:
        """Compute the target when the group epoch moved on; False when the assignment
        interval holds it back (streams.assignment.interval.ms, as Kafka 4.4)."""
        if sg.group_epoch <= sg.assignment_epoch:
            return True
        configured = sg.configured
        ready = configured is not None and configured.ready
        if delayed and sg.delay_bumped:
            return True  # within the initial delay the target moves once only (the reference)
        if (not delayed and sg.last_assignment_ms is not None
                and now - sg.last_assignment_ms < self._group_config(group_id, ASSIGNMENT_INTERVAL)):
            return False
        tasks = configured.tasks if ready and configured is not None and not delayed else {}
        specs = [sa.MemberSpec(m.member_id, m.process_id,
                               sa.to_tasks(sg.target[m.member_id].active)
                               if m.member_id in sg.target else frozenset(),
                               sa.to_tasks(sg.target[m.member_id].standby)
                               if m.member_id in sg.target else frozenset())
                 for m in sg.members.values()]
        stateful = frozenset(s.subtopology_id for s in sg.topology.subtopologies
                             if s.state_changelog_topics) if sg.topology is not None else None
        sg.target = sa.assign(specs, tasks, self._group_config(group_id, NUM_STANDBY), stateful)
        sg.assignment_epoch = sg.group_epoch
        if tasks:
            sg.last_assignment_ms = now
        if delayed and not sg.delay_bumped:
            # Kafka 4.4 during the initial delay: members get an empty target at the join's
            # epoch and the group moves one epoch on (Assigning, group epoch 2 / assignment 1 on
            # the reference), so the first heartbeat after the delay computes the real one.
            sg.group_epoch += 1
            sg.delay_bumped = True
        if tasks and any(m.user_endpoint is not None for m in sg.members.values()):
            sg.endpoint_epoch += 1
        log.info("streams_group.target_assignment", group_id=group_id,
                 assignment_epoch=sg.assignment_epoch,
                 members={mid: {"active": _show(a.active), "standby": _show(a.standby)}
                          for mid, a in sg.target.items()})
        return True

    def _reconcile(self, sg: StreamsGroupState, m: StreamsMember,
                   owned: Tasks | None) -> StreamsMember:
        """Kafka's streams CurrentAssignmentBuilder: revoke, then take what others released."""
        if m.member_epoch == STATIC_LEAVE_EPOCH:
            return m
        target = sg.target.get(m.member_id, sa.TaskAssignment())
        if any(m.revoking.values()):
            if owned is None or not _disjoint(owned, m.revoking):
                return m  # still owns (or said nothing new about) what it must let go
            m = replace(m, revoking={})
        if m.member_epoch == sg.assignment_epoch and _eq(m.active, target.active) and \
                _eq(m.standby, target.standby) and _eq(m.warmup, target.warmup):
            return m
        keep = sa.to_tasks(m.active) & sa.to_tasks(target.active)
        revoke = sa.to_tasks(m.active) - sa.to_tasks(target.active)
        if revoke:
            return replace(m, active=sa.from_tasks(keep), revoking=sa.from_tasks(revoke),
                           standby=_intersect(m.standby, target.standby),
                           warmup=_intersect(m.warmup, target.warmup))
        free = {t for t in sa.to_tasks(target.active)
                if t in keep or sg.active_holder(t, m.member_id) is None}
        previous = m.member_epoch if m.member_epoch != sg.assignment_epoch else m.previous_epoch
        new = replace(m, member_epoch=sg.assignment_epoch, previous_epoch=previous,
                      active=sa.from_tasks(free), standby=dict(target.standby),
                      warmup=dict(target.warmup))
        return new if new != m else m

    def _endpoints(self, sg: StreamsGroupState) -> tuple:
        """For each member endpoint, the topic partitions of its tasks' source topics."""
        topology = sg.topology
        sources: dict[str, tuple[str, ...]] = {}
        if topology is not None:
            for s in topology.subtopologies:
                sources[s.subtopology_id] = s.source_topics + tuple(
                    t.name for t in s.repartition_source_topics)
        out = []
        for m in sorted(sg.members.values(), key=lambda m: m.member_id):
            if m.user_endpoint is None:
                continue

            def parts(tasks: Mapping[str, frozenset[int]]) -> dict[str, frozenset[int]]:
                acc: dict[str, set[int]] = {}
                for sid, ps in tasks.items():
                    for topic in sources.get(sid, ()):
                        acc.setdefault(topic, set()).update(ps)
                return {t: frozenset(ps) for t, ps in acc.items()}
            out.append((m.user_endpoint, parts(m.active), parts(m.standby)))
        return tuple(out)

    # -- what other parts ask ------------------------------------------------------------------
    def describe(self, group_id: str) -> StreamsGroupState:
        g = self.groups.get(group_id)
        if g is None or g.streams is None:
            raise ConsumerGroupError(ErrorCode.group_id_not_found,
                                     f"Group {group_id} not found.")
        return g.streams

    def member_epoch(self, group_id: str, member_id: str) -> int | None:
        g = self.groups.get(group_id)
        m = g.streams.members.get(member_id) if g is not None and g.streams is not None else None
        return None if m is None else m.member_epoch


def _subset(owned: Tasks | None, assigned: Mapping[str, frozenset[int]]) -> bool:
    if owned is None:
        return True
    return all(ps <= assigned.get(s, frozenset()) for s, ps in owned.items())


def _disjoint(owned: Tasks, revoking: Mapping[str, frozenset[int]]) -> bool:
    return all(not (ps & owned.get(s, frozenset())) for s, ps in revoking.items())


def _eq(a: Mapping[str, frozenset[int]], b: Mapping[str, frozenset[int]]) -> bool:
    return sa.to_tasks(a) == sa.to_tasks(b)


def _intersect(a: Mapping[str, frozenset[int]],
               b: Mapping[str, frozenset[int]]) -> dict[str, frozenset[int]]:
    return sa.from_tasks(sa.to_tasks(a) & sa.to_tasks(b))


def _show(a: Mapping[str, frozenset[int]]) -> dict[str, list[int]]:
    return {s: sorted(ps) for s, ps in sorted(a.items()) if ps}


def validate_streams_offset_commit(g: Group, member_id: str, instance_id: str | None, epoch: int,
                                   transactional: bool, api_version: int) -> None:
    """Kafka's StreamsGroup.validateOffsetCommit (the same rules as a consumer group's)."""
    assert g.streams is not None
    check_member_offset_commit(g, g.streams.members, "streams", member_id, instance_id, epoch,
                               transactional, api_version)


def validate_streams_offset_fetch(g: Group, member_id: str | None, epoch: int) -> None:
    """Kafka's StreamsGroup.validateOffsetFetch."""
    assert g.streams is not None
    check_member_offset_fetch(g, g.streams.members, member_id, epoch)


def source_topics_of(sg: StreamsGroupState) -> set[str]:
    """The topics a streams group reads (sources and repartition sources): OffsetDelete refuses
    them while the group has members (GROUP_SUBSCRIBED_TO_TOPIC)."""
    if sg.topology is None or not sg.members:
        return set()
    return {t for s in sg.topology.subtopologies for t in s.source_topics} | {
        t.name for s in sg.topology.subtopologies for t in s.repartition_source_topics}
