"""CreateTopics, DeleteTopics, DescribeConfigs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.topics import is_internal, topic_name_error
from minibroker_storage.manager import LogManager

from ..client_metrics import configs as cmc
from ..cluster import Cluster, all_fenced, manual_assignment_error
from ..config import group_configs as gc
from ..config import topic_configs as tc
from ..config.options import Config
from .api import Api, RequestContext
from .authz import OFF, Authz, Op, Res
from .common import ZERO, CreateTopic, answers, response_cls


class AdminHandlers:
    def __init__(self, *, logs: LogManager, config: Config, create_topic: CreateTopic,
                 delete_topic: Callable[[str], None], client_metrics: Any = None,
                 group_configs: gc.GroupConfigs | None = None, authz: Authz = OFF,
                 cluster: Cluster | None = None) -> None:
        self.logs = logs
        self.cluster = cluster  # virtual brokers: a manual assignment needs a replica up
        self.group_configs = group_configs
        self.authz = authz
        self.client_metrics = client_metrics
        self.config = config
        self.create_topic = create_topic
        # deletes the topic's logs and wakes the fetches waiting on it
        self.delete_topic = delete_topic

    def apis(self) -> list[Api]:
        return [
            Api(ApiKey.CreateTopics, 2, 7, self.create_topics),
            Api(ApiKey.DeleteTopics, 1, 6, self.delete_topics),
            Api(ApiKey.DescribeConfigs, 1, 4, self.describe_configs),
        ]

    # -- CreateTopics ----------------------------------------------------------
    @answers
    def create_topics(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        Result = nested(R, "CreatableTopicResult")
        Cfg = nested(R, "CreatableTopicConfigs") if ctx.api_version >= 5 else None
        names = [t.name for t in req.topics]
        results = []
        # ControllerApis.createTopics: CREATE on the cluster or each topic; configs are only
        # answered with DESCRIBE_CONFIGS on the topic (neither denial logged for the cluster)
        creatable = describable = set(names)
        if self.authz.on:
            if not self.authz.cluster(ctx, Op.CREATE, log_if_denied=False):
                creatable = self.authz.topics(ctx, Op.CREATE, names)
            describable = self.authz.names(ctx, Op.DESCRIBE_CONFIGS, Res.TOPIC, names, log_if_denied=False)
        for t in req.topics:
            if names.count(t.name) == 1 and t.name not in creatable:
                results.append(build(Result, name=t.name, topic_id=None,
                                     error_message="Authorization failed.",
                                     error_code=ErrorCode.topic_authorization_failed,
                                     topic_config_error_code=0, num_partitions=-1, replication_factor=-1,
                                     configs=() if Cfg is not None else None))
                continue
            error, message, partitions = self._check_create(t, names)
            configs = {c.name: c.value for c in t.configs}
            topic_id = None
            rf = self._replication_factor(t)
            if error == ErrorCode.none and not req.validate_only:
                # the replicas as given, in their order: the first is the preferred leader
                info = self.create_topic(t.name, partitions, configs, reason="create_topics",
                                         replication_factor=rf,
                                         assignments={a.partition_index: list(a.broker_ids)
                                                      for a in t.assignments})
                topic_id = info.topic_id
            ok = error == ErrorCode.none
            # ReplicationControlManager.createTopic: without DESCRIBE_CONFIGS neither the configs
            # nor the partition count and replication factor are told
            shown = ok and t.name in describable
            results.append(build(
                Result, name=t.name, topic_id=topic_id, error_code=error, error_message=message,
                topic_config_error_code=0 if shown or not ok else ErrorCode.topic_authorization_failed,
                num_partitions=partitions if shown else -1,
                replication_factor=rf if shown else -1,
                # v5+: an empty list, not null, whenever they are not told (errors included:
                # checked against Kafka 4.4, with and without an authorizer)
                configs=self._creation_configs(Cfg, configs) if shown and Cfg is not None
                else (() if Cfg is not None else None),
            ))
        return build(R, throttle_time=ZERO, topics=tuple(results))

    def _replication_factor(self, t) -> int:
        # -1 without assignments: the broker's default.replication.factor, as Kafka's controller
        if t.assignments:
            return len(t.assignments[0].broker_ids)
        return self.config.default_replication_factor if t.replication_factor == -1 else t.replication_factor

    def _check_create(self, t, names) -> tuple[ErrorCode, str | None, int]:
        if names.count(t.name) > 1:
            return (ErrorCode.invalid_request,
                    f"Create topics request from client contains a duplicate topic {t.name}", -1)
        why = topic_name_error(t.name)
        if why is not None:
            return ErrorCode.invalid_topic_exception, why, -1
        if self.logs.topic(t.name) is not None:
            return ErrorCode.topic_already_exists, f"Topic '{t.name}' already exists.", -1
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                return (ErrorCode.invalid_request,
                        "Both numPartitions or replicationFactor and replicasAssignments were set. "
                        "Both cannot be used at the same time.", -1)
            # ReplicationControlManager.createTopic, its checks in its order
            nodes = set(self.config.node_ids)
            seen: set[int] = set()
            factor: int | None = None
            for a in t.assignments:
                if a.partition_index in seen:
                    return (ErrorCode.invalid_replica_assignment, "Found multiple manual partition "
                            f"assignments for partition {a.partition_index}", -1)
                why = manual_assignment_error(list(a.broker_ids), nodes, factor)
                if why is None and self.cluster is not None and not set(a.broker_ids) & self.cluster.up:
                    why = all_fenced(a.partition_index)
                if why is not None:
                    return ErrorCode.invalid_replica_assignment, why, -1
                factor = len(a.broker_ids)
                seen.add(a.partition_index)
            if seen != set(range(len(seen))):
                return (ErrorCode.invalid_replica_assignment,
                        "partitions should be a consecutive 0-based integer sequence", -1)
            partitions = len(seen)
        else:
            partitions = self.config.num_partitions if t.num_partitions == -1 else t.num_partitions
            if partitions <= 0:
                return ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.", -1
            if t.replication_factor == 0 or t.replication_factor < -1:
                return ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0.", -1
            rf = self._replication_factor(t)
            if rf > self.config.brokers:
                return (ErrorCode.invalid_replication_factor,
                        f"Unable to replicate the partition {rf} time(s): "
                        "The target replication factor of "
                        f"{rf} cannot be reached because only {self.config.brokers} "
                        "broker(s) are registered or some brokers have all their log directories "
                        "cordoned.",
                        -1)
        for c in t.configs:
            why = tc.validate_topic_config(c.name, c.value)
            if why is not None:
                return ErrorCode.invalid_config, why, -1
        return ErrorCode.none, None, partitions

    def _creation_configs(self, Cfg, overrides: dict[str, str]):
        out = []
        for name in sorted(tc.TOPIC_CONFIGS):
            if name in overrides:
                value, source = overrides[name], tc.DYNAMIC_TOPIC_CONFIG
            else:
                value, source = tc.default_for(name, self.config)
            out.append(build(Cfg, name=name, value=value, read_only=False, config_source=source,
                             is_sensitive=False))
        return tuple(out)

    # -- DeleteTopics ------------------------------------------------------------
    @answers
    def delete_topics(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        Result = nested(R, "DeletableTopicResult")
        if ctx.api_version >= 6:
            wanted = [(t.name, t.topic_id) for t in req.topics]
        else:
            wanted = [(name, None) for name in req.topic_names]
        results = []
        # ControllerApis.deleteTopics: DELETE on the cluster or the topic; a topic the caller may
        # not DESCRIBE is refused before its existence is told (by id: without its name)
        everything = not self.authz.on or self.authz.cluster(ctx, Op.DELETE, log_if_denied=False)
        for name, tid in wanted:
            info = self.logs.topic(name) if name else (self.logs.topic_by_id(tid) if tid else None)
            if name and tid and info is not None and info.topic_id != tid:
                info = None
            subject = name or (info.name if info is not None else None)
            if not everything and subject is not None:
                if not self.authz.allowed(ctx, Op.DESCRIBE, Res.TOPIC, subject):
                    results.append(build(Result, name=name, topic_id=tid, error_message=None,
                                         error_code=ErrorCode.topic_authorization_failed))
                    continue
                if info is not None and not self.authz.allowed(ctx, Op.DELETE, Res.TOPIC, subject):
                    results.append(build(Result, name=subject, topic_id=tid, error_message=None,
                                         error_code=ErrorCode.topic_authorization_failed))
                    continue
            if info is None:
                if name:
                    err = ErrorCode.unknown_topic_or_partition
                    msg = "This server does not host this topic-partition."
                else:
                    err, msg = ErrorCode.unknown_topic_id, "This server does not host this topic ID."
                results.append(build(Result, name=name, topic_id=tid, error_code=err, error_message=msg))
                continue
            if is_internal(info.name):
                results.append(build(Result, name=info.name, topic_id=info.topic_id,
                                     error_code=ErrorCode.invalid_topic_exception,
                                     error_message="Internal topics cannot be deleted"))
                continue
            self.delete_topic(info.name)
            results.append(build(Result, name=info.name, topic_id=info.topic_id,
                                 error_code=ErrorCode.none, error_message=None))
        return build(R, throttle_time=ZERO, responses=tuple(results))

    # -- DescribeConfigs ---------------------------------------------------------
    @answers
    def describe_configs(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        Result = nested(R, "DescribeConfigsResult")
        Entry = nested(R, "DescribeConfigsResourceResult")
        Syn = nested(R, "DescribeConfigsSynonym")
        synonyms = getattr(req, "include_synonyms", False)
        docs = getattr(req, "include_documentation", False)
        results = []
        denied = []
        for res in req.resources:
            keys = set(res.configuration_keys) if res.configuration_keys is not None else None
            refused = self._describe_configs_refused(ctx, res.resource_type, res.resource_name)
            if refused is not None:
                # ConfigHelper.handleDescribeConfigsRequest: the refused after the others
                denied.append(build(Result, error_code=refused, error_message=None, configs=(),
                                    resource_type=res.resource_type, resource_name=res.resource_name))
                continue
            if res.resource_type == tc.RESOURCE_TOPIC:
                error, message, entries = self._topic_configs(res.resource_name)
            elif res.resource_type == tc.RESOURCE_BROKER:
                error, message, entries = self._broker_configs(
                    res.resource_name, getattr(ctx.connection, "listeners", ()))
            elif res.resource_type == tc.RESOURCE_BROKER_LOGGER:
                error, message, entries = ErrorCode.none, None, []
            elif res.resource_type == tc.RESOURCE_CLIENT_METRICS and self.client_metrics is not None:
                error, message, entries = self._client_metrics_configs(res.resource_name)
            elif res.resource_type == tc.RESOURCE_GROUP and self.group_configs is not None:
                error, message, entries = self._group_configs(self.group_configs, res.resource_name)
            else:
                error, message, entries = (ErrorCode.invalid_request,
                                           f"Unsupported resource type {res.resource_type}", [])
            configs = tuple(
                build(Entry, name=name, value=value, read_only=read_only, config_source=source,
                      is_sensitive=False, config_type=ctype,
                      documentation=doc if docs else None,
                      synonyms=tuple(build(Syn, name=n, value=v, source=src)
                                     for n, v, src in (more[0] if more else ((name, value, source),)))
                      if synonyms else ())
                # an entry's synonyms, when it has others than itself, follow its documentation
                for name, value, source, read_only, ctype, doc, *more in entries
                if keys is None or name in keys
            )
            results.append(build(Result, error_code=error, error_message=message,
                                 resource_type=res.resource_type, resource_name=res.resource_name,
                                 configs=configs))
        return build(R, throttle_time=ZERO, results=tuple(results + denied))

    def _describe_configs_refused(self, ctx: RequestContext, rtype: int, name: str) -> ErrorCode | None:
        """DESCRIBE_CONFIGS on the cluster (broker, logger, client-metrics configs), the topic or
        the group; the error of a refusal, or None."""
        if not self.authz.on:
            return None
        if rtype == tc.RESOURCE_TOPIC:
            return None if self.authz.allowed(ctx, Op.DESCRIBE_CONFIGS, Res.TOPIC, name) \
                else ErrorCode.topic_authorization_failed
        if rtype == tc.RESOURCE_GROUP:
            return None if self.authz.allowed(ctx, Op.DESCRIBE_CONFIGS, Res.GROUP, name) \
                else ErrorCode.group_authorization_failed
        allowed = self.authz.cluster(ctx, Op.DESCRIBE_CONFIGS)
        return None if allowed else ErrorCode.cluster_authorization_failed

    def _group_configs(self, groups: gc.GroupConfigs, name: str):
        if not name:
            return ErrorCode.invalid_request, "Group name must not be empty", []
        # Kafka answers a group it does not know with the defaults, and an empty message
        entries = [(e.name, e.value, e.source, False, e.type, e.doc, e.synonyms)
                   for e in gc.describe(groups.own(name), self.config)]
        return ErrorCode.none, "", entries

    def _client_metrics_configs(self, name: str):
        if not name:
            return ErrorCode.invalid_request, "Client metrics subscription name must not be empty", []
        own = self.client_metrics.configs.get(name, {})
        entries = []
        for key in sorted(cmc.NAMES):
            value, source = ((own[key], tc.CLIENT_METRICS_CONFIG) if key in own
                             else (cmc.DEFAULTS[key], tc.DEFAULT_CONFIG))
            if cmc.TYPES[key] == tc.LIST:  # shown as ConfigDef prints a parsed list
                value = ",".join(cmc.java_list(value))
            entries.append((key, value, source, False, cmc.TYPES[key], cmc.DOCS[key]))
        # Kafka answers an empty message, not null, for a subscription (ConfigHelper)
        return ErrorCode.none, "", entries

    def _topic_configs(self, name: str):
        info = self.logs.topic(name)
        if info is None:
            why = topic_name_error(name)
            if why is not None:
                return ErrorCode.invalid_topic_exception, why, []
            return ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist", []
        entries = []
        for key in sorted(tc.TOPIC_CONFIGS):
            d = tc.TOPIC_CONFIGS[key]
            if key in info.configs:
                value, source = info.configs[key], tc.DYNAMIC_TOPIC_CONFIG
            else:
                value, source = tc.default_for(key, self.config)
            entries.append((key, value, source, False, d.type, d.doc or None))
        return ErrorCode.none, None, entries

    def _broker_configs(self, name: str, listeners: tuple):
        if name not in ("", str(self.config.node_id)):
            return (ErrorCode.invalid_request,
                    f"Unexpected broker id, expected {self.config.node_id} but received {name}", [])
        c = self.config
        S = tc.STATIC_BROKER_CONFIG
        rows = [
            ("node.id", str(self.config.node_id), tc.INT),
            ("broker.id", str(self.config.node_id), tc.INT),
            ("listeners", ",".join(x.config_value() for x in listeners), tc.LIST),
            ("advertised.listeners", ",".join(x.advertised_value() for x in listeners), tc.LIST),
            ("log.dirs", str(c.data_dir), tc.STRING),
            ("num.partitions", str(c.num_partitions), tc.INT),
            ("default.replication.factor", str(c.default_replication_factor), tc.INT),
            ("auto.create.topics.enable", str(c.auto_create_topics).lower(), tc.BOOLEAN),
            ("min.insync.replicas", str(c.min_insync_replicas), tc.INT),
            ("offsets.topic.replication.factor", "1", tc.SHORT),
            ("transaction.state.log.replication.factor", "1", tc.SHORT),
            ("transaction.state.log.min.isr", "1", tc.INT),
            ("log.segment.bytes", str(c.segment_bytes), tc.INT),
            ("log.roll.ms", str(c.segment_ms), tc.LONG),
            ("log.retention.ms", str(c.retention_ms), tc.LONG),
            ("log.retention.bytes", str(c.retention_bytes), tc.LONG),
            ("log.retention.check.interval.ms", str(c.retention_check_interval_ms), tc.LONG),
            ("log.flush.interval.ms", "0" if c.fsync.mode == "always" else
             str(c.fsync.interval_ms) if c.fsync.mode == "interval" else str(2**63 - 1), tc.LONG),
            ("message.max.bytes", str(c.message_max_bytes), tc.INT),
            ("log.message.timestamp.type", c.log_message_timestamp_type, tc.STRING),
            ("log.message.timestamp.before.max.ms", str(c.log_message_timestamp_before_max_ms), tc.LONG),
            ("log.message.timestamp.after.max.ms", str(c.log_message_timestamp_after_max_ms), tc.LONG),
            ("socket.request.max.bytes", str(c.max_request_bytes), tc.INT),
        ]
        # set in the broker's configuration only when given (else Kafka's default, null / none)
        rack = c.rack_of(c.node_id)
        if rack is not None:
            rows.append(("broker.rack", rack, tc.STRING))
        if c.replica_selector_class:
            rows.append(("replica.selector.class", c.replica_selector_class, tc.CLASS))
        return ErrorCode.none, None, [(k, v, S, True, t, None) for k, v, t in rows]
