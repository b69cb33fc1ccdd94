"""Kafka's ACL vocabulary: resource types, operations, pattern and permission types (with
Kafka's wire codes), and one ACL binding.

Codes are the ones ``org.apache.kafka.common.acl``/``resource`` put on the wire; a code a
request carries that Kafka does not know reads as UNKNOWN, as ``fromCode`` does there.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Self

# The one name of the CLUSTER resource (Kafka's CLUSTER_NAME).
CLUSTER_NAME = "kafka-cluster"
# A LITERAL ACL on this name applies to every resource of its type; as an ACL's principal
# or host it matches every principal (of type User) or host.
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class _Coded(enum.IntEnum):
    @classmethod
    def from_code(cls, code: int) -> Self:
        try:
            return cls(code)
        except ValueError:
            return cls(0)  # UNKNOWN


class ResourceType(_Coded):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(_Coded):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class PatternType(_Coded):
    UNKNOWN = 0
    ANY = 1  # filters only: any pattern type, the name compared exactly
    MATCH = 2  # filters only: every ACL that would apply to the named resource
    LITERAL = 3
    PREFIXED = 4


class PermissionType(_Coded):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry (Kafka's AclBinding)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType

    def to_json(self) -> dict[str, object]:
        return {"resource_type": self.resource_type.name, "resource_name": self.resource_name,
                "pattern_type": self.pattern_type.name, "principal": self.principal,
                "host": self.host, "operation": self.operation.name,
                "permission": self.permission.name}

    @classmethod
    def from_json(cls, d: dict) -> AclBinding:
        return cls(ResourceType[d["resource_type"]], d["resource_name"],
                   PatternType[d["pattern_type"]], d["principal"], d["host"],
                   AclOperation[d["operation"]], PermissionType[d["permission"]])

    def describe(self) -> str:
        """Kafka's log form of a binding's pattern and entry, for structured logs."""
        return (f"{self.resource_type.name}:{self.pattern_type.name}:{self.resource_name} "
                f"{self.permission.name} {self.principal} {self.operation.name} from {self.host}")


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Kafka's AclBindingFilter: None for a name, principal or host matches any."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: PermissionType

    def has_unknown(self) -> bool:
        return UNKNOWN_CODE in (self.resource_type, self.pattern_type, self.operation,
                                self.permission)


UNKNOWN_CODE = 0
