"""A SCRAM client over a raw Connection (tests/reference/client.py), for the tests that log in
with a user or a delegation token (``tokenauth=true``, Kafka's ScramExtensions) on both brokers."""

from __future__ import annotations

import base64
import hashlib
import hmac

from tests.reference.client import Connection, req

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
DIGESTS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


def scram_login(c: Connection, user: str, password: str, mechanism: str = "SCRAM-SHA-256",
                token: bool = False):
    """Handshake and the two SCRAM steps; the last SaslAuthenticate answer (or the first one
    that failed). The server's signature is checked when the login succeeds."""
    digest = DIGESTS[mechanism]
    hs = c.call(req(SASL_HANDSHAKE, 1, mechanism=mechanism))
    assert hs.error_code == 0, hs
    first_bare = f"n={user},r=tokentestnonce" + (",tokenauth=true" if token else "")
    a = c.call(req(SASL_AUTHENTICATE, 2, auth_bytes=f"n,,{first_bare}".encode()))
    if a.error_code:
        return a
    server_first = bytes(a.auth_bytes).decode()
    attrs = dict(p.split("=", 1) for p in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    without_proof = f"c={base64.b64encode(b'n,,').decode()},r={attrs['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.new(digest, client_key).digest(), auth_message, digest).digest()
    proof = bytes(x ^ y for x, y in zip(client_key, signature))
    a = c.call(req(SASL_AUTHENTICATE, 2,
                   auth_bytes=f"{without_proof},p={base64.b64encode(proof).decode()}".encode()))
    if a.error_code == 0:
        server_key = hmac.new(salted, b"Server Key", digest).digest()
        expected = hmac.new(server_key, auth_message, digest).digest()
        assert bytes(a.auth_bytes) == b"v=" + base64.b64encode(expected)
    return a


def plain_login(c: Connection, user: str, password: str):
    hs = c.call(req(SASL_HANDSHAKE, 1, mechanism="PLAIN"))
    assert hs.error_code == 0, hs
    return c.call(req(SASL_AUTHENTICATE, 2, auth_bytes=f"\0{user}\0{password}".encode()))
