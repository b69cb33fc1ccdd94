"""FindCoordinator: this single broker coordinates every group and transactional id.

librdkafka also reads FindCoordinator v0 support as the sign of a broker that
takes LZ4 batches (rdkafka_feature.c), so this API is needed for plain
producing too.
"""

from __future__ import annotations

from typing import Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode

from ..api import Api, RequestContext
from .common import ZERO, Endpoint, advertised_endpoint, answers, response_cls

KEY_GROUP = 0
KEY_TRANSACTION = 1


class CoordinatorHandlers:
    def __init__(self, *, node_id: int, endpoint: Endpoint) -> None:
        self.node_id = node_id
        self.endpoint = endpoint

    def apis(self) -> list[Api]:
        # v6 adds share-group keys (KIP-932), which this broker does not serve.
        return [Api(ApiKey.FindCoordinator, 0, 5, self.find_coordinator)]

    def _answer(self, key_type: int, key: str) -> tuple[ErrorCode, str | None]:
        if key_type not in (KEY_GROUP, KEY_TRANSACTION):
            return ErrorCode.invalid_request, f"Unknown coordinator key type {key_type}"
        if key_type == KEY_TRANSACTION and not key:
            return ErrorCode.invalid_request, "Transactional id must not be empty"
        return ErrorCode.none, None

    @answers
    def find_coordinator(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        node_id = self.node_id
        key_type = getattr(req, "key_type", KEY_GROUP)
        host, port = advertised_endpoint(ctx, self.endpoint)
        if ctx.api_version >= 4:
            C = nested(R, "Coordinator")
            out = []
            for key in req.coordinator_keys:
                error, message = self._answer(key_type, key)
                ok = error == ErrorCode.none
                out.append(build(C, key=key, node_id=node_id if ok else -1,
                                 host=host if ok else "", port=port if ok else -1,
                                 error_code=error, error_message=message))
            return build(R, throttle_time=ZERO, coordinators=tuple(out))
        error, message = self._answer(key_type, req.key)
        ok = error == ErrorCode.none
        return build(R, throttle_time=ZERO, error_code=error, error_message=message,
                     node_id=node_id if ok else -1, host=host if ok else "",
                     port=port if ok else -1)
