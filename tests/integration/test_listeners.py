"""Several listeners, each with its advertised address (the compose case), with real clients.

A client bootstrapping on a listener must be told that listener's advertised address in
Metadata and FindCoordinator, or it would follow the other network's name after bootstrap.
"""

from __future__ import annotations

import re
import time
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from minibroker.testing import MiniBroker  # noqa: E402


def _brokers(bootstrap: str) -> list[tuple[int, str, int]]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return [(b.id, b.host, b.port) for b in md.brokers.values()]


def _txn_roundtrip(bootstrap: str, topic: str, n: int = 20) -> list[bytes]:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex}",
                  "linger.ms": 5})
    p.init_transactions(15)
    p.begin_transaction()
    for i in range(n):
        p.produce(topic, value=b"committed-%d" % i)
    p.commit_transaction(15)
    p.begin_transaction()
    p.produce(topic, value=b"aborted")
    p.abort_transaction(15)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and not m.error():
                got.append(m.value())
        c.commit(asynchronous=False)  # FindCoordinator + OffsetCommit on this listener
    finally:
        c.close()
    return got


def test_each_listener_advertises_itself():
    with MiniBroker.from_command_line(["--listeners", "A://127.0.0.1:0,B://127.0.0.1:0",
                   "--advertised-listeners", "B://localhost:0", "--ephemeral"]) as b:
        a_addr, b_addr = b.addresses
        a_port, b_port = int(a_addr.rsplit(":", 1)[1]), int(b_addr.rsplit(":", 1)[1])
        assert a_addr == f"127.0.0.1:{a_port}" and b_addr == f"localhost:{b_port}"
        assert _brokers(a_addr) == [(1, "127.0.0.1", a_port)]
        assert _brokers(f"127.0.0.1:{b_port}") == [(1, "localhost", b_port)]
        for addr in (a_addr, b_addr):
            topic = f"listeners-{uuid.uuid4().hex[:8]}"
            assert _txn_roundtrip(addr, topic) == [b"committed-%d" % i for i in range(20)]


def test_compose_pair_host_client_never_sees_the_internal_name():
    # INTERNAL's advertised name does not resolve here, as `minibroker` does not on a host
    # outside the compose network: everything a host client does must go through EXTERNAL.
    with MiniBroker.from_command_line(["--listeners", "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
                   "--advertised-listeners", "INTERNAL://minibroker.invalid:29092",
                   "--ephemeral"]) as b:
        internal, external = b.addresses
        assert internal == "minibroker.invalid:29092"
        ext_port = int(external.rsplit(":", 1)[1])
        assert _brokers(external) == [(1, "127.0.0.1", ext_port)]
        # Bootstrapping on the internal socket itself tells the client the internal name.
        int_port = int(re.search(r"INTERNAL://127\.0\.0\.1:([1-9]\d*)", b.log_text()).group(1))
        assert _brokers(f"127.0.0.1:{int_port}") == [(1, "minibroker.invalid", 29092)]
        topic = f"compose-{uuid.uuid4().hex[:8]}"
        assert len(_txn_roundtrip(external, topic)) == 20


def test_describe_configs_lists_the_listeners():
    from confluent_kafka.admin import ConfigResource
    with MiniBroker.from_command_line(["--listeners", "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
                   "--advertised-listeners", "INTERNAL://minibroker:29092", "--ephemeral"]) as b:
        admin = AdminClient({"bootstrap.servers": b.addresses[1]})
        res = ConfigResource(ConfigResource.Type.BROKER, "1")
        configs = admin.describe_configs([res])[res].result(timeout=10)
        listeners = configs["listeners"].value.split(",")
        advertised = configs["advertised.listeners"].value.split(",")
        assert [x.split("://")[0] for x in listeners] == ["INTERNAL", "EXTERNAL"]
        assert advertised[0] == "INTERNAL://minibroker:29092"
        assert advertised[1] == "EXTERNAL://" + b.addresses[1]
