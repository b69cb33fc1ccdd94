"""CreateAcls, DescribeAcls, DeleteAcls (Kafka's AclApis).

Each needs the Cluster permission first (ALTER to change ACLs, DESCRIBE to list them);
without an authorizer Kafka answers SECURITY_DISABLED. A code Kafka does not know (UNKNOWN)
fails Kafka's request parsing, which closes the connection: so does minibroker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode

from ..security.acl.filters import (
    MalformedRequest,
    UnknownServerError,
    check_codes,
    check_request_bindings,
    filter_refusal,
    refusal,
)
from ..security.acl.model import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from .api import Api, Disconnect, RequestContext
from .common import ZERO, answers, response_cls

if TYPE_CHECKING:
    from ..security.acl.authorizer import Authorizer

# Kafka's messages: CreateAcls/DeleteAcls throw SecurityDisabledException("No Authorizer is
# configured."); DescribeAcls sets its own (core/src/main/scala/kafka/server/AclApis.scala).
NO_AUTHORIZER = "No Authorizer is configured."
NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"
NOT_AUTHORIZED = "Request is not authorized."


def _binding(c: Any) -> AclBinding:
    return AclBinding(ResourceType.from_code(c.resource_type), c.resource_name,
                      PatternType.from_code(c.resource_pattern_type), c.principal, c.host,
                      AclOperation.from_code(c.operation), PermissionType.from_code(c.permission_type))


def _filter(f: Any) -> AclFilter:
    return AclFilter(ResourceType.from_code(f.resource_type_filter), f.resource_name_filter,
                     PatternType.from_code(f.pattern_type_filter), f.principal_filter, f.host_filter,
                     AclOperation.from_code(f.operation), PermissionType.from_code(f.permission_type))


class AclHandlers:
    def __init__(self, *, authorizer: Authorizer | None) -> None:
        self.authorizer = authorizer  # None: --authorizer none

    def apis(self) -> list[Api]:
        # Kafka 4 serves v1-v3 of each (KIP-896 removed v0).
        return [
            Api(ApiKey.DescribeAcls, 1, 3, self.describe_acls),
            Api(ApiKey.CreateAcls, 1, 3, self.create_acls),
            Api(ApiKey.DeleteAcls, 1, 3, self.delete_acls),
        ]

    def _cluster_allowed(self, ctx: RequestContext, op: AclOperation) -> bool:
        a = self.authorizer
        return a is None or a.authorize(ctx, op, ResourceType.CLUSTER, CLUSTER_NAME)

    @staticmethod
    def _malformed(e: MalformedRequest) -> Disconnect:
        return Disconnect("acl_request_malformed", str(e))

    @answers
    def describe_acls(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        f = _filter(req)
        try:
            check_codes(req.resource_type_filter, req.pattern_type_filter, req.operation, req.permission_type)
        except MalformedRequest as e:
            raise self._malformed(e) from None
        if not self._cluster_allowed(ctx, AclOperation.DESCRIBE):
            return build(R, throttle_time=ZERO, error_code=ErrorCode.cluster_authorization_failed,
                         error_message=NOT_AUTHORIZED, resources=())
        if self.authorizer is None:
            return build(R, throttle_time=ZERO, error_code=ErrorCode.security_disabled,
                         error_message=NO_AUTHORIZER_DESCRIBE, resources=())
        Res = nested(R, "DescribeAclsResource")
        D = nested(R, "AclDescription")
        by_pattern: dict[tuple[int, str, int], list] = {}
        for a in self.authorizer.describe(f):
            by_pattern.setdefault((a.resource_type, a.resource_name, a.pattern_type), []).append(
                build(D, principal=a.principal, host=a.host, operation=int(a.operation),
                      permission_type=int(a.permission)))
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
                     resources=tuple(build(Res, resource_type=rt, resource_name=n, pattern_type=pt,
                                           acls=tuple(ds))
                                     for (rt, n, pt), ds in by_pattern.items()))

    @answers
    def create_acls(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        C = nested(R, "AclCreationResult")
        bindings = [_binding(c) for c in req.creations]

        def all_fail(code: ErrorCode, message: str | None) -> Any:
            return build(R, throttle_time=ZERO, results=tuple(
                build(C, error_code=code, error_message=message) for _ in bindings))

        try:
            for c in req.creations:
                check_codes(c.resource_type, c.resource_pattern_type, c.operation, c.permission_type)
            check_request_bindings(bindings)
        except MalformedRequest as e:
            raise self._malformed(e) from None
        except UnknownServerError:
            if not self._cluster_allowed(ctx, AclOperation.ALTER):
                return all_fail(ErrorCode.cluster_authorization_failed, NOT_AUTHORIZED)
            if self.authorizer is None:
                return all_fail(ErrorCode.security_disabled, NO_AUTHORIZER)
            # Kafka's handler throws building the bindings: every result is the same error
            return all_fail(ErrorCode.unknown_server_error, None)
        if not self._cluster_allowed(ctx, AclOperation.ALTER):
            return all_fail(ErrorCode.cluster_authorization_failed, NOT_AUTHORIZED)
        if self.authorizer is None:
            return all_fail(ErrorCode.security_disabled, NO_AUTHORIZER)
        refusals = [refusal(b) for b in bindings]
        self.authorizer.create([b for b, r in zip(bindings, refusals, strict=True) if r is None], ctx)
        return build(R, throttle_time=ZERO, results=tuple(
            build(C, error_code=ErrorCode.none if r is None else ErrorCode.invalid_request, error_message=r)
            for r in refusals))

    @answers
    def delete_acls(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        F = nested(R, "DeleteAclsFilterResult")
        M = nested(R, "DeleteAclsMatchingAcl")
        fs = [_filter(f) for f in req.filters]
        try:
            for f in req.filters:
                check_codes(f.resource_type_filter, f.pattern_type_filter, f.operation, f.permission_type)
        except MalformedRequest as e:
            raise self._malformed(e) from None

        def all_fail(code: ErrorCode, message: str) -> Any:
            return build(R, throttle_time=ZERO, filter_results=tuple(
                build(F, error_code=code, error_message=message, matching_acls=()) for _ in fs))

        if not self._cluster_allowed(ctx, AclOperation.ALTER):
            return all_fail(ErrorCode.cluster_authorization_failed, NOT_AUTHORIZED)
        if self.authorizer is None:
            return all_fail(ErrorCode.security_disabled, NO_AUTHORIZER)
        refusals = [filter_refusal(f) for f in fs]
        matched = self.authorizer.delete([f for f, r in zip(fs, refusals, strict=True) if r is None], ctx)
        results = iter(matched)
        return build(R, throttle_time=ZERO, filter_results=tuple(
            build(F, error_code=ErrorCode.invalid_request, error_message=r, matching_acls=())
            if r is not None else
            build(F, error_code=ErrorCode.none, error_message=None, matching_acls=tuple(
                build(M, error_code=ErrorCode.none, error_message=None, resource_type=int(a.resource_type),
                      resource_name=a.resource_name, pattern_type=int(a.pattern_type),
                      principal=a.principal, host=a.host, operation=int(a.operation),
                      permission_type=int(a.permission))
                for a in next(results)))
            for r in refusals))
