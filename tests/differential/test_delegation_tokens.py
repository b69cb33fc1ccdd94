"""Delegation tokens against Kafka 4.4: the same raw requests on each broker, the answers
compared after the values only a broker can choose (token ids, HMACs, clock readings) are
replaced by what they must be (an id of Kafka's Uuid form, a 64-byte HMAC, times relative to
the token's issue).

A Kafka of this module's own (KRaft, one node) and a minibroker, both with
``delegation.token.secret.key``, a SASL_PLAINTEXT listener offering PLAIN and both SCRAMs
(PLAIN users of tests/reference/settings.py), the StandardAuthorizer with User:ANONYMOUS and
User:admin as super users:

* every version of each API over PLAINTEXT (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1 timestamps);
* create with renewers, a shorter max lifetime, a non-User renewer, another owner without and with
  CreateTokens; describe by owner, renewer and stranger, with an owners filter, with an ACL;
* renew and expire by owner, renewer and stranger, an unknown HMAC, an expired token, removal;
* logging in with the token (SCRAM-SHA-256/512 + tokenauth=true): the session lifetime, the token
  APIs refused on it, a wrong HMAC and an unknown token id;
* and, on the session's shared pair without a secret key, DELEGATION_TOKEN_AUTH_DISABLED.
"""

from __future__ import annotations

import base64
import datetime
import os
import struct
import tempfile
import time
from pathlib import Path

import pytest

from minibroker.testing.broker import MiniBroker
from tests.integration.scram_login import plain_login, scram_login
from tests.reference import settings
from tests.reference.client import Connection, ConnectionClosed, part, req
from tests.reference.kafka import KafkaReference, KafkaUnavailable, free_port

CREATE, RENEW, EXPIRE, DESCRIBE, CREATE_ACLS, METADATA = 38, 39, 40, 41, 30, 3
SECRET = "differential-token-secret"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"


@pytest.fixture(scope="module")
def token_brokers():
    """(Kafka's, minibroker's) (PLAINTEXT, SASL_PLAINTEXT) addresses."""
    props = {
        "delegation.token.secret.key": SECRET,
        "sasl.enabled.mechanisms": MECHANISMS,
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": MECHANISMS,
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "authorizer.class.name": settings.KAFKA_AUTHORIZER,
        "super.users": settings.SUPER_USERS,
    }
    kafka = KafkaReference(props, sasl_users=settings.SASL_USERS)
    try:
        kafka.java()
    except KafkaUnavailable as e:
        if os.environ.get("MINIBROKER_TEST_REQUIRE_TOOLS"):
            pytest.fail(str(e))
        pytest.skip(str(e))
    users = Path(tempfile.mkdtemp(prefix="differential-tokens-")) / "users"
    users.write_text("".join(f"{u}:{pw}\n" for u, pw in settings.SASL_USERS.items()))
    listeners = f"PLAINTEXT://127.0.0.1:{free_port()},SASL_PLAINTEXT://127.0.0.1:{free_port()}"
    with kafka, MiniBroker(name="differential-tokens", listeners=listeners, sasl_users=users,
                           sasl_mechanisms=MECHANISMS, authorizer="standard",
                           super_users=settings.SUPER_USERS,
                           delegation_token_secret_key=SECRET) as mb:
        k = (("127.0.0.1", kafka.port), ("127.0.0.1", kafka.sasl_port))
        m = tuple((h, int(p)) for h, p in (a.rsplit(":", 1) for a in mb.addresses))
        yield k, m


# -- requests ----------------------------------------------------------------------------------
def create(renewers=(), max_lifetime_ms=-1, owner=None, version=3):
    return req(CREATE, version, owner_principal_type="User" if owner else None, owner_principal_name=owner,
               renewers=tuple(part((CREATE, version), "CreatableRenewers", principal_type=t, principal_name=n)
                              for t, n in renewers),
               max_lifetime=datetime.timedelta(milliseconds=max_lifetime_ms))


def describe(owners=None, version=3):
    return req(DESCRIBE, version, owners=None if owners is None else tuple(
        part((DESCRIBE, version), "DescribeDelegationTokenOwner", principal_type="User", principal_name=o)
        for o in owners))


def renew(hmac, period_ms=-1, version=2):
    return req(RENEW, version, hmac=hmac, renew_period=datetime.timedelta(milliseconds=period_ms))


def expire(hmac, period_ms=-1, version=2):
    return req(EXPIRE, version, hmac=hmac, expiry_time_period=datetime.timedelta(milliseconds=period_ms))


# -- normalising -------------------------------------------------------------------------------
class Tokens:
    """One broker's tokens by the name a test gave them; answers told in those names."""

    def __init__(self) -> None:
        self.made: dict[str, object] = {}  # name -> the CreateDelegationToken answer

    def name_of(self, token_id: str) -> str:
        for name, a in self.made.items():
            if a.token_id == token_id:
                return name
        return f"unknown token {token_id}"

    def hmac(self, name: str) -> bytes:
        return self.made[name].hmac


def _created(a) -> tuple:
    issue = a.issue_timestamp
    ok = a.error_code == 0
    return (("error", a.error_code), ("owner", a.principal_type, a.principal_name),
            ("requester", getattr(a, "token_requester_principal_type", None),
             getattr(a, "token_requester_principal_name", None)),
            ("issue", "set" if ok and issue > 0 else issue),
            ("expiry-issue", a.expiry_timestamp - issue if ok else a.expiry_timestamp),
            ("max-issue", a.max_timestamp - issue if ok else a.max_timestamp),
            ("token id", len(a.token_id)), ("hmac", len(a.hmac)))


def _described(a, tokens: Tokens) -> tuple:
    out = []
    for t in a.tokens:
        name = tokens.name_of(t.token_id)
        made = tokens.made.get(name)
        out.append((name, t.principal_type, t.principal_name,
                    getattr(t, "token_requester_principal_name", None),
                    t.issue_timestamp == getattr(made, "issue_timestamp", None),
                    t.max_timestamp - t.issue_timestamp, t.hmac == getattr(made, "hmac", None),
                    tuple((r.principal_type, r.principal_name) for r in t.renewers)))
    return (("error", a.error_code), ("tokens", tuple(sorted(out))))


def _expiry(a, window: tuple[int, int] | None = None) -> tuple:
    """A renewal's or expiry's answer. With ``window``, the wall clock just before and after the
    request: the broker's "now" lies in it, so the period the broker applied (a whole number of
    seconds in these tests) is the multiple of 1000 ms in [expiry - after, expiry - before]; on a
    loaded machine a rounding of "expiry - now" would not be stable."""
    e = a.expiry_timestamp
    if a.error_code or window is None:
        return (("error", a.error_code), ("expiry", e))
    before, after = window
    period = -(-(e - after) // 1000) * 1000
    if period > e - before:
        return (("error", a.error_code), ("period between, ms", e - after, e - before))
    return (("error", a.error_code), ("period, s", period // 1000))


def _timed(call):
    """(answer, (wall ms before, wall ms after))."""
    before = _now_ms()
    a = call()
    return a, (before, _now_ms())


def _settle(c: Connection, tokens: Tokens, name: str, done) -> None:
    """Wait (bounded) until Describe shows ``done(token or None)``: Kafka's controller writes a
    change to its metadata log and the broker's token cache, which Describe, Renew, Expire and
    the SCRAM login read, follows it a moment later; minibroker's is there at once."""
    deadline = time.monotonic() + 15
    while True:
        found = {tokens.name_of(t.token_id): t for t in c.call(describe()).tokens}
        if done(found.get(name)) or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def _now_ms() -> int:
    return int(datetime.datetime.now(datetime.UTC).timestamp() * 1000)


def _conn(address) -> Connection:
    return Connection(*address, timeout=15)


def _login(address, user: str) -> Connection:
    c = _conn(address)
    a = plain_login(c, user, settings.SASL_USERS[user])
    assert a.error_code == 0, a
    return c


def _both(token_brokers, scenario):
    kafka, mini = token_brokers
    k, m = scenario(*kafka), scenario(*mini)
    assert m == k, f"\nkafka:      {k}\nminibroker: {m}"
    if os.environ.get("MINIBROKER_DIFFERENTIAL_TRACE"):  # what was compared (pair.py's switch)
        print(*k, sep="\n")
    return k


# -- the tests ---------------------------------------------------------------------------------
def test_every_version_is_refused_over_plaintext(token_brokers):
    def scenario(plain, _sasl):
        out = []
        with _conn(plain) as c:
            for v in (1, 2, 3):
                out.append(("create", v, _created(c.call(create(version=v)))))
                out.append(("describe", v, _described(c.call(describe(version=v)), Tokens())))
            for v in (1, 2):
                out.append(("renew", v, _expiry(c.call(renew(b"x", version=v)))))
                out.append(("expire", v, _expiry(c.call(expire(b"x", version=v)))))
        return out
    _both(token_brokers, scenario)


def test_create_describe_renew_expire(token_brokers):
    def scenario(_plain, sasl):
        tokens, out = Tokens(), []
        with _login(sasl, "alice") as alice:
            for v in (1, 2, 3):
                a = alice.call(create(renewers=[("User", "bob")], version=v))
                tokens.made[f"v{v}"] = a
                out.append(("create", v, _created(a)))
            a = alice.call(create(max_lifetime_ms=3 * 86_400_000))
            tokens.made["short-max"] = a
            out.append(("create short max", _created(a)))
            for name in tokens.made:
                _settle(alice, tokens, name, lambda t: t is not None)
            out.append(("create group renewer", _created(alice.call(create(renewers=[("Group", "g")])))))
            out.append(("create for bob", _created(alice.call(create(owner="bob")))))
            for v in (1, 2, 3):
                out.append(("describe", v, _described(alice.call(describe(version=v)), tokens)))
            for owners in ([], ["bob"], ["carol"], ["alice", "carol"]):
                out.append(("describe owners", owners, _described(alice.call(describe(owners)), tokens)))
            for period in (60_000, 10 * 86_400_000, -1, 0):
                a, window = _timed(lambda period=period: alice.call(renew(tokens.hmac("v3"), period)))
                out.append(("renew", period, _expiry(a, window)))
                _settle(alice, tokens, "v3", lambda t, e=a.expiry_timestamp: t.expiry_timestamp == e)
            out.append(("renew unknown", _expiry(alice.call(renew(b"\0" * 64)))))
            out.append(("expire unknown", _expiry(alice.call(expire(b"\0" * 64)))))
        with _login(sasl, "admin") as admin:
            out.append(("admin renew", _expiry(admin.call(renew(tokens.hmac("v3"))))))
            out.append(("admin expire", _expiry(admin.call(expire(tokens.hmac("v3"))))))
            a = admin.call(create(owner="bob"))
            tokens.made["bobs"] = a
            out.append(("admin creates for bob", _created(a)))
            _settle(admin, tokens, "bobs", lambda t: t is not None)
            out.append(("admin describes", _described(admin.call(describe()), tokens)))
        with _login(sasl, "bob") as bob:
            out.append(("bob describes", _described(bob.call(describe()), tokens)))
            a, window = _timed(lambda: bob.call(renew(tokens.hmac("v2"), 120_000)))
            out.append(("bob renews", _expiry(a, window)))
            _settle(bob, tokens, "v2", lambda t, e=a.expiry_timestamp: t.expiry_timestamp == e)
            a, window = _timed(lambda: bob.call(expire(tokens.hmac("v1"), 0)))
            out.append(("bob expires in 0", _expiry(a, window)))
            _settle(bob, tokens, "v1", lambda t, e=a.expiry_timestamp: t.expiry_timestamp == e)
        with _login(sasl, "alice") as alice:
            # past its expiry, not swept yet (the sweep runs hourly): still listed, EXPIRED
            time.sleep(0.05)
            out.append(("renew expired", _expiry(alice.call(renew(tokens.hmac("v1"))))))
            out.append(("expire expired", _expiry(alice.call(expire(tokens.hmac("v1"), 1000)))))
            out.append(("expire now", _expiry(alice.call(expire(tokens.hmac("v1"))))[0]))
            _settle(alice, tokens, "v1", lambda t: t is None)
            out.append(("renew removed", _expiry(alice.call(renew(tokens.hmac("v1"))))))
            out.append(("describe after", _described(alice.call(describe(["alice"])), tokens)))
        # an ACL lets bob describe alice's tokens
        with _conn(_plain) as c:
            acl = part((CREATE_ACLS, 3), "AclCreation", resource_type=7, resource_name="User:alice",
                       resource_pattern_type=3, principal="User:bob", host="*", operation=14,
                       permission_type=3)
            assert c.call(req(CREATE_ACLS, 3, creations=(acl,))).results[0].error_code == 0
        with _login(sasl, "bob") as bob:
            # Kafka applies the ACL through its metadata log: wait (bounded) until alice's show
            _settle(bob, tokens, "short-max", lambda t: t is not None)
            out.append(("bob describes with DescribeTokens", _described(bob.call(describe()), tokens)))
        # the tokens go, so the next test starts without them
        with _login(sasl, "admin") as admin:
            for name in ("bobs",):
                admin.call(expire(tokens.hmac(name)))
        with _login(sasl, "alice") as alice:
            for name in ("v2", "v3", "short-max"):
                alice.call(expire(tokens.hmac(name)))
        return out
    _both(token_brokers, scenario)


def test_logging_in_with_a_token(token_brokers):
    def scenario(_plain, sasl):
        out = []
        with _login(sasl, "alice") as alice:
            made = alice.call(create())
            assert made.error_code == 0
            tokens = Tokens()
            tokens.made["t"] = made
            _settle(alice, tokens, "t", lambda t: t is not None)
        password = base64.b64encode(made.hmac).decode()
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            with _conn(sasl) as t:
                a = scram_login(t, made.token_id, password, mechanism, token=True)
                lifetime = a.session_lifetime / datetime.timedelta(milliseconds=1)
                out.append((mechanism, a.error_code, a.error_message,
                            "about a day" if 86_300_000 < lifetime <= 86_400_000 else lifetime))
                out.append(("create", _created(t.call(create()))))
                out.append(("describe", t.call(describe()).error_code))
                out.append(("renew", _expiry(t.call(renew(made.hmac)))))
                out.append(("expire", _expiry(t.call(expire(made.hmac)))))
                md = t.call(req(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                                include_topic_authorized_operations=False))
                out.append(("metadata answered", bool(md.brokers)))
        # the token is not a user: without tokenauth it does not log in
        for user, pw, token in ((made.token_id, password, False), (made.token_id, "wrong", True),
                                ("no-such-token", password, True)):
            with _conn(sasl) as t:
                try:
                    a = scram_login(t, user, pw, token=token)
                    out.append((user == made.token_id, pw == password, token, a.error_code, a.error_message))
                except ConnectionClosed:
                    out.append((user == made.token_id, pw == password, token, "closed"))
        # past its expiry, not swept yet: the login succeeds with a session already over, and
        # the next request closes the connection (SaslServerAuthenticator, KafkaChannel)
        with _login(sasl, "alice") as alice:
            assert alice.call(expire(made.hmac, 0)).error_code == 0
            _settle(alice, tokens, "t", lambda t: t.expiry_timestamp < made.expiry_timestamp)
        time.sleep(0.05)
        with _conn(sasl) as t:
            a = scram_login(t, made.token_id, password, token=True)
            out.append(("expired token", a.error_code, a.session_lifetime))
            try:
                t.call(req(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False))
                out.append("answered")
            except ConnectionClosed:
                out.append("closed")
        with _login(sasl, "alice") as alice:
            alice.call(expire(made.hmac))
        return out
    _both(token_brokers, scenario)


def _raw(c: Connection, key: int, version: int, body: bytes, template):
    """A request whose int64 kio cannot write (Long.MAX_VALUE as a period): the frame by hand
    (request header v1, or v2 for flexible versions), the answer decoded as ``template``'s."""
    c._connect()
    c._corr += 1
    header = struct.pack(">hhih", key, version, c._corr, len(c.client_id)) + c.client_id.encode()
    frame = header + (b"\0" if version >= 2 else b"") + body
    c._sock.sendall(struct.pack(">i", len(frame)) + frame)
    return c._read_answer(template, c._corr)


def test_periods_of_any_long(token_brokers):
    """Long.MAX_VALUE and Long.MIN_VALUE as lifetime and periods: Kafka saturates its sums."""
    big, small = struct.pack(">q", 2**63 - 1), struct.pack(">q", -(2**63))

    def scenario(_plain, sasl):
        out = []
        with _login(sasl, "alice") as alice:
            made = _raw(alice, CREATE, 2, b"\x01" + big + b"\0", create(version=2))
            out.append(("create, max lifetime Long.MAX", _created(made)))
            tokens = Tokens()
            tokens.made["t"] = made
            _settle(alice, tokens, "t", lambda t: t is not None)
            hmac = bytes([len(made.hmac) + 1]) + made.hmac
            a, window = _timed(lambda: _raw(alice, RENEW, 2, hmac + big + b"\0", renew(b"", version=2)))
            out.append(("renew Long.MAX", _expiry(a, window)))
            _settle(alice, tokens, "t", lambda t, e=a.expiry_timestamp: t.expiry_timestamp == e)
            a = _raw(alice, EXPIRE, 1, struct.pack(">i", len(made.hmac)) + made.hmac + big, expire(b"", version=1))
            out.append(("expire Long.MAX", a.error_code, a.expiry_timestamp == made.max_timestamp))
            _settle(alice, tokens, "t", lambda t, e=a.expiry_timestamp: t.expiry_timestamp == e)
            a, window = _timed(lambda: _raw(alice, EXPIRE, 2, hmac + small + b"\0", expire(b"", version=2)))
            out.append(("expire Long.MIN", _expiry(a, window)))
            _settle(alice, tokens, "t", lambda t: t is None)
            out.append(("described after", _described(alice.call(describe(["alice"])), tokens)))
        return out
    _both(token_brokers, scenario)


def test_without_a_secret_key_tokens_are_disabled(differential_pair):
    pair = differential_pair
    if pair.sasl is None:
        pytest.skip("the pair has no SASL_PLAINTEXT listeners")

    def scenario(sasl):
        with _login(sasl, "alice") as c:
            return [("create", _created(c.call(create()))), ("create for bob", _created(c.call(create(owner="bob")))),
                    ("describe", _described(c.call(describe()), Tokens())),
                    ("renew", _expiry(c.call(renew(b"x")))),
                    ("expire", _expiry(c.call(expire(b"x"))))]
    k, m = (scenario(a) for a in pair.sasl)
    assert m == k, f"\nkafka:      {k}\nminibroker: {m}"
