"""SCRAM's server side against RFC 7677's SCRAM-SHA-256 example, and its refusals; no I/O."""

from __future__ import annotations

import base64

import pytest

from minibroker.security.sasl.scram import ScramError, ScramServer, make_credential

# RFC 7677 section 3
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _server(password="pencil"):
    cred = make_credential("SCRAM-SHA-256", password, 4096, SALT)
    return ScramServer("SCRAM-SHA-256", {"user": cred}.get, nonce=SERVER_NONCE)


def test_rfc7677_exchange():
    s = _server()
    assert s.respond(CLIENT_FIRST) == SERVER_FIRST
    assert s.respond(CLIENT_FINAL) == SERVER_FINAL
    assert s.state == "done" and s.username == "user"


def test_a_wrong_password_fails_at_the_proof():
    s = _server("not-pencil")
    s.respond(CLIENT_FIRST)
    with pytest.raises(ScramError, match="Invalid user credentials"):
        s.respond(CLIENT_FINAL)
    with pytest.raises(ScramError):
        s.respond(CLIENT_FINAL)  # nothing after a failure


@pytest.mark.parametrize("first, message", [
    (b"n,,n=nobody,r=abc", "Invalid user credentials"),
    (b"n,a=other,n=user,r=abc", "authorization id"),
    (b"p=tls-unique,,n=user,r=abc", "Invalid SCRAM client first message"),
    (b"n,,r=abc", "Invalid SCRAM client first message"),
    (b"n,,n=us=ZZer,r=abc", "username encoding"),
    (b"\xff", "UTF-8"),
])
def test_bad_client_first_messages(first, message):
    with pytest.raises(ScramError, match=message):
        _server().respond(first)


def test_a_replayed_nonce_is_refused():
    s = _server()
    s.respond(CLIENT_FIRST)
    with pytest.raises(ScramError, match="nonce"):
        s.respond(CLIENT_FINAL.replace(b"k0,p=", b"k1,p="))


def test_plain():
    from minibroker.security.sasl.plain import PlainError, authenticate

    users = {"alice": "secret"}.get
    assert authenticate(b"\x00alice\x00secret", users) == "alice"
    assert authenticate(b"alice\x00alice\x00secret", users) == "alice"
    for bad, message in [(b"\x00alice\x00wrong", "Invalid username or password"),
                         (b"\x00bob\x00secret", "Invalid username or password"),
                         (b"bob\x00alice\x00secret", "authorization id"),
                         (b"alice\x00secret", "expected 3 tokens"),
                         (b"\x00\x00secret", "username not specified")]:
        with pytest.raises(PlainError, match=message):
            authenticate(bad, users)
