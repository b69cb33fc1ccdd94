"""SASL listeners on the wire, request by request: what an unauthenticated connection may send
(ApiVersions and the SASL handshake only, frames of at most 512 KiB, authenticated within the
timeout), Kafka's answers to a bad mechanism and to a request out of turn, SaslHandshake v0's
bare tokens, the SASL APIs on a plaintext listener, and the SCRAM credential APIs with a real
SCRAM login afterwards. Every failure is a logged disconnect, never a traceback."""

from __future__ import annotations

import hashlib
import os
import socket
import struct
import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from tests.integration.support import free_port
from tests.reference.client import Connection, ConnectionClosed, part, req

SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA, API_VERSIONS = 17, 36, 3, 18
DESCRIBE_SCRAM, ALTER_SCRAM = 50, 51


@pytest.fixture
def sasl_broker(broker_factory, tmp_path):
    users = tmp_path / "users"
    users.write_text("alice:alice-secret\nadmin:admin-secret\n")
    # fixed ports, so a restart binds the same ones
    listeners = f"PLAINTEXT://127.0.0.1:{free_port()},SASL_PLAINTEXT://127.0.0.1:{free_port()}"
    return broker_factory(listeners=listeners,
                          sasl_users=users, sasl_authentication_timeout_ms=1500)


def _conn(address: str) -> Connection:
    host, port = address.rsplit(":", 1)
    return Connection(host, int(port), timeout=5)


def _closed(c: Connection) -> bool:
    sock = c._connect()
    sock.settimeout(5)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _plain_login(c: Connection, user="alice", password="alice-secret"):
    hs = c.call(req(SASL_HANDSHAKE, 1, mechanism="PLAIN"))
    assert hs.error_code == 0 and "PLAIN" in hs.mechanisms
    return c.call(req(SASL_AUTHENTICATE, 2, auth_bytes=f"\0{user}\0{password}".encode()))


def test_only_api_versions_and_the_handshake_before_authentication(sasl_broker):
    plain, sasl = sasl_broker.addresses
    # a request before the handshake: closed without an answer
    with _conn(sasl) as c, pytest.raises(ConnectionClosed):
        c.call(req(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                   include_topic_authorized_operations=False))
    # ApiVersions, then a mechanism the broker does not offer: UNSUPPORTED_SASL_MECHANISM with
    # the ones it does, then closed
    with _conn(sasl) as c:
        assert c.call(req(API_VERSIONS, 3, client_software_name="t", client_software_version="1")).error_code == 0
        hs = c.call(req(SASL_HANDSHAKE, 1, mechanism="GSSAPI"))
        assert hs.error_code == 33 and list(hs.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert _closed(c)
    # a request during the token exchange: its own error answer (ILLEGAL_SASL_STATE), then closed
    with _conn(sasl) as c:
        assert c.call(req(SASL_HANDSHAKE, 1, mechanism="PLAIN")).error_code == 0
        ip = c.call(req(22, 4, transactional_id=None, transaction_timeout=__import__("datetime").timedelta(seconds=60),
                        producer_id=-1, producer_epoch=-1))
        assert ip.error_code == 34
        assert _closed(c)
    # a wrong password: SASL_AUTHENTICATION_FAILED with Kafka's text, then closed
    with _conn(sasl) as c:
        a = _plain_login(c, password="wrong")
        assert a.error_code == 58 and a.error_message == "Authentication failed: Invalid username or password"
        assert _closed(c)
    # the right one: served from then on, with no session end
    with _conn(sasl) as c:
        a = _plain_login(c)
        assert a.error_code == 0 and a.session_lifetime.total_seconds() == 0
        md = c.call(req(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False))
        assert [b.port for b in md.brokers] == [int(sasl.rsplit(":", 1)[1])]
        # a second exchange on an authenticated connection: KafkaApis' answers
        assert c.call(req(SASL_HANDSHAKE, 1, mechanism="PLAIN")).error_code == 34
        again = c.call(req(SASL_AUTHENTICATE, 2, auth_bytes=b"\0alice\0alice-secret"))
        assert again.error_code == 34
        assert again.error_message == "SaslAuthenticate request received after successful authentication"
    # the same two on the plaintext listener
    with _conn(plain) as c:
        assert c.call(req(SASL_HANDSHAKE, 1, mechanism="PLAIN")).error_code == 34
        assert c.call(req(SASL_AUTHENTICATE, 1, auth_bytes=b"x")).error_code == 34
    log = sasl_broker.log_text()
    assert "sasl.authentication_failed" in log and "principal=User:alice" in log
    assert "wrong" not in log.replace("sasl.", "")  # the password never reaches the log
    assert "Traceback" not in log


def test_size_limit_and_timeout_before_authentication(sasl_broker):
    _plain_addr, sasl = sasl_broker.addresses
    host, port = sasl.rsplit(":", 1)
    # 600 KiB before authentication: past SaslServerAuthenticator's 512 KiB, closed at the size
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(struct.pack(">i", 600 * 1024) + b"\0" * 1024)
        s.settimeout(5)
        assert s.recv(1) == b""
    # after authentication the broker's own limit applies: a 600 KiB frame is read (and, as a
    # malformed request, closes the connection only after it has all been read)
    with _conn(sasl) as c:
        assert _plain_login(c).error_code == 0
        md = c.call(req(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False))
        assert md.brokers
    # silent after connecting: closed at the authentication timeout (1.5 s here)
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.settimeout(10)
        assert s.recv(1) == b""
    assert 1.2 < time.monotonic() - started < 8
    # so is one that stops half-way through the exchange
    with _conn(sasl) as c:
        assert c.call(req(SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-256")).error_code == 0
        assert _closed(c)
    log = sasl_broker.log_text()
    assert log.count("sasl.authentication_timeout") >= 2 and "larger than the maximum 524288" in log
    assert "Traceback" not in log


def test_handshake_v0_bare_tokens(sasl_broker):
    _plain_addr, sasl = sasl_broker.addresses
    with _conn(sasl) as c:
        assert c.call(req(SASL_HANDSHAKE, 0, mechanism="PLAIN")).error_code == 0
        sock = c._connect()
        token = b"\0alice\0alice-secret"
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert c._recv_exact(4) == struct.pack(">i", 0)  # PLAIN's empty answer, bare
        md = c.call(req(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False))
        assert md.brokers


def _salted(password: str, salt: bytes, iterations: int, digest="sha256") -> bytes:
    return hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)


def _scram_admin(address: str, user: str, password: str, mechanism="SCRAM-SHA-256") -> AdminClient:
    return AdminClient({"bootstrap.servers": address, "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
                        "socket.timeout.ms": 5000})


def test_scram_credentials_made_and_removed_through_the_api(sasl_broker):
    plain, sasl = sasl_broker.addresses
    alter = (ALTER_SCRAM, 0)
    salt = os.urandom(16)
    with _conn(plain) as c:
        r = c.call(req(*alter, deletions=(), upsertions=(
            part(alter, "ScramCredentialUpsertion", name="carol", mechanism=1, iterations=8192, salt=salt,
                 salted_password=_salted("carol-secret", salt, 8192)),
            part(alter, "ScramCredentialUpsertion", name="dave", mechanism=2, iterations=1000, salt=salt,
                 salted_password=b"x" * 64),
            part(alter, "ScramCredentialUpsertion", name="", mechanism=1, iterations=4096, salt=salt,
                 salted_password=b"x" * 32),
            part(alter, "ScramCredentialUpsertion", name="erin", mechanism=9, iterations=4096, salt=salt,
                 salted_password=b"x" * 32),
        )))
        got = {x.user: (x.error_code, x.error_message) for x in r.results}
        assert got == {"carol": (0, None), "dave": (93, "Too few iterations"),
                       "": (93, "Username must not be empty"), "erin": (33, "Unknown SCRAM mechanism")}
        d = c.call(req(DESCRIBE_SCRAM, 0, users=(part((DESCRIBE_SCRAM, 0), "UserName", name="carol"),
                                                 part((DESCRIBE_SCRAM, 0), "UserName", name="nobody"))))
        got = {x.user: (x.error_code, [(i.mechanism, i.iterations) for i in x.credential_infos])
               for x in d.results}
        assert got == {"carol": (0, [(1, 8192)]), "nobody": (91, [])}
    # a real SCRAM login with the credential made through the API; SCRAM-SHA-512 was never made
    assert _scram_admin(sasl, "carol", "carol-secret").list_topics(timeout=10).brokers
    with pytest.raises(KafkaException):
        _scram_admin(sasl, "carol", "carol-secret", "SCRAM-SHA-512").list_topics(timeout=2)
    # it survives a restart, salted (the password is not in the data dir)
    sasl_broker.restart()
    plain, sasl = sasl_broker.addresses
    assert _scram_admin(sasl, "carol", "carol-secret").list_topics(timeout=10).brokers
    stored = (sasl_broker.data_dir / "scram-credentials.json").read_text()
    assert "carol" in stored and "carol-secret" not in stored
    with _conn(plain) as c:
        r = c.call(req(*alter, upsertions=(), deletions=(
            part(alter, "ScramCredentialDeletion", name="carol", mechanism=1),
            part(alter, "ScramCredentialDeletion", name="nobody", mechanism=1))))
        got = {x.user: (x.error_code, x.error_message) for x in r.results}
        assert got == {"carol": (0, None),
                       "nobody": (91, "Attempt to delete a user credential that does not exist")}
    with pytest.raises(KafkaException):
        _scram_admin(sasl, "carol", "carol-secret").list_topics(timeout=2)
    assert "Traceback" not in sasl_broker.log_text()
