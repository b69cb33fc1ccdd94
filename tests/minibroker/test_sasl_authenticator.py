"""One SASL connection's state machine, without I/O: what it admits, the exchange, the session's
end and re-authentication (Kafka's SaslServerAuthenticator and KafkaChannel)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from minibroker.security.sasl.common import AuthenticationFailed
from minibroker.security.sasl.authenticator import Authenticator
from minibroker.security.sasl.credentials import Credentials, UsersFileError, read_users_file
from minibroker.security.sasl.scram import make_credential
from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.errors import ErrorCode

MECHS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def _auth(max_reauth_ms=0, mechanisms=MECHS):
    clock = Clock()
    creds = Credentials({"alice": "alice-secret", "bob": "bob-secret"})
    return Authenticator(mechanisms, creds, clock, max_reauth_ms), clock


def _plain(a: Authenticator, user="alice", password="alice-secret"):
    assert a.admit(ApiKey.SaslHandshake) is False
    a.handshake("PLAIN")
    assert a.admit(ApiKey.SaslAuthenticate) is False
    return a.authenticate(f"\0{user}\0{password}".encode())


def _scram_client(a: Authenticator, mechanism: str, user: str, password: str, doubled=False) -> int:
    digest = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    a.handshake(mechanism)
    first_bare = f"n={user},r=clientnonce"
    server_first, _ = a.authenticate(f"n,,{first_bare}".encode())
    attrs = dict(p.split("=", 1) for p in server_first.decode().split(","))
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    nonce = ("clientnonce" if doubled else "") + attrs["r"]
    without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
    auth_message = f"{first_bare},{server_first.decode()},{without_proof}".encode()
    signature = hmac.new(hashlib.new(digest, client_key).digest(), auth_message, digest).digest()
    proof = bytes(x ^ y for x, y in zip(client_key, signature))
    server_final, lifetime = a.authenticate(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    expected = hmac.new(server_key, auth_message, digest).digest()
    assert server_final == b"v=" + base64.b64encode(expected)
    return lifetime


def test_api_versions_then_plain():
    a, _ = _auth()
    assert a.admit(ApiKey.ApiVersions) is True
    assert _plain(a) == (b"", 0)
    assert a.authenticated and a.principal == "User:alice" and a.session_ends_ms is None
    assert a.admit(ApiKey.Produce) is True


def test_only_the_sasl_apis_before_authentication():
    a, _ = _auth()
    with pytest.raises(AuthenticationFailed) as e:
        a.admit(ApiKey.Metadata)
    # before the handshake Kafka closes without an answer
    assert not e.value.answer and e.value.message == "Unexpected Kafka request of type METADATA during SASL handshake."
    a, _ = _auth()
    a.admit(ApiKey.ApiVersions)
    with pytest.raises(AuthenticationFailed):
        a.admit(ApiKey.ApiVersions)  # once, first
    a, _ = _auth()
    a.handshake("PLAIN")
    with pytest.raises(AuthenticationFailed) as e:
        a.admit(ApiKey.InitProducerId)
    # during the exchange it answers the request with ILLEGAL_SASL_STATE, then closes
    assert e.value.answer and e.value.error_code == ErrorCode.illegal_sasl_state
    assert e.value.message == "Unexpected Kafka request of type INIT_PRODUCER_ID during SASL authentication."


def test_unsupported_mechanism():
    a, _ = _auth(mechanisms=("SCRAM-SHA-512",))
    with pytest.raises(AuthenticationFailed) as e:
        a.handshake("PLAIN")
    assert e.value.error_code == ErrorCode.unsupported_sasl_mechanism and a.state == "failed"


@pytest.mark.parametrize("user, password", [("alice", "wrong"), ("mallory", "alice-secret")])
def test_plain_bad_credentials(user, password):
    a, _ = _auth()
    with pytest.raises(AuthenticationFailed) as e:
        _plain(a, user, password)
    assert e.value.error_code == ErrorCode.sasl_authentication_failed
    assert e.value.message == "Authentication failed: Invalid username or password"
    assert e.value.user == user and password not in e.value.reason
    assert a.state == "failed"


def test_plain_malformed_message_gets_plains_own_text():
    # Kafka's PlainSaslServer refuses a malformed message with its own words (Kafka 4.4 answers so)
    a, _ = _auth()
    a.handshake("PLAIN")
    with pytest.raises(AuthenticationFailed) as e:
        a.authenticate(b"alice-secret")
    assert e.value.message == "Invalid SASL/PLAIN response: expected 3 tokens, got 1"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_with_a_users_file_password(mechanism):
    a, _ = _auth()
    assert _scram_client(a, mechanism, "bob", "bob-secret") == 0
    assert a.principal == "User:bob"


def test_scram_accepts_librdkafkas_doubled_client_nonce():
    # librdkafka < 2.6.1 repeats its nonce in front of the server's; Kafka 3.8.1+ accepts it
    a, _ = _auth()
    _scram_client(a, "SCRAM-SHA-512", "alice", "alice-secret", doubled=True)
    assert a.principal == "User:alice"


def test_scram_wrong_password():
    a, _ = _auth()
    with pytest.raises(AuthenticationFailed) as e:
        _scram_client(a, "SCRAM-SHA-256", "bob", "nope")
    # ScramSaslServer's SaslException: the client gets the generic text, as from Kafka 4.4
    assert e.value.message == ("Authentication failed during authentication due to invalid credentials "
                               "with SASL mechanism SCRAM-SHA-256") and e.value.user == "bob"
    assert "Invalid user credentials" in e.value.reason


def test_scram_stored_credential_overrides_the_file_and_persists(tmp_path):
    creds = Credentials({"bob": "bob-secret"}, tmp_path)
    creds.upsert("bob", "SCRAM-SHA-256", make_credential("SCRAM-SHA-256", "rotated", 8192))
    creds.save()
    again = Credentials({"bob": "bob-secret"}, tmp_path)
    a = Authenticator(MECHS, again, Clock())
    _scram_client(a, "SCRAM-SHA-256", "bob", "rotated")
    assert again.described("bob") == [("SCRAM-SHA-256", 8192), ("SCRAM-SHA-512", 4096)]
    assert "rotated" not in (tmp_path / "scram-credentials.json").read_text()


def test_a_damaged_credentials_file_does_not_stop_start_up(tmp_path):
    (tmp_path / "scram-credentials.json").write_text("{not json")
    assert Credentials({}, tmp_path).stored == {}


def test_session_ends_and_reauthentication():
    a, clock = _auth(max_reauth_ms=60_000)
    assert _plain(a) == (b"", 60_000)
    assert a.session_ends_ms == clock.ms + 60_000
    clock.ms += 30_000
    assert a.admit(ApiKey.SaslHandshake) is False
    a.handshake("PLAIN")
    assert a.reauthenticating and a.admit(ApiKey.SaslAuthenticate) is False
    assert a.authenticate(b"\0alice\0alice-secret") == (b"", 60_000)
    assert a.reauthentications == 1 and a.session_ends_ms == clock.ms + 60_000
    # another within a second of the last re-authentication's start is not one: KafkaApis
    # answers that handshake (ILLEGAL_SASL_STATE)
    clock.ms += 500
    assert a.admit(ApiKey.SaslHandshake) is True
    clock.ms += 59_500
    with pytest.raises(AuthenticationFailed) as e:
        a.admit(ApiKey.Fetch)
    assert e.value.reason == "session_expired" and not e.value.answer


def test_reauthentication_cannot_change_principal_or_mechanism():
    a, clock = _auth(max_reauth_ms=10_000)
    _plain(a)
    clock.ms += 2_000
    a.admit(ApiKey.SaslHandshake)
    a.handshake("PLAIN")
    with pytest.raises(AuthenticationFailed) as e:
        a.authenticate(b"\0bob\0bob-secret")
    assert e.value.message == "Cannot change principals during re-authentication from User:alice: User:bob"
    a, clock = _auth(max_reauth_ms=10_000)
    _plain(a)
    clock.ms += 2_000
    with pytest.raises(AuthenticationFailed):
        a.handshake("SCRAM-SHA-256")


def test_users_file(tmp_path):
    f = tmp_path / "users"
    f.write_text("# team\nalice:a:b:c\n\n bob :pw\n")
    assert read_users_file(f) == {"alice": "a:b:c", "bob": "pw"}
    f.write_text("alice\n")
    with pytest.raises(UsersFileError, match="users:1: expected name:password"):
        read_users_file(f)
    f.write_text("a:1\na:2\n")
    with pytest.raises(UsersFileError, match="appears twice"):
        read_users_file(f)
