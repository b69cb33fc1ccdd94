"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the server side, sans-io.

Credentials are stored as Kafka stores them (ScramCredential: salt, StoredKey, ServerKey,
iterations; never the password). ``ScramServer`` is one exchange's state machine: feed it the
client's messages, get the server's; a failure raises ``ScramError`` with the message Kafka's
ScramSaslServer gives, and the connection is then closed by the caller.

    start --client-first--> first_sent --client-final (proof ok)--> done
                                       --client-final (bad proof)--> ScramError
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's ScramMechanism: minIterations 4096; AlterUserScramCredentials refuses above 16384.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


class ScramError(Exception):
    """``visible``: the client gets this text (Kafka's SaslAuthenticationException); otherwise
    (SaslException) it gets SaslServerAuthenticator's generic one and only the log has this."""

    def __init__(self, message: str, visible: bool = False) -> None:
        super().__init__(message)
        self.visible = visible


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(digest: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, digest).digest()


def salted_password(digest: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)


def credential_from_salted(digest: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    client_key = _hmac(digest, salted, b"Client Key")
    return ScramCredential(salt, hashlib.new(digest, client_key).digest(),
                           _hmac(digest, salted, b"Server Key"), iterations)


def make_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    digest = MECHANISMS[mechanism]
    salt = os.urandom(32) if salt is None else salt
    return credential_from_salted(digest, salted_password(digest, password, salt, iterations), salt,
                                  iterations)


def _attributes(message: str) -> dict[str, str]:
    # One-letter RFC 5802 attributes, and in the client-first message Kafka's extensions
    # ("tokenauth=true", ScramExtensions) after them
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ScramError(f"Invalid SCRAM message attribute {part!r}")
        out.setdefault(key, value)
    return out


def _username(saslname: str) -> str:
    # RFC 5802 5.1: "=2C" is "," and "=3D" is "="; any other "=" is invalid
    out, i = [], 0
    while i < len(saslname):
        if saslname[i] == "=":
            code = saslname[i + 1:i + 3]
            if code == "2C":
                out.append(",")
            elif code == "3D":
                out.append("=")
            else:
                raise ScramError("Invalid username encoding")
            i += 3
        else:
            out.append(saslname[i])
            i += 1
    return "".join(out)


def _nonce() -> str:
    # Kafka's ScramFormatter.secureRandomString: 130 random bits in base 36, letters and digits
    # only. Some clients (librdkafka 2.0) misread a nonce holding base64's '+', '/' or '='.
    n = int.from_bytes(os.urandom(17), "big") >> 6
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out or "0"


class ScramServer:
    """One SCRAM exchange. ``lookup(username)`` returns the user's credential or None;
    ``token_lookup(token_id)`` a delegation token's (credential, owner name, expiry ms) or None
    (None: no token logs in)."""

    def __init__(self, mechanism: str, lookup, nonce: str | None = None, token_lookup=None) -> None:
        self.mechanism = mechanism
        self.digest = MECHANISMS[mechanism]
        self.lookup = lookup
        self.token_lookup = token_lookup
        # Who the session is: the user, or a delegation token's owner (ScramSaslServer's
        # authorizationId); and, for a token, when it expires
        self.authorization_id: str | None = None
        self.token_authenticated = False
        self.token_expiry_ms: int | None = None
        self._server_nonce = nonce or _nonce()
        self.state = "start"
        self.username: str | None = None
        self._credential: ScramCredential | None = None
        self._first_bare = self._server_first = self._nonce = ""
        self._gs2 = ""

    def _fail(self, message: str, visible: bool = False) -> ScramError:
        self.state = "failed"
        return ScramError(message, visible)

    def respond(self, message: bytes) -> bytes:
        try:
            text = message.decode()
        except UnicodeDecodeError:
            raise self._fail("Invalid SCRAM message: not UTF-8") from None
        if self.state == "start":
            return self._first(text)
        if self.state == "first_sent":
            return self._final(text)
        raise self._fail(f"Unexpected SCRAM message in state {self.state}")

    def _first(self, text: str) -> bytes:
        # gs2-header: "n,," or "n,a=authzid," (no channel binding: Kafka's clients never use it)
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y") or (parts[1] and not parts[1].startswith("a=")):
            raise self._fail("Invalid SCRAM client first message")
        self._gs2 = f"{parts[0]},{parts[1]},"
        self._first_bare = parts[2]
        attrs = _attributes(self._first_bare)
        if "n" not in attrs or "r" not in attrs:
            raise self._fail("Invalid SCRAM client first message")
        self.username = _username(attrs["n"])
        authzid = parts[1][2:] if parts[1] else ""
        if authzid and authzid != self.username:
            raise self._fail("Authentication failed: Client requested an authorization id that is "
                             "different from username", visible=True)
        if attrs.get("tokenauth", "").lower() == "true":
            # ScramSaslServer.evaluateResponse: the user name is a token id, the session its owner's
            found = self.token_lookup(self.username) if self.token_lookup is not None else None
            if found is None:
                raise self._fail(f"Token Authentication failed: Invalid tokenId : {self.username}")
            credential, owner, self.token_expiry_ms = found
            self.authorization_id = owner
            self.token_authenticated = True
        else:
            credential = self.lookup(self.username)
            self.authorization_id = self.username
        if credential is None:
            # Kafka's ScramSaslServer fails an unknown user at the first message
            raise self._fail("Authentication failed: Invalid user credentials")
        self._credential = credential
        self._nonce = attrs["r"] + self._server_nonce
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self.state = "first_sent"
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        assert self._credential is not None
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise self._fail("Invalid SCRAM client final message")
        attrs = _attributes(without_proof)
        # endswith, not equality, as Kafka since 3.8.1 (ScramSaslServer.evaluateResponse): librdkafka
        # before 2.6.1 sends its own nonce again in front of the server's (librdkafka #4895)
        if not attrs.get("r", "").endswith(self._nonce):
            raise self._fail("Invalid client nonce in the final client message.")
        if attrs.get("c") != base64.b64encode(self._gs2.encode()).decode():
            raise self._fail("Invalid channel binding in the final client message.")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise self._fail("Invalid SCRAM client final message") from None
        auth = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        c = self._credential
        signature = _hmac(self.digest, c.stored_key, auth)
        if len(proof) != len(signature):
            raise self._fail("Authentication failed: Invalid user credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self.digest, client_key).digest(), c.stored_key):
            raise self._fail("Authentication failed: Invalid user credentials")
        self.state = "done"
        return b"v=" + base64.b64encode(_hmac(self.digest, c.server_key, auth))
