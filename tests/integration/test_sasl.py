"""SASL with real clients: confluent-kafka, kcat, the Java client and KafkaJS each run a
transaction over SASL_SSL with SCRAM, against users from ``--sasl-users`` and one made with
AlterUserScramCredentials; a wrong password and an untrusted broker certificate are refused
with the error each client documents; librdkafka and the Java client re-authenticate (KIP-368)
when the broker ends their sessions; OAUTHBEARER with librdkafka's and Java's unsecured tokens."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import pytest
from confluent_kafka import KafkaError, Producer, TopicPartition

from .clients import create_topic, run_node
from .support import free_port
from .test_txn_support import READ_COMMITTED, consumer, run_java_txn, txn_id

USERS = "alice:alice-secret\nbob:bob-secret\n"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("sasl-certs")
    subprocess.run([sys.executable, "-m", "minibroker", "certs", str(d)], check=True,
                   capture_output=True, timeout=60)
    other = tmp_path_factory.mktemp("sasl-other-ca")
    subprocess.run([sys.executable, "-m", "minibroker", "certs", str(other)], check=True,
                   capture_output=True, timeout=60)
    return d, other


@pytest.fixture(scope="module")
def sasl_ssl(certs, tmp_path_factory):
    """One broker for the module: PLAINTEXT (for set-up) and SASL_SSL."""
    from minibroker.testing import MiniBroker

    ca_dir, _ = certs
    users = tmp_path_factory.mktemp("sasl-users") / "users"
    users.write_text(USERS)
    b = MiniBroker(name="sasl-ssl", listeners=f"PLAINTEXT://127.0.0.1:{free_port()},"
                   f"SASL_SSL://127.0.0.1:{free_port()}", sasl_users=users,
                   sasl_mechanisms="SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
                   ssl_certfile=ca_dir / "broker.crt", ssl_keyfile=ca_dir / "broker.key")
    try:
        yield b.start()
    finally:
        b.close()


def _librdkafka(ca_dir, mechanism="SCRAM-SHA-512", user="alice", password="alice-secret", **extra):
    return {"security.protocol": "SASL_SSL", "ssl.ca.location": str(ca_dir / "ca.crt"),
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
            "socket.timeout.ms": 10000, **extra}


def _errors_of(conf: dict, seconds: float = 6.0) -> list[KafkaError]:
    """What librdkafka reports through error_cb for a client that cannot get in."""
    errors: list[KafkaError] = []
    p = Producer({**conf, "error_cb": errors.append, "reconnect.backoff.ms": 500})
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not errors:
        p.poll(0.2)
    return errors


def _read_committed(address: str, topic: str, n: int, conf: dict) -> list[bytes]:
    c = consumer(address, READ_COMMITTED, **conf)
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


def test_confluent_kafka_transaction_over_sasl_ssl_scram(sasl_ssl, certs, topic):
    ca_dir, other = certs
    plain, secure = sasl_ssl.addresses
    create_topic(plain, topic, 1)
    conf = _librdkafka(ca_dir)
    p = Producer({**conf, "bootstrap.servers": secure, "transactional.id": txn_id("sasl-ck")})
    p.init_transactions(30)
    for outcome in ("commit", "abort", "commit"):
        p.begin_transaction()
        for i in range(3):
            p.produce(topic, value=f"{outcome}-{i}".encode(), partition=0)
        (p.commit_transaction if outcome == "commit" else p.abort_transaction)(30)
    got = _read_committed(secure, topic, 6, _librdkafka(ca_dir, "SCRAM-SHA-256", "bob", "bob-secret"))
    assert got == [f"commit-{i}".encode() for i in range(3)] * 2

    # a wrong password: librdkafka's _AUTHENTICATION error with Kafka's text
    errors = _errors_of({**_librdkafka(ca_dir, password="wrong"), "bootstrap.servers": secure})
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in errors[0].str()
    errors = _errors_of({**_librdkafka(ca_dir, "PLAIN", password="wrong"), "bootstrap.servers": secure})
    assert errors and "Invalid username or password" in errors[0].str(), errors
    # an untrusted broker certificate: an SSL handshake failure, before any SASL
    errors = _errors_of({**_librdkafka(other), "bootstrap.servers": secure})
    assert errors and errors[0].code() in (KafkaError._TRANSPORT, KafkaError._SSL, KafkaError._ALL_BROKERS_DOWN)
    assert any("certificate verify failed" in e.str() or "SSL handshake failed" in e.str() for e in errors), errors
    log = sasl_ssl.log_text()
    assert "sasl.authenticated" in log and "principal=User:alice" in log
    assert "sasl.authentication_failed" in log and "wrong" not in log.replace("sasl.", "")
    assert "Traceback" not in log


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_transaction_over_sasl_ssl_scram(sasl_ssl, certs, topic):
    ca_dir, _ = certs
    plain, secure = sasl_ssl.addresses
    create_topic(plain, topic, 1)
    security = ["-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={ca_dir / 'ca.crt'}",
                "-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", "sasl.username=bob",
                "-X", "sasl.password=bob-secret"]
    r = subprocess.run(["kcat", "-b", secure, *security, "-P", "-t", topic, "-p", "0",
                        "-X", f"transactional.id={txn_id('sasl-kcat')}"],
                       input="one\ntwo\nthree\n", capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(["kcat", "-b", secure, *security, "-C", "-t", topic, "-p", "0", "-e",
                        "-X", "isolation.level=read_committed", "-f", "%s\n"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["one", "two", "three"], r.stderr
    r = subprocess.run(["kcat", "-b", secure, *security[:-2], "-X", "sasl.password=nope", "-L",
                        "-m", "5"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "invalid credentials with SASL mechanism SCRAM" in r.stderr


def test_java_client_transaction_over_sasl_ssl_scram(sasl_ssl, certs, topic, monkeypatch):
    """kafka-clients 4.x: ScramLoginModule with a PEM truststore, commit/abort/commit and both
    isolation levels (java/TxnDriver.java); then a wrong password."""
    ca_dir, _ = certs
    plain, secure = sasl_ssl.addresses
    create_topic(plain, topic, 1)

    def props(password: str) -> str:
        return ("security.protocol=SASL_SSL,ssl.truststore.type=PEM,"
                f"ssl.truststore.location={ca_dir / 'ca.crt'},sasl.mechanism=SCRAM-SHA-256,"
                "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="alice" password="{password}";')

    monkeypatch.setenv("TXN_DRIVER_CLIENT_PROPS", props("alice-secret"))
    res = run_java_txn("commit-abort", secure, topic, 1, 3, txn_id("java-sasl"))
    assert not res["errors"], res["errors"]
    committed = [v.split("|")[0] for _p, _o, v in res["read_committed"]]
    assert committed == [f"t{k}-p0-{i}" for k in (0, 2) for i in range(3)]
    monkeypatch.setenv("TXN_DRIVER_CLIENT_PROPS", props("wrong"))
    from . import java_client
    tc = java_client.java_toolchain()
    r = java_client.run_driver(tc, java_client.compile_drivers(tc), "TxnDriver",
                               ["commit-abort", secure, topic, "1", "1", txn_id("java-sasl-bad")],
                               timeout=90)
    # SaslAuthenticationException, with the broker's message
    assert "SaslAuthenticationException" in r.stdout + r.stderr
    assert "invalid credentials with SASL mechanism SCRAM" in r.stdout + r.stderr


def test_kafkajs_transaction_over_sasl_ssl_scram(sasl_ssl, certs, topic):
    ca_dir, _ = certs
    plain, secure = sasl_ssl.addresses
    create_topic(plain, topic, 1)
    base = ["--broker", secure, "--topic", topic, "--partitions", "1", "--per-partition", "4",
            "--ssl-ca", str(ca_dir / "ca.crt"), "--sasl-mechanism", "scram-sha-512",
            "--sasl-username", "bob"]
    r = run_node("txn_produce.js", *base, "--sasl-password", "bob-secret",
                 "--transactional-id", txn_id("kafkajs-sasl"), timeout=90)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout)["ended"] == ["commit", "abort", "commit"]
    got = _read_committed(secure, topic, 8, _librdkafka(ca_dir))
    assert [v.split(b"|")[0] for v in got] == [f"t{k}-p0-{i}".encode() for k in (0, 2) for i in range(4)]
    r = run_node("txn_produce.js", *base, "--sasl-password", "wrong",
                 "--transactional-id", txn_id("kafkajs-sasl-bad"), "--timeout-ms", "30000", timeout=60)
    # KafkaJSSASLAuthenticationError, with the broker's message
    assert r.returncode != 0 and "SASL SCRAM SHA512 authentication failed" in r.stderr, r.stderr[-3000:]


def _sasl_plaintext(broker_factory, tmp_path, topic: str, reauth_ms: int):
    """A broker with PLAINTEXT and SASL_PLAINTEXT (SCRAM-SHA-256, OAUTHBEARER), sessions of
    ``reauth_ms``, and ``topic``; the broker and its SASL address."""
    users = tmp_path / "users"
    users.write_text(USERS)
    b = broker_factory(listeners=f"PLAINTEXT://127.0.0.1:{free_port()},SASL_PLAINTEXT://127.0.0.1:{free_port()}",
                       sasl_users=users, sasl_mechanisms="SCRAM-SHA-256,OAUTHBEARER",
                       connections_max_reauth_ms=reauth_ms)
    plain, sasl = b.addresses
    create_topic(plain, topic, 1)
    return b, sasl


def test_reauthentication_and_oauthbearer(broker_factory, topic, tmp_path):
    """--connections-max-reauth-ms 2000: librdkafka re-authenticates on its open connections
    (sasl.reauthenticated) and keeps producing; OAUTHBEARER with the unsecured tokens librdkafka
    makes for development."""
    b, sasl = _sasl_plaintext(broker_factory, tmp_path, topic, reauth_ms=2000)
    p = Producer({"bootstrap.servers": sasl, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
                  "sasl.password": "alice-secret", "enable.idempotence": True})
    deadline = time.monotonic() + 7
    sent = 0
    while time.monotonic() < deadline:
        p.produce(topic, value=b"r%d" % sent, partition=0)
        sent += 1
        p.poll(0.1)
    assert p.flush(20) == 0
    assert b.log_text().count("sasl.reauthenticated") >= 2

    o = Producer({"bootstrap.servers": sasl, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
                  "sasl.oauthbearer.config": "principal=carol"})
    o.produce(topic, value=b"oauth", partition=0)
    assert o.flush(20) == 0
    log = b.log_text()
    assert "mechanism=OAUTHBEARER" in log and "principal=User:carol" in log
    assert "Traceback" not in log


def test_java_client_oauthbearer(broker_factory, topic, tmp_path, monkeypatch):
    """kafka-clients 4.x with OAuthBearerLoginModule's unsecured tokens (for development) over
    SASL_PLAINTEXT runs commit/abort/commit (java/TxnDriver.java); the broker gives its sessions
    1 s (--connections-max-reauth-ms), which the client accepts (its connections here live less than
    that, so re-authentication itself is tested with librdkafka above)."""
    b, sasl = _sasl_plaintext(broker_factory, tmp_path, topic, reauth_ms=1000)
    monkeypatch.setenv("TXN_DRIVER_CLIENT_PROPS", (
        "security.protocol=SASL_PLAINTEXT,sasl.mechanism=OAUTHBEARER,sasl.jaas.config="
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredLoginStringClaim_sub="dave";'))
    res = run_java_txn("commit-abort", sasl, topic, 1, 3, txn_id("java-oauth"))
    assert not res["errors"], res["errors"]
    committed = [v.split("|")[0] for _p, _o, v in res["read_committed"]]
    assert committed == [f"t{k}-p0-{i}" for k in (0, 2) for i in range(3)]
    log = b.log_text()
    assert "mechanism=OAUTHBEARER" in log and "principal=User:dave" in log
    assert "session_lifetime_ms=1000" in log
    assert "Traceback" not in log
