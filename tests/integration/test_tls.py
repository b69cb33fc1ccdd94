"""SSL listeners with real clients: certificates from ``minibroker certs``, a transaction and a
read_committed consumer over TLS (confluent-kafka), kcat listing metadata over TLS, and the
refusals each client documents: an untrusted broker certificate, a client without a certificate
when ``--ssl-client-auth required``, a plaintext client on the TLS port. Each refusal is a
logged disconnect on the broker, never a traceback."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from .test_txn_support import READ_COMMITTED, consumer

LISTENERS = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    r = subprocess.run([sys.executable, "-m", "minibroker", "certs", str(d)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    other = tmp_path_factory.mktemp("other-ca")  # a CA the broker's certificate is not from
    subprocess.run([sys.executable, "-m", "minibroker", "certs", str(other)], check=True,
                   capture_output=True, timeout=60)
    return d, other


def _tls(certs_dir, **extra):
    return {"security.protocol": "SSL", "ssl.ca.location": str(certs_dir / "ca.crt"),
            "socket.timeout.ms": 10000, **extra}


def _refused(conf: dict) -> str:
    """What a client whose connection is refused reports (a metadata request that cannot work)."""
    admin = AdminClient(conf)
    with pytest.raises(KafkaException) as e:
        admin.list_topics(timeout=1.5)
    return str(e.value)


def test_a_transaction_over_tls_and_the_refusals(broker_factory, topic, certs):
    ca_dir, other = certs
    b = broker_factory(listeners=LISTENERS, ssl_certfile=ca_dir / "broker.crt",
                       ssl_keyfile=ca_dir / "broker.key")
    plain_addr, tls_addr = b.addresses
    conf = {"bootstrap.servers": tls_addr, **_tls(ca_dir)}
    p = Producer({**conf, "transactional.id": f"{topic}-tls"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, key=b"k%d" % i, value=b"over tls %d" % i, partition=0)
    p.commit_transaction(30)
    c = consumer(tls_addr, READ_COMMITTED, **_tls(ca_dir))
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < 5 and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == [b"over tls %d" % i for i in range(5)]
    # the same data on the plaintext listener
    assert topic in AdminClient({"bootstrap.servers": plain_addr}).list_topics(timeout=10).topics

    # kcat, over TLS
    if shutil.which("kcat"):
        r = subprocess.run(["kcat", "-b", tls_addr, "-X", "security.protocol=ssl",
                            "-X", f"ssl.ca.location={ca_dir / 'ca.crt'}", "-L", "-t", topic],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and f'topic "{topic}"' in r.stdout, r.stderr

    # an untrusted broker certificate: librdkafka's documented failure
    assert "Broker transport failure" in _refused({"bootstrap.servers": tls_addr, **_tls(other)})
    # a plaintext client on the TLS port
    assert "transport failure" in _refused({"bootstrap.servers": tls_addr, "socket.timeout.ms": 1500})
    log = b.log_text()
    assert "listener.connection_failed" in log and "UNKNOWN_CA" in log.upper()
    assert "Traceback" not in log


def test_client_certificates_required(broker_factory, topic, certs):
    ca_dir, other = certs
    b = broker_factory(listeners="SSL://127.0.0.1:0", ssl_certfile=ca_dir / "broker.crt",
                       ssl_keyfile=ca_dir / "broker.key", ssl_cafile=ca_dir / "ca.crt",
                       ssl_client_auth="required")
    (tls_addr,) = b.addresses
    # without a certificate: refused in the handshake
    assert "transport failure" in _refused({"bootstrap.servers": tls_addr, **_tls(ca_dir)})
    # with one the broker's CA did not sign: refused too
    assert "transport failure" in _refused({"bootstrap.servers": tls_addr, **_tls(
        ca_dir, **{"ssl.certificate.location": str(other / "client.crt"),
                   "ssl.key.location": str(other / "client.key")})})
    # with the client certificate from `minibroker certs`: served
    good = _tls(ca_dir, **{"ssl.certificate.location": str(ca_dir / "client.crt"),
                           "ssl.key.location": str(ca_dir / "client.key")})
    p = Producer({"bootstrap.servers": tls_addr, "enable.idempotence": True, **good})
    p.produce(topic, value=b"mtls", partition=0)
    assert p.flush(20) == 0
    assert "Traceback" not in b.log_text()


def test_the_java_client_over_tls(broker_factory, topic, certs, monkeypatch):
    """kafka-clients 4.x with a PEM truststore: commit, abort, commit, then both isolation
    levels read back (java/TxnDriver.java commit-abort)."""
    from .clients import create_topic
    from .test_txn_support import run_java_txn, txn_id

    ca_dir, _other = certs
    b = broker_factory(listeners=LISTENERS, ssl_certfile=ca_dir / "broker.crt",
                       ssl_keyfile=ca_dir / "broker.key")
    plain_addr, tls_addr = b.addresses
    create_topic(plain_addr, topic, 1)
    monkeypatch.setenv("TXN_DRIVER_CLIENT_PROPS", "security.protocol=SSL,ssl.truststore.type=PEM,"
                       f"ssl.truststore.location={ca_dir / 'ca.crt'}")
    res = run_java_txn("commit-abort", tls_addr, topic, 1, 3, txn_id("java-tls"))
    assert not res["errors"], res["errors"]
    committed = [v.split("|")[0] for _p, _o, v in res["read_committed"]]
    assert committed == [f"t{k}-p0-{i}" for k in (0, 2) for i in range(3)]
    assert len(res["read_uncommitted"]) == 9
