"""The SASL exchange against Kafka 4.4: the same raw requests on each broker's SASL_PLAINTEXT
listener (PLAIN, the users of tests/reference/settings.py) and on its PLAINTEXT listener, the
answers compared field by field, and where Kafka closes the connection, that minibroker does too.

* a mechanism the listener does not offer (UNSUPPORTED_SASL_MECHANISM and the list offered);
* a wrong password, an unknown user, a token that is not PLAIN's three fields (the texts Kafka's
  PlainSaslServer and SaslServerAuthenticator give);
* a request before the handshake (closed, no answer), one during the exchange (its error
  answer, then closed);
* a successful login (no session end), and SaslHandshake/SaslAuthenticate again after it;
* both SASL APIs on the PLAINTEXT listener (ILLEGAL_SASL_STATE).
"""

from __future__ import annotations

import datetime

import pytest

from tests.reference.client import Connection, ConnectionClosed, req

from .pair import Pair

SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS, METADATA, INIT_PRODUCER_ID = 17, 36, 18, 3, 22


@pytest.fixture
def pair(differential_pair):
    p: Pair = differential_pair
    if p.sasl is None:
        pytest.skip("the pair has no SASL_PLAINTEXT listeners")
    return p


def _closed(c: Connection) -> bool:
    sock = c._connect()
    sock.settimeout(1.5)  # Kafka closes at once after a failure; an open one is just waited on
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, TimeoutError):
        return False


def _exchange(address: tuple[str, int], steps) -> list:
    """Each step's answer in order (as comparable tuples), then whether the broker closed."""
    out: list = []
    c = Connection(*address, timeout=10)
    try:
        for step in steps:
            try:
                a = c.call(step)
            except ConnectionClosed:
                out.append("closed without an answer")
                return out
            out.append(_comparable(a))
        out.append("closed" if _closed(c) else "open")
        return out
    finally:
        c.close()


def _comparable(a) -> tuple:
    if hasattr(a, "api_keys"):  # ApiVersions: its table is compared elsewhere
        return (("error_code", a.error_code),)
    fields = []
    for name in ("error_code", "error_message", "mechanisms", "auth_bytes", "session_lifetime"):
        if hasattr(a, name):
            v = getattr(a, name)
            fields.append((name, tuple(v) if isinstance(v, tuple) else v))
    return tuple(fields)


def _both(pair: Pair, steps, plaintext: bool = False) -> None:
    addresses = [pair.kafka.conn.address, pair.mini.conn.address] if plaintext else list(pair.sasl)
    kafka, mini = (_exchange(addr, steps) for addr in addresses)
    assert mini == kafka, f"\nkafka:      {kafka}\nminibroker: {mini}"


def _plain(token: bytes):
    return req(SASL_AUTHENTICATE, 2, auth_bytes=token)


HANDSHAKE = req(SASL_HANDSHAKE, 1, mechanism="PLAIN")
VERSIONS = req(API_VERSIONS, 3, client_software_name="differential", client_software_version="1")


def test_refused_logins(pair):
    _both(pair, [req(SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-256")])  # not offered there
    _both(pair, [VERSIONS, req(SASL_HANDSHAKE, 1, mechanism="GSSAPI")])
    _both(pair, [HANDSHAKE, _plain(b"\0alice\0wrong")])
    _both(pair, [HANDSHAKE, _plain(b"\0mallory\0alice-secret")])
    _both(pair, [HANDSHAKE, _plain(b"alice-secret")])
    _both(pair, [HANDSHAKE, _plain(b"\0\0alice-secret")])
    _both(pair, [HANDSHAKE, _plain(b"bob\0alice\0alice-secret")])


def test_requests_out_of_turn(pair):
    metadata = req(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                   include_topic_authorized_operations=False)
    _both(pair, [metadata])
    init = req(INIT_PRODUCER_ID, 4, transactional_id=None,
               transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1, producer_epoch=-1)
    _both(pair, [HANDSHAKE, init])


def test_a_login_and_the_sasl_apis_after_it(pair):
    _both(pair, [HANDSHAKE, _plain(b"\0alice\0alice-secret"), HANDSHAKE,
                 _plain(b"\0alice\0alice-secret")])


def test_the_sasl_apis_on_a_plaintext_listener(pair):
    _both(pair, [HANDSHAKE, _plain(b"\0alice\0alice-secret")], plaintext=True)
