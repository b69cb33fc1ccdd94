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
    """A code Kafka reads as UNKNOWN: Kafka fails to parse the request and closes the connection
    (CreateAclsRequest/DescribeAclsRequest/DeleteAclsRequest's validate)."""


class UnknownServerError(ValueError):
    """The request's bindings do not build (ResourcePattern/AccessControlEntry refuse ANY/MATCH):
    Kafka's handler throws, and every creation of the request answers UNKNOWN_SERVER_ERROR
    without a message."""


def check_request_bindings(bindings: list[AclBinding]) -> None:
    """What Kafka checks of a whole CreateAcls request before any binding is looked at alone."""
    for b in bindings:
        if 0 in (b.resource_type, b.pattern_type, b.operation, b.permission):
            raise MalformedRequest("CreatableAcls contain unknown elements")
    for b in bindings:
        if (b.resource_type == ResourceType.ANY or b.pattern_type in (PatternType.ANY, PatternType.MATCH)
                or b.operation == AclOperation.ANY or b.permission == PermissionType.ANY):
            raise UnknownServerError("a binding with ANY or MATCH")


def refusal(b: AclBinding) -> str | None:
    """The INVALID_REQUEST message of a binding Kafka will not create, or None."""
    if b.resource_type == ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is " + CLUSTER_NAME
    if b.resource_name == "":
        return "Invalid empty resource name"
    return None


def check_filter(f: AclFilter) -> None:
    if f.has_unknown():
        raise MalformedRequest("filter contains UNKNOWN elements")
