"""FindCoordinator: this single broker coordinates every group and transactional id.

librdkafka also reads FindCoordinator v0 support as the sign of a broker that
takes LZ4 batches (rdkafka_feature.c), so this API is needed for plain
producing too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode

from .api import Api, RequestContext
from .authz import OFF, Authz, Op, Res
from .common import ZERO, Endpoint, advertised_endpoint, answers, response_cls

KEY_GROUP = 0
KEY_TRANSACTION = 1


class CoordinatorHandlers:
    def __init__(self, *, node_id: int, endpoint: Endpoint,
                 coordinator_node: Callable[[int, str], int | None] | None = None,
                 node_endpoints: Callable[[], dict[int, tuple[str, int]]] | None = None,
                 coordinator_topic: Callable[[int], None] | None = None, authz: Authz = OFF) -> None:
        self.node_id = node_id
        self.authz = authz
        self.endpoint = endpoint
        # virtual brokers: the node leading the key's internal partition, and its address
        self.coordinator_node = coordinator_node
        self.node_endpoints = node_endpoints
        # creates the key type's internal topic when missing, as Kafka does at this request
        self.coordinator_topic = coordinator_topic

    def apis(self) -> list[Api]:
        # v6 adds share-group keys (KIP-932), which this broker does not serve.
        return [Api(ApiKey.FindCoordinator, 0, 5, self.find_coordinator)]

    def _answer(self, ctx: RequestContext, key_type: int, key: str
                ) -> tuple[ErrorCode, str | None, int, tuple[str, int]]:
        # KafkaApis.getCoordinator: DESCRIBE on the group or transactional id comes first
        if key_type == KEY_GROUP and not self.authz.allowed(ctx, Op.DESCRIBE, Res.GROUP, key):
            return ErrorCode.group_authorization_failed, None, -1, ("", -1)
        if key_type == KEY_TRANSACTION and not self.authz.allowed(ctx, Op.DESCRIBE, Res.TRANSACTIONAL_ID,
                                                                   key):
            return ErrorCode.transactional_id_authorization_failed, None, -1, ("", -1)
        if key_type not in (KEY_GROUP, KEY_TRANSACTION):
            return ErrorCode.invalid_request, f"Unknown coordinator key type {key_type}", -1, ("", -1)
        if key_type == KEY_TRANSACTION and not key:
            return ErrorCode.invalid_request, "Transactional id must not be empty", -1, ("", -1)
        if self.coordinator_topic is not None:
            self.coordinator_topic(key_type)
        if self.coordinator_node is None or self.node_endpoints is None:
            return ErrorCode.none, None, self.node_id, advertised_endpoint(ctx, self.endpoint)
        node = self.coordinator_node(key_type, key)
        endpoint = self.node_endpoints().get(node) if node is not None else None
        if node is None or endpoint is None:
            return ErrorCode.coordinator_not_available, "The coordinator is not available.", -1, ("", -1)
        return ErrorCode.none, None, node, endpoint

    @answers
    def find_coordinator(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        key_type = getattr(req, "key_type", KEY_GROUP)
        if ctx.api_version >= 4:
            C = nested(R, "Coordinator")
            out = []
            for key in req.coordinator_keys:
                error, message, node_id, (host, port) = self._answer(ctx, key_type, key)
                ok = error == ErrorCode.none
                out.append(build(C, key=key, node_id=node_id if ok else -1,
                                 host=host if ok else "", port=port if ok else -1,
                                 error_code=error, error_message=message))
            return build(R, throttle_time=ZERO, coordinators=tuple(out))
        error, message, node_id, (host, port) = self._answer(ctx, key_type, req.key)
        ok = error == ErrorCode.none
        return build(R, throttle_time=ZERO, error_code=error, error_message=message,
                     node_id=node_id if ok else -1, host=host if ok else "",
                     port=port if ok else -1)
