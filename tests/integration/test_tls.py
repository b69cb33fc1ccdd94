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


class _TLSConnection:
    """A raw Kafka connection over TLS at one protocol version whose TLS records' bytes go out
    in the pieces a test chooses, even a record cut in two (ssl.SSLObject on memory BIOs over a
    plain socket; tests/reference/client.py encodes and decodes)."""

    def __init__(self, addr: str, ca: str, version) -> None:
        import socket
        import ssl

        from tests.reference.client import Connection

        host, port = addr.rsplit(":", 1)
        ctx = ssl.create_default_context(cafile=ca)
        ctx.minimum_version = ctx.maximum_version = version
        self.raw = socket.create_connection((host, int(port)), timeout=20)
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.incoming, self.outgoing, server_hostname=host)
        for _ in range(20):
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.raw.sendall(self.outgoing.read())
                self.incoming.write(self.raw.recv(65536) or b"")
        self.raw.sendall(self.outgoing.read())
        self.version = self.tls.version()
        self.corr = 0
        outer = self

        class Over(Connection):  # answers read through the TLS object
            def _recv_exact(self, n: int) -> bytes:
                return outer.recv_exact(n)

        self.conn = Over(host, int(port), timeout=20)

    def records(self, data: bytes) -> bytes:
        """``data`` as TLS records (each write of at most 16 KiB is one record)."""
        self.tls.write(data)
        return self.outgoing.read()

    def recv_exact(self, n: int) -> bytes:
        import ssl

        out = b""
        for _ in range(10_000):
            if len(out) >= n:
                break
            try:
                out += self.tls.read(n - len(out))
            except ssl.SSLWantReadError:
                chunk = self.raw.recv(65536)
                assert chunk, "the broker closed the connection"
                self.incoming.write(chunk)
        return out

    def frame(self, entity) -> bytes:
        import struct

        from minibroker_protocol.codec import encode_request

        self.corr += 1
        payload = encode_request(entity, self.corr, "tls-test")
        return struct.pack(">i", len(payload)) + payload

    def answer(self, entity):
        return self.conn._read_answer(entity, self.corr)


@pytest.mark.parametrize("version", ["TLSv1_2", "TLSv1_3"])
def test_a_large_request_in_pieces_then_a_small_one_over_tls(broker_factory, topic, certs, version):
    """While a large frame is incomplete the broker sleeps until most of it is there
    (SO_RCVLOWAT, less one TLS record): a frame whose last bytes come late, in small records,
    is still read, and the small request behind it answered (TLS 1.2's and 1.3's records)."""
    import ssl
    from datetime import timedelta

    from minibroker_protocol.records import build_batch
    from tests.reference.client import part, req

    from .clients import create_topic

    ca_dir, _other = certs
    b = broker_factory(listeners=LISTENERS, ssl_certfile=ca_dir / "broker.crt",
                       ssl_keyfile=ca_dir / "broker.key")
    plain_addr, tls_addr = b.addresses
    create_topic(plain_addr, topic, 1)
    c = _TLSConnection(tls_addr, str(ca_dir / "ca.crt"), getattr(ssl.TLSVersion, version))
    assert c.version == version.replace("_", ".")
    values = [bytes([i % 251]) * 1000 for i in range(600)]  # ~600 KB: larger than one wait
    produce = req(0, 9, transactional_id=None, acks=-1, timeout=timedelta(seconds=20), topic_data=[
        part((0, 9), "TopicProduceData", name=topic, partition_data=[
            part((0, 9), "PartitionProduceData", index=0,
                 records=build_batch([(None, v) for v in values]))])])
    big = c.frame(produce)
    c.raw.sendall(c.records(big[:70_000]))
    time.sleep(0.3)
    c.raw.sendall(c.records(big[70_000:-16_000]))
    time.sleep(0.3)
    # The frame's last 16,000 bytes in one record whose last 10 bytes come late: the broker holds
    # most of that record undecrypted while 16,000 bytes are missing, and must not wait for them.
    last = c.records(big[-16_000:])
    c.raw.sendall(last[:-10])
    time.sleep(0.5)
    c.raw.sendall(last[-10:])
    answer = c.answer(produce)
    (partition,) = answer.responses[0].partition_responses
    assert partition.error_code == 0 and partition.base_offset == 0
    metadata = req(3, 12, topics=None, allow_auto_topic_creation=False,
                   include_topic_authorized_operations=False)
    c.raw.sendall(c.records(c.frame(metadata)))
    assert c.answer(metadata).brokers
    c.raw.close()
    assert "Traceback" not in b.log_text()
