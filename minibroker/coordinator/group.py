"""The group coordinator: Kafka's classic consumer-group protocol.

Follows Kafka's GroupCoordinator / GroupMetadata (the pre-KIP-848 protocol):
JoinGroup gathers members until every known member has rejoined or the
rebalance timeout passes, the leader's SyncGroup hands out the assignment,
heartbeats keep members alive within their session timeout. Assignment is
the clients' business: protocols and metadata are relayed untouched.
Committed offsets and group metadata are records in ``__consumer_offsets``
(Kafka's layout), replayed at start-up; offsets committed inside a
transaction stay pending until the transaction's marker lands.
"""

from __future__ import annotations

import asyncio
import os
import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from minibroker_protocol import group_log as gl
from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.records import build_batch, parse_control_record
from minibroker_protocol.topics import GROUP_METADATA_TOPIC

from . import replay, snapshot

log = structlog.get_logger("minibroker.group")

EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD = (
    "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")

# Kafka's group.min/max.session.timeout.ms defaults
MIN_SESSION_TIMEOUT_MS = 6_000
MAX_SESSION_TIMEOUT_MS = 1_800_000

_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")


def _keyed(key: bytes, value: bytes) -> bytes:
    return _U32.pack(len(key)) + key + value


def _offset_value(o) -> bytes:
    return gl.encode_offset(gl.OffsetValue(o.offset, o.leader_epoch, o.metadata, o.commit_timestamp))


def now_ms() -> int:
    return int(time.time() * 1000)


class GroupError(Exception):
    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


@dataclass
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future | None = None
    sync_future: asyncio.Future | None = None
    expiry: asyncio.TimerHandle | None = None
    is_new: bool = True

    def metadata_for(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""


@dataclass
class Offset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    log_offset: int = -1  # where its record sits in __consumer_offsets


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending: dict[str, asyncio.TimerHandle | None] = field(default_factory=dict)  # MEMBER_ID_REQUIRED ids
    offsets: dict[tuple[str, int], Offset] = field(default_factory=dict)
    # producer id -> offsets committed in its open transaction (Kafka's pendingTransactionalOffsetCommits)
    txn_offsets: dict[int, dict[tuple[str, int], Offset]] = field(default_factory=dict)
    join_timer: asyncio.TimerHandle | None = None
    initial_delay_until: float = 0.0
    # A member joined a new group (generation 0) during its initial delay: the delay runs
    # once more (Kafka's GroupMetadata.newMemberAdded).
    new_member_added: bool = False
    # The group's last GroupMetadataValue in the log, as written: what a replay (and so
    # a coordinator snapshot) knows of its generation and members.
    persisted_value: bytes | None = None

    def all_joined(self) -> bool:
        return not self.pending and all(m.join_future is not None for m in self.members.values())

    def has_pending_txn_offset(self, tp: tuple[str, int]) -> bool:
        return any(tp in offs for offs in self.txn_offsets.values())


class GroupCoordinator:
    def __init__(self, broker, *, initial_rebalance_delay_ms: int = 3000) -> None:
        self.broker = broker
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.groups: dict[str, Group] = {}
        self.snapshots = snapshot.Schedule()
        self._applied_end: dict[int, int] = {}  # partition -> log offset the state covers up to

    # -- persistence ----------------------------------------------------------------
    def _log_for(self, group_id: str):
        return self.broker.internal_log(GROUP_METADATA_TOPIC,
                                        self.broker.offsets_partition_for(group_id))

    def _append(self, group_id: str, records: list[dict], producer: tuple[int, int] | None = None):
        if producer is None:
            batch = build_batch(records)
        else:
            # A transactional batch of the committing producer, so the transaction's
            # marker on this partition decides whether the offsets count.
            batch = build_batch(records, producer_id=producer[0], producer_epoch=producer[1],
                                base_sequence=-1, transactional=True)
        plog = self._log_for(group_id)
        base = plog.append(batch, origin="coordinator").base_offset
        self._applied_end[self.broker.offsets_partition_for(group_id)] = base + len(records)
        self.snapshots.wrote(len(records))
        return base

    def _persist_group(self, g: Group) -> None:
        value = gl.GroupValue(
            g.protocol_type or "", g.generation, g.protocol, g.leader, now_ms(),
            tuple(gl.MemberValue(m.member_id, m.instance_id, m.client_id, m.client_host,
                                 m.rebalance_timeout_ms, m.session_timeout_ms,
                                 m.metadata_for(g.protocol) if g.protocol else b"", m.assignment)
                  for m in g.members.values()))
        encoded = gl.encode_group(value)
        self._append(g.group_id, [{"key": gl.group_key(g.group_id), "value": encoded}])
        g.persisted_value = encoded

    def load(self) -> None:
        """Replay ``__consumer_offsets``: committed offsets, group generations, pending
        transactional offsets resolved by the markers that follow them."""
        info = self.broker.topic(GROUP_METADATA_TOPIC)
        if info is None:
            return
        t0 = time.perf_counter()
        logs = {p: self.broker.get_log(GROUP_METADATA_TOPIC, p) for p in range(info.partitions)}
        starts = self._load_snapshot(info, logs)
        records = skipped = 0
        skips = replay.Skips()
        for partition, plog in logs.items():
            for h, recs in replay.batches(plog, GROUP_METADATA_TOPIC, partition,
                                          starts[partition], "group_log.record_skipped",
                                          skips):
                if h.is_control:
                    try:
                        _v, kind = parse_control_record(recs[0].key) if recs else (0, -1)
                    except ValueError as e:
                        kind, reason = -1, str(e)
                    else:
                        reason = f"unknown control record type {kind}"
                    if kind not in (0, 1):
                        skipped += 1
                        log.warning("group_log.record_skipped", topic=GROUP_METADATA_TOPIC,
                                    partition=partition, offset=h.base_offset, reason=reason)
                        continue
                    self._complete_txn_offsets(h.producer_id, kind == 1, log_it=False,
                                               partition=partition)
                    continue
                for rec in recs:
                    records += 1
                    reason = self._replay(rec.key, rec.value, rec.offset,
                                          h.producer_id if h.is_transactional else None)
                    if reason is not None:
                        skipped += 1
                        log.warning("group_log.record_skipped", topic=GROUP_METADATA_TOPIC,
                                    partition=partition, offset=rec.offset, reason=reason)
        loop = asyncio.get_running_loop()
        for g in self.groups.values():
            # As Kafka's onGroupLoaded: the last persisted generation is Stable
            # with its members, whose heartbeats are expected from now on.
            g.state = STABLE if g.members else EMPTY
            for m in g.members.values():
                m.expiry = loop.call_later(m.session_timeout_ms / 1000, self._expire, g, m)
        self._applied_end = {p: plog.log_end_offset for p, plog in logs.items()}
        if records:
            self.snapshots.wrote(records)
        log.info("group.coordinator_loaded", groups=len(self.groups), records=records,
                 from_snapshot=any(starts[p] > logs[p].log_start_offset for p in logs),
                 skipped=skipped + skips.count,
                 ms=round((time.perf_counter() - t0) * 1000, 1))

    def _replay(self, key: bytes | None, value: bytes | None, log_offset: int,
                txn_pid: int | None) -> str | None:
        """Apply one record of the log; the reason it cannot be applied, if so. Decoding
        comes first, so a bad record changes nothing."""
        try:
            k = gl.decode_key(key)
            if value is None:
                v = None
            elif k[0] == "offset":
                v = gl.decode_offset(value)
            else:
                v = gl.decode_group(value)
        except gl.GroupLogFormatError as e:
            return str(e)
        if k[0] == "offset":
            _, gid, topic, partition = k
            g = self.groups.setdefault(gid, Group(gid))
            if v is None:
                g.offsets.pop((topic, partition), None)
                return None
            off = Offset(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, log_offset)
            if txn_pid is not None:
                g.txn_offsets.setdefault(txn_pid, {})[(topic, partition)] = off
            else:
                g.offsets[(topic, partition)] = off
            return None
        _, gid = k
        if v is None:
            self.groups.pop(gid, None)
            return None
        g = self.groups.setdefault(gid, Group(gid))
        self._apply_group_value(g, v)
        g.persisted_value = bytes(value)
        return None

    # -- snapshots ---------------------------------------------------------------------
    # Entries: b"G" group key | group value; b"O" log offset i64 | offset key | value;
    # b"T" producer id i64 | log offset i64 | offset key | value (a pending transactional
    # commit). Keys are length-prefixed (u32); values take the rest of the entry.
    SNAPSHOT_FILE = "group-coordinator.snapshot"

    def snapshot_path(self) -> str:
        return os.path.join(self.broker.config.data_dir, self.SNAPSHOT_FILE)

    def capture_snapshot(self) -> tuple[str, Callable[[], bytes], dict] | None:
        info = self.broker.topic(GROUP_METADATA_TOPIC)
        if info is None:
            return None
        offsets = {p: self.broker.get_log(GROUP_METADATA_TOPIC, p).log_end_offset
                   for p in range(info.partitions)}
        foreign = {p: o for p, o in offsets.items() if o != self._applied_end.get(p, 0)}
        if foreign:
            # Something other than this coordinator appended to its log (markers are the
            # coordinator's too, see on_marker): the state in memory is not what a replay
            # would build, so it must not claim those offsets.
            log.warning("group.snapshot_skipped", partitions=sorted(foreign),
                        reason="records in the log this coordinator did not write")
            self.snapshots.taken()
            return None
        # Copies of the containers are taken here; the Offset objects in them are never
        # changed once stored, so encoding can wait for the writer's thread, off the loop.
        groups = [(g.group_id, g.persisted_value, list(g.offsets.items()),
                   [(pid, list(pending.items())) for pid, pending in g.txn_offsets.items()])
                  for g in self.groups.values()]

        def encode() -> bytes:
            entries = []
            for gid, persisted, committed, pending_by_pid in groups:
                if persisted is not None:
                    entries.append(b"G" + _keyed(gl.group_key(gid), persisted))
                for (t, p), o in committed:
                    entries.append(b"O" + _I64.pack(o.log_offset) + _keyed(
                        gl.offset_key(gid, t, p), _offset_value(o)))
                for pid, pending in pending_by_pid:
                    for (t, p), o in pending:
                        entries.append(b"T" + _I64.pack(pid) + _I64.pack(o.log_offset) + _keyed(
                            gl.offset_key(gid, t, p), _offset_value(o)))
            return snapshot.encode(info.topic_id, offsets, entries)

        self.snapshots.taken()
        return self.snapshot_path(), encode, {"groups": len(groups),
                                              "offsets": sum(len(c) for _, _, c, _ in groups)}

    def _load_snapshot(self, info, logs) -> dict[int, int]:
        """Load the snapshot if it can be trusted; where each partition's replay starts."""
        starts = {p: plog.log_start_offset for p, plog in logs.items()}
        path = self.snapshot_path()
        snap = snapshot.load(path, "group", info.topic_id, logs)
        if snap is None:
            return starts
        try:
            for entry in snap.entries:
                self._load_entry(entry)
        except (gl.GroupLogFormatError, struct.error, ValueError) as e:
            # The checksum held, so this is a broker bug, not damage: trust the log.
            log.error("group.snapshot_ignored", path=path, reason=f"entry does not decode: {e}",
                      consequence="full replay")
            self.groups.clear()
            return starts
        log.info("group.snapshot_loaded", path=path, groups=len(self.groups),
                 offsets=dict(sorted(snap.offsets.items())) if len(snap.offsets) <= 8 else None)
        return {p: snap.offsets[p] for p in logs}

    def _load_entry(self, entry: bytes) -> None:
        kind, pos = entry[:1], 1
        pid = log_offset = -1
        if kind == b"T":
            (pid,) = _I64.unpack_from(entry, pos)
            pos += 8
        if kind in (b"T", b"O"):
            (log_offset,) = _I64.unpack_from(entry, pos)
            pos += 8
        elif kind != b"G":
            raise ValueError(f"unknown snapshot entry kind {kind!r}")
        (n,) = _U32.unpack_from(entry, pos)
        key, value = entry[pos + 4:pos + 4 + n], entry[pos + 4 + n:]
        reason = self._replay(key, value, log_offset, pid if kind == b"T" else None)
        if reason is not None:
            raise ValueError(reason)

    @staticmethod
    def _apply_group_value(g: Group, v: gl.GroupValue) -> None:
        g.generation = v.generation
        g.protocol_type = v.protocol_type or None
        g.protocol = v.protocol
        g.leader = v.leader
        g.members = {}
        g.static = {}
        for mv in v.members:
            m = Member(mv.member_id, mv.instance_id, mv.client_id, mv.client_host,
                       mv.session_timeout_ms, mv.rebalance_timeout_ms, g.protocol_type or "",
                       [(v.protocol or "", mv.subscription)], assignment=mv.assignment,
                       is_new=False)
            g.members[m.member_id] = m
            if m.instance_id is not None:
                g.static[m.instance_id] = m.member_id

    # -- JoinGroup --------------------------------------------------------------------
    async def join(self, *, group_id: str, member_id: str, instance_id: str | None,
                   client_id: str, client_host: str, session_timeout_ms: int,
                   rebalance_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], require_known_member_id: bool) -> dict:
        if not group_id:
            raise GroupError(ErrorCode.invalid_group_id, "group id must not be empty")
        if not MIN_SESSION_TIMEOUT_MS <= session_timeout_ms <= MAX_SESSION_TIMEOUT_MS:
            raise GroupError(ErrorCode.invalid_session_timeout,
                             f"session timeout {session_timeout_ms} ms outside "
                             f"[{MIN_SESSION_TIMEOUT_MS}, {MAX_SESSION_TIMEOUT_MS}]")
        g = self.groups.get(group_id)
        if g is None or g.state == DEAD:
            g = self.groups[group_id] = Group(group_id)
        if not g.members:
            # GroupMetadata.add: an empty group takes the first member's protocol type.
            g.protocol_type = protocol_type
        if not protocols or protocol_type != g.protocol_type:
            raise GroupError(ErrorCode.inconsistent_group_protocol)
        if g.members and not self._supports_a_common_protocol(g, protocols):
            raise GroupError(ErrorCode.inconsistent_group_protocol)

        if not member_id:
            if instance_id is not None and instance_id in g.static:
                return await self._static_rejoin(g, instance_id, client_id, client_host,
                                                 session_timeout_ms, rebalance_timeout_ms,
                                                 protocol_type, protocols)
            new_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if require_known_member_id and instance_id is None:
                # KIP-394: hand out the id first, so a client that dies before
                # it rejoins leaves no member behind.
                # Kafka's addPendingMemberExpiration: forget it after a session timeout.
                g.pending[new_id] = asyncio.get_running_loop().call_later(
                    session_timeout_ms / 1000, self._expire_pending, g, new_id)
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
            if g.state == PREPARING_REBALANCE and g.generation == 0:
                g.new_member_added = True
            self._prepare_rebalance(g, reason=f"new member {member_id} joined")
        else:
            changed = list(protocols) != member.protocols
            member.protocols = list(protocols)
            member.session_timeout_ms = session_timeout_ms
            member.rebalance_timeout_ms = rebalance_timeout_ms
            # doCurrentMemberJoinGroup: in Stable a leader's rejoin or new metadata
            # rebalances; in CompletingRebalance only new metadata does.
            if (g.state == STABLE and (changed or member_id == g.leader)) or (
                    g.state == COMPLETING_REBALANCE and changed):
                self._prepare_rebalance(g, reason=f"member {member_id} rejoined"
                                        + (" with new metadata" if changed else " (leader)"))
            elif g.state in (STABLE, COMPLETING_REBALANCE):
                # A follower rejoining with unchanged metadata: answer with the
                # current generation (Kafka's CompletingRebalance/Stable case).
                return self._join_answer(g, member)
        fut = asyncio.get_running_loop().create_future()
        member.join_future = fut
        self._schedule_expiry(g, member, member.rebalance_timeout_ms + member.session_timeout_ms)
        self._try_complete_join(g)
        return await fut

    def _expire_pending(self, g: Group, member_id: str) -> None:
        if g.pending.pop(member_id, "gone") == "gone":
            return
        log.info("group.pending_member_expired", group_id=g.group_id, member_id=member_id,
                 reason="did not rejoin with its member id within the session timeout")
        self._try_complete_join(g)

    def _supports_a_common_protocol(self, g: Group, protocols) -> bool:
        names = {n for n, _ in protocols}
        common = set.intersection(*[{n for n, _ in m.protocols} for m in g.members.values()])
        return bool(names & common)

    async def _static_rejoin(self, g: Group, instance_id, client_id, client_host,
                             session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols):
        """A static member comes back under a new member id: the old id is fenced;
        with unchanged metadata in a stable group there is no rebalance (KIP-345)."""
        old_id = g.static[instance_id]
        old = g.members.pop(old_id, None)
        new_id = f"{client_id or 'member'}-{uuid.uuid4()}"
        if old is not None:
            self._cancel_expiry(old)
            for fut in (old.join_future, old.sync_future):
                if fut is not None and not fut.done():
                    fut.set_exception(GroupError(ErrorCode.fenced_instance_id))
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
        if g.state == STABLE and unchanged:
            self._persist_group(g)
            self._schedule_expiry(g, member, session_timeout_ms)
            return self._join_answer(g, member)
        fut = asyncio.get_running_loop().create_future()
        member.join_future = fut
        self._prepare_rebalance(g, reason=f"static member {instance_id} rejoined with new metadata")
        self._schedule_expiry(g, member, rebalance_timeout_ms + session_timeout_ms)
        self._try_complete_join(g)
        return await fut

    def _join_answer(self, g: Group, member: Member) -> dict:
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

    def _prepare_rebalance(self, g: Group, reason: str) -> None:
        loop = asyncio.get_running_loop()
        for m in g.members.values():
            if m.sync_future is not None and not m.sync_future.done():
                m.sync_future.set_exception(GroupError(ErrorCode.rebalance_in_progress))
                m.sync_future = None
        if g.state == PREPARING_REBALANCE:
            return
        was_empty = g.state == EMPTY
        g.state = PREPARING_REBALANCE
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
            g.join_timer = loop.call_later(timeout / 1000, self._complete_join, g)
        log.info("group.rebalance_started", group_id=g.group_id, generation=g.generation,
                 members=len(g.members), reason=reason)

    def _delay_initial_join(self, g: Group, delay_ms: int, remaining_ms: int) -> None:
        loop = asyncio.get_running_loop()
        g.initial_delay_until = loop.time() + delay_ms / 1000
        g.join_timer = loop.call_later(delay_ms / 1000, self._initial_delay_over, g, delay_ms,
                                       remaining_ms)

    def _initial_delay_over(self, g: Group, delay_ms: int, remaining_ms: int) -> None:
        # GroupCoordinator.scala, InitialDelayedJoin.onComplete: the next delay is the configured
        # one capped by what is left, and what is left shrinks by the delay just served.
        if g.state != PREPARING_REBALANCE:
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
        if g.state != PREPARING_REBALANCE or not g.all_joined():
            return
        if g.initial_delay_until and asyncio.get_running_loop().time() < g.initial_delay_until:
            return
        self._complete_join(g)

    def _complete_join(self, g: Group) -> None:
        if g.state != PREPARING_REBALANCE:
            return
        if g.join_timer is not None:
            g.join_timer.cancel()
            g.join_timer = None
        g.initial_delay_until = 0.0
        for m in [m for m in g.members.values()
                  if m.join_future is None and m.instance_id is None]:
            log.info("group.member_removed", group_id=g.group_id, member_id=m.member_id,
                     reason="did not rejoin within the rebalance timeout")
            self._remove(g, m)
        for timer in g.pending.values():
            if timer is not None:
                timer.cancel()
        g.pending.clear()
        g.generation += 1
        if not g.members:
            g.state = EMPTY
            g.protocol = None
            g.leader = None
            self._persist_group(g)
            log.info("group.empty", group_id=g.group_id, generation=g.generation)
            return
        g.protocol = self._select_protocol(g)
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        g.state = COMPLETING_REBALANCE
        log.info("group.join_completed", group_id=g.group_id, generation=g.generation,
                 protocol=g.protocol, leader=g.leader, members=len(g.members))
        for m in g.members.values():
            fut, m.join_future = m.join_future, None
            m.is_new = False
            self._schedule_expiry(g, m, m.session_timeout_ms)
            if fut is not None and not fut.done():
                fut.set_result(self._join_answer(g, m))

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
    async def sync(self, *, group_id: str, generation: int, member_id: str,
                   instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes]) -> tuple[bytes, str | None, str | None]:
        g, member = self._member(group_id, member_id, instance_id)
        if generation != g.generation:
            raise GroupError(ErrorCode.illegal_generation)
        if (protocol_type is not None and protocol_type != g.protocol_type) or (
                protocol_name is not None and protocol_name != g.protocol):
            raise GroupError(ErrorCode.inconsistent_group_protocol)
        if g.state == PREPARING_REBALANCE:
            raise GroupError(ErrorCode.rebalance_in_progress)
        if g.state == STABLE:
            return member.assignment, g.protocol_type, g.protocol
        # CompletingRebalance
        fut = asyncio.get_running_loop().create_future()
        member.sync_future = fut
        if member_id == g.leader:
            for m in g.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            g.state = STABLE
            self._persist_group(g)
            log.info("group.stable", group_id=g.group_id, generation=g.generation,
                     members=len(g.members), protocol=g.protocol)
            for m in g.members.values():
                if m.sync_future is not None and not m.sync_future.done():
                    m.sync_future.set_result(m.assignment)
                    m.sync_future = None
        assignment = await fut
        return assignment, g.protocol_type, g.protocol

    def _member(self, group_id: str, member_id: str, instance_id: str | None) -> tuple[Group, Member]:
        if not group_id:
            raise GroupError(ErrorCode.invalid_group_id)
        g = self.groups.get(group_id)
        if g is None or g.state == DEAD:
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
        if g.state == PREPARING_REBALANCE:
            raise GroupError(ErrorCode.rebalance_in_progress)

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
        for fut in (m.join_future, m.sync_future):
            if fut is not None and not fut.done():
                fut.set_exception(GroupError(ErrorCode.unknown_member_id))
        m.join_future = m.sync_future = None

    def _after_removal(self, g: Group, reason: str) -> None:
        if g.state in (STABLE, COMPLETING_REBALANCE):
            if g.members:
                self._prepare_rebalance(g, reason)
            else:
                g.state = PREPARING_REBALANCE
                self._complete_join(g)
        elif g.state == PREPARING_REBALANCE:
            if g.members:
                self._try_complete_join(g)
            else:
                self._complete_join(g)

    def _schedule_expiry(self, g: Group, m: Member, timeout_ms: int) -> None:
        self._cancel_expiry(m)
        m.expiry = asyncio.get_running_loop().call_later(timeout_ms / 1000, self._expire, g, m)

    @staticmethod
    def _cancel_expiry(m: Member) -> None:
        if m.expiry is not None:
            m.expiry.cancel()
            m.expiry = None

    def _expire(self, g: Group, m: Member) -> None:
        if g.members.get(m.member_id) is not m:
            return
        if m.join_future is not None and g.state == PREPARING_REBALANCE:
            return  # waiting in a join: the rebalance timeout decides
        log.info("group.member_expired", group_id=g.group_id, member_id=m.member_id,
                 instance_id=m.instance_id, session_timeout_ms=m.session_timeout_ms,
                 reason="no heartbeat within the session timeout")
        self._remove(g, m)
        self._after_removal(g, f"member {m.member_id} session timed out")

    # -- offsets ----------------------------------------------------------------------------
    def _check_commit_member(self, g: Group | None, generation: int, member_id: str,
                             instance_id: str | None, transactional: bool = False) -> None:
        """Kafka's GroupCoordinator.validateOffsetCommit."""
        if g is None or not g.members:
            if generation < 0:
                return  # the group only stores offsets (assign() consumers)
            if g is None or g.state == DEAD:
                raise GroupError(ErrorCode.illegal_generation)
        if generation >= 0 or member_id or instance_id is not None:
            if instance_id is not None and g.static.get(instance_id, member_id) != member_id:
                raise GroupError(ErrorCode.fenced_instance_id)
            if member_id not in g.members:
                raise GroupError(ErrorCode.unknown_member_id)
            if generation != g.generation:
                raise GroupError(ErrorCode.illegal_generation)
            if not transactional and g.state == COMPLETING_REBALANCE:
                raise GroupError(ErrorCode.rebalance_in_progress)
        elif not transactional and g.members:
            # The group is managed and the committer is not one of its members.
            raise GroupError(ErrorCode.unknown_member_id)

    def _write_offsets(self, group_id: str, offsets: dict[tuple[str, int], Offset],
                       producer: tuple[int, int] | None = None) -> None:
        """One record per offset; each remembers where it landed, so a later
        transactional completion can tell which commit is newer."""
        base = self._append(group_id, [
            {"key": gl.offset_key(group_id, t, p),
             "value": gl.encode_offset(gl.OffsetValue(o.offset, o.leader_epoch, o.metadata,
                                                      o.commit_timestamp))}
            for (t, p), o in offsets.items()], producer=producer)
        for i, o in enumerate(offsets.values()):
            o.log_offset = base + i

    def commit_offsets(self, group_id: str, generation: int, member_id: str,
                       instance_id: str | None, offsets: dict[tuple[str, int], Offset]) -> None:
        g = self.groups.get(group_id)
        self._check_commit_member(g, generation, member_id, instance_id)
        if g is None:
            g = self.groups[group_id] = Group(group_id)
        self._write_offsets(group_id, offsets)
        g.offsets.update(offsets)
        if member_id:
            m = g.members.get(member_id)
            if m is not None:
                self._schedule_expiry(g, m, m.session_timeout_ms)

    def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                           generation: int, member_id: str, instance_id: str | None,
                           offsets: dict[tuple[str, int], Offset]) -> None:
        g = self.groups.get(group_id)
        # KIP-447: the consumer's generation fences zombies of older generations.
        self._check_commit_member(g, generation, member_id, instance_id, transactional=True)
        if g is None:
            g = self.groups[group_id] = Group(group_id)
        self._write_offsets(group_id, offsets, producer=(producer_id, producer_epoch))
        g.txn_offsets.setdefault(producer_id, {}).update(offsets)

    def on_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT/ABORT marker reached ``__consumer_offsets``-partition (it is the
        partition's last record: the state now covers the log up to its end)."""
        self._complete_txn_offsets(producer_id, commit, log_it=True, partition=partition)
        plog = self.broker.get_log(GROUP_METADATA_TOPIC, partition)
        self._applied_end[partition] = plog.log_end_offset
        self.snapshots.wrote()

    def _complete_txn_offsets(self, producer_id: int, commit: bool, log_it: bool,
                              partition: int | None = None) -> None:
        for g in self.groups.values():
            if partition is not None and self.broker.offsets_partition_for(g.group_id) != partition:
                continue
            pending = g.txn_offsets.pop(producer_id, None)
            if not pending:
                continue
            if commit:
                # completePendingTxnOffsetCommit: a newer plain commit wins.
                for tp, off in pending.items():
                    current = g.offsets.get(tp)
                    if current is None or current.log_offset < off.log_offset:
                        g.offsets[tp] = off
            if log_it:
                log.info("group.txn_offsets_" + ("committed" if commit else "aborted"),
                         group_id=g.group_id, producer_id=producer_id, partitions=len(pending))

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None,
                      require_stable: bool) -> tuple[ErrorCode, list]:
        """[(topic, partition, Offset | None, error)], or all committed when partitions is None."""
        g = self.groups.get(group_id)
        if partitions is None:
            partitions = sorted(g.offsets) if g is not None else []
        out = []
        for tp in partitions:
            if g is not None and require_stable and g.has_pending_txn_offset(tp):
                out.append((tp[0], tp[1], None, ErrorCode.unstable_offset_commit))
                continue
            off = g.offsets.get(tp) if g is not None else None
            out.append((tp[0], tp[1], off, ErrorCode.none))
        return ErrorCode.none, out

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> dict:
        g = self.groups.get(group_id)
        if g is None:
            raise GroupError(ErrorCode.group_id_not_found)
        subscribed: set[str] = set()
        if g.state != EMPTY and g.members:
            if g.protocol_type != "consumer":
                raise GroupError(ErrorCode.non_empty_group)
            subscribed = {t for m in g.members.values()
                          for t in _subscribed_topics(m.metadata_for(g.protocol))}
        result = {}
        tombstones = []
        for tp in partitions:
            if tp[0] in subscribed:
                result[tp] = ErrorCode.group_subscribed_to_topic
                continue
            result[tp] = ErrorCode.none
            if g.offsets.pop(tp, None) is not None:
                tombstones.append({"key": gl.offset_key(group_id, *tp), "value": None})
        if tombstones:
            self._append(group_id, tombstones)
        return result

    # -- admin --------------------------------------------------------------------------
    def list_groups(self) -> list[Group]:
        return [g for g in self.groups.values() if g.state != DEAD]

    def delete_group(self, group_id: str) -> ErrorCode:
        g = self.groups.get(group_id)
        if g is None or g.state == DEAD:
            return ErrorCode.group_id_not_found
        if g.state != EMPTY or g.members:
            return ErrorCode.non_empty_group
        records = [{"key": gl.offset_key(group_id, t, p), "value": None} for t, p in g.offsets]
        records.append({"key": gl.group_key(group_id), "value": None})
        self._append(group_id, records)
        g.state = DEAD
        del self.groups[group_id]
        log.info("group.deleted", group_id=group_id, offsets=len(g.offsets))
        return ErrorCode.none


def _subscribed_topics(metadata: bytes) -> list[str]:
    """Topics of a ConsumerProtocolSubscription (version, array of topics, ...)."""
    try:
        pos = 2
        (n,) = struct.unpack_from(">i", metadata, pos)
        pos += 4
        topics = []
        for _ in range(n):
            (ln,) = struct.unpack_from(">h", metadata, pos)
            pos += 2
            topics.append(metadata[pos:pos + ln].decode())
            pos += ln
        return topics
    except (struct.error, UnicodeDecodeError):
        return []
