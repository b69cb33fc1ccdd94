"""KIP-1071 streams groups on the wire: StreamsGroupHeartbeat (88) v0-1, StreamsGroupDescribe (89)
v0-1 and StreamsGroupTopologyDescriptionUpdate (93) v0.

They work only while ``streams.version`` is finalized at 1 or above (Kafka 4.4 finalizes it on a
fresh cluster); below it every request is answered UNSUPPORTED_VERSION, as Kafka's
KafkaApis.handleStreamsGroupHeartbeat does when the streams protocol is off.

Topology descriptions (KIP-1331) are stored by a broker plugin Kafka 4.4 ships none of: as on the
reference, a heartbeat v1 never asks for one (TopologyDescriptionRequired false), describe v1
answers NOT_STORED (1) when asked, and 93 is answered UNSUPPORTED_VERSION "The broker has no
streams group topology description plugin configured.".
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode
from minibroker_storage.lazylog import get_logger

from ..config.features import Features
from ..config.group_configs import STREAMS_ASSIGNORS
from ..coordinator.group import streams_topology as st
from ..coordinator.group.consumer_group import ConsumerGroupError
from ..coordinator.group.coordinator import GroupCoordinator
from ..coordinator.group.streams_group import StreamsHeartbeat
from .api import Api, RequestContext
from .authz import OFF, Authz, Op, Res
from .common import AUTHORIZED_OPERATIONS_OMITTED, ZERO, answers, response_cls

log = get_logger("minibroker.group")

STREAMS_PROTOCOL_LEVEL = 1
# StreamsGroupDescribeResponse.TopologyDescriptionStatus
NOT_REQUESTED, NOT_STORED = 0, 1


class StreamsGroupHandlers:
    def __init__(self, *, groups: GroupCoordinator, features: Features,
                 authz: Authz = OFF) -> None:
        self.groups = groups
        self.features = features
        self.authz = authz

    def apis(self) -> list[Api]:
        return [
            Api(ApiKey.StreamsGroupHeartbeat, 0, 1, self.heartbeat),
            Api(ApiKey.StreamsGroupDescribe, 0, 1, self.describe),
            Api(ApiKey.StreamsGroupTopologyDescriptionUpdate, 0, 0, self.topology_description_update),
        ]

    def _enabled(self) -> bool:
        return self.features.streams_version >= STREAMS_PROTOCOL_LEVEL

    @answers
    def heartbeat(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        if not self._enabled():
            return _refusal(R, ErrorCode.unsupported_version, None)
        if not self.authz.allowed(ctx, Op.READ, Res.GROUP, req.group_id):
            # KafkaApis.handleStreamsGroupHeartbeat: READ on the group
            return _refusal(R, ErrorCode.group_authorization_failed, None)
        # (a leave's and a refusal's lag is the field's default, -1, from v1: the reference)
        peer = ctx.connection.peer if ctx.connection is not None else None
        hb = StreamsHeartbeat(
            group_id=req.group_id, member_id=req.member_id, member_epoch=req.member_epoch,
            endpoint_information_epoch=req.endpoint_information_epoch,
            instance_id=req.instance_id, rack_id=req.rack_id,
            rebalance_timeout_ms=int(req.rebalance_timeout.total_seconds() * 1000),
            topology=_topology(req.topology) if req.topology is not None else None,
            active=_tasks(req.active_tasks), standby=_tasks(req.standby_tasks),
            warmup=_tasks(req.warmup_tasks), process_id=req.process_id,
            user_endpoint=((req.user_endpoint.host, int(req.user_endpoint.port))
                           if req.user_endpoint is not None else None),
            client_tags=(tuple((kv.key, kv.value) for kv in req.client_tags)
                         if req.client_tags is not None else None),
            task_offsets=_offsets(req.task_offsets), task_end_offsets=_offsets(req.task_end_offsets),
            shutdown_application=req.shutdown_application)
        try:
            ans = self.groups.streams_heartbeat(
                hb, client_id=ctx.client_id or "", client_host=f"/{peer[0]}" if peer else "")
        except ConsumerGroupError as e:
            log.info("streams_group.heartbeat_refused", group_id=req.group_id,
                     member_id=req.member_id, member_epoch=req.member_epoch,
                     error=e.code.name, reason=e.message)
            return _refusal(R, e.code, e.message)
        S = nested(R, "Status")
        endpoints = None
        if ans.partitions_by_endpoint is not None:
            E, EP = nested(R, "EndpointToPartitions"), nested(R, "Endpoint")
            endpoints = tuple(build(E, user_endpoint=build(EP, host=h, port=p),
                                    active_partitions=_topic_partitions(R, act),
                                    standby_partitions=_topic_partitions(R, stb))
                              for (h, p), act, stb in ans.partitions_by_endpoint)
        return build(
            R, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
            member_id=ans.member_id, member_epoch=ans.member_epoch,
            heartbeat_interval=datetime.timedelta(milliseconds=ans.heartbeat_interval_ms),
            # v0's AcceptableRecoveryLagLegacy: Kafka 4.4 answers 0 there (seen on the
            # reference), the group's streams.acceptable.recovery.lag from v1
            acceptable_recovery_lag=ans.acceptable_recovery_lag if ctx.api_version >= 1 else 0,
            topology_description_required=False,
            task_offset_interval=datetime.timedelta(milliseconds=ans.task_offset_interval_ms),
            status=tuple(build(S, status_code=c, status_detail=d) for c, d in ans.statuses),
            active_tasks=_task_ids(R, ans.active), standby_tasks=_task_ids(R, ans.standby),
            warmup_tasks=_task_ids(R, ans.warmup),
            endpoint_information_epoch=ans.endpoint_information_epoch,
            partitions_by_user_endpoint=endpoints)

    @answers
    def describe(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        D = nested(R, "DescribedGroup")
        out, denied = [], []
        for gid in req.group_ids:
            if not self._enabled():
                out.append(_missing(D, gid, ErrorCode.unsupported_version, None))
                continue
            if not self.authz.allowed(ctx, Op.DESCRIBE, Res.GROUP, gid):
                denied.append(_missing(D, gid, ErrorCode.group_authorization_failed, None))
                continue
            try:
                sg = self.groups.streams.describe(gid)
            except ConsumerGroupError as e:
                out.append(_missing(D, gid, e.code, e.message))
                continue
            out.append(build(D, error_code=ErrorCode.none, error_message=None, group_id=gid,
                             group_state=sg.state, group_epoch=sg.group_epoch,
                             assignment_epoch=sg.assignment_epoch,
                             topology=_describe_topology(R, sg),
                             members=tuple(_describe_member(R, sg, m) for m in sorted(
                                 sg.members.values(), key=lambda m: m.member_id)),
                             authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
                             topology_description=None,
                             topology_description_status=(
                                 NOT_STORED if getattr(req, "include_topology_description", False)
                                 else NOT_REQUESTED),
                             assignor_name=STREAMS_ASSIGNORS[0]))
        return build(R, throttle_time=ZERO, groups=tuple(out + denied))

    @answers
    def topology_description_update(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        if not self._enabled():
            return build(R, throttle_time=ZERO, error_code=ErrorCode.unsupported_version,
                         error_message=None)
        if not self.authz.allowed(ctx, Op.READ, Res.GROUP, req.group_id):
            return build(R, throttle_time=ZERO, error_code=ErrorCode.group_authorization_failed,
                         error_message=None)
        # Kafka 4.4 without a topology description plugin (its default) answers every push so,
        # whatever the group, member or epoch (seen on the reference)
        return build(R, throttle_time=ZERO, error_code=ErrorCode.unsupported_version,
                     error_message="The broker has no streams group topology description plugin "
                                   "configured.")


def _topology(t: Any) -> st.Topology:
    def info(i: Any) -> st.TopicInfo:
        return st.TopicInfo(i.name, i.partitions, i.replication_factor,
                            tuple((kv.key, kv.value) for kv in i.topic_configs))

    subs = []
    for s in t.subtopologies:
        names = list(s.source_topics) + [i.name for i in s.repartition_source_topics]
        groups = tuple(tuple(names[k] for k in (*g.source_topics, *g.repartition_source_topics)
                             if 0 <= k < len(names)) for g in s.copartition_groups)
        subs.append(st.Subtopology(
            s.subtopology_id, tuple(s.source_topics), tuple(s.source_topic_regex),
            tuple(s.repartition_sink_topics), tuple(info(i) for i in s.repartition_source_topics),
            tuple(info(i) for i in s.state_changelog_topics), groups))
    return st.Topology(t.epoch, tuple(subs))


def _tasks(ts: Any) -> dict[str, frozenset[int]] | None:
    if ts is None:
        return None
    out: dict[str, frozenset[int]] = {}
    for t in ts:
        out[t.subtopology_id] = out.get(t.subtopology_id, frozenset()) | frozenset(t.partitions)
    return out


def _offsets(ts: Any) -> tuple[tuple[str, int, int], ...] | None:
    if ts is None:
        return None
    return tuple((t.subtopology_id, t.partition, t.offset) for t in ts)


def _task_ids(R: Any, tasks: Mapping[str, frozenset[int]] | None) -> tuple[Any, ...] | None:
    if tasks is None:
        return None
    T = nested(R, "TaskIds")
    return tuple(build(T, subtopology_id=s, partitions=tuple(sorted(ps)))
                 for s, ps in sorted(tasks.items()) if ps)


def _topic_partitions(R: Any, parts: Mapping[str, frozenset[int]]) -> tuple[Any, ...]:
    T = nested(R, "TopicPartition")
    return tuple(build(T, topic=t, partitions=tuple(sorted(ps))) for t, ps in sorted(parts.items()))


def _describe_topology(R: Any, sg: Any) -> Any:
    if sg.topology is None:
        return None
    TP, S, TI, KV = (nested(R, n) for n in ("Topology", "Subtopology", "TopicInfo", "KeyValue"))
    computed = sg.configured.internal_partitions if sg.configured is not None else {}

    def info(i: st.TopicInfo) -> Any:
        return build(TI, name=i.name, partitions=computed.get(i.name, i.partitions),
                     replication_factor=i.replication_factor,
                     topic_configs=tuple(build(KV, key=k, value=v) for k, v in i.configs))

    return build(TP, epoch=sg.topology.epoch, subtopologies=tuple(
        build(S, subtopology_id=s.subtopology_id, source_topics=s.source_topics,
              repartition_sink_topics=s.repartition_sink_topics,
              state_changelog_topics=tuple(info(i) for i in s.state_changelog_topics),
              repartition_source_topics=tuple(info(i) for i in s.repartition_source_topics))
        for s in sg.topology.subtopologies))


def _describe_member(R: Any, sg: Any, m: Any) -> Any:
    M, A, KV, TO, EP, T = (nested(R, n) for n in ("Member", "Assignment", "KeyValue", "TaskOffset",
                                                  "Endpoint", "TaskIds"))

    def ids(tasks: Mapping[str, frozenset[int]]) -> tuple[Any, ...]:
        return tuple(build(T, subtopology_id=s, partitions=tuple(sorted(ps)))
                     for s, ps in sorted(tasks.items()) if ps)

    target = sg.target.get(m.member_id)
    held = dict(m.active)
    for s, ps in m.revoking.items():  # what it holds: assigned and not yet revoked
        held[s] = held.get(s, frozenset()) | ps
    return build(
        M, member_id=m.member_id, member_epoch=m.member_epoch, instance_id=m.instance_id,
        rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        topology_epoch=m.topology_epoch, process_id=m.process_id,
        user_endpoint=build(EP, host=m.user_endpoint[0], port=m.user_endpoint[1])
        if m.user_endpoint is not None else None,
        client_tags=tuple(build(KV, key=k, value=v) for k, v in m.client_tags),
        task_offsets=tuple(build(TO, subtopology_id=s, partition=p, offset=o)
                           for s, p, o in m.task_offsets),
        task_end_offsets=tuple(build(TO, subtopology_id=s, partition=p, offset=o)
                               for s, p, o in m.task_end_offsets),
        assignment=build(A, active_tasks=ids(held), standby_tasks=ids(m.standby),
                         warmup_tasks=ids(m.warmup)),
        target_assignment=build(A, active_tasks=ids(target.active if target else {}),
                                standby_tasks=ids(target.standby if target else {}),
                                warmup_tasks=ids(target.warmup if target else {})),
        is_classic=False)


def _refusal(R: Any, code: ErrorCode, message: str | None) -> Any:
    # v0's legacy lag is 0, v1's lag its default -1; an empty status list (seen on the reference)
    return build(R, throttle_time=ZERO, error_code=code, error_message=message, member_id="",
                 member_epoch=0, heartbeat_interval=ZERO,
                 acceptable_recovery_lag=-1 if R.__version__ >= 1 else 0,
                 topology_description_required=False,
                 task_offset_interval=ZERO, status=(), active_tasks=None, standby_tasks=None,
                 warmup_tasks=None, endpoint_information_epoch=0, partitions_by_user_endpoint=None)


def _missing(D: Any, gid: str, code: ErrorCode, message: str | None) -> Any:
    return build(D, error_code=code, error_message=message, group_id=gid, group_state="",
                 group_epoch=0, assignment_epoch=0, topology=None, members=(),
                 authorized_operations=AUTHORIZED_OPERATIONS_OMITTED, topology_description=None,
                 topology_description_status=NOT_REQUESTED, assignor_name=None)
