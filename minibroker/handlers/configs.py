"""IncrementalAlterConfigs, AlterConfigs and ListConfigResources: topic configs, KIP-714 client metrics
subscriptions and group configs, changed at runtime as Kafka's controller changes them.

Kafka: ConfigAdminManager.preprocess (duplicates) and ConfigurationControlManager
.incrementalAlterConfigResource (SET, DELETE, and APPEND/SUBTRACT on LIST configs, starting
from the current value or, when none is set, the default); the whole resource is checked after
the operations and changes nothing when one fails. AlterConfigs (ConfigurationControlManager
.legacyAlterConfigResource) replaces a resource's whole set of configs, checked the same way.
Broker and broker-logger configs are not changed at runtime by minibroker
(tests/differential/divergences.py, REFUSED_ON_PURPOSE).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.topics import topic_name_error
from minibroker_storage.manager import LogManager

from ..client_metrics.configs import SubscriptionError, java_list
from ..client_metrics.manager import ClientMetricsManager, java_hash_set_order
from ..config import group_configs as gc
from ..config import topic_configs as tc
from ..config.options import Config
from .api import Api, RequestContext
from .authz import OFF, Authz, Op
from .authz import Res as AclRes
from .common import ZERO, answers, response_cls

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


class Refusal(Exception):
    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ConfigHandlers:
    def __init__(self, *, logs: LogManager, config: Config, client_metrics: ClientMetricsManager,
                 group_configs: gc.GroupConfigs, authz: Authz = OFF) -> None:
        self.authz = authz
        self.group_configs = group_configs
        self.logs = logs
        self.config = config
        self.client_metrics = client_metrics

    def apis(self) -> list[Api]:
        return [Api(ApiKey.AlterConfigs, 0, 2, self.alter_configs),
                Api(ApiKey.IncrementalAlterConfigs, 0, 1, self.incremental_alter_configs),
                Api(ApiKey.ListConfigResources, 0, 1, self.list_config_resources)]

    # -- IncrementalAlterConfigs ---------------------------------------------------------
    @answers
    def incremental_alter_configs(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        Result = nested(R, "AlterConfigsResourceResponse")
        keys = [(r.resource_type, r.resource_name) for r in req.resources]
        results = []
        for res in req.resources:
            try:
                if keys.count((res.resource_type, res.resource_name)) > 1:
                    raise Refusal(ErrorCode.invalid_request, "Each resource must appear at most once.")
                names = [c.name for c in res.configs]
                if len(set(names)) != len(names):
                    raise Refusal(ErrorCode.invalid_request, "Error due to duplicate config keys")
                self._authorize_alter(ctx, res.resource_type, res.resource_name)
                self._alter(res.resource_type, res.resource_name,
                            lambda cur, is_list, default, ops=res.configs: _apply(ops, cur, is_list, default),
                            req.validate_only)
                error, message = ErrorCode.none, None
            except Refusal as e:
                error, message = e.code, e.message
            results.append(build(Result, error_code=error, error_message=message,
                                 resource_type=res.resource_type, resource_name=res.resource_name))
        return build(R, throttle_time=ZERO, responses=tuple(results))

    # -- AlterConfigs (the non-incremental form) ---------------------------------------------
    @answers
    def alter_configs(self, ctx: RequestContext, req: Any) -> Any:
        """Each resource's configs become exactly those given: a key left out is deleted
        (ConfigurationControlManager.legacyAlterConfigResource)."""
        R = response_cls(ctx)
        Result = nested(R, "AlterConfigsResourceResponse")
        keys = [(r.resource_type, r.resource_name) for r in req.resources]
        results = []
        for res in req.resources:
            try:
                # Kafka 4.4 leaves a request naming one resource twice, or a resource type it
                # does not know, unanswered (the client times out); these answers are
                # ControllerApis.handleLegacyAlterConfigs' own.
                if keys.count((res.resource_type, res.resource_name)) > 1:
                    raise Refusal(ErrorCode.invalid_request, "Duplicate resource.")
                if res.resource_type not in tc.RESOURCE_TYPES:
                    raise Refusal(ErrorCode.unsupported_version,
                                  f"Unknown resource type {res.resource_type}.")
                # ConfigAdminManager.preprocess, as for IncrementalAlterConfigs
                names = [c.name for c in res.configs]
                if len(set(names)) != len(names):
                    raise Refusal(ErrorCode.invalid_request, "Error due to duplicate config keys")
                for c in res.configs:
                    if c.value is None:
                        raise Refusal(ErrorCode.invalid_request, f"Null value not supported for : {c.name}")
                self._authorize_alter(ctx, res.resource_type, res.resource_name)
                if res.resource_type == tc.RESOURCE_BROKER_LOGGER:
                    # loggers are IncrementalAlterConfigs' only (checked against Kafka 4.4)
                    raise Refusal(ErrorCode.invalid_request, f"Unknown resource type {res.resource_type}")
                given = {c.name: c.value for c in res.configs}
                self._alter(res.resource_type, res.resource_name,
                            lambda current, is_list, default, given=given: dict(given),
                            req.validate_only)
                error, message = ErrorCode.none, None
            except Refusal as e:
                error, message = e.code, e.message
            results.append(build(Result, error_code=error, error_message=message,
                                 resource_type=res.resource_type, resource_name=res.resource_name))
        return build(R, throttle_time=ZERO, responses=tuple(results))

    def _authorize_alter(self, ctx: RequestContext, kind: int, name: str) -> None:
        """ALTER_CONFIGS on the topic, the group, or the cluster (broker, logger and client
        metrics configs), after the request's own checks (ConfigAdminManager.preprocess)."""
        if not self.authz.on:
            return
        if kind == tc.RESOURCE_TOPIC:
            if not self.authz.allowed(ctx, Op.ALTER_CONFIGS, AclRes.TOPIC, name):
                raise Refusal(ErrorCode.topic_authorization_failed, None)
        elif kind == tc.RESOURCE_GROUP:
            if not self.authz.allowed(ctx, Op.ALTER_CONFIGS, AclRes.GROUP, name):
                raise Refusal(ErrorCode.group_authorization_failed, None)
        elif kind in (tc.RESOURCE_BROKER, tc.RESOURCE_BROKER_LOGGER, tc.RESOURCE_CLIENT_METRICS):
            if not self.authz.cluster(ctx, Op.ALTER_CONFIGS):
                raise Refusal(ErrorCode.cluster_authorization_failed, None)

    def _alter(self, kind: int, name: str, change: Callable[..., dict[str, str]],
               validate_only: bool) -> None:
        """Changes resource (kind, name) to ``change(current configs, is_list, default)``, after
        the checks of its kind; a Refusal changes nothing."""
        if kind == tc.RESOURCE_TOPIC:
            if not name:
                raise Refusal(ErrorCode.invalid_request, "Default topic resources are not allowed.")
            why = topic_name_error(name)
            if why is not None:
                raise Refusal(ErrorCode.invalid_topic_exception, why)
            info = self.logs.topic(name)
            if info is None:
                raise Refusal(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
            configs = change(dict(info.configs), _topic_list, self._topic_default)
            for key, value in configs.items():
                why = tc.validate_topic_config(key, value)
                if why is not None:
                    raise Refusal(ErrorCode.invalid_config, why)
            if not validate_only and configs != dict(info.configs):
                self.logs.alter_topic_configs(name, configs)
        elif kind == tc.RESOURCE_CLIENT_METRICS:
            current = self.client_metrics.configs.get(name, {})
            # Kafka's controller knows no CLIENT_METRICS config types: APPEND and SUBTRACT are
            # refused for every key (ConfigurationControlManager, isSplittable)
            configs = change(dict(current), lambda k: False, lambda k: "")
            try:
                self.client_metrics.alter(name, configs, validate_only=validate_only)
            except SubscriptionError as e:
                raise Refusal(e.code, str(e)) from None
        elif kind == tc.RESOURCE_GROUP:
            if not name:
                raise Refusal(ErrorCode.invalid_request, "Default group resources are not allowed.")
            # Kafka knows no LIST group config on this path: APPEND and SUBTRACT are refused for
            # every key, streams.rack.aware.assignment.tags too
            configs = change(self.group_configs.own(name), lambda k: False, lambda k: "")
            try:
                self.group_configs.replace(name, configs, validate_only=validate_only)
            except gc.GroupConfigError as e:
                raise Refusal(ErrorCode.invalid_config, str(e)) from None
        elif kind == tc.RESOURCE_BROKER and change({}, lambda k: False, lambda k: "") == {}:
            # No dynamic broker config is ever set here, so a change that leaves none (deleting,
            # as kafka-reassign-partitions.sh --verify clears the replication throttles it may
            # have set) is the no-op it would be on Kafka, and is answered so.
            return
        elif kind in (tc.RESOURCE_BROKER, tc.RESOURCE_BROKER_LOGGER):
            raise Refusal(ErrorCode.invalid_request,
                          f"minibroker does not change {_KIND_NAMES[kind]} configs at runtime; set broker "
                          "options at start-up (minibroker --help)")
        else:
            raise Refusal(ErrorCode.invalid_request, f"Unknown resource type {kind}")

    def _topic_default(self, key: str) -> str:
        return tc.default_for(key, self.config)[0] if key in tc.TOPIC_CONFIGS else ""

    # -- ListConfigResources --------------------------------------------------------------
    @answers
    def list_config_resources(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        Res = nested(R, "ConfigResource")
        # v0 was ListClientMetricsResources: client metrics subscriptions only
        asked = (set(getattr(req, "resource_types", ()) or ()) if ctx.api_version >= 1
                 else {tc.RESOURCE_CLIENT_METRICS})
        if not asked:
            asked = set(tc.RESOURCE_TYPES)
        if not self.authz.cluster(ctx, Op.DESCRIBE_CONFIGS):
            # KafkaApis: DESCRIBE_CONFIGS on the cluster, before anything else
            return build(R, throttle_time=ZERO, error_code=ErrorCode.cluster_authorization_failed,
                         config_resources=())
        if not asked <= set(tc.RESOURCE_TYPES):
            return build(R, throttle_time=ZERO, error_code=ErrorCode.unsupported_version, config_resources=())
        out: list[tuple[str, int]] = []
        # Kafka's order (KafkaApis.handleListConfigResources): groups, subscriptions, the broker's
        # logger and itself, then topics
        if tc.RESOURCE_GROUP in asked:
            # Kafka walks a HashMap of the groups with configs
            out += [(g, tc.RESOURCE_GROUP) for g in java_hash_set_order(self.group_configs.groups())]
        if tc.RESOURCE_CLIENT_METRICS in asked:
            out += [(n, tc.RESOURCE_CLIENT_METRICS) for n in sorted(self.client_metrics.configs)]
        node = str(self.config.node_id)
        if tc.RESOURCE_BROKER_LOGGER in asked:
            out.append((node, tc.RESOURCE_BROKER_LOGGER))
        if tc.RESOURCE_BROKER in asked:
            out.append((node, tc.RESOURCE_BROKER))
        if tc.RESOURCE_TOPIC in asked:
            out += [(t.name, tc.RESOURCE_TOPIC) for t in sorted(self.logs.topics(), key=lambda t: t.name)]
        kw = (lambda t: {"resource_type": t}) if ctx.api_version >= 1 else (lambda t: {})
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none,
                     config_resources=tuple(build(Res, resource_name=n, **kw(t)) for n, t in out))


_KIND_NAMES = {tc.RESOURCE_BROKER: "broker", tc.RESOURCE_BROKER_LOGGER: "broker logger"}


def _topic_list(key: str) -> bool:
    d = tc.TOPIC_CONFIGS.get(key)
    return d is not None and d.type == tc.LIST


def _apply(ops: Any, configs: dict[str, str], is_list, default) -> dict[str, str]:
    """The resource's configs after the operations, in order (a Refusal on a bad one)."""
    for op in ops:
        key, value = op.name, op.value
        if op.config_operation == SET:
            if value is None:
                raise Refusal(ErrorCode.invalid_request, f"Null value not supported for : {key}")
            configs[key] = ",".join(java_list(value)) if is_list(key) else value
        elif op.config_operation == DELETE:
            configs.pop(key, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            if not is_list(key):
                raise Refusal(ErrorCode.invalid_config, f"Can't {_OP_NAMES[op.config_operation]} to key "
                                                        f"{key} because its type is not LIST.")
            items = java_list(configs[key] if key in configs else default(key))
            given = java_list(value or "")
            if op.config_operation == APPEND:
                for v in given:
                    if v not in items:
                        items.append(v)
            else:
                items = [v for v in items if v not in given]
            configs[key] = ",".join(items)
        else:  # Kafka answers an unknown operation with UNKNOWN_SERVER_ERROR and no message
            raise Refusal(ErrorCode.unknown_server_error, None)
    return configs
