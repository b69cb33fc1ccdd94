"""Delegation tokens on minibroker over the wire: the four APIs on SASL and PLAINTEXT listeners,
a SCRAM login with a token (``tokenauth=true``) as its owner, the refusals a token session gets,
tokens kept across a restart, expiry by the broker's clock (``--clock virtual``), and the
CreateTokens ACL. Kafka 4.4's own answers to the same requests are compared in
tests/differential/test_delegation_tokens.py; real clients are in test_delegation_tokens_java.py."""

from __future__ import annotations

import base64
import datetime
import socket
import ssl
import subprocess
import sys

import pytest

from tests.integration.scram_login import plain_login, scram_login
from tests.integration.support import free_port
from tests.reference.client import Connection, part, req

CREATE, RENEW, EXPIRE, DESCRIBE, METADATA = 38, 39, 40, 41, 3
NOT_ALLOWED, DISABLED, NOT_FOUND, OWNER_MISMATCH, EXPIRED = 64, 61, 62, 63, 66
AUTHZ_FAILED, INVALID_PRINCIPAL_TYPE = 65, 67
SECRET = "token-test-secret"
DAY_MS = 86_400_000


def _ms(d) -> int:
    return round(d.timestamp() * 1000) if isinstance(d, datetime.datetime) else int(d)


def _conn(address: str) -> Connection:
    host, port = address.rsplit(":", 1)
    return Connection(host, int(port), timeout=10)


def _create(c, renewers=(), max_lifetime_ms=-1, owner=None, version=3):
    return c.call(req(CREATE, version, owner_principal_type="User" if owner else None,
                      owner_principal_name=owner,
                      renewers=tuple(part((CREATE, version), "CreatableRenewers", principal_type=t,
                                          principal_name=n) for t, n in renewers),
                      max_lifetime=datetime.timedelta(milliseconds=max_lifetime_ms)))


def _describe(c, owners=None, version=3):
    return c.call(req(DESCRIBE, version, owners=None if owners is None else tuple(
        part((DESCRIBE, version), "DescribeDelegationTokenOwner", principal_type="User", principal_name=o)
        for o in owners)))


def _renew(c, hmac, period_ms=-1):
    return c.call(req(RENEW, 2, hmac=hmac, renew_period=datetime.timedelta(milliseconds=period_ms)))


def _expire(c, hmac, period_ms=-1):
    return c.call(req(EXPIRE, 2, hmac=hmac, expiry_time_period=datetime.timedelta(milliseconds=period_ms)))


@pytest.fixture
def token_broker(broker_factory, tmp_path):
    users = tmp_path / "users"
    users.write_text("alice:alice-secret\nbob:bob-secret\nadmin:admin-secret\n")
    listeners = f"PLAINTEXT://127.0.0.1:{free_port()},SASL_PLAINTEXT://127.0.0.1:{free_port()}"
    return broker_factory(listeners=listeners, sasl_users=users, delegation_token_secret_key=SECRET,
                          control=True, clock="virtual")


def _alice(address):
    c = _conn(address)
    assert plain_login(c, "alice", "alice-secret").error_code == 0
    return c


def test_create_describe_renew_expire_and_log_in_with_the_token(token_broker):
    plain, sasl = token_broker.addresses
    with _alice(sasl) as c:
        made = _create(c, renewers=[("User", "bob")])
        assert made.error_code == 0 and (made.principal_type, made.principal_name) == ("User", "alice")
        assert made.token_requester_principal_name == "alice"
        issue, expiry, max_ts = _ms(made.issue_timestamp), _ms(made.expiry_timestamp), _ms(made.max_timestamp)
        assert expiry - issue == DAY_MS and max_ts - issue == 7 * DAY_MS
        assert len(made.token_id) == 22 and len(made.hmac) == 64  # Kafka's Uuid text, HmacSHA512
        d = _describe(c)
        assert d.error_code == 0 and [t.token_id for t in d.tokens] == [made.token_id]
        assert [(r.principal_type, r.principal_name) for r in d.tokens[0].renewers] == [("User", "bob")]
        assert d.tokens[0].hmac == made.hmac and d.tokens[0].expiry_timestamp == expiry
        assert _describe(c, owners=[]).tokens == ()
        assert [t.token_id for t in _describe(c, owners=["bob"]).tokens] == [made.token_id]  # a renewer
        assert _describe(c, owners=["carol"]).tokens == ()
        renewed = _renew(c, made.hmac, 60_000)
        assert renewed.error_code == 0 and _ms(renewed.expiry_timestamp) == issue + 60_000
        assert _renew(c, b"not a token").error_code == NOT_FOUND

    # the token logs in, as its owner; a token session may not manage tokens
    with _conn(sasl) as t:
        ok = scram_login(t, made.token_id, base64.b64encode(made.hmac).decode(), "SCRAM-SHA-512", token=True)
        assert ok.error_code == 0
        # the session ends with the token (SaslServerAuthenticator: the credential's lifetime)
        assert ok.session_lifetime == datetime.timedelta(milliseconds=60_000)
        assert _create(t).error_code == NOT_ALLOWED
        assert _describe(t).error_code == NOT_ALLOWED
        assert t.call(req(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                          include_topic_authorized_operations=False)).brokers
    # a wrong token password, an unknown token id: refused (the texts are compared with Kafka's
    # in tests/differential/test_delegation_tokens.py)
    with _conn(sasl) as t:
        assert scram_login(t, made.token_id, "wrong", token=True).error_code == 58
    with _conn(sasl) as t:
        bad = scram_login(t, "no-such-token", "x", token=True)
        assert bad.error_code == 58
        assert bad.error_message == ("Authentication failed during authentication due to invalid "
                                     "credentials with SASL mechanism SCRAM-SHA-256")

    with _conn(sasl) as c:
        assert plain_login(c, "bob", "bob-secret").error_code == 0
        assert _renew(c, made.hmac).error_code == 0  # a renewer may renew
        assert [t.token_id for t in _describe(c).tokens] == [made.token_id]
    with _conn(sasl) as c:
        assert plain_login(c, "admin", "admin-secret").error_code == 0
        assert _renew(c, made.hmac).error_code == OWNER_MISMATCH
        assert _expire(c, made.hmac).error_code == OWNER_MISMATCH
        # without an authorizer everyone may describe every token (Kafka's AuthHelper allows all)
        assert len(_describe(c).tokens) == 1

    # PLAINTEXT: every token API is refused
    with _conn(plain) as c:
        assert _create(c).error_code == NOT_ALLOWED
        assert _ms(_create(c).expiry_timestamp) == -1
        assert _renew(c, made.hmac).error_code == NOT_ALLOWED
        assert _expire(c, made.hmac).error_code == NOT_ALLOWED
        assert _describe(c).error_code == NOT_ALLOWED

    # kept across a restart: the same token, the same HMAC, still logs in
    token_broker.restart()
    with _alice(sasl) as c:
        d = _describe(c)
        assert [(t.token_id, t.hmac) for t in d.tokens] == [(made.token_id, made.hmac)]
        gone = _expire(c, made.hmac)  # a negative period removes it at once
        assert gone.error_code == 0
        assert _describe(c).tokens == ()
        assert _renew(c, made.hmac).error_code == NOT_FOUND
    token_broker.restart()
    with _alice(sasl) as c:
        assert _describe(c).tokens == ()


def test_expiry_follows_the_brokers_clock(token_broker):
    _, sasl = token_broker.addresses
    with _alice(sasl) as c:
        short = _create(c)
        assert _expire(c, short.hmac, 30_000).error_code == 0
        long = _create(c, max_lifetime_ms=3 * DAY_MS)
        assert _ms(long.max_timestamp) - _ms(long.issue_timestamp) == 3 * DAY_MS
    token_broker.control.advance("31s")  # the catch-up sweeps the expired token away
    with _alice(sasl) as c:
        assert [t.token_id for t in _describe(c).tokens] == [long.token_id]
        assert _renew(c, short.hmac).error_code == NOT_FOUND
        assert _renew(c, long.hmac, 10 * DAY_MS).error_code == 0   # capped by the default, 1 day
        assert _ms(_describe(c).tokens[0].expiry_timestamp) == _ms(long.issue_timestamp) + 31_000 + DAY_MS
    token_broker.control.advance(f"{3 * DAY_MS}ms")  # past its max lifetime
    with _alice(sasl) as c:
        assert _describe(c).tokens == ()


def test_without_a_secret_key_tokens_are_disabled(broker_factory, tmp_path):
    users = tmp_path / "users"
    users.write_text("alice:alice-secret\n")
    b = broker_factory(listeners=f"PLAINTEXT://127.0.0.1:{free_port()},SASL_PLAINTEXT://127.0.0.1:{free_port()}",
                       sasl_users=users)
    with _alice(b.addresses[1]) as c:
        made = _create(c)
        assert made.error_code == DISABLED and _ms(made.issue_timestamp) == 0 and made.token_id == ""
        assert _describe(c).error_code == DISABLED
        assert _renew(c, b"x").error_code == DISABLED
    with _conn(b.addresses[1]) as t:
        assert scram_login(t, "some-token", "x", token=True).error_code == 58


def test_owners_renewers_and_acls(broker_factory, tmp_path):
    users = tmp_path / "users"
    users.write_text("alice:alice-secret\nbob:bob-secret\nadmin:admin-secret\n")
    b = broker_factory(listeners=f"PLAINTEXT://127.0.0.1:{free_port()},SASL_PLAINTEXT://127.0.0.1:{free_port()}",
                       sasl_users=users, delegation_token_secret_key=SECRET, authorizer="standard",
                       super_users="User:admin;User:ANONYMOUS")
    plain, sasl = b.addresses
    with _alice(sasl) as c:
        assert _create(c, owner="bob").error_code == AUTHZ_FAILED
        assert _create(c, renewers=[("Group", "g")]).error_code == INVALID_PRINCIPAL_TYPE
        mine = _create(c)
        assert mine.error_code == 0
    with _conn(sasl) as c:
        assert plain_login(c, "admin", "admin-secret").error_code == 0
        for_bob = _create(c, owner="bob")  # a super user may create for anyone
        assert (for_bob.error_code, for_bob.principal_name, for_bob.token_requester_principal_name) == (
            0, "bob", "admin")
        assert len(_describe(c).tokens) == 2
    with _conn(sasl) as c:
        assert plain_login(c, "bob", "bob-secret").error_code == 0
        # bob sees his own token, not alice's, until an ACL lets him describe hers
        assert [t.token_id for t in _describe(c).tokens] == [for_bob.token_id]
    def allow_bob(resource_type: int, name: str, operation: int) -> None:
        acl = part((30, 3), "AclCreation", resource_type=resource_type, resource_name=name,
                   resource_pattern_type=3, principal="User:bob", host="*", operation=operation,
                   permission_type=3)
        with _conn(plain) as c:
            assert c.call(req(30, 3, creations=(acl,))).results[0].error_code == 0

    allow_bob(6, mine.token_id, 8)  # DESCRIBE on that one DelegationToken
    with _alice(sasl) as c:
        another = _create(c)
    with _conn(sasl) as c:
        assert plain_login(c, "bob", "bob-secret").error_code == 0
        assert sorted(t.token_id for t in _describe(c).tokens) == sorted([for_bob.token_id, mine.token_id])
    allow_bob(7, "User:alice", 14)  # DESCRIBE_TOKENS on alice: all of hers
    with _conn(sasl) as c:
        assert plain_login(c, "bob", "bob-secret").error_code == 0
        assert sorted(t.token_id for t in _describe(c).tokens) == sorted(
            [for_bob.token_id, mine.token_id, another.token_id])


class _TlsConnection(Connection):
    def __init__(self, address: str, context) -> None:
        host, port = address.rsplit(":", 1)
        super().__init__(host, int(port), timeout=10)
        self.context = context

    def _connect(self):
        if self._sock is None:
            raw = socket.create_connection(self.address, timeout=self.timeout)
            self._sock = self.context.wrap_socket(raw, server_hostname="localhost")
        return self._sock


def test_ssl_with_a_client_certificate_may_manage_tokens_and_without_one_not(broker_factory, tmp_path):
    """KafkaApis.allowTokenRequests: an SSL principal from a client certificate may, SSL's
    User:ANONYMOUS (no certificate sent) may not."""
    certs = tmp_path / "certs"
    subprocess.run([sys.executable, "-m", "minibroker", "certs", str(certs)], check=True, capture_output=True,
                   timeout=60)
    b = broker_factory(listeners=f"SSL://127.0.0.1:{free_port()},PLAINTEXT://127.0.0.1:{free_port()}",
                       ssl_certfile=certs / "broker.crt", ssl_keyfile=certs / "broker.key",
                       ssl_cafile=certs / "ca.crt", ssl_client_auth="requested",
                       delegation_token_secret_key=SECRET)
    tls = b.addresses[0]
    with_cert = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    with_cert.load_cert_chain(str(certs / "client.crt"), str(certs / "client.key"))
    with _TlsConnection(tls, with_cert) as c:
        made = _create(c)
        assert made.error_code == 0 and made.principal_type == "User" and made.principal_name.startswith("CN=")
        assert [t.token_id for t in _describe(c).tokens] == [made.token_id]
    without = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    with _TlsConnection(tls, without) as c:
        assert _create(c).error_code == NOT_ALLOWED
        assert _describe(c).error_code == NOT_ALLOWED
