"""The broker's authorizer (``--authorizer standard``): Kafka's StandardAuthorizer over the
ACLs of :mod:`.store`, with super users and ``allow.everyone.if.no.acl.found``."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from minibroker_storage.lazylog import get_logger

from . import filters
from .decision import Decision, allowed_on_some, decide
from .model import AclBinding, AclFilter, AclOperation, ResourceType
from .store import AclStore

# Kafka logs its authorizer's decisions in kafka.authorizer.logger: denials at INFO.
log = get_logger("minibroker.acl")

ANONYMOUS = "User:ANONYMOUS"


def parse_super_users(text: str) -> frozenset[str]:
    """Kafka's super.users: principals separated by ';', blanks ignored."""
    return frozenset(p.strip() for p in text.split(";") if p.strip())


def caller(ctx: object) -> tuple[str, str]:
    """The (principal, host) of a request: the connection's SASL principal (User:ANONYMOUS
    before or without authentication, as Kafka) and the client's address."""
    conn = getattr(ctx, "connection", None)
    principal = getattr(conn, "principal", None) or ANONYMOUS
    peer = getattr(conn, "peer", None)
    host = peer[0] if peer else ""
    return principal, host


class Authorizer:
    def __init__(self, data_dir: Path | None, *, super_users: str = "",
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.store = AclStore(data_dir)
        self.super_users = parse_super_users(super_users)
        self.allow_everyone = allow_everyone_if_no_acl_found
        log.info("acl.authorizer_started", acls=len(self.store), super_users=sorted(self.super_users),
                 allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found)

    # -- decisions -----------------------------------------------------------------------
    def decide(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
               name: str) -> Decision:
        return decide(self.store.candidates(resource_type, name), principal, host, operation,
                      resource_type, name, super_users=self.super_users,
                      allow_if_no_acl=self.allow_everyone)

    def authorize(self, ctx: object, operation: AclOperation, resource_type: ResourceType, name: str,
                  *, log_if_denied: bool = True) -> bool:
        principal, host = caller(ctx)
        d = self.decide(principal, host, operation, resource_type, name)
        if not d.allowed and log_if_denied:
            log.info("acl.denied", principal=principal, host=host, operation=operation.name,
                     resource=f"{resource_type.name}:LITERAL:{name}", rule=d.rule,
                     acl=d.acl.describe() if d.acl is not None else None,
                     api=getattr(ctx, "api_key", None))
        return d.allowed

    def authorized_names(self, ctx: object, operation: AclOperation, resource_type: ResourceType,
                         names: Iterable[str], *, log_if_denied: bool = True) -> set[str]:
        """AuthHelper.filterByAuthorized: the names (each asked once) the caller may use."""
        return {n for n in dict.fromkeys(names)
                if self.authorize(ctx, operation, resource_type, n, log_if_denied=log_if_denied)}

    def authorize_by_resource_type(self, ctx: object, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Authorizer.authorizeByResourceType: may the caller ``operation`` some resource of the
        type? First the made-up name "hardcode" (super users, allow.everyone), unlogged."""
        principal, host = caller(ctx)
        if self.decide(principal, host, operation, resource_type, "hardcode").allowed:
            return True
        return allowed_on_some(self.store.of_type(resource_type), principal, host, operation,
                               resource_type)

    # -- the ACL APIs ----------------------------------------------------------------------
    def describe(self, f: AclFilter) -> list[AclBinding]:
        return [a for a in self.store.all() if filters.matches(f, a)]

    def create(self, bindings: list[AclBinding], ctx: object = None) -> None:
        """Adds the (valid) bindings; one already there is left as it is."""
        new = [b for b in dict.fromkeys(bindings) if b not in self.store]
        if not new:
            return
        self.store.replace(new, set())
        principal, host = caller(ctx)
        for b in new:
            log.info("acl.created", acl=b.describe(), by=principal, from_host=host)

    def delete(self, fs: list[AclFilter], ctx: object = None) -> list[list[AclBinding]]:
        """Each filter's matches among the ACLs as they were before the request (two filters
        matching one ACL both name it, as Kafka's AclControlManager.deleteAcls answers)."""
        before = self.store.all()
        results = [[a for a in before if filters.matches(f, a)] for f in fs]
        gone = {a for r in results for a in r}
        if gone:
            self.store.replace([], gone)
            principal, host = caller(ctx)
            for a in before:
                if a in gone:
                    log.info("acl.deleted", acl=a.describe(), by=principal, from_host=host)
        return results
