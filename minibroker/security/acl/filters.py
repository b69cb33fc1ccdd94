"""Which ACLs a DescribeAcls/DeleteAcls filter selects (Kafka's AclBindingFilter), and why a
CreateAcls binding is refused (KafkaApis' AclApis.handleCreateAcls, then the request's
AclBinding constructors, then AclControlManager.validateNewAcl)."""

from __future__ import annotations

from .model import (
    CLUSTER_NAME,
    WILDCARD,
    AclBinding,
    AclFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)


def pattern_matches(f: AclFilter, acl: AclBinding) -> bool:
    """ResourcePatternFilter.matches: ANY compares the name exactly across pattern types; MATCH
    selects every ACL that applies to the named resource (its literal, ``*`` and prefixes)."""
    if f.resource_type != ResourceType.ANY and f.resource_type != acl.resource_type:
        return False
    if f.pattern_type not in (PatternType.ANY, PatternType.MATCH) and f.pattern_type != acl.pattern_type:
        return False
    if f.resource_name is None:
        return True
    if f.pattern_type in (PatternType.ANY, acl.pattern_type):
        return f.resource_name == acl.resource_name
    # MATCH
    if acl.pattern_type == PatternType.LITERAL:
        return f.resource_name == acl.resource_name or acl.resource_name == WILDCARD
    return f.resource_name.startswith(acl.resource_name)


def entry_matches(f: AclFilter, acl: AclBinding) -> bool:
    """AccessControlEntryFilter.matches: exact principal and host (no wildcard expansion)."""
    if f.principal is not None and f.principal != acl.principal:
        return False
    if f.host is not None and f.host != acl.host:
        return False
    if f.operation != AclOperation.ANY and f.operation != acl.operation:
        return False
    return f.permission == PermissionType.ANY or f.permission == acl.permission


def matches(f: AclFilter, acl: AclBinding) -> bool:
    return pattern_matches(f, acl) and entry_matches(f, acl)


class MalformedRequest(ValueError):
    """A code 0 (UNKNOWN) on the wire: Kafka fails to parse the request and closes the connection
    (CreateAclsRequest/DescribeAclsRequest/DeleteAclsRequest's validate compare the raw codes
    with 0). Other codes Kafka does not know read as UNKNOWN and are answered."""


def check_codes(*codes: int) -> None:
    if 0 in codes:
        raise MalformedRequest("the request contains UNKNOWN (0) elements")


class UnknownServerError(ValueError):
    """The request's bindings do not build (ResourcePattern/AccessControlEntry refuse ANY/MATCH):
    Kafka's handler throws, and every creation of the request answers UNKNOWN_SERVER_ERROR
    without a message."""


def check_request_bindings(bindings: list[AclBinding]) -> None:
    """What Kafka checks of a whole CreateAcls request before any binding is looked at alone
    (the raw codes were checked with :func:`check_codes`)."""
    for b in bindings:
        if (b.resource_type == ResourceType.ANY or b.pattern_type in (PatternType.ANY, PatternType.MATCH)
                or b.operation == AclOperation.ANY or b.permission == PermissionType.ANY):
            raise UnknownServerError("a binding with ANY or MATCH")


def refusal(b: AclBinding) -> str | None:
    """The INVALID_REQUEST message of a binding Kafka will not create, or None: AclApis' own
    checks, then AclControlManager.validateNewAcl's (codes Kafka does not know are UNKNOWN)."""
    if b.resource_type == ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is " + CLUSTER_NAME
    if b.resource_name == "":
        return "Invalid empty resource name"
    if b.resource_type == ResourceType.UNKNOWN:
        return "Invalid resourceType UNKNOWN"
    if b.pattern_type == PatternType.UNKNOWN:
        return "Invalid patternType UNKNOWN"
    if b.operation == AclOperation.UNKNOWN:
        return "Invalid operation UNKNOWN"
    if b.permission == PermissionType.UNKNOWN:
        return "Invalid permissionType UNKNOWN"
    return None


def filter_refusal(f: AclFilter) -> str | None:
    """AclControlManager.validateFilter: a DeleteAcls filter with an UNKNOWN part."""
    if f.resource_type == ResourceType.UNKNOWN or f.pattern_type == PatternType.UNKNOWN:
        return "Unknown patternFilter."
    if f.operation == AclOperation.UNKNOWN or f.permission == PermissionType.UNKNOWN:
        return "Unknown entryFilter."
    return None
