"""Consumer groups (classic protocol) and committed offsets."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build, has_field, nested
from minibroker_protocol.errors import ErrorCode, for_version
from minibroker_storage.lazylog import get_logger
from minibroker_storage.manager import LogManager

from ..cluster import connection_node
from ..coordinator.group.coordinator import GroupCoordinator, GroupError, Offset
from ..coordinator.share.coordinator import ShareCoordinator
from ..coordinator.share.group import ShareGroupError
from .api import Api, RequestContext
from .authz import OFF, Authz, Op, Res
from .common import AUTHORIZED_OPERATIONS_OMITTED, ZERO, answers, answers_later, response_cls

log = get_logger("minibroker.group")

# Kafka's offset.metadata.max.bytes
OFFSET_METADATA_MAX_BYTES = 4096


def _ms(td: datetime.timedelta) -> int:
    return int(td.total_seconds() * 1000)


class GroupHandlers:
    def __init__(self, *, groups: GroupCoordinator, logs: LogManager, authz: Authz = OFF,
                 share: ShareCoordinator | None = None,
                 coordinator_node: Callable[[int, str], int | None] | None = None) -> None:
        self.groups = groups
        # virtual brokers: which node coordinates a group, so each lists only its own
        self.coordinator_node = coordinator_node
        self.logs = logs
        # share groups live in their own coordinator; ListGroups, DescribeGroups and
        # DeleteGroups see them as Kafka's group coordinator does
        self.share = share
        # KafkaApis: the classic group APIs need READ on the group (DESCRIBE to read offsets or
        # describe it, DELETE to delete it or its offsets), offsets READ/DESCRIBE on topics.
        self.authz = authz

    def _delete(self, group_id: str) -> ErrorCode:
        if self.share is not None and group_id in self.share.groups.groups:
            try:
                self.share.delete_group(group_id)
            except ShareGroupError as e:  # not empty
                return e.code
            return ErrorCode.none
        return self.groups.delete_group(group_id)

    def _group_denied(self, ctx: RequestContext, group_id: str, op: Any = Op.READ) -> bool:
        return not self.authz.allowed(ctx, op, Res.GROUP, group_id)

    def apis(self) -> list[Api]:
        return [
            Api(ApiKey.JoinGroup, 0, 9, self.join_group),
            Api(ApiKey.SyncGroup, 0, 5, self.sync_group),
            Api(ApiKey.Heartbeat, 0, 4, self.heartbeat),
            Api(ApiKey.LeaveGroup, 0, 5, self.leave_group),
            Api(ApiKey.OffsetCommit, 2, 10, self.offset_commit),
            Api(ApiKey.OffsetFetch, 1, 10, self.offset_fetch),
            Api(ApiKey.TxnOffsetCommit, 0, 6, self.txn_offset_commit),
            Api(ApiKey.ListGroups, 0, 5, self.list_groups),
            Api(ApiKey.DescribeGroups, 0, 6, self.describe_groups),
            Api(ApiKey.DeleteGroups, 0, 3, self.delete_groups),
            Api(ApiKey.OffsetDelete, 0, 0, self.offset_delete),
        ]

    # -- membership -------------------------------------------------------------------
    @answers_later
    async def join_group(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        M = nested(R, "JoinGroupResponseMember")
        if self._group_denied(ctx, req.group_id):
            # JoinGroupRequest.getErrorResponse: no member id, generation -1
            return build(R, throttle_time=ZERO, error_code=ErrorCode.group_authorization_failed,
                         generation_id=-1, protocol_type=None,
                         protocol_name=None if ctx.api_version >= 7 else "", leader="",
                         skip_assignment=False, member_id="", members=())
        peer = ctx.connection.peer
        rebalance = getattr(req, "rebalance_timeout", None)
        try:
            ans = await self.groups.join(
                group_id=req.group_id, member_id=req.member_id,
                instance_id=getattr(req, "group_instance_id", None),
                client_id=ctx.client_id or "", client_host=f"/{peer[0]}" if peer else "",
                session_timeout_ms=_ms(req.session_timeout),
                rebalance_timeout_ms=_ms(rebalance) if rebalance is not None else _ms(req.session_timeout),
                protocol_type=req.protocol_type,
                protocols=[(p.name, p.metadata) for p in req.protocols],
                require_known_member_id=ctx.api_version >= 4)
        except GroupError as e:
            member_id = str(e) if e.code == ErrorCode.member_id_required else req.member_id
            return build(R, throttle_time=ZERO, error_code=e.code, generation_id=-1,
                         protocol_type=None, protocol_name=None if ctx.api_version >= 7 else "",
                         leader="", skip_assignment=False, member_id=member_id, members=())
        return build(
            R, throttle_time=ZERO, error_code=ErrorCode.none, generation_id=ans["generation_id"],
            protocol_type=ans["protocol_type"], protocol_name=ans["protocol_name"] or "",
            leader=ans["leader"], skip_assignment=False, member_id=ans["member_id"],
            members=tuple(build(M, member_id=mid, group_instance_id=iid, metadata=meta)
                          for mid, iid, meta in ans["members"]))

    @answers_later
    async def sync_group(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        if self._group_denied(ctx, req.group_id):
            return build(R, throttle_time=ZERO, error_code=ErrorCode.group_authorization_failed,
                         protocol_type=None, protocol_name=None, assignment=b"")
        try:
            assignment, ptype, pname = await self.groups.sync(
                group_id=req.group_id, generation=req.generation_id, member_id=req.member_id,
                instance_id=getattr(req, "group_instance_id", None),
                protocol_type=getattr(req, "protocol_type", None),
                protocol_name=getattr(req, "protocol_name", None),
                assignments={a.member_id: a.assignment for a in req.assignments})
        except GroupError as e:
            return build(R, throttle_time=ZERO, error_code=e.code, protocol_type=None,
                         protocol_name=None, assignment=b"")
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none, protocol_type=ptype,
                     protocol_name=pname, assignment=assignment)

    @answers
    def heartbeat(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        if self._group_denied(ctx, req.group_id):
            return build(R, throttle_time=ZERO, error_code=ErrorCode.group_authorization_failed)
        try:
            self.groups.heartbeat(req.group_id, req.generation_id, req.member_id,
                                  getattr(req, "group_instance_id", None))
            code = ErrorCode.none
        except GroupError as e:
            code = e.code
        return build(R, throttle_time=ZERO, error_code=code)

    @answers
    def leave_group(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        if self._group_denied(ctx, req.group_id):
            return build(R, throttle_time=ZERO, error_code=ErrorCode.group_authorization_failed, members=())
        if ctx.api_version >= 3:
            members = [(m.member_id, m.group_instance_id) for m in req.members]
        else:
            members = [(req.member_id, None)]
        codes = self.groups.leave(req.group_id, members)
        if ctx.api_version >= 3:
            MR = nested(R, "MemberResponse")
            return build(R, throttle_time=ZERO, error_code=ErrorCode.none, members=tuple(
                build(MR, member_id=mid, group_instance_id=iid, error_code=c)
                for (mid, iid), c in zip(members, codes)))
        return build(R, throttle_time=ZERO, error_code=codes[0])

    # -- offsets ----------------------------------------------------------------------
    def _offsets_from(
        self, ctx: RequestContext, topics: Any,
    ) -> tuple[dict[tuple[str, int], Offset], dict[tuple[str, int], ErrorCode]]:
        ok: dict[tuple[str, int], Offset] = {}
        errors: dict[tuple[str, int], ErrorCode] = {}
        ts = self.groups.now_ms()
        named = [(t, self._name_of(t)) for t in topics]
        # KafkaApis.handle(Txn)OffsetCommitRequest: READ on each topic, before its existence
        readable = self.authz.topics(ctx, Op.READ, (n for _, n in named if n is not None))
        for t, name in named:
            info = self.logs.topic(name) if name is not None else None
            for p in t.partitions:
                tp = (name if name is not None else _id_key(t.topic_id), p.partition_index)
                if name is not None and name not in readable:
                    errors[tp] = ErrorCode.topic_authorization_failed
                elif name is None:
                    errors[tp] = ErrorCode.unknown_topic_id
                elif info is None or not 0 <= p.partition_index < info.partitions:
                    errors[tp] = ErrorCode.unknown_topic_or_partition
                elif (p.committed_metadata is not None
                      and len(p.committed_metadata.encode()) > OFFSET_METADATA_MAX_BYTES):
                    errors[tp] = ErrorCode.offset_metadata_too_large
                else:
                    ok[tp] = Offset(p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                    p.committed_metadata or "", ts)
        return ok, errors

    @answers
    def offset_commit(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        T = nested(R, "OffsetCommitResponseTopic")
        P = nested(R, "OffsetCommitResponsePartition")
        generation = getattr(req, "generation_id", None)
        if generation is None:
            generation = req.generation_id_or_member_epoch
        if self._group_denied(ctx, req.group_id):
            # OffsetCommitRequest.getErrorResponse: every partition
            return self._per_partition(R, T, P, req.topics, None, ErrorCode.group_authorization_failed)
        ok, errors = self._offsets_from(ctx, req.topics)
        if ok:
            try:
                self.groups.commit_offsets(req.group_id, generation, req.member_id,
                                           getattr(req, "group_instance_id", None), ok,
                                           api_version=ctx.api_version)
            except GroupError as e:
                errors.update({tp: e.code for tp in ok})
        return self._per_partition(R, T, P, req.topics, errors)

    @answers
    def txn_offset_commit(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        T = nested(R, "TxnOffsetCommitResponseTopic")
        P = nested(R, "TxnOffsetCommitResponsePartition")
        # KafkaApis.handleTxnOffsetCommitRequest: WRITE on the transactional id, READ on the
        # group, then READ on each topic
        if not self.authz.allowed(ctx, Op.WRITE, Res.TRANSACTIONAL_ID, req.transactional_id):
            return self._per_partition(R, T, P, req.topics, None,
                                       ErrorCode.transactional_id_authorization_failed)
        if self._group_denied(ctx, req.group_id):
            return self._per_partition(R, T, P, req.topics, None, ErrorCode.group_authorization_failed)
        ok, errors = self._offsets_from(ctx, req.topics)
        if ok:
            # v5 (transactions v2): the offsets partition joins the transaction here, as
            # AddOffsetsToTxn did before (AddPartitionsToTxnManager, addPartition)
            code = self.groups.verify_txn_producer(req.group_id, req.producer_id,
                                                   req.producer_epoch, add=ctx.api_version >= 5)
            if code is None:
                try:
                    self.groups.txn_commit_offsets(
                        req.group_id, req.producer_id, req.producer_epoch,
                        getattr(req, "generation_id", -1), getattr(req, "member_id", ""),
                        getattr(req, "group_instance_id", None), ok, api_version=ctx.api_version)
                except GroupError as e:
                    code = e.code
            if code is not None:
                # A fenced producer is INVALID_PRODUCER_EPOCH on every TxnOffsetCommit version
                # (Kafka 4.4, found by tests/differential); for_version holds that rule.
                code = for_version(code, ctx.api_key, ctx.api_version)
                log.info("txn_offset_commit.refused", group_id=req.group_id,
                         transactional_id=req.transactional_id, producer_id=req.producer_id,
                         epoch=req.producer_epoch, error=code.name)
                errors.update({tp: code for tp in ok})
        return self._per_partition(R, T, P, req.topics, errors)

    def _name_of(self, t: Any) -> str | None:
        """The topic a request's entry names: by name, or by id from OffsetCommit/OffsetFetch v10;
        None for an id no topic has."""
        if not hasattr(t, "topic_id") or hasattr(t, "name"):
            return t.name
        info = self.logs.topic_by_id(t.topic_id)
        return info.name if info is not None else None

    def _per_partition(self, R, T, P, topics, errors, every=None):
        """The answer per partition: from ``errors``, or ``every`` for all of them."""
        out = []
        for t in topics:
            name = self._name_of(t)
            key = name if name is not None else _id_key(t.topic_id)
            out.append(build(T, name=t.name if hasattr(t, "name") else None,
                             topic_id=getattr(t, "topic_id", None), partitions=tuple(
                build(P, partition_index=p.partition_index,
                      error_code=every if every is not None
                      else errors.get((key, p.partition_index), ErrorCode.none))
                for p in t.partitions)))
        return build(R, throttle_time=ZERO, topics=tuple(out))

    @answers
    def offset_fetch(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        stable = getattr(req, "require_stable", False)
        if ctx.api_version >= 8:
            G = nested(R, "OffsetFetchResponseGroup")
            T = nested(R, "OffsetFetchResponseTopics")
            P = nested(R, "OffsetFetchResponsePartitions")
            groups = []
            for grp in req.groups:
                if self._group_denied(ctx, grp.group_id, Op.DESCRIBE):
                    groups.append(build(G, group_id=grp.group_id, topics=(),
                                        error_code=ErrorCode.group_authorization_failed))
                    continue
                try:
                    topics = self._fetch(ctx, grp.group_id, grp.topics, stable, T, P,
                                         getattr(grp, "member_id", None),
                                         getattr(grp, "member_epoch", -1))
                    code = ErrorCode.none
                except GroupError as e:  # a consumer group member at another epoch (v9+)
                    topics, code = (), e.code
                groups.append(build(G, group_id=grp.group_id, topics=topics, error_code=code))
            return build(R, throttle_time=ZERO, groups=tuple(groups))
        T = nested(R, "OffsetFetchResponseTopic")
        P = nested(R, "OffsetFetchResponsePartition")
        if self._group_denied(ctx, req.group_id, Op.DESCRIBE):
            return build(R, throttle_time=ZERO, topics=(), error_code=ErrorCode.group_authorization_failed)
        topics = self._fetch(ctx, req.group_id, req.topics, stable, T, P)
        return build(R, throttle_time=ZERO, topics=topics, error_code=ErrorCode.none)

    def _fetch(self, ctx, group_id, topics, stable, T, P, member_id=None, member_epoch=-1):
        by_id = has_field(T, "topic_id")
        unknown: list[Any] = []  # v10 entries whose topic id no topic has
        # KafkaApis.fetchOffsetsForGroup: topics the caller may not DESCRIBE are not asked for,
        # and answered TOPIC_AUTHORIZATION_FAILED after the others
        denied: list[tuple[Any, str]] = []
        wanted: list[tuple[str, int]] | None = None
        if topics is not None:
            wanted = []
            names = [(t, self._name_of(t)) for t in topics]
            visible = self.authz.topics(ctx, Op.DESCRIBE, (n for _, n in names if n is not None))
            for t, name in names:
                if name is None:
                    unknown.append(t)
                elif name not in visible:
                    denied.append((t, name))
                else:
                    wanted.extend((name, p) for p in t.partition_indexes)
        _err, rows = (self.groups.fetch_offsets(group_id, wanted, stable, member_id, member_epoch)
                      if wanted != [] else (None, []))
        if topics is None and self.authz.on:
            # fetchAllOffsetsForGroup: the offsets of topics the caller may not DESCRIBE are left out
            visible = self.authz.topics(ctx, Op.DESCRIBE, dict.fromkeys(r[0] for r in rows))
            rows = [r for r in rows if r[0] in visible]
        by_topic: dict[str, list] = {}
        for topic, partition, off, code in rows:
            by_topic.setdefault(topic, []).append(build(
                P, partition_index=partition,
                committed_offset=off.offset if off else -1,
                committed_leader_epoch=off.leader_epoch if off else -1,
                metadata=off.metadata if off else "",
                error_code=code))
        out = []
        for name, ps in by_topic.items():
            if by_id:
                info = self.logs.topic(name)
                if info is None:  # offsets of a topic deleted since: no id to name it by
                    continue
                out.append(build(T, topic_id=info.topic_id, partitions=tuple(ps)))
            else:
                out.append(build(T, name=name, partitions=tuple(ps)))
        for t, name in denied:
            out.append(build(T, name=name, topic_id=getattr(t, "topic_id", None), partitions=tuple(
                build(P, partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                      error_code=ErrorCode.topic_authorization_failed) for p in t.partition_indexes)))
        for t in unknown:
            out.append(build(T, topic_id=t.topic_id, partitions=tuple(
                build(P, partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                      error_code=ErrorCode.unknown_topic_id) for p in t.partition_indexes)))
        return tuple(out)

    @answers
    def offset_delete(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        T = nested(R, "OffsetDeleteResponseTopic")
        P = nested(R, "OffsetDeleteResponsePartition")
        if self._group_denied(ctx, req.group_id, Op.DELETE):
            return build(R, error_code=ErrorCode.group_authorization_failed, throttle_time=ZERO, topics=())
        # KafkaApis.handleOffsetDeleteRequest: READ on each topic, else TOPIC_AUTHORIZATION_FAILED
        readable = self.authz.topics(ctx, Op.READ, (t.name for t in req.topics))
        wanted = [(t.name, p.partition_index) for t in req.topics for p in t.partitions
                  if t.name in readable]
        try:
            result = self.groups.delete_offsets(req.group_id, wanted) if wanted else {}
        except GroupError as e:
            return build(R, error_code=e.code, throttle_time=ZERO, topics=())
        result = {**result, **{(t.name, p.partition_index): ErrorCode.topic_authorization_failed
                               for t in req.topics if t.name not in readable for p in t.partitions}}
        by_topic: dict[str, list] = {}
        for (t, p), code in result.items():
            by_topic.setdefault(t, []).append(build(P, partition_index=p, error_code=code))
        return build(R, error_code=ErrorCode.none, throttle_time=ZERO, topics=tuple(
            build(T, name=t, partitions=tuple(ps)) for t, ps in by_topic.items()))

    # -- admin ---------------------------------------------------------------------------
    @answers
    def list_groups(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        L = nested(R, "ListedGroup")
        states = {s.lower() for s in getattr(req, "states_filter", ())}
        types = {s.lower() for s in getattr(req, "types_filter", ())}
        out = []
        # KafkaApis.handleListGroupsRequest: DESCRIBE on the cluster lists all, otherwise the
        # groups the caller may DESCRIBE (neither denial logged)
        every = not self.authz.on or self.authz.cluster(ctx, Op.DESCRIBE, log_if_denied=False)
        node = connection_node(ctx)

        def elsewhere(group_id: str) -> bool:
            # GroupCoordinator.listGroups: a broker lists the groups of the __consumer_offsets
            # partitions it leads, so a client asking every broker sees each group once
            return (self.coordinator_node is not None and node is not None
                    and self.coordinator_node(0, group_id) != node)

        for g in self.groups.list_groups():
            if elsewhere(g.group_id):
                continue
            if not every and not self.authz.allowed(ctx, Op.DESCRIBE, Res.GROUP, g.group_id,
                                                    log_if_denied=False):
                continue
            state = (g.streams.state if g.streams is not None
                     else g.consumer.state if g.consumer is not None else g.state)
            if states and state.lower() not in states:
                continue
            if types and g.group_type not in types:
                continue
            out.append(build(L, group_id=g.group_id,
                             # seen on Kafka 4.4: a streams group's protocol type is "streams"
                             protocol_type=("streams" if g.streams is not None else "consumer"
                                            if g.consumer is not None else g.protocol_type or ""),
                             group_state=state, group_type=g.group_type))
        for gid, state in (self.share.share_groups() if self.share is not None else ()):
            if elsewhere(gid):
                continue
            if not every and not self.authz.allowed(ctx, Op.DESCRIBE, Res.GROUP, gid,
                                                    log_if_denied=False):
                continue
            if (states and state.lower() not in states) or (types and "share" not in types):
                continue
            # seen on Kafka 4.4: protocol type "share", group type "share"
            out.append(build(L, group_id=gid, protocol_type="share", group_state=state,
                             group_type="share"))
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none, groups=tuple(out))

    @answers
    def describe_groups(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        D = nested(R, "DescribedGroup")
        DM = nested(R, "DescribedGroupMember")
        out = []
        denied = []
        for gid in req.groups:
            if self._group_denied(ctx, gid, Op.DESCRIBE):
                # DescribeGroupsResponse.groupError; these come first in Kafka's answer
                denied.append(build(D, error_code=ErrorCode.group_authorization_failed, error_message=None,
                                    group_id=gid, group_state="", protocol_type="", protocol_data="",
                                    members=(), authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
                continue
            g = self.groups.groups.get(gid)
            if g is None or g.consumer is not None or g.streams is not None:
                # v6 (KIP-1043) says so; older versions describe an unknown group as Dead.
                missing = ctx.api_version >= 6
                other = g is not None or (self.share is not None and gid in self.share.groups.groups)
                why = f"Group {gid} is not a classic group." if other else f"Group {gid} not found."
                out.append(build(D, error_code=ErrorCode.group_id_not_found if missing else ErrorCode.none,
                                 error_message=why if missing else None,
                                 group_id=gid, group_state="Dead",
                                 protocol_type="", protocol_data="", members=(),
                                 authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
                continue
            stable = g.state == "Stable"
            members = tuple(
                build(DM, member_id=m.member_id, group_instance_id=m.instance_id,
                      client_id=m.client_id, client_host=m.client_host,
                      member_metadata=m.metadata_for(g.protocol) if stable and g.protocol else b"",
                      member_assignment=m.assignment if stable else b"")
                for m in g.members.values())
            out.append(build(D, error_code=ErrorCode.none, group_id=gid, group_state=g.state,
                             protocol_type=g.protocol_type or "",
                             protocol_data=(g.protocol or "") if stable else "",
                             members=members,
                             authorized_operations=self.authz.operations(ctx, Res.GROUP, gid)
                             if self.authz.on and getattr(req, "include_authorized_operations", False)
                             else AUTHORIZED_OPERATIONS_OMITTED))
        return build(R, throttle_time=ZERO, groups=tuple(denied + out))

    @answers
    def delete_groups(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        # v3's per-group error_message (kio lacks v3: minibroker_protocol.schemas) is left
        # null: Kafka 4.4 answers null for every group, refused or not (checked against it)
        D = nested(R, "DeletableGroupResult")
        if not self.authz.on:
            return build(R, throttle_time=ZERO, results=tuple(
                build(D, group_id=gid, error_code=self._delete(gid))
                for gid in req.groups_names))
        # KafkaApis.handleDeleteGroupsRequest: each group once, DELETE on it; the refused last
        names = list(dict.fromkeys(req.groups_names))
        allowed = self.authz.names(ctx, Op.DELETE, Res.GROUP, names)
        return build(R, throttle_time=ZERO, results=tuple(
            [build(D, group_id=gid, error_code=self._delete(gid))
             for gid in names if gid in allowed]
            + [build(D, group_id=gid, error_code=ErrorCode.group_authorization_failed)
               for gid in names if gid not in allowed]))


def _id_key(topic_id: Any) -> str:
    # Error-table key of a v10 topic id that names no topic (a topic name never starts with "#").
    return f"#{topic_id}"
