"""FindCoordinator: this single broker coordinates every group and transactional id.

librdkafka also reads FindCoordinator v0 support as the sign of a broker that
takes LZ4 batches (rdkafka_feature.c), so this API is needed for plain
producing too.
"""

from __future__ import annotations

import base64
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
KEY_SHARE = 2  # a share partition's state, "group:topicId:partition" (KIP-932, v6)


def _share_key_ok(key: str) -> bool:
    """SharePartitionKey.validate: a group id, a topic id as Uuid.toString writes it (URL-safe
    base64, 22 characters) and a partition number, split at the last two colons."""
    parts = key.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        return False
    try:
        int(parts[2])
        return len(parts[1]) == 22 and len(base64.urlsafe_b64decode(parts[1] + "==")) == 16
    except ValueError:
        return False


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
        return [Api(ApiKey.FindCoordinator, 0, 6, self.find_coordinator)]

    def _answer(self, ctx: RequestContext, key_type: int, key: str
                ) -> tuple[ErrorCode, str | None, int, tuple[str, int]]:
        # KafkaApis.getCoordinator: DESCRIBE on the group or transactional id comes first
        if key_type == KEY_GROUP and not self.authz.allowed(ctx, Op.DESCRIBE, Res.GROUP, key):
            return ErrorCode.group_authorization_failed, None, -1, ("", -1)
        if key_type == KEY_TRANSACTION and not self.authz.allowed(ctx, Op.DESCRIBE, Res.TRANSACTIONAL_ID,
                                                                   key):
            return ErrorCode.transactional_id_authorization_failed, None, -1, ("", -1)
        if key_type == KEY_SHARE and ctx.api_version >= 6:
            # KafkaApis.getCoordinator: share partitions' coordinators are for brokers (their
            # share-state calls): CLUSTER_ACTION, then the key's form
            if not self.authz.cluster(ctx, Op.CLUSTER_ACTION):
                return ErrorCode.cluster_authorization_failed, "", -1, ("", -1)
            if not _share_key_ok(key):
                return ErrorCode.invalid_request, "", -1, ("", -1)
        elif key_type == KEY_SHARE:  # below v6 the type is unknown (checked against Kafka 4.4)
            return ErrorCode.invalid_request, "", -1, ("", -1)
        elif key_type not in (KEY_GROUP, KEY_TRANSACTION):
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
