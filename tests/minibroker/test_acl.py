"""The ACL decision table of Kafka's StandardAuthorizer, the filters and the store, without I/O
(but the store's one file in a temp dir)."""

from __future__ import annotations

import pytest

from minibroker.security.acl.authorizer import Authorizer
from minibroker.security.acl.decision import allowed_on_some, decide
from minibroker.security.acl.filters import (
    MalformedRequest,
    UnknownServerError,
    check_codes,
    check_request_bindings,
    filter_refusal,
    matches,
    refusal,
)
from minibroker.security.acl.model import AclBinding, AclFilter
from minibroker.security.acl.model import AclOperation as Op
from minibroker.security.acl.model import PatternType as Pat
from minibroker.security.acl.model import PermissionType as Perm
from minibroker.security.acl.model import ResourceType as Res

ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def acl(name="t", op=Op.READ, perm=Perm.ALLOW, principal=ALICE, host="*", pat=Pat.LITERAL,
        rtype=Res.TOPIC) -> AclBinding:
    return AclBinding(rtype, name, pat, principal, host, op, perm)


def allowed(acls, op=Op.READ, name="t", principal=ALICE, host=HOST, rtype=Res.TOPIC,
            supers=frozenset(), everyone=False) -> bool:
    return decide(acls, principal, host, op, rtype, name, super_users=supers,
                  allow_if_no_acl=everyone).allowed


def test_no_acls_denies_unless_allow_everyone():
    assert not allowed([])
    assert allowed([], everyone=True)


def test_allow_everyone_only_when_no_acl_applies_to_the_resource():
    other = acl(principal=BOB)  # names the resource, not alice
    assert not allowed([other], everyone=True)
    assert allowed([acl(name="u", principal=BOB)], everyone=True)  # another resource
    # a prefixed ACL covering the name counts as one on the resource
    assert not allowed([acl(name="t", pat=Pat.PREFIXED, principal=BOB)], name="tx", everyone=True)


def test_deny_wins_over_allow():
    assert not allowed([acl(), acl(perm=Perm.DENY)])
    assert not allowed([acl(op=Op.ALL), acl(perm=Perm.DENY, pat=Pat.PREFIXED, name="")], name="t")
    assert not allowed([acl(name="*", principal="User:*"), acl(perm=Perm.DENY)])
    assert not allowed([acl(), acl(name="*", perm=Perm.DENY, principal="User:*")])


def test_prefixed_and_literal_matching():
    assert allowed([acl(name="orders", pat=Pat.PREFIXED)], name="orders-eu")
    assert not allowed([acl(name="orders", pat=Pat.LITERAL)], name="orders-eu")
    assert not allowed([acl(name="orders-eu-x", pat=Pat.PREFIXED)], name="orders-eu")
    assert allowed([acl(name="*")], name="anything")
    # "*" is literal only: a PREFIXED "*" covers names starting with '*'
    assert not allowed([acl(name="*", pat=Pat.PREFIXED)], name="anything")


def test_wildcard_principal_and_host():
    assert allowed([acl(principal="User:*")])
    assert not allowed([acl(principal="Group:*")])
    assert allowed([acl(host=HOST)])
    assert not allowed([acl(host="10.0.0.2")])
    assert not allowed([acl(principal=BOB)])


def test_implied_operations_only_for_allow():
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE):
        assert allowed([acl(op=op)], op=Op.DESCRIBE), op
    for op in (Op.CREATE, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE):
        assert not allowed([acl(op=op)], op=Op.DESCRIBE), op
    assert allowed([acl(op=Op.ALTER_CONFIGS)], op=Op.DESCRIBE_CONFIGS)
    assert not allowed([acl(op=Op.DESCRIBE_CONFIGS)], op=Op.ALTER_CONFIGS)
    assert not allowed([acl(op=Op.DESCRIBE)], op=Op.READ)
    # DENY READ does not deny DESCRIBE (an ALLOW WRITE still implies it)
    assert allowed([acl(op=Op.WRITE), acl(op=Op.READ, perm=Perm.DENY)], op=Op.DESCRIBE)
    # DENY ALL denies everything
    assert not allowed([acl(op=Op.WRITE), acl(op=Op.ALL, perm=Perm.DENY)], op=Op.DESCRIBE)
    assert allowed([acl(op=Op.ALL)], op=Op.IDEMPOTENT_WRITE)


def test_super_users_pass_deny():
    assert allowed([acl(perm=Perm.DENY, op=Op.ALL)], supers=frozenset({ALICE}))


def test_resource_types_are_separate():
    assert not allowed([acl(rtype=Res.GROUP)], rtype=Res.TOPIC)
    assert allowed([acl(rtype=Res.TRANSACTIONAL_ID, op=Op.WRITE)], rtype=Res.TRANSACTIONAL_ID,
                   op=Op.WRITE)


def test_allowed_on_some_resource_of_a_type():
    def some(acls):
        return allowed_on_some(acls, ALICE, HOST, Op.WRITE, Res.TOPIC)

    assert not some([])
    assert some([acl(op=Op.WRITE)])
    assert some([acl(op=Op.ALL, name="x", pat=Pat.PREFIXED)])
    assert not some([acl(op=Op.WRITE), acl(op=Op.WRITE, perm=Perm.DENY)])
    assert not some([acl(op=Op.WRITE, name="ab"), acl(op=Op.WRITE, perm=Perm.DENY, name="a",
                                                      pat=Pat.PREFIXED)])
    assert some([acl(op=Op.WRITE, name="ab"), acl(op=Op.WRITE, perm=Perm.DENY, name="ab",
                                                  pat=Pat.PREFIXED, host="10.9.9.9")])
    assert not some([acl(op=Op.WRITE, name="*", principal="User:*"),
                     acl(op=Op.WRITE, name="*", perm=Perm.DENY)])
    assert not some([acl(op=Op.READ)])  # no implication here


def f(**kw) -> AclFilter:
    base = dict(resource_type=Res.ANY, resource_name=None, pattern_type=Pat.ANY, principal=None,
                host=None, operation=Op.ANY, permission=Perm.ANY)
    base.update(kw)
    return AclFilter(**base)


def test_filters():
    lit, pre, star = acl(name="orders-eu"), acl(name="orders", pat=Pat.PREFIXED), acl(name="*")
    assert all(matches(f(), a) for a in (lit, pre, star))
    assert [a for a in (lit, pre, star) if matches(f(resource_name="orders-eu", pattern_type=Pat.MATCH), a)] \
        == [lit, pre, star]
    assert [a for a in (lit, pre, star) if matches(f(resource_name="orders-eu"), a)] == [lit]
    assert [a for a in (lit, pre, star) if matches(f(pattern_type=Pat.PREFIXED), a)] == [pre]
    assert [a for a in (lit, pre, star) if matches(f(resource_name="*", pattern_type=Pat.LITERAL), a)] \
        == [star]
    assert not matches(f(principal="User:*"), lit)  # filters compare exactly
    assert not matches(f(operation=Op.WRITE), lit)
    assert matches(f(permission=Perm.ALLOW, host="*"), lit)
    with pytest.raises(MalformedRequest):
        check_codes(2, 3, 0, 3)
    assert filter_refusal(f(operation=Op.UNKNOWN)) == "Unknown entryFilter."
    assert filter_refusal(f(resource_type=Res.UNKNOWN)) == "Unknown patternFilter."
    assert filter_refusal(f()) is None


def test_create_refusals():
    assert refusal(acl(rtype=Res.CLUSTER, name="c")) == \
        "The only valid name for the CLUSTER resource is kafka-cluster"
    assert refusal(acl(rtype=Res.CLUSTER, name="kafka-cluster")) is None
    assert refusal(acl(name="")) == "Invalid empty resource name"
    with pytest.raises(UnknownServerError):
        check_request_bindings([acl(), acl(pat=Pat.MATCH)])
    with pytest.raises(UnknownServerError):
        check_request_bindings([acl(op=Op.ANY)])
    assert refusal(acl(op=Op.UNKNOWN)) == "Invalid operation UNKNOWN"
    assert refusal(acl(rtype=Res.UNKNOWN, op=Op.UNKNOWN)) == "Invalid resourceType UNKNOWN"
    assert refusal(acl(name="", op=Op.UNKNOWN)) == "Invalid empty resource name"


def test_authorizer_persists_and_deletes(tmp_path):
    a = Authorizer(tmp_path, super_users=" User:admin ;; User:root")
    assert a.super_users == {"User:admin", "User:root"}
    a.create([acl(), acl(), acl(op=Op.WRITE)])
    assert len(a.store) == 2
    b = Authorizer(tmp_path)
    assert b.store.all() == [acl(), acl(op=Op.WRITE)]
    res = b.delete([f(operation=Op.READ), f(resource_name="t")])
    assert res == [[acl()], [acl(), acl(op=Op.WRITE)]]  # both name the ACL both match
    assert Authorizer(tmp_path).store.all() == []


def test_authorize_by_resource_type_hardcode_rule(tmp_path):
    class Ctx:
        class connection:
            principal = ALICE
            peer = (HOST, 1)
    a = Authorizer(None, allow_everyone_if_no_acl_found=True)
    assert a.authorize_by_resource_type(Ctx(), Op.WRITE, Res.TOPIC)
    a = Authorizer(None)
    assert not a.authorize_by_resource_type(Ctx(), Op.WRITE, Res.TOPIC)
    a.create([acl(op=Op.WRITE, name="x", pat=Pat.PREFIXED)])
    assert a.authorize_by_resource_type(Ctx(), Op.WRITE, Res.TOPIC)
    assert a.authorize(Ctx(), Op.WRITE, Res.TOPIC, "xy")
    assert not a.authorize(Ctx(), Op.WRITE, Res.TOPIC, "y")


def test_principal_without_colon_never_matches():
    # tests/differential/divergences.py ACL_DIFFERENCES: Kafka would fail the request instead
    from tests.differential.divergences import ACL_DIFFERENCES

    assert any("no ':'" in k for k in ACL_DIFFERENCES)
    assert not allowed([acl(principal="alice")], principal="alice")
    # a DENY with such a principal denies nothing
    assert allowed([acl(principal="alice", perm=Perm.DENY), acl()])
