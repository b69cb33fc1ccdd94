"""ACLs: Kafka's StandardAuthorizer, sans-io but for the one JSON file of :mod:`.store`.

:mod:`.model` the vocabulary, :mod:`.decision` the authorization decision,
:mod:`.filters` DescribeAcls/DeleteAcls filters and CreateAcls refusals, :mod:`.store` the
persisted ACLs, :mod:`.authorizer` the broker's authorizer (logging and the API operations).
"""

from typing import TYPE_CHECKING, Any

from .model import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)

if TYPE_CHECKING:
    from .authorizer import Authorizer, caller


def __getattr__(name: str) -> Any:
    # The authorizer (decisions, filters, the ACL file) is imported when --authorizer standard
    # makes one, not on every broker's start-up: the handlers need only the vocabulary.
    if name in ("Authorizer", "caller"):
        from . import authorizer
        return getattr(authorizer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CLUSTER_NAME", "AclBinding", "AclFilter", "AclOperation", "Authorizer", "PatternType",
           "PermissionType", "ResourceType", "caller"]
