"""Delegation tokens without I/O (minibroker/security/tokens.py): DelegationTokenControlManager's
rules for create, renew, expire and the sweep, the HMAC as Kafka makes it, the file kept across a
restart, and a SCRAM login with ``tokenauth=true`` through the connection's Authenticator."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from minibroker.core.clock import ManualClock
from minibroker.security.sasl.authenticator import Authenticator
from minibroker.security.sasl.common import AuthenticationFailed
from minibroker.security.sasl.credentials import Credentials
from minibroker.security.tokens import FILE_NAME, DelegationTokens
from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.errors import ErrorCode

ALICE, BOB, CAROL = ("User", "alice"), ("User", "bob"), ("User", "carol")
DAY = 86_400_000


def _tokens(tmp_path=None, key="secret"):
    clock = ManualClock()
    return DelegationTokens(key, clock.wall_ms, data_dir=tmp_path), clock


def test_create_follows_kafkas_lifetimes_and_hmac():
    t, clock = _tokens()
    now = clock.wall_ms()
    out = t.create(ALICE, ALICE, [BOB], -1)
    tok = out.token
    assert out.error == ErrorCode.none and (tok.issue_ms, tok.expiry_ms, tok.max_ms) == (now, now + DAY, now + 7 * DAY)
    # DelegationTokenManager.createHmac: HmacSHA512 of the token id under the secret key
    assert tok.hmac == hmac.new(b"secret", tok.token_id.encode(), hashlib.sha512).digest()
    assert len(tok.token_id) == 22 and not tok.token_id.startswith("-")
    short = t.create(ALICE, ALICE, [], 3_600_000).token  # max lifetime below the expiry time
    assert short.max_ms == short.expiry_ms == now + 3_600_000
    assert t.create(ALICE, ALICE, [("Group", "g")], -1).error == ErrorCode.invalid_principal_type


def test_renew_and_expire_rules():
    t, clock = _tokens()
    tok = t.create(ALICE, ALICE, [BOB], -1).token
    assert t.renew(CAROL, tok.hmac, -1).error == ErrorCode.delegation_token_owner_mismatch
    assert t.renew(ALICE, b"nope", -1).error == ErrorCode.delegation_token_not_found
    clock.advance(1000)
    out = t.renew(BOB, tok.hmac, 60_000)
    assert out.error == ErrorCode.none and out.expiry_ms == clock.wall_ms() + 60_000
    assert t.renew(ALICE, tok.hmac, 30 * DAY).expiry_ms == clock.wall_ms() + DAY  # capped by the default
    assert t.expire(CAROL, tok.hmac, 0).error == ErrorCode.delegation_token_owner_mismatch
    assert t.expire(ALICE, tok.hmac, 10).expiry_ms == clock.wall_ms() + 10
    clock.advance(11)
    # past its expiry, not swept yet: EXPIRED for renew and for a non-negative expire
    assert t.renew(ALICE, tok.hmac, -1).error == ErrorCode.delegation_token_expired
    assert t.expire(ALICE, tok.hmac, 5).error == ErrorCode.delegation_token_expired
    assert [x.token_id for x in t.all()] == [tok.token_id]
    assert t.sweep() == 1 and t.all() == []
    assert t.renew(ALICE, tok.hmac, -1).error == ErrorCode.delegation_token_not_found
    other = t.create(ALICE, ALICE, [], -1).token
    out = t.expire(ALICE, other.hmac, -1)  # negative: removed at once
    assert out.error == ErrorCode.none and out.expiry_ms == clock.wall_ms() and t.all() == []


def test_max_lifetime_bounds_renewals_and_the_sweep():
    t, clock = _tokens()
    tok = t.create(ALICE, ALICE, [], 2 * DAY).token
    clock.advance(DAY + 1)
    assert t.renew(ALICE, tok.hmac, -1).error == ErrorCode.delegation_token_expired
    t2 = t.create(ALICE, ALICE, [], 2 * DAY).token
    clock.advance(DAY - 5)
    assert t.renew(ALICE, t2.hmac, -1).expiry_ms == t2.max_ms - 5
    clock.advance(10)
    assert t.renew(ALICE, t2.hmac, -1).expiry_ms == t2.max_ms  # no further than its max
    assert t.sweep() == 1  # the first one
    clock.advance(DAY)
    assert t.sweep() == 1 and t.all() == []


def test_disabled_without_a_key():
    t, _ = _tokens(key=None)
    assert not t.enabled
    assert t.create(ALICE, ALICE, [], -1).error == ErrorCode.delegation_token_auth_disabled
    assert t.renew(ALICE, b"x", -1).error == ErrorCode.delegation_token_auth_disabled
    assert t.expire(ALICE, b"x", -1).error == ErrorCode.delegation_token_auth_disabled


def test_kept_across_a_restart_without_their_hmacs(tmp_path):
    t, clock = _tokens(tmp_path)
    tok = t.create(("User", "alice"), BOB, [CAROL], -1).token
    text = (tmp_path / FILE_NAME).read_text()
    assert base64.b64encode(tok.hmac).decode() not in text and tok.hmac.hex() not in text
    assert json.loads(text)[0]["token_id"] == tok.token_id
    again = DelegationTokens("secret", clock.wall_ms, data_dir=tmp_path)
    assert again.all() == [tok] and again.by_hmac(tok.hmac) == tok
    # another secret key: the same tokens, other HMACs (the old ones no longer match)
    rekeyed = DelegationTokens("other", clock.wall_ms, data_dir=tmp_path)
    assert rekeyed.by_hmac(tok.hmac) is None and len(rekeyed.all()) == 1
    (tmp_path / FILE_NAME).write_text("{broken")
    assert DelegationTokens("secret", clock.wall_ms, data_dir=tmp_path).all() == []


def _token_login(a: Authenticator, user: str, password: str, mechanism="SCRAM-SHA-256") -> int:
    digest = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    assert a.admit(ApiKey.SaslHandshake) is False
    a.handshake(mechanism)
    first_bare = f"n={user},r=clientnonce,tokenauth=true"
    server_first, _ = a.authenticate(f"n,,{first_bare}".encode())
    attrs = dict(p.split("=", 1) for p in server_first.decode().split(","))
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    without_proof = f"c={base64.b64encode(b'n,,').decode()},r={attrs['r']}"
    auth_message = f"{first_bare},{server_first.decode()},{without_proof}".encode()
    signature = hmac.new(hashlib.new(digest, client_key).digest(), auth_message, digest).digest()
    proof = bytes(x ^ y for x, y in zip(client_key, signature))
    _, lifetime = a.authenticate(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    return lifetime


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_token_logs_in_as_its_owner_until_it_expires(mechanism):
    t, clock = _tokens()
    tok = t.create(("User", "alice"), ("User", "admin"), [], -1).token
    a = Authenticator(("PLAIN", mechanism), Credentials({}), clock.wall_ms, tokens=t)
    lifetime = _token_login(a, tok.token_id, base64.b64encode(tok.hmac).decode(), mechanism)
    assert a.principal == "User:alice" and a.token_authenticated
    assert lifetime == DAY and a.session_ends_ms == clock.wall_ms() + DAY
    clock.advance(DAY)
    with pytest.raises(AuthenticationFailed):
        a.admit(ApiKey.Metadata)  # the session ended with the token


def test_token_logins_refused():
    t, clock = _tokens()
    tok = t.create(ALICE, ALICE, [], -1).token
    for user, password in ((tok.token_id, "wrong"), ("unknown", base64.b64encode(tok.hmac).decode())):
        a = Authenticator(("SCRAM-SHA-256",), Credentials({}), clock.wall_ms, tokens=t)
        with pytest.raises(AuthenticationFailed) as e:
            _token_login(a, user, password)
        assert e.value.message == ("Authentication failed during authentication due to invalid credentials "
                                   "with SASL mechanism SCRAM-SHA-256")
    # no tokens on this broker (no secret key): a token login is an unknown token
    off = DelegationTokens(None, clock.wall_ms)
    a = Authenticator(("SCRAM-SHA-256",), Credentials({}), clock.wall_ms, tokens=off)
    with pytest.raises(AuthenticationFailed):
        _token_login(a, tok.token_id, base64.b64encode(tok.hmac).decode())
    # an expired token not swept yet logs in, with a session that is already over (as in Kafka)
    t.expire(ALICE, tok.hmac, 0)
    clock.advance(1)
    a = Authenticator(("SCRAM-SHA-256",), Credentials({}), clock.wall_ms, tokens=t)
    assert _token_login(a, tok.token_id, base64.b64encode(tok.hmac).decode()) == 0
    assert a.expired()
