"""CreateAcls, DescribeAcls, DeleteAcls handlers called directly (no I/O but acls.json)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from minibroker.handlers.acls import AclHandlers
from minibroker.handlers.api import RequestContext
from minibroker.handlers.api import Disconnect
from minibroker.security.acl.authorizer import Authorizer
from minibroker_protocol.build import nested
from minibroker_protocol.errors import ErrorCode

from .requests import req

TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
READ, WRITE, ALTER, DESCRIBE = 3, 4, 7, 8
DENY, ALLOW = 2, 3


def ctx(api_key: int, principal: str = "User:admin", version: int = 3) -> RequestContext:
    conn = SimpleNamespace(principal=principal, peer=("127.0.0.1", 5555))
    return RequestContext(api_key, version, 1, "test", conn)


def creation(rtype=TOPIC, name="t", pat=LITERAL, principal="User:alice", host="*", op=READ, perm=ALLOW):
    cls = nested(type(req(30, 3, creations=())), "AclCreation")
    return cls(resource_type=rtype, resource_name=name, resource_pattern_type=pat, principal=principal,
               host=host, operation=op, permission_type=perm)


def create(h, *cs, principal="User:admin"):
    return h.create_acls(ctx(30, principal), req(30, 3, creations=cs)).entity


def describe(h, rtype=ANY, name=None, pat=ANY, principal="User:admin", op=ANY, perm=ANY):
    return h.describe_acls(ctx(29, principal), req(
        29, 3, resource_type_filter=rtype, resource_name_filter=name, pattern_type_filter=pat,
        principal_filter=None, host_filter=None, operation=op, permission_type=perm)).entity


def delete(h, *filters, principal="User:admin"):
    F = nested(type(req(31, 3, filters=())), "DeleteAclsFilter")
    fs = tuple(F(resource_type_filter=rt, resource_name_filter=n, pattern_type_filter=pt,
                 principal_filter=None, host_filter=None, operation=op, permission_type=perm)
               for rt, n, pt, op, perm in filters)
    return h.delete_acls(ctx(31, principal), req(31, 3, filters=fs)).entity


@pytest.fixture
def handlers(tmp_path):
    return AclHandlers(authorizer=Authorizer(tmp_path, super_users="User:admin"))


def test_security_disabled_without_authorizer():
    h = AclHandlers(authorizer=None)
    assert [r.error_code for r in create(h, creation(), creation()).results] == \
        [ErrorCode.security_disabled] * 2
    assert describe(h).error_code == ErrorCode.security_disabled
    assert [r.error_code for r in delete(h, (ANY, None, ANY, ANY, ANY)).filter_results] == \
        [ErrorCode.security_disabled]


def test_create_describe_delete(handlers):
    r = create(handlers, creation(), creation(name="o", pat=PREFIXED, op=WRITE),
               creation(rtype=CLUSTER, name="c"), creation(name=""))
    assert [x.error_code for x in r.results] == [ErrorCode.none, ErrorCode.none,
                                                 ErrorCode.invalid_request, ErrorCode.invalid_request]
    d = describe(handlers)
    assert d.error_code == ErrorCode.none
    assert [(x.resource_name, x.pattern_type, [(a.principal, a.operation) for a in x.acls])
            for x in d.resources] == [("t", LITERAL, [("User:alice", READ)]),
                                     ("o", PREFIXED, [("User:alice", WRITE)])]
    assert [x.resource_name for x in describe(handlers, TOPIC, "orders", MATCH).resources] == ["o"]
    res = delete(handlers, (TOPIC, "t", LITERAL, ANY, ANY), (ANY, None, ANY, WRITE, ALLOW))
    assert [[m.resource_name for m in f.matching_acls] for f in res.filter_results] == [["t"], ["o"]]
    assert describe(handlers).resources == ()


def test_any_or_match_in_a_creation_fails_the_whole_request(handlers):
    r = create(handlers, creation(), creation(pat=MATCH))
    assert [x.error_code for x in r.results] == [ErrorCode.unknown_server_error] * 2
    assert describe(handlers).resources == ()


def test_code_zero_closes_the_connection_other_unknown_codes_are_answered(handlers):
    with pytest.raises(Disconnect):
        create(handlers, creation(op=0))
    with pytest.raises(Disconnect):
        describe(handlers, op=0)
    with pytest.raises(Disconnect):
        delete(handlers, (0, None, ANY, ANY, ANY))
    r = create(handlers, creation(op=99), creation())
    assert [(x.error_code, x.error_message) for x in r.results] == [
        (ErrorCode.invalid_request, "Invalid operation UNKNOWN"), (ErrorCode.none, None)]
    assert describe(handlers, op=99).resources == ()
    res = delete(handlers, (99, None, ANY, ANY, ANY), (ANY, None, ANY, ANY, ANY))
    assert [(f.error_code, len(f.matching_acls)) for f in res.filter_results] == [
        (ErrorCode.invalid_request, 0), (ErrorCode.none, 1)]


def test_acl_apis_need_cluster_permissions(handlers):
    alice = "User:alice"
    assert [x.error_code for x in create(handlers, creation(), principal=alice).results] == \
        [ErrorCode.cluster_authorization_failed]
    assert describe(handlers, principal=alice).error_code == ErrorCode.cluster_authorization_failed
    create(handlers, creation(rtype=CLUSTER, name="kafka-cluster", op=DESCRIBE, principal=alice))
    assert describe(handlers, principal=alice).error_code == ErrorCode.none
    assert [f.error_code for f in delete(handlers, (ANY, None, ANY, ANY, ANY), principal=alice)
            .filter_results] == [ErrorCode.cluster_authorization_failed]
    # ALTER on the cluster implies DESCRIBE; it lets alice change ACLs
    create(handlers, creation(rtype=CLUSTER, name="kafka-cluster", op=ALTER, principal=alice))
    assert [x.error_code for x in create(handlers, creation(), principal=alice).results] == [ErrorCode.none]
