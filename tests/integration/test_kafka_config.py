"""A broker process configured the Kafka way (issue 13): ``minibroker serve server.properties``
with ``KAFKA_*`` variables on top, and ``--wait-for-config`` (the Testcontainers mechanism)
without a container: the broker binds nothing until the file arrives, then advertises what it
says. Every process is killed by PID at the end, every wait is bounded."""

from __future__ import annotations

import shutil
import signal
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from minibroker.testing import MiniBroker

from .support import HOST, free_port, port_in_use

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402


def _brokers(bootstrap: str) -> list[tuple[int, str, int]]:
    md = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"}).list_topics(timeout=10)
    return [(b.id, b.host, b.port) for b in md.brokers.values()]


def _roundtrip(bootstrap: str, topic: str) -> list[bytes]:
    p = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "linger.ms": 5})
    for i in range(5):
        p.produce(topic, value=b"v%d" % i)
    assert p.flush(15) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                  "group.id": f"g-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < 5 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
    finally:
        c.close()
    return sorted(got)


def test_server_properties_and_kafka_variables():
    port = free_port()
    work = Path(tempfile.mkdtemp(prefix="minibroker-props-"))
    props = work / "server.properties"
    props.write_text(
        "# as kafka-server-start.sh would take it\n"
        "process.roles=broker,controller\n"
        f"listeners=PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:0\n"
        "controller.listener.names=CONTROLLER\n"
        f"log.dirs={work / 'kafka-logs'}\n"
        "num.partitions=2\n"
        "node.id=4\n")
    b = MiniBroker.from_command_line(["serve", str(props)], env={
        "KAFKA_NUM_PARTITIONS": "3", "KAFKA_NODE_ID": "7",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://localhost:{port}"}).start(wait=False)
    try:
        b.wait_for_log("broker.started")
        bootstrap = f"{HOST}:{port}"
        assert _brokers(bootstrap) == [(7, "localhost", port)]         # KAFKA_* over the file
        topic = f"kcfg-{uuid.uuid4().hex[:8]}"
        assert _roundtrip(bootstrap, topic) == [b"v%d" % i for i in range(5)]
        md = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"}).list_topics(topic, timeout=10)
        assert len(md.topics[topic].partitions) == 3
        assert (work / "kafka-logs" / f"{topic}-2").is_dir()           # log.dirs from the file
        log = b.log_text()
        assert "config.controller_listeners_dropped" in log and "process.roles" in log
        b.proc.send_signal(signal.SIGTERM)
        assert b.proc.wait(15) == 0
    finally:
        b.close()
        shutil.rmtree(work, ignore_errors=True)


def test_wait_for_config_binds_only_once_the_file_arrives():
    port = free_port()
    late = Path(tempfile.mkdtemp(prefix="minibroker-wait-")) / "late.properties"
    b = MiniBroker.from_command_line(["--host", HOST, "--port", str(port), "--ephemeral",
                                      "--wait-for-config", str(late)]).start(wait=False)
    try:
        b.wait_for_log("config.waiting_for_file")
        time.sleep(0.5)
        assert not port_in_use(port), "bound before its configuration arrived"
        assert b.proc.poll() is None
        # Written the way Testcontainers' copyFileToContainer lands a file: not atomically.
        with open(late, "w") as f:
            f.write(f"advertised.listeners=PLAINTEXT://localhost:{port}\n")
            f.flush()
            time.sleep(0.05)
            f.write("num.partitions=2\n")
        b.wait_for_log("broker.started")
        bootstrap = f"{HOST}:{port}"
        assert _brokers(bootstrap) == [(1, "localhost", port)]
        topic = f"wait-{uuid.uuid4().hex[:8]}"
        assert _roundtrip(bootstrap, topic) == [b"v%d" % i for i in range(5)]
        md = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"}).list_topics(topic, timeout=10)
        assert len(md.topics[topic].partitions) == 2
    finally:
        b.close()
        shutil.rmtree(late.parent, ignore_errors=True)


def test_sigterm_while_waiting_for_config_exits_0():
    late = Path(tempfile.mkdtemp(prefix="minibroker-wait-")) / "never.properties"
    b = MiniBroker.from_command_line(["--port", "0", "--ephemeral", "--wait-for-config", str(late)]
                                     ).start(wait=False)
    try:
        b.wait_for_log("config.waiting_for_file")
        t0 = time.monotonic()
        b.proc.send_signal(signal.SIGTERM)
        assert b.proc.wait(10) == 0, b.log_text()
        assert time.monotonic() - t0 < 2
        assert "config.wait_stopped" in b.log_text()
    finally:
        b.close()
        shutil.rmtree(late.parent, ignore_errors=True)
