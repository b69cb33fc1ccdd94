"""The authorization decision of Kafka's StandardAuthorizerData, without I/O.

For a principal at a host wanting an operation on a (type, name) resource:

* a super user is allowed everything;
* otherwise the ACLs that apply to the resource are the LITERAL ones on its exact name, the
  LITERAL ones on ``*``, and the PREFIXED ones whose name starts the resource name;
* among them an ACL matches when its principal is the caller's or ``User:*``, its host the
  caller's or ``*``, and its operation the one asked, ALL, or (ALLOW ACLs only) one implying
  it: DESCRIBE is implied by READ, WRITE, DELETE and ALTER, DESCRIBE_CONFIGS by
  ALTER_CONFIGS. A DENY ACL never implies: DENY READ does not deny DESCRIBE;
* a matching DENY wins over any ALLOW; a matching ALLOW allows;
* no match: allowed only when ``allow.everyone.if.no.acl.found`` is set and no ACL applies
  to the resource at all (whoever it names); any applying ACL makes it a denial.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .model import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)

_IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                               AclOperation.DELETE, AclOperation.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    # Kafka's rule names: SuperUser, DefaultAllow, DefaultDeny, or the matching ACL.
    rule: str
    acl: AclBinding | None = None


SUPER_USER = Decision(True, "SuperUser")
DEFAULT_ALLOW = Decision(True, "DefaultAllow")
DEFAULT_DENY = Decision(False, "DefaultDeny")


def principal_matches(acl_principal: str, principal: str) -> bool:
    # Kafka compares parsed (type, name) pairs, split at the first colon: the same as comparing
    # the strings. An ACL principal without a colon cannot be parsed and never matches here
    # (Kafka fails the request instead; listed in tests/differential/divergences.py).
    return ":" in acl_principal and (acl_principal == principal or acl_principal == WILDCARD_PRINCIPAL)


def acl_result(acl: AclBinding, principal: str, host: str, operation: AclOperation) -> bool | None:
    """True (allow) or False (deny) when ``acl`` matches the caller and operation, else None
    (StandardAuthorizerData.findResult; the resource is matched by the caller)."""
    if not principal_matches(acl.principal, principal):
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation != AclOperation.ALL:
        if acl.permission == PermissionType.ALLOW:
            if operation == AclOperation.DESCRIBE:
                if acl.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif operation == AclOperation.DESCRIBE_CONFIGS:
                if acl.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif operation != acl.operation:
                return None
        elif operation != acl.operation:
            return None
    return acl.permission == PermissionType.ALLOW


def applies_to(acl: AclBinding, resource_type: ResourceType, name: str) -> bool:
    """Whether ``acl`` is one of the resource's ACLs (exact literal, literal ``*``, prefix)."""
    if acl.resource_type != resource_type:
        return False
    if acl.pattern_type == PatternType.LITERAL:
        return acl.resource_name == name or acl.resource_name == WILDCARD
    if acl.pattern_type == PatternType.PREFIXED:
        return name.startswith(acl.resource_name)
    return False


def decide(acls: Iterable[AclBinding], principal: str, host: str, operation: AclOperation,
           resource_type: ResourceType, name: str, *, super_users: frozenset[str],
           allow_if_no_acl: bool) -> Decision:
    """``acls``: at least every ACL that applies to the resource (others are skipped)."""
    if principal in super_users:
        return SUPER_USER
    allow: AclBinding | None = None
    has_resource_acls = False
    for acl in acls:
        if not applies_to(acl, resource_type, name):
            continue
        has_resource_acls = True
        result = acl_result(acl, principal, host, operation)
        if result is False:
            return Decision(False, "MatchingAcl", acl)
        if result is True:
            allow = acl
    if allow is not None:
        return Decision(True, "MatchingAcl", allow)
    if has_resource_acls or not allow_if_no_acl:
        return DEFAULT_DENY
    return DEFAULT_ALLOW


def allowed_on_some(acls: Iterable[AclBinding], principal: str, host: str, operation: AclOperation,
                    resource_type: ResourceType) -> bool:
    """Kafka's Authorizer.authorizeByResourceType after its first check (the caller asks
    ``decide`` about a resource named "hardcode" first, as Kafka does, so super users and
    allow.everyone.if.no.acl.found pass): is there some resource name of the type the caller
    may ``operation``? ALLOW ACLs on a literal name or prefix count unless a DENY on the same
    literal or on a prefix of it covers them; a literal ``*`` DENY denies all. Implied
    operations do not count here, ALL does."""
    deny_literal: set[str] = set()
    deny_prefixed: set[str] = set()
    allow_literal: set[str] = set()
    allow_prefixed: set[str] = set()
    wildcard_allow = False
    for acl in acls:
        if acl.resource_type != resource_type:
            continue
        if acl.host != host and acl.host != WILDCARD:
            continue
        if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
            continue
        if acl.operation != operation and acl.operation != AclOperation.ALL:
            continue
        literal = acl.pattern_type == PatternType.LITERAL
        if acl.permission == PermissionType.DENY:
            if literal and acl.resource_name == WILDCARD:
                return False
            (deny_literal if literal else deny_prefixed).add(acl.resource_name)
        elif literal and acl.resource_name == WILDCARD:
            wildcard_allow = True
        else:
            (allow_literal if literal else allow_prefixed).add(acl.resource_name)
    if wildcard_allow:
        return True
    for literal, names in ((True, allow_literal), (False, allow_prefixed)):
        for name in names:
            if literal and name in deny_literal:
                continue
            if not any(name[:i] in deny_prefixed for i in range(1, len(name) + 1)):
                return True
    return False
