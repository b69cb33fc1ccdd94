"""ACLs: Kafka's StandardAuthorizer, sans-io but for the one JSON file of :mod:`.store`.

:mod:`.model` the vocabulary, :mod:`.decision` the authorization decision,
:mod:`.filters` DescribeAcls/DeleteAcls filters and CreateAcls refusals, :mod:`.store` the
persisted ACLs, :mod:`.authorizer` the broker's authorizer (logging and the API operations).
"""

from .authorizer import Authorizer, caller
from .model import (
           CLUSTER_NAME,
           AclBinding,
           AclFilter,
           AclOperation,
           PatternType,
           PermissionType,
           ResourceType,
)

__all__ = ["CLUSTER_NAME", "AclBinding", "AclFilter", "AclOperation", "Authorizer", "PatternType",
           "PermissionType", "ResourceType", "caller"]
