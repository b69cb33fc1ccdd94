"""Share groups (KIP-932) on the wire: ShareGroupHeartbeat (76), ShareGroupDescribe (77),
ShareFetch (78), ShareAcknowledge (79), DescribeShareGroupOffsets (90), AlterShareGroupOffsets
(91) and DeleteShareGroupOffsets (92), in the order of checks of Kafka 4.4's KafkaApis
(docs/design/share-groups.md §1).

Every one works only while ``share.version`` is finalized at 1 or above; below it ApiVersions
still lists them and the requests are answered UNSUPPORTED_VERSION, as Kafka's
``isShareGroupProtocolEnabled`` gate does. A ShareFetch that acquires nothing waits up to its
MaxWaitMs, woken by appends, lock expiries, releases and acknowledgements (FetchWaiters).
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode
from minibroker_storage.lazylog import get_logger
from minibroker_storage.manager import LogManager

from ..cluster import Cluster, connection_node
from ..config.features import Features
from ..coordinator.share.coordinator import ShareCoordinator, SharePartitionView
from ..coordinator.share.group import MAX_MEMBER_ID_CHARS
from ..coordinator.share.partition import AckBatch, AcquireMode, ack_batches_valid
from ..coordinator.share.sessions import PartitionResult, ShareSessionError
from .api import Api, RequestContext, Response
from .authz import OFF, Authz, Op, Res
from .common import AUTHORIZED_OPERATIONS_OMITTED, ZERO, answers, partition_log, response_cls

log = get_logger("minibroker.share")

SHARE_GROUPS_LEVEL = 1
# How much a ShareFetch without MaxBytes reads per partition at most
DEFAULT_MAX_BYTES = 0x7FFFFFFF


def _ms(td: Any) -> int:
    return int(td.total_seconds() * 1000) if isinstance(td, datetime.timedelta) else int(td)


class ShareHandlers:
    def __init__(self, *, share: ShareCoordinator, logs: LogManager, features: Features,
                 wait_for_append: Callable[[list[tuple[str, int]], float], Awaitable[None]],
                 cluster: Cluster | None = None, authz: Authz = OFF,
                 node_endpoints: Callable[[], dict[int, tuple[str, int]]] | None = None) -> None:
        self.share = share
        self.node_endpoints = node_endpoints
        self.logs = logs
        self.features = features
        self.wait_for_append = wait_for_append
        self.cluster = cluster
        self.authz = authz

    def apis(self) -> list[Api]:
        return [
            Api(ApiKey.ShareGroupHeartbeat, 1, 1, self.heartbeat),
            Api(ApiKey.ShareGroupDescribe, 1, 1, self.describe),
            Api(ApiKey.ShareFetch, 1, 2, self.fetch),
            Api(ApiKey.ShareAcknowledge, 1, 2, self.acknowledge),
            Api(ApiKey.DescribeShareGroupOffsets, 0, 1, self.describe_offsets),
            Api(ApiKey.AlterShareGroupOffsets, 0, 0, self.alter_offsets),
            Api(ApiKey.DeleteShareGroupOffsets, 0, 0, self.delete_offsets),
        ]

    def _enabled(self) -> bool:
        return self.features.share_version >= SHARE_GROUPS_LEVEL

    # ---- ShareGroupHeartbeat ---------------------------------------------------------------
    @answers
    def heartbeat(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)

        def refuse(code: ErrorCode, message: str | None = None) -> Any:
            return build(R, throttle_time=ZERO, error_code=code, error_message=message,
                         member_id=None, member_epoch=0, heartbeat_interval=ZERO, assignment=None)

        if not self._enabled():
            return refuse(ErrorCode.unsupported_version)
        if not self.authz.allowed(ctx, Op.READ, Res.GROUP, req.group_id):
            return refuse(ErrorCode.group_authorization_failed)
        mid = req.member_id
        if mid is None or mid == "" or len(mid.encode("utf-16-le")) // 2 > MAX_MEMBER_ID_CHARS:
            return refuse(ErrorCode.invalid_request)
        if req.subscribed_topic_names and self.authz.on:
            allowed = self.authz.topics(ctx, Op.DESCRIBE, req.subscribed_topic_names)
            if set(req.subscribed_topic_names) - allowed:
                return refuse(ErrorCode.topic_authorization_failed)
        peer = ctx.connection.peer if ctx.connection is not None else None
        ans = self.share.heartbeat(
            group_id=req.group_id, member_id=mid, member_epoch=req.member_epoch,
            rack_id=req.rack_id,
            subscribed_topic_names=(list(req.subscribed_topic_names)
                                    if req.subscribed_topic_names is not None else None),
            client_id=ctx.client_id or "", client_host=f"/{peer[0]}" if peer else "")
        if ans.error_code != ErrorCode.none:
            log.info("share.heartbeat_refused", group=req.group_id, member=mid,
                     epoch=req.member_epoch, error=ErrorCode(ans.error_code).name,
                     reason=ans.error_message)
            return build(R, throttle_time=ZERO, error_code=ans.error_code,
                         error_message=ans.error_message, member_id=ans.member_id,
                         member_epoch=ans.member_epoch, heartbeat_interval=ZERO, assignment=None)
        assignment = None
        if ans.assignment is not None:
            A = nested(R, "Assignment")
            T = nested(R, "TopicPartitions")
            assignment = build(A, topic_partitions=tuple(
                build(T, topic_id=tid, partitions=tuple(ps)) for tid, ps in ans.assignment))
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
                     member_id=ans.member_id, member_epoch=ans.member_epoch,
                     heartbeat_interval=datetime.timedelta(milliseconds=ans.heartbeat_interval_ms),
                     assignment=assignment)

    # ---- ShareGroupDescribe ----------------------------------------------------------------
    @answers
    def describe(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        D = nested(R, "DescribedGroup")
        M = nested(R, "Member")
        A = nested(R, "Assignment")
        T = nested(R, "TopicPartitions")
        out = []
        for gid in req.group_ids:
            if not self._enabled():
                code, message = ErrorCode.unsupported_version, None
            elif not self.authz.allowed(ctx, Op.DESCRIBE, Res.GROUP, gid):
                code, message = ErrorCode.group_authorization_failed, None
            else:
                g = self.share.groups.describe([gid])[0]
                code, message = g.error_code, g.error_message
                if code == ErrorCode.none:
                    members = tuple(build(
                        M, member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                        client_id=m.client_id, client_host=m.client_host,
                        subscribed_topic_names=m.subscribed_topic_names,
                        assignment=build(A, topic_partitions=tuple(
                            build(T, topic_id=tid, topic_name=name, partitions=ps)
                            for tid, name, ps in m.assignment))) for m in g.members)
                    out.append(build(D, error_code=ErrorCode.none, error_message=None, group_id=gid,
                                     group_state=g.state, group_epoch=g.group_epoch,
                                     assignment_epoch=g.assignment_epoch,
                                     assignor_name=g.assignor_name, members=members,
                                     authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
                    continue
            out.append(build(D, error_code=code, error_message=message, group_id=gid,
                             group_state="", group_epoch=0, assignment_epoch=0, assignor_name="",
                             members=(), authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
        return build(R, throttle_time=ZERO, groups=tuple(out))

    # ---- ShareFetch --------------------------------------------------------------------------
    def fetch(self, ctx: RequestContext, req: Any) -> Response | Awaitable[Response]:
        R = response_cls(ctx)
        top = self._fetch_checks(ctx, req)
        if top is not None:
            return Response.of(ctx.correlation_id, self._top_error(R, *top))
        conn = str(getattr(ctx.connection, "conn_id", "")) if ctx.connection is not None else ""
        wanted = [(str(t.topic_id), p.partition_index) for t in req.topics for p in t.partitions]
        forgotten = [(str(t.topic_id), p) for t in req.forgotten_topics_data for p in t.partitions]
        has_acks = any(p.acknowledgement_batches for t in req.topics for p in t.partitions)
        try:
            context = self.share.sessions.new_context(req.group_id, req.member_id,
                                                      req.share_session_epoch, wanted, forgotten,
                                                      has_acks, conn, connection_node(ctx))
        except ShareSessionError as e:
            return Response.of(ctx.correlation_id, self._top_error(R, e.code, None, lock=False))
        is_renew = bool(getattr(req, "is_renew_ack", False))
        if context.close_after:
            acks = self._acknowledge_all(ctx, req, req.topics, is_renew)
            return Response.of(ctx.correlation_id,
                               self._fetch_response(ctx, R, req, context, acks, {}, close=True))
        # Kafka acknowledges and fetches in parallel: the records an acknowledgement moves stay
        # in transition until its state write completes, and the fetch's first attempt runs
        # before that (KafkaApis.handleShareFetchRequest; SharePartition skips batches with an
        # ongoing state transition). So the first attempt sees the state before this request's
        # acknowledgements (seen: a piggybacked RELEASE is not redelivered by the same answer
        # while other records are available, a piggybacked ACCEPT frees no in-flight room for
        # it); the answers are known first, the acknowledgements applied after it, and a
        # waiting fetch is woken by them.
        acks = self._acknowledge_all(ctx, req, req.topics, is_renew, check_only=True)
        results = self._acquire_all(ctx, req, context.partitions, is_renew)
        applied = self._acknowledge_all(ctx, req, req.topics, is_renew,
                                        only={k for k, (code, _m) in acks.items() if code == ErrorCode.none})
        acks.update(applied)
        max_wait = _ms(req.max_wait)
        if (not is_renew and max_wait > 0 and not any(r[1] for r in results.values())
                and not any(r[0] != ErrorCode.none for r in results.values())):
            if applied:
                results = self._acquire_all(ctx, req, context.partitions, is_renew)
            if not any(r[1] for r in results.values()) and not any(
                    r[0] != ErrorCode.none for r in results.values()):
                return self._long_poll(ctx, R, req, context, acks, max_wait, is_renew)
        return Response.of(ctx.correlation_id, self._fetch_response(ctx, R, req, context, acks, results))

    async def _long_poll(self, ctx, R, req, context, acks, max_wait: int, is_renew: bool) -> Response:
        deadline = time.monotonic() + max_wait / 1000
        results: dict = {}
        for _ in range(1000):  # bounded: each pass waits or ends
            left = deadline - time.monotonic()
            names = [(n, p) for (tid, p) in context.partitions
                     if (n := self._name(tid)) is not None]
            if left <= 0:
                break
            await self.wait_for_append(names, left)
            results = self._acquire_all(ctx, req, context.partitions, is_renew)
            if any(r[1] for r in results.values()) or any(r[0] != ErrorCode.none for r in results.values()):
                break
        else:
            results = {}
        if not results:
            results = self._acquire_all(ctx, req, context.partitions, is_renew)
        return Response.of(ctx.correlation_id, self._fetch_response(ctx, R, req, context, acks, results))

    def _fetch_checks(self, ctx: RequestContext, req: Any) -> tuple[ErrorCode, str | None] | None:
        if not self._enabled():
            return ErrorCode.unsupported_version, None
        if req.group_id is None:
            return ErrorCode.invalid_request, "Invalid group id in the request."
        if not self.authz.allowed(ctx, Op.READ, Res.GROUP, req.group_id):
            return ErrorCode.group_authorization_failed, None
        if not req.member_id:
            return ErrorCode.invalid_request, "Invalid member id in the request."
        if getattr(req, "is_renew_ack", False):
            bad = [n for n, v in (("maxBytes", req.max_bytes), ("minBytes", req.min_bytes),
                                  ("maxRecords", req.max_records), ("maxWaitMs", _ms(req.max_wait)))
                   if v != 0]
            if bad:
                return ErrorCode.invalid_request, ("Renew acknowledgement requests must have "
                                                   + ", ".join(bad) + " set to 0.")
        return None

    def _top_error(self, R: Any, code: ErrorCode, message: str | None, lock: bool = False) -> Any:
        fields: dict[str, Any] = dict(throttle_time=ZERO, error_code=code, error_message=message,
                                      responses=(), node_endpoints=())
        if "acquisition_lock_timeout" in R.__dataclass_fields__:
            fields["acquisition_lock_timeout"] = ZERO
        return build(R, **fields)

    def _name(self, topic_id: str) -> str | None:
        try:
            info = self.logs.topic_by_id(uuid.UUID(topic_id))
        except ValueError:
            return None
        return info.name if info is not None else None

    def _partition_error(self, ctx: RequestContext, topic_id: str, partition: int,
                         op: Any = Op.READ) -> tuple[ErrorCode, SharePartitionView | None]:
        name = self._name(topic_id)
        if name is None:
            return ErrorCode.unknown_topic_id, None
        if not self.authz.allowed(ctx, op, Res.TOPIC, name):
            return ErrorCode.topic_authorization_failed, None
        info = self.logs.topic(name)
        if info is None or partition >= info.partitions:
            return ErrorCode.unknown_topic_or_partition, None
        if self.cluster is not None and self.cluster.not_leader(connection_node(ctx), name, partition):
            return ErrorCode.not_leader_or_follower, None
        return ErrorCode.none, None

    def _view(self, ctx: RequestContext, group_id: str, topic_id: str,
              partition: int) -> tuple[ErrorCode, SharePartitionView | None]:
        code, _ = self._partition_error(ctx, topic_id, partition)
        if code != ErrorCode.none:
            return code, None
        name = self._name(topic_id)
        assert name is not None
        view = self.share.partition(group_id, name, partition)
        if view is None:
            return ErrorCode.unknown_topic_or_partition, None
        return ErrorCode.none, view

    def _acknowledge_all(self, ctx: RequestContext, req: Any, topics: Any, is_renew: bool, *,
                         check_only: bool = False, only: set[tuple[str, int]] | None = None,
                         ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """Each partition's acknowledgement outcome, for those that carried any (``only``: just
        these partitions; ``check_only``: the outcomes, nothing applied)."""
        out: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
        renew_supported = ctx.api_version >= 2
        for t in topics:
            for p in t.partitions:
                if not p.acknowledgement_batches:
                    continue
                key = (str(t.topic_id), p.partition_index)
                if only is not None and key not in only:
                    continue
                batches = [AckBatch(b.first_offset, b.last_offset, tuple(int(x) for x in b.acknowledge_types))
                           for b in p.acknowledgement_batches]
                if not ack_batches_valid(batches, renew_supported=renew_supported, is_renew_ack=is_renew):
                    out[key] = (ErrorCode.invalid_request, None)
                    continue
                code, view = self._view(ctx, req.group_id, *key)
                if view is None:
                    out[key] = (code, None)
                    continue
                outcome = (self.share.check_acknowledge(view, req.member_id, batches) if check_only
                           else self.share.acknowledge(view, req.member_id, batches))
                if outcome.error is not None:
                    out[key] = (outcome.error.code, outcome.error.message)
                else:
                    out[key] = (ErrorCode.none, None)
        return out

    def _acquire_all(self, ctx: RequestContext, req: Any, partitions: Any,
                     is_renew: bool) -> dict[tuple[str, int], tuple[ErrorCode, bytes, list]]:
        out: dict[tuple[str, int], tuple[ErrorCode, bytes, list]] = {}
        if is_renew:
            return {k: (ErrorCode.none, b"", []) for k in partitions}
        remaining = req.max_records if req.max_records > 0 else 500
        max_bytes = req.max_bytes if req.max_bytes > 0 else DEFAULT_MAX_BYTES
        mode = AcquireMode(getattr(req, "share_acquire_mode", 0) or 0)
        batch_size = getattr(req, "batch_size", 0) or remaining
        for key in partitions:
            code, view = self._view(ctx, req.group_id, *key)
            if view is None:
                out[key] = (code, b"", [])
                continue
            if remaining <= 0 or max_bytes <= 0:
                out[key] = (ErrorCode.none, b"", [])
                continue
            try:
                acquired, raw = self.share.acquire(view, req.member_id, max_records=remaining,
                                                   batch_size=batch_size, max_bytes=max_bytes, mode=mode)
            except OSError as e:
                log.error("share.read_failed", topic=view.sp.topic, partition=view.sp.partition,
                          reason=str(e))
                out[key] = (ErrorCode.kafka_storage_error, b"", [])
                continue
            remaining -= acquired.count
            max_bytes -= len(raw)
            out[key] = (ErrorCode.none, raw, acquired.records)
        return out

    def _fetch_response(self, ctx: RequestContext, R: Any, req: Any, context: Any,
                        acks: dict, results: dict, close: bool = False) -> Any:
        P = nested(R, "PartitionData")
        T = nested(R, "ShareFetchableTopicResponse")
        AR = nested(R, "AcquiredRecords")
        L = nested(R, "LeaderIdAndEpoch")
        keys = list(context.partitions)
        if close:
            keys = list(acks)
            self._close_session(req.group_id, req.member_id, connection_node(ctx))
        else:
            summary = {k: PartitionResult(bool(r[2]), r[0]) for k, r in results.items()}
            for k in acks:
                if k not in summary:
                    summary[k] = PartitionResult(False, ErrorCode.none)
            listed = self.share.sessions.response_partitions(context, summary)
            keys = listed + [k for k in acks if k not in listed]
        by_topic: dict[str, list[Any]] = {}
        leaders: set[int] = set()
        for key in keys:
            code, raw, acquired = results.get(key, (ErrorCode.none, b"", []))
            ack_code, ack_msg = acks.get(key, (ErrorCode.none, None))
            by_topic.setdefault(key[0], []).append(build(
                P, partition_index=key[1], error_code=code, error_message=None,
                acknowledge_error_code=ack_code, acknowledge_error_message=ack_msg,
                current_leader=self._leader(L, key[0], key[1], code if code else ack_code, leaders),
                records=raw if acquired else b"",
                acquired_records=tuple(build(AR, first_offset=a.first_offset, last_offset=a.last_offset,
                                             delivery_count=a.delivery_count) for a in acquired)))
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
                     acquisition_lock_timeout=datetime.timedelta(
                         milliseconds=self.share.lock_duration_ms(req.group_id)),
                     responses=tuple(build(T, topic_id=uuid.UUID(tid), partitions=tuple(ps))
                                     for tid, ps in by_topic.items()),
                     node_endpoints=self._endpoints(R, leaders))

    def _leader(self, L: Any, topic_id: str, partition: int, code: ErrorCode,
                leaders: set[int]) -> Any:
        """CurrentLeader of a NOT_LEADER_OR_FOLLOWER partition (and its node for NodeEndpoints),
        as Kafka's answer carries them so a client moves without a Metadata round trip."""
        name = self._name(topic_id)
        if code != ErrorCode.not_leader_or_follower or self.cluster is None or name is None:
            return build(L, leader_id=-1, leader_epoch=-1)
        leader = self.cluster.leader(name, partition)
        if leader is None:
            return build(L, leader_id=-1, leader_epoch=-1)
        leaders.add(leader)
        return build(L, leader_id=leader, leader_epoch=self.cluster.leader_epoch(name, partition))

    def _endpoints(self, R: Any, leaders: set[int]) -> tuple[Any, ...]:
        if not leaders or self.node_endpoints is None:
            return ()
        N = nested(R, "NodeEndpoint")
        known = self.node_endpoints()
        return tuple(build(N, node_id=n, host=known[n][0], port=known[n][1], rack=None)
                     for n in sorted(leaders) if n in known)

    def _close_session(self, group_id: str, member_id: str, node: int | None) -> None:
        try:
            session = self.share.sessions.release(group_id, member_id, node)
        except ShareSessionError:
            return
        self.share._release_session(session)

    # ---- ShareAcknowledge --------------------------------------------------------------------
    @answers
    def acknowledge(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        top: tuple[ErrorCode, str | None] | None = None
        if not self._enabled():
            top = (ErrorCode.unsupported_version, None)
        elif req.group_id is None:
            top = (ErrorCode.invalid_request, "Invalid group id in the request.")
        elif not self.authz.allowed(ctx, Op.READ, Res.GROUP, req.group_id):
            top = (ErrorCode.group_authorization_failed, None)
        elif not req.member_id:
            top = (ErrorCode.invalid_request, "Invalid member id in the request.")
        if top is not None:
            return self._top_error(R, *top)
        try:
            self.share.sessions.acknowledge_update(req.group_id, req.member_id, req.share_session_epoch,
                                                   connection_node(ctx))
        except ShareSessionError as e:
            return self._top_error(R, e.code, None)
        is_renew = bool(getattr(req, "is_renew_ack", False))
        acks = self._acknowledge_all(ctx, req, req.topics, is_renew)
        if req.share_session_epoch == -1:
            self._close_session(req.group_id, req.member_id, connection_node(ctx))
        P = nested(R, "PartitionData")
        T = nested(R, "ShareAcknowledgeTopicResponse")
        L = nested(R, "LeaderIdAndEpoch")
        by_topic: dict[str, list[Any]] = {}
        leaders: set[int] = set()
        for t in req.topics:
            for p in t.partitions:
                code, msg = acks.get((str(t.topic_id), p.partition_index), (ErrorCode.none, None))
                by_topic.setdefault(str(t.topic_id), []).append(build(
                    P, partition_index=p.partition_index, error_code=code, error_message=msg,
                    current_leader=self._leader(L, str(t.topic_id), p.partition_index, code, leaders)))
        fields: dict[str, Any] = dict(
            throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
            responses=tuple(build(T, topic_id=uuid.UUID(tid), partitions=tuple(ps))
                            for tid, ps in by_topic.items()),
            node_endpoints=self._endpoints(R, leaders))
        if "acquisition_lock_timeout" in R.__dataclass_fields__:
            fields["acquisition_lock_timeout"] = datetime.timedelta(
                milliseconds=self.share.lock_duration_ms(req.group_id))
        return build(R, **fields)

    # ---- DescribeShareGroupOffsets -------------------------------------------------------------
    @answers
    def describe_offsets(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        G = nested(R, "DescribeShareGroupOffsetsResponseGroup")
        T = nested(R, "DescribeShareGroupOffsetsResponseTopic")
        P = nested(R, "DescribeShareGroupOffsetsResponsePartition")
        lag_field = "lag" in P.__dataclass_fields__
        out = []
        for g in req.groups:
            gid = g.group_id
            code: ErrorCode = ErrorCode.none
            if not self._enabled():
                code = ErrorCode.unsupported_version
            elif not self.authz.allowed(ctx, Op.DESCRIBE, Res.GROUP, gid):
                code = ErrorCode.group_authorization_failed
            # a group nobody made is not an error: Kafka asks its share coordinator's state
            # summary, which knows no state for it (start offset -1), the same as a partition
            # not yet initialized (GroupCoordinatorService.describeShareGroupOffsets)
            if code != ErrorCode.none:
                out.append(build(G, group_id=gid, topics=(), error_code=code, error_message=None))
                continue
            wanted: list[tuple[str, list[int]]]
            if g.topics is None:
                init = self.share.initialized_partitions(gid)
                wanted = sorted((name, sorted(ps)) for name, ps in init.values())
            else:
                wanted = [(t.topic_name, list(t.partitions)) for t in g.topics]
            topics = []
            for name, parts in wanted:
                info = self.logs.topic(name)
                rows = []
                for p in parts:
                    fields: dict[str, Any] = dict(partition_index=p, start_offset=-1, leader_epoch=-1,
                                                  error_code=ErrorCode.none, error_message=None)
                    if lag_field:
                        fields["lag"] = -1
                    if info is None:
                        # Kafka 4.4 answers an unknown topic like one without share state: no
                        # error, TopicId zero, StartOffset -1, LeaderEpoch 0 (seen)
                        fields["leader_epoch"] = 0
                    elif p >= info.partitions:
                        fields["error_code"] = ErrorCode.unknown_topic_or_partition
                    elif not self.authz.allowed(ctx, Op.DESCRIBE, Res.TOPIC, name):
                        fields["error_code"] = ErrorCode.topic_authorization_failed
                    else:
                        start, done = self.share.start_offset(gid, info.topic_id, p)
                        fields["start_offset"] = start
                        # the state summary's leader epoch: 0 also with no state yet (Kafka 4.4
                        # answers StartOffset -1, LeaderEpoch 0 for an unknown group)
                        fields["leader_epoch"] = 0
                        if start >= 0:
                            if lag_field:
                                plog = partition_log(self.logs, name, p)
                                fields["lag"] = max(plog.high_watermark - start - max(done, 0), 0)
                    rows.append(build(P, **fields))
                topics.append(build(T, topic_name=name,
                                    topic_id=info.topic_id if info is not None else uuid.UUID(int=0),
                                    partitions=tuple(rows)))
            out.append(build(G, group_id=gid, topics=tuple(topics), error_code=ErrorCode.none,
                             error_message=None))
        return build(R, throttle_time=ZERO, groups=tuple(out))

    # ---- AlterShareGroupOffsets ------------------------------------------------------------------
    @answers
    def alter_offsets(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        T = nested(R, "AlterShareGroupOffsetsResponseTopic")
        P = nested(R, "AlterShareGroupOffsetsResponsePartition")
        top = self._admin_checks(ctx, req.group_id, Op.READ, create=True)
        if top is not None:
            return build(R, throttle_time=ZERO, error_code=top[0], error_message=top[1], responses=())
        topics = []
        for t in req.topics:
            info = self.logs.topic(t.topic_name)
            rows = []
            for p in t.partitions:
                code, msg = ErrorCode.none, None
                if info is None or p.partition_index >= info.partitions:
                    code = ErrorCode.unknown_topic_or_partition
                    # Errors.UNKNOWN_TOPIC_OR_PARTITION.message(), as Kafka 4.4 answers
                    msg = "This server does not host this topic-partition."
                elif not self.authz.allowed(ctx, Op.READ, Res.TOPIC, t.topic_name):
                    code = ErrorCode.topic_authorization_failed
                else:
                    self.share.alter_offset(req.group_id, info.topic_id, t.topic_name,
                                            p.partition_index, p.start_offset)
                rows.append(build(P, partition_index=p.partition_index, error_code=code,
                                  error_message=msg))
            topics.append(build(T, topic_name=t.topic_name,
                                topic_id=info.topic_id if info is not None else uuid.UUID(int=0),
                                partitions=tuple(rows)))
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
                     responses=tuple(topics))

    def _admin_checks(self, ctx: RequestContext, group_id: str, op: Any,
                      create: bool = False) -> tuple[ErrorCode, str | None] | None:
        if not self._enabled():
            return ErrorCode.unsupported_version, None
        if not self.authz.allowed(ctx, op, Res.GROUP, group_id):
            return ErrorCode.group_authorization_failed, None
        groups = self.share.groups
        if groups._is_other_group(group_id):
            return ErrorCode.group_id_not_found, f"Group {group_id} is not a share group."
        group = groups.groups.get(group_id)
        if group is None and create:
            self.share.create_group(group_id)
            return None
        if group is None:
            return ErrorCode.group_id_not_found, f"Group {group_id} not found."
        if group.members:
            return ErrorCode.non_empty_group, "The group is not empty."
        return None

    # ---- DeleteShareGroupOffsets -----------------------------------------------------------------
    @answers
    def delete_offsets(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        T = nested(R, "DeleteShareGroupOffsetsResponseTopic")
        top = self._admin_checks(ctx, req.group_id, Op.DELETE)
        if top is not None:
            return build(R, throttle_time=ZERO, error_code=top[0], error_message=top[1], responses=())
        rows = []
        for t in req.topics:
            info = self.logs.topic(t.topic_name)
            code, msg = ErrorCode.none, None
            if info is None:
                code, msg = (ErrorCode.unknown_topic_or_partition,
                             "This server does not host this topic-partition.")  # as Kafka 4.4
            elif not self.authz.allowed(ctx, Op.READ, Res.TOPIC, t.topic_name):
                code = ErrorCode.topic_authorization_failed
            elif not self.share.delete_offsets(req.group_id, info.topic_id, t.topic_name):
                code, msg = (ErrorCode.unknown_topic_or_partition,
                             "There is no offset information to delete.")
            # Kafka names the topic id only of a topic whose state it deletes (seen: zero for
            # a topic with no offset information)
            rows.append(build(T, topic_name=t.topic_name,
                              topic_id=info.topic_id if info is not None and code == ErrorCode.none
                              else uuid.UUID(int=0),
                              error_code=code, error_message=msg))
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
                     responses=tuple(rows))

