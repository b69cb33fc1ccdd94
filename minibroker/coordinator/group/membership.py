"""Membership of classic groups: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, timeouts.

Follows Kafka's GroupCoordinator / GroupMetadata (the pre-KIP-848 protocol), as a
synchronous state machine. JoinGroup gathers members until every known member has
rejoined or the rebalance timeout passes, the leader's SyncGroup hands out the
assignment, heartbeats keep members alive within their session timeout. Assignment is
the clients' business: protocols and metadata are relayed untouched.

Nothing here waits. A JoinGroup or SyncGroup that must wait for other members returns
:class:`Waiting` and marks the member (``awaiting_join`` / ``awaiting_sync``); when
the group moves on, each answer — a dict for a join, the assignment for a sync, or a
:class:`GroupError` — is put in :attr:`Membership.answers` for whoever holds the
waiting caller (the asyncio adapter's futures, or a test). Timeouts are deadlines in
:class:`~.group_timers.Deadlines`, on the clock's ``monotonic`` time; they run when
their owner runs them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from minibroker_protocol.errors import ErrorCode
from minibroker_storage.lazylog import get_logger

from ...core.clock import Clock
from ..timers import Deadlines
from .model import Group, GroupError, Member
from .state import GroupState, transition

log = get_logger("minibroker.group")

S = GroupState

# Kafka's group.min/max.session.timeout.ms defaults
MIN_SESSION_TIMEOUT_MS = 6_000
MAX_SESSION_TIMEOUT_MS = 1_800_000

JOIN, SYNC = "join", "sync"


@dataclass(frozen=True)
class Waiting:
    """The caller's answer comes later, through ``answers``, for this member."""
    kind: str  # JOIN or SYNC
    member: Member


class Membership:
    def __init__(self, groups: dict[str, Group], *, clock: Clock, timers: Deadlines,
                 persist: Callable[[Group], None], initial_rebalance_delay_ms: int) -> None:
        self.groups = groups
        self.clock = clock
        self.timers = timers
        self._persist = persist
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        # (JOIN | SYNC, member, answer | GroupError): for the callers that got Waiting
        self.answers: list[tuple[str, Member, object]] = []

    def take_answers(self) -> list[tuple[str, Member, object]]:
        out, self.answers = self.answers, []
        return out

    def _answer(self, kind: str, m: Member, value: object) -> None:
        self.answers.append((kind, m, value))

    # -- after a replay ------------------------------------------------------------------
    def loaded(self) -> None:
        for g in self.groups.values():
            # As Kafka's onGroupLoaded: the last persisted generation is Stable with its
            # members, whose heartbeats are expected from now on. A loaded group starts in
            # its state; it does not move there.
            g.state = S.STABLE if g.members else S.EMPTY
            for m in g.members.values():
                m.expiry = self.timers.call_later(m.session_timeout_ms, self._expire, g, m)

    # -- JoinGroup --------------------------------------------------------------------
    def join(self, *, group_id: str, member_id: str, instance_id: str | None,
             client_id: str, client_host: str, session_timeout_ms: int,
             rebalance_timeout_ms: int, protocol_type: str,
             protocols: list[tuple[str, bytes]], require_known_member_id: bool) -> dict | Waiting:
        if not group_id:
            raise GroupError(ErrorCode.invalid_group_id, "group id must not be empty")
        if not MIN_SESSION_TIMEOUT_MS <= session_timeout_ms <= MAX_SESSION_TIMEOUT_MS:
            raise GroupError(ErrorCode.invalid_session_timeout,
                             f"session timeout {session_timeout_ms} ms outside "
                             f"[{MIN_SESSION_TIMEOUT_MS}, {MAX_SESSION_TIMEOUT_MS}]")
        g = self.groups.get(group_id)
        if g is None or g.state == S.DEAD:
            g = self.groups[group_id] = Group(group_id)
        if g.consumer is not None:
            if g.consumer.members:
                # Kafka migrates classic members into a consumer group online
                # (group.consumer.migration.policy); minibroker does not: the refusal Kafka
                # gives with migration disabled (tests/differential/divergences.py).
                raise GroupError(ErrorCode.inconsistent_group_protocol,
                                 f"group {group_id} is a consumer group")
            g.consumer = None  # an empty consumer group becomes a classic one
        if g.streams is not None:
            # a streams group stays one, empty or not (seen on Kafka 4.4)
            raise GroupError(ErrorCode.inconsistent_group_protocol,
                             f"group {group_id} is a streams group")
        if not g.members:
            # GroupMetadata.add: an empty group takes the first member's protocol type.
            g.protocol_type = protocol_type
        if not protocols or protocol_type != g.protocol_type:
            raise GroupError(ErrorCode.inconsistent_group_protocol)
        if g.members and not self._supports_a_common_protocol(g, protocols):
            raise GroupError(ErrorCode.inconsistent_group_protocol)

        if not member_id:
            if instance_id is not None and instance_id in g.static:
                return self._static_rejoin(g, instance_id, client_id, client_host,
                                            session_timeout_ms, rebalance_timeout_ms,
                                            protocol_type, protocols)
            new_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if require_known_member_id and instance_id is None:
                # KIP-394: hand out the id first, so a client that dies before
                # it rejoins leaves no member behind.
                # Kafka's addPendingMemberExpiration: forget it after a session timeout.
                g.pending[new_id] = self.timers.call_later(
                    session_timeout_ms, self._expire_pending, g, new_id)
                raise GroupError(ErrorCode.member_id_required, new_id)
            member_id = new_id
        elif member_id in g.pending:
            timer = g.pending.pop(member_id)
            if timer is not None:
                timer.cancel()
        elif member_id not in g.members:
            if instance_id is not None and g.static.get(instance_id) not in (None, member_id):
                raise GroupError(ErrorCode.fenced_instance_id)
            raise GroupError(ErrorCode.unknown_member_id, f"unknown member {member_id}")
        elif instance_id is not None and g.static.get(instance_id) != member_id:
            raise GroupError(ErrorCode.fenced_instance_id)

        member = g.members.get(member_id)
        if member is None:
            member = Member(member_id, instance_id, client_id, client_host, session_timeout_ms,
                            rebalance_timeout_ms, protocol_type, list(protocols))
            g.members[member_id] = member
            if instance_id is not None:
                g.static[instance_id] = member_id
            if g.protocol_type is None:
                g.protocol_type = protocol_type
            log.info("group.member_joined", group_id=group_id, member_id=member_id,
                     instance_id=instance_id, client_id=client_id, members=len(g.members))
            if g.state == S.PREPARING_REBALANCE and g.generation == 0:
                g.new_member_added = True
            self._prepare_rebalance(g, reason=f"new member {member_id} joined")
        else:
            changed = list(protocols) != member.protocols
            member.protocols = list(protocols)
            member.session_timeout_ms = session_timeout_ms
            member.rebalance_timeout_ms = rebalance_timeout_ms
            # doCurrentMemberJoinGroup: in Stable a leader's rejoin or new metadata
            # rebalances; in CompletingRebalance only new metadata does.
            if (g.state == S.STABLE and (changed or member_id == g.leader)) or (
                    g.state == S.COMPLETING_REBALANCE and changed):
                self._prepare_rebalance(g, reason=f"member {member_id} rejoined"
                                        + (" with new metadata" if changed else " (leader)"))
            elif g.state in (S.STABLE, S.COMPLETING_REBALANCE):
                # A follower rejoining with unchanged metadata: answer with the
                # current generation (Kafka's CompletingRebalance/Stable case).
                return self._join_answer(g, member)
        member.awaiting_join = True
        self._schedule_expiry(g, member, member.rebalance_timeout_ms + member.session_timeout_ms)
        self._try_complete_join(g)
        return Waiting(JOIN, member)

    def _expire_pending(self, g: Group, member_id: str) -> None:
        if g.pending.pop(member_id, "gone") == "gone":
            return
        log.info("group.pending_member_expired", group_id=g.group_id, member_id=member_id,
                 reason="did not rejoin with its member id within the session timeout")
        self._try_complete_join(g)

    @staticmethod
    def _supports_a_common_protocol(g: Group, protocols) -> bool:
        names = {n for n, _ in protocols}
        common = set.intersection(*[{n for n, _ in m.protocols} for m in g.members.values()])
        return bool(names & common)

    def _static_rejoin(self, g: Group, instance_id, client_id, client_host,
                       session_timeout_ms, rebalance_timeout_ms, protocol_type,
                       protocols) -> dict | Waiting:
        """A static member comes back under a new member id: the old id is fenced;
        with unchanged metadata in a stable group there is no rebalance (KIP-345)."""
        old_id = g.static[instance_id]
        old = g.members.pop(old_id, None)
        new_id = f"{client_id or 'member'}-{uuid.uuid4()}"
        if old is not None:
            self._cancel_expiry(old)
            self._fail_waiting(old, ErrorCode.fenced_instance_id)
        member = Member(new_id, instance_id, client_id, client_host, session_timeout_ms,
                        rebalance_timeout_ms, protocol_type, list(protocols),
                        assignment=old.assignment if old else b"", is_new=False)
        g.members[new_id] = member
        g.static[instance_id] = new_id
        if g.leader == old_id:
            g.leader = new_id
        log.info("group.static_member_rejoined", group_id=g.group_id, instance_id=instance_id,
                 old_member_id=old_id, member_id=new_id, state=g.state)
        # updateStaticMemberAndRebalance: only a change of the selected protocol
        # forces a rebalance of a stable group.
        unchanged = old is not None and g.protocol is not None and (
            self._select_protocol(g) == g.protocol)
        if g.state == S.STABLE and unchanged:
            self._persist(g)
            self._schedule_expiry(g, member, session_timeout_ms)
            return self._join_answer(g, member)
        member.awaiting_join = True
        self._prepare_rebalance(g, reason=f"static member {instance_id} rejoined with new metadata")
        self._schedule_expiry(g, member, rebalance_timeout_ms + session_timeout_ms)
        self._try_complete_join(g)
        return Waiting(JOIN, member)

    def _fail_waiting(self, m: Member, code: ErrorCode) -> None:
        """The member's pending JoinGroup and SyncGroup fail with ``code``."""
        if m.awaiting_join:
            self._answer(JOIN, m, GroupError(code))
        if m.awaiting_sync:
            self._answer(SYNC, m, GroupError(code))
        m.awaiting_join = m.awaiting_sync = False

    @staticmethod
    def _join_answer(g: Group, member: Member) -> dict:
        is_leader = member.member_id == g.leader
        return {
            "generation_id": g.generation,
            "protocol_type": g.protocol_type,
            "protocol_name": g.protocol,
            "leader": g.leader or "",
            "member_id": member.member_id,
            "members": [(m.member_id, m.instance_id, m.metadata_for(g.protocol))
                        for m in g.members.values()] if is_leader else [],
        }

    # -- rebalance ------------------------------------------------------------------------
    def _prepare_rebalance(self, g: Group, reason: str) -> None:
        for m in g.members.values():
            if m.awaiting_sync:
                m.awaiting_sync = False
                self._answer(SYNC, m, GroupError(ErrorCode.rebalance_in_progress))
        if g.state == S.PREPARING_REBALANCE:
            return
        was_empty = g.state == S.EMPTY
        transition(g, S.PREPARING_REBALANCE)
        timeout = max((m.rebalance_timeout_ms for m in g.members.values()), default=0)
        if g.join_timer is not None:
            g.join_timer.cancel()
        if was_empty and self.initial_rebalance_delay_ms > 0:
            # Kafka's InitialDelayedJoin: let the first members of a new group arrive together;
            # each newcomer during the delay earns one more delay, within the rebalance timeout.
            delay = min(self.initial_rebalance_delay_ms, timeout or self.initial_rebalance_delay_ms)
            remaining = max(timeout - self.initial_rebalance_delay_ms, 0)
            g.new_member_added = False
            self._delay_initial_join(g, delay, remaining)
        else:
            g.initial_delay_until = 0.0
            g.join_timer = self.timers.call_later(timeout, self._complete_join, g)
        log.info("group.rebalance_started", group_id=g.group_id, generation=g.generation,
                 members=len(g.members), reason=reason)

    def _delay_initial_join(self, g: Group, delay_ms: int, remaining_ms: int) -> None:
        g.initial_delay_until = self.clock.monotonic() + delay_ms / 1000
        g.join_timer = self.timers.call_later(delay_ms, self._initial_delay_over, g, delay_ms,
                                              remaining_ms)

    def _initial_delay_over(self, g: Group, delay_ms: int, remaining_ms: int) -> None:
        # GroupCoordinator.scala, InitialDelayedJoin.onComplete: the next delay is the configured
        # one capped by what is left, and what is left shrinks by the delay just served.
        if g.state != S.PREPARING_REBALANCE:
            return
        if g.new_member_added and remaining_ms != 0:
            g.new_member_added = False
            delay = min(self.initial_rebalance_delay_ms, remaining_ms)
            log.info("group.initial_delay_extended", group_id=g.group_id, members=len(g.members),
                     delay_ms=delay, remaining_ms=max(remaining_ms - delay_ms, 0))
            self._delay_initial_join(g, delay, max(remaining_ms - delay_ms, 0))
            return
        self._complete_join(g)

    def _try_complete_join(self, g: Group) -> None:
        if g.state != S.PREPARING_REBALANCE or not g.all_joined():
            return
        if g.initial_delay_until and self.clock.monotonic() < g.initial_delay_until:
            return
        self._complete_join(g)

    def _complete_join(self, g: Group) -> None:
        if g.state != S.PREPARING_REBALANCE:
            return
        if g.join_timer is not None:
            g.join_timer.cancel()
            g.join_timer = None
        g.initial_delay_until = 0.0
        for m in [m for m in g.members.values()
                  if not m.awaiting_join and m.instance_id is None]:
            log.info("group.member_removed", group_id=g.group_id, member_id=m.member_id,
                     reason="did not rejoin within the rebalance timeout")
            self._remove(g, m)
        for timer in g.pending.values():
            if timer is not None:
                timer.cancel()
        g.pending.clear()
        g.generation += 1
        if not g.members:
            transition(g, S.EMPTY)
            g.protocol = None
            g.leader = None
            self._persist(g)
            log.info("group.empty", group_id=g.group_id, generation=g.generation)
            return
        g.protocol = self._select_protocol(g)
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        transition(g, S.COMPLETING_REBALANCE)
        log.info("group.join_completed", group_id=g.group_id, generation=g.generation,
                 protocol=g.protocol, leader=g.leader, members=len(g.members))
        for m in g.members.values():
            waiting, m.awaiting_join = m.awaiting_join, False
            m.is_new = False
            self._schedule_expiry(g, m, m.session_timeout_ms)
            if waiting:
                self._answer(JOIN, m, self._join_answer(g, m))

    @staticmethod
    def _select_protocol(g: Group) -> str:
        members = list(g.members.values())
        common = set.intersection(*[{n for n, _ in m.protocols} for m in members])
        votes: dict[str, int] = {}
        for m in members:
            for name, _ in m.protocols:
                if name in common:
                    votes[name] = votes.get(name, 0) + 1
                    break
        return max(votes, key=lambda n: votes[n])

    # -- SyncGroup ----------------------------------------------------------------------
    def sync(self, *, group_id: str, generation: int, member_id: str,
             instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
             assignments: dict[str, bytes]) -> tuple[bytes, str | None, str | None] | Waiting:
        g, member = self._member(group_id, member_id, instance_id)
        if generation != g.generation:
            raise GroupError(ErrorCode.illegal_generation)
        if (protocol_type is not None and protocol_type != g.protocol_type) or (
                protocol_name is not None and protocol_name != g.protocol):
            raise GroupError(ErrorCode.inconsistent_group_protocol)
        if g.state == S.PREPARING_REBALANCE:
            raise GroupError(ErrorCode.rebalance_in_progress)
        if g.state == S.STABLE:
            return member.assignment, g.protocol_type, g.protocol
        # CompletingRebalance
        member.awaiting_sync = True
        if member_id == g.leader:
            for m in g.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            transition(g, S.STABLE)
            self._persist(g)
            log.info("group.stable", group_id=g.group_id, generation=g.generation,
                     members=len(g.members), protocol=g.protocol)
            for m in g.members.values():
                if m.awaiting_sync:
                    m.awaiting_sync = False
                    self._answer(SYNC, m, (m.assignment, g.protocol_type, g.protocol))
        return Waiting(SYNC, member)

    def _member(self, group_id: str, member_id: str,
                instance_id: str | None) -> tuple[Group, Member]:
        if not group_id:
            raise GroupError(ErrorCode.invalid_group_id)
        g = self.groups.get(group_id)
        if g is None or g.state == S.DEAD:
            raise GroupError(ErrorCode.unknown_member_id)
        if instance_id is not None and g.static.get(instance_id, member_id) != member_id:
            raise GroupError(ErrorCode.fenced_instance_id)
        member = g.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.unknown_member_id)
        return g, member

    # -- Heartbeat / LeaveGroup -------------------------------------------------------------
    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  instance_id: str | None) -> None:
        g, member = self._member(group_id, member_id, instance_id)
        if generation != g.generation:
            raise GroupError(ErrorCode.illegal_generation)
        self._schedule_expiry(g, member, member.session_timeout_ms)
        if g.state == S.PREPARING_REBALANCE:
            raise GroupError(ErrorCode.rebalance_in_progress)

    def touch(self, g: Group, m: Member) -> None:
        """A sign of life other than a heartbeat (an offset commit)."""
        self._schedule_expiry(g, m, m.session_timeout_ms)

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> list[ErrorCode]:
        g = self.groups.get(group_id)
        out = []
        for member_id, instance_id in members:
            if g is None:
                out.append(ErrorCode.unknown_member_id)
                continue
            if instance_id is not None:
                current = g.static.get(instance_id)
                if current is None:
                    out.append(ErrorCode.unknown_member_id)
                    continue
                if member_id and member_id != current:
                    out.append(ErrorCode.fenced_instance_id)
                    continue
                member_id = current
            m = g.members.get(member_id)
            if m is None and member_id in g.pending:
                timer = g.pending.pop(member_id)
                if timer is not None:
                    timer.cancel()
                self._try_complete_join(g)
                out.append(ErrorCode.none)
                continue
            if m is None:
                out.append(ErrorCode.unknown_member_id)
                continue
            log.info("group.member_left", group_id=group_id, member_id=member_id,
                     instance_id=m.instance_id)
            self._remove(g, m)
            self._after_removal(g, f"member {member_id} left")
            out.append(ErrorCode.none)
        return out

    def _remove(self, g: Group, m: Member) -> None:
        self._cancel_expiry(m)
        g.members.pop(m.member_id, None)
        if m.instance_id is not None and g.static.get(m.instance_id) == m.member_id:
            del g.static[m.instance_id]
        self._fail_waiting(m, ErrorCode.unknown_member_id)

    def _after_removal(self, g: Group, reason: str) -> None:
        if g.state in (S.STABLE, S.COMPLETING_REBALANCE):
            if g.members:
                self._prepare_rebalance(g, reason)
            else:
                transition(g, S.PREPARING_REBALANCE)
                self._complete_join(g)
        elif g.state == S.PREPARING_REBALANCE:
            if g.members:
                self._try_complete_join(g)
            else:
                self._complete_join(g)

    def _schedule_expiry(self, g: Group, m: Member, timeout_ms: int) -> None:
        self._cancel_expiry(m)
        m.expiry = self.timers.call_later(timeout_ms, self._expire, g, m)

    @staticmethod
    def _cancel_expiry(m: Member) -> None:
        if m.expiry is not None:
            m.expiry.cancel()
            m.expiry = None

    def _expire(self, g: Group, m: Member) -> None:
        if g.members.get(m.member_id) is not m:
            return
        if m.awaiting_join and g.state == S.PREPARING_REBALANCE:
            return  # waiting in a join: the rebalance timeout decides
        log.info("group.member_expired", group_id=g.group_id, member_id=m.member_id,
                 instance_id=m.instance_id, session_timeout_ms=m.session_timeout_ms,
                 reason="no heartbeat within the session timeout")
        self._remove(g, m)
        self._after_removal(g, f"member {m.member_id} session timed out")
