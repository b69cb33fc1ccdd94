"""KIP-848 consumer groups on the wire: ConsumerGroupHeartbeat and ConsumerGroupDescribe.

Both work only while ``group.version`` is finalized at 1 or above; below it, as Kafka 4.4 does,
ApiVersions still lists them and every request is answered UNSUPPORTED_VERSION (checked by
tests/differential/test_consumer_groups.py), which clients report as the broker not supporting
``group.protocol=consumer``.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping
from typing import Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode
from minibroker_storage.lazylog import get_logger
from minibroker_storage.manager import LogManager

from ..config.features import Features
from ..coordinator.group.consumer_group import ConsumerGroupError
from ..coordinator.group.coordinator import GroupCoordinator
from .api import Api, RequestContext
from .authz import OFF, Authz, Op, Res
from .common import AUTHORIZED_OPERATIONS_OMITTED, ZERO, answers, response_cls

log = get_logger("minibroker.group")

CONSUMER_PROTOCOL_LEVEL = 1
MEMBER_TYPE_CONSUMER = 1


class ConsumerGroupHandlers:
    def __init__(self, *, groups: GroupCoordinator, logs: LogManager, features: Features,
                 authz: Authz = OFF) -> None:
        self.groups = groups
        self.authz = authz
        self.logs = logs
        self.features = features

    def apis(self) -> list[Api]:
        return [
            Api(ApiKey.ConsumerGroupHeartbeat, 0, 1, self.heartbeat),
            Api(ApiKey.ConsumerGroupDescribe, 0, 1, self.describe),
        ]

    def _enabled(self) -> bool:
        return self.features.group_version >= CONSUMER_PROTOCOL_LEVEL

    @answers
    def heartbeat(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        if not self._enabled():
            return _refusal(R, ErrorCode.unsupported_version, None)
        if not self.authz.allowed(ctx, Op.READ, Res.GROUP, req.group_id):
            # KafkaApis.handleConsumerGroupHeartbeat: READ on the group
            return _refusal(R, ErrorCode.group_authorization_failed, None)
        owned: dict[uuid.UUID, frozenset[int]] | None = None
        if req.topic_partitions is not None:
            owned = {}
            for t in req.topic_partitions:
                owned[t.topic_id] = owned.get(t.topic_id, frozenset()) | frozenset(t.partitions)
        rebalance = req.rebalance_timeout
        peer = ctx.connection.peer if ctx.connection is not None else None
        try:
            ans = self.groups.consumer_heartbeat(
                version=ctx.api_version, group_id=req.group_id, member_id=req.member_id,
                member_epoch=req.member_epoch, instance_id=req.instance_id, rack_id=req.rack_id,
                rebalance_timeout_ms=int(rebalance.total_seconds() * 1000),
                subscribed_names=(tuple(req.subscribed_topic_names)
                                  if req.subscribed_topic_names is not None else None),
                subscribed_regex=getattr(req, "subscribed_topic_regex", None),
                server_assignor=req.server_assignor, owned=owned,
                client_id=ctx.client_id or "", client_host=f"/{peer[0]}" if peer else "")
        except ConsumerGroupError as e:
            log.info("consumer_group.heartbeat_refused", group_id=req.group_id,
                     member_id=req.member_id, member_epoch=req.member_epoch,
                     error=e.code.name, reason=e.message)
            return _refusal(R, e.code, e.message)
        assignment = None
        if ans.assignment is not None:
            A = nested(R, "Assignment")
            assignment = build(A, topic_partitions=_topic_partitions(R, ans.assignment, None))
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
                     member_id=ans.member_id, member_epoch=ans.member_epoch,
                     heartbeat_interval=datetime.timedelta(milliseconds=ans.heartbeat_interval_ms),
                     assignment=assignment)

    @answers
    def describe(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        D = nested(R, "DescribedGroup")
        M = nested(R, "Member")
        A = nested(R, "Assignment")
        out = []
        denied = []
        for gid in req.group_ids:
            if not self._enabled():
                out.append(_missing(D, gid, ErrorCode.unsupported_version, None))
                continue
            if not self.authz.allowed(ctx, Op.DESCRIBE, Res.GROUP, gid):
                # KafkaApis.handleConsumerGroupDescribe: DESCRIBE on the group, the refused last
                denied.append(_missing(D, gid, ErrorCode.group_authorization_failed, None))
                continue
            try:
                cg = self.groups.consumer.describe(gid)
            except ConsumerGroupError as e:
                out.append(_missing(D, gid, e.code, e.message))
                continue
            names = {t.topic_id: t.name for t in self.logs.topics()}
            members = []
            for m in sorted(cg.members.values(), key=lambda m: m.member_id):
                fields = dict(
                    member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                    member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                    subscribed_topic_names=m.subscribed_names,
                    subscribed_topic_regex=m.subscribed_regex or "",
                    # what it holds: assigned and not yet revoked (Kafka's describe shows both)
                    assignment=build(A, topic_partitions=_topic_partitions(
                        R, _union(m.assigned, m.pending_revocation), names)),
                    target_assignment=build(A, topic_partitions=_topic_partitions(
                        R, cg.target.get(m.member_id, {}), names)),
                    member_type=MEMBER_TYPE_CONSUMER)
                members.append(build(M, **fields))
            out.append(build(D, error_code=ErrorCode.none, error_message=None, group_id=gid,
                             group_state=cg.state, group_epoch=cg.group_epoch,
                             assignment_epoch=cg.assignment_epoch,
                             assignor_name=self.groups.consumer.assignor_name(cg),
                             members=tuple(members),
                             authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
        return build(R, throttle_time=ZERO, groups=tuple(out + denied))


def _refusal(R: Any, code: ErrorCode, message: str | None) -> Any:
    return build(R, throttle_time=ZERO, error_code=code, error_message=message, member_id=None,
                 member_epoch=0, heartbeat_interval=ZERO, assignment=None)


def _missing(D: Any, gid: str, code: ErrorCode, message: str | None) -> Any:
    return build(D, error_code=code, error_message=message, group_id=gid, group_state="",
                 group_epoch=0, assignment_epoch=0, assignor_name="", members=(),
                 authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def _union(a: Mapping[uuid.UUID, frozenset[int]],
           b: Mapping[uuid.UUID, frozenset[int]]) -> dict[uuid.UUID, frozenset[int]]:
    out = dict(a)
    for t, ps in b.items():
        out[t] = out.get(t, frozenset()) | ps
    return out


def _topic_partitions(R: Any, assignment: Mapping[uuid.UUID, frozenset[int]],
                      names: Mapping[uuid.UUID, str] | None) -> tuple[Any, ...]:
    T = nested(R, "TopicPartitions")
    out = []
    for tid in sorted(assignment, key=lambda t: (names or {}).get(t, "") or str(t)):
        fields: dict[str, Any] = dict(topic_id=tid, partitions=tuple(sorted(assignment[tid])))
        if names is not None:
            if tid not in names:
                continue  # deleted since it was assigned
            fields["topic_name"] = names[tid]
        out.append(build(T, **fields))
    return tuple(out)
