"""UpdateFeatures: finalize a feature level at runtime, as Kafka's controller does (KIP-584).

A client's mid-life switch of protocol (transaction.version, group.version) is tested by
changing the level while it runs; ApiVersions answers the new level and epoch at once.
"""

from __future__ import annotations

from typing import Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode

from ..config.features import UPGRADE, Features
from .api import Api, RequestContext
from .authz import OFF, Authz, Op
from .common import ZERO, answers, response_cls


class FeatureHandlers:
    def __init__(self, *, features: Features, node_id: int, authz: Authz = OFF) -> None:
        self.features = features
        self.authz = authz
        self.node_id = node_id

    def apis(self) -> list[Api]:
        return [Api(ApiKey.UpdateFeatures, 0, 2, self.update_features)]

    @answers
    def update_features(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        if not self.authz.cluster(ctx, Op.ALTER):
            # ControllerApis.handleUpdateFeatures: ALTER on the cluster, the whole request refused
            return build(R, throttle_time=ZERO, error_code=ErrorCode.cluster_authorization_failed,
                         error_message=None, results=())
        # v0's allow_downgrade is not honoured by Kafka 4.4 (a downgrade through v0 is refused as
        # an upgrade would be); v1+ say the upgrade type.
        updates = [(u.feature, u.max_version_level, getattr(u, "upgrade_type", UPGRADE))
                   for u in req.feature_updates]
        refused = self.features.update(updates, getattr(req, "validate_only", False), self.node_id)
        if refused is not None:
            return build(R, throttle_time=ZERO, error_code=ErrorCode.invalid_update_version,
                         error_message=refused, results=())
        results = ()
        if ctx.api_version < 2:  # v2 answers the top-level error only
            Result = nested(R, "UpdatableFeatureResult")
            results = tuple(build(Result, feature=name, error_code=ErrorCode.none, error_message="NONE")
                            for name, _, _ in updates)
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None, results=results)
