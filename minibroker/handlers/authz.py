"""What the request handlers ask of the authorizer, as Kafka's AuthHelper asks it: everything
is allowed without one (``--authorizer none``, Kafka without authorizer.class.name)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..security.acl.model import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from ..security.acl.authorizer import Authorizer

Op = AclOperation
Res = ResourceType

# AclEntry.supportedOperations: what authorized-operations bit fields are computed over.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    Res.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS,
                Op.ALTER_CONFIGS),
    Res.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    Res.CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE,
                  Op.ALTER, Op.DESCRIBE),
    Res.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
    Res.DELEGATION_TOKEN: (Op.DESCRIBE,),
    Res.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}


class Authz:
    def __init__(self, authorizer: Authorizer | None = None) -> None:
        self.authorizer = authorizer

    @property
    def on(self) -> bool:
        return self.authorizer is not None

    def allowed(self, ctx: object, op: AclOperation, rtype: ResourceType, name: str, *,
                log_if_denied: bool = True) -> bool:
        a = self.authorizer
        return a is None or a.authorize(ctx, op, rtype, name, log_if_denied=log_if_denied)

    def cluster(self, ctx: object, op: AclOperation, *, log_if_denied: bool = True) -> bool:
        return self.allowed(ctx, op, Res.CLUSTER, CLUSTER_NAME, log_if_denied=log_if_denied)

    def names(self, ctx: object, op: AclOperation, rtype: ResourceType, names: Iterable[str], *,
              log_if_denied: bool = True) -> set[str]:
        """AuthHelper.filterByAuthorized: the names the caller may ``op``."""
        a = self.authorizer
        if a is None:
            return set(names)
        return a.authorized_names(ctx, op, rtype, names, log_if_denied=log_if_denied)

    def topics(self, ctx: object, op: AclOperation, names: Iterable[str]) -> set[str]:
        return self.names(ctx, op, Res.TOPIC, names)

    def by_resource_type(self, ctx: object, op: AclOperation, rtype: ResourceType) -> bool:
        a = self.authorizer
        return a is None or a.authorize_by_resource_type(ctx, op, rtype)

    def operations(self, ctx: object, rtype: ResourceType, name: str) -> int:
        """AuthHelper.authorizedOperations: a bit per supported operation allowed (unlogged)."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(rtype, ()):
            if self.allowed(ctx, op, rtype, name, log_if_denied=False):
                bits |= 1 << int(op)
        return bits


OFF = Authz(None)
