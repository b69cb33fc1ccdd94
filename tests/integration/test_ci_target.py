"""The throw-away CI broker: --port 0 --ephemeral --ready-file, `minibroker health`, SIGTERM."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402

from minibroker.testing import MiniBroker  # noqa: E402

from .support import REPO_ROOT  # noqa: E402


def _cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minibroker", *args], cwd=str(REPO_ROOT),
                          capture_output=True, text=True, timeout=timeout)


def test_ephemeral_broker_serves_then_leaves_nothing_behind():
    with MiniBroker.from_command_line(["--port", "0", "--ephemeral"]) as b:
        (addr,) = b.addresses
        assert re.fullmatch(r"127\.0\.0\.1:\d+", addr)
        print(f"process start -> ready file: {b.ready_seconds * 1000:.0f} ms")
        health = _cli("health", "--bootstrap", addr)
        assert health.returncode == 0 and "healthy" in health.stdout, health
        topic = f"ci-{uuid.uuid4().hex[:8]}"
        p = Producer({"bootstrap.servers": addr, "enable.idempotence": True})
        for i in range(100):
            p.produce(topic, value=b"%d" % i)
        assert p.flush(15) == 0
        c = Consumer({"bootstrap.servers": addr, "group.id": "ci", "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 100 and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and not m.error():
                got.append(int(m.value()))
        c.close()
        assert got == list(range(100))
        data_dir = Path(re.search(r"data_dir=(\S+)", b.log_text().split("broker.started")[1]).group(1))
        assert data_dir.is_dir() and "minibroker-ephemeral-" in data_dir.name
        assert b.stop(timeout=10) == 0  # SIGTERM: clean stop, exit 0
        assert not data_dir.exists()
        assert not b.ready_file.exists()
        assert "broker.stopped" in b.log_text()


def test_health_fails_when_nothing_answers():
    import socket
    with socket.socket() as s:  # a port that was free a moment ago, nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = _cli("health", "--bootstrap", f"127.0.0.1:{port}", "--timeout", "2")
    assert r.returncode == 1 and "unhealthy" in r.stderr


def test_health_refuses_a_non_kafka_answer():
    import socket
    import threading
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def answer_garbage():
        conn, _ = srv.accept()
        with conn:
            conn.recv(100)
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    t = threading.Thread(target=answer_garbage, daemon=True)
    t.start()
    try:
        r = _cli("health", "--bootstrap", f"127.0.0.1:{srv.getsockname()[1]}", "--timeout", "3")
    finally:
        srv.close()
    assert r.returncode == 1 and "unhealthy" in r.stderr


def test_bad_listener_list_is_a_usage_error():
    r = _cli("--listeners", "SSL://127.0.0.1:0", "--ephemeral")
    assert r.returncode == 2 and "an SSL listener needs --ssl-certfile" in r.stderr
    r = _cli("--listeners", "SASL_SSL://127.0.0.1:0", "--ephemeral")
    assert r.returncode == 2 and "an SSL listener needs --ssl-certfile" in r.stderr
    r = _cli("--listeners", "SASL_PLAINTEXT://127.0.0.1:0", "--sasl-mechanisms", "GSSAPI", "--ephemeral")
    assert r.returncode == 2 and "--sasl-mechanisms: GSSAPI" in r.stderr
    r = _cli("--listeners", "SASL_PLAINTEXT://127.0.0.1:0", "--sasl-users", "/nonexistent/users", "--ephemeral")
    assert r.returncode == 2 and "--sasl-users /nonexistent/users" in r.stderr
    r = _cli("--listeners", "A://127.0.0.1:0", "--advertised-listeners", "B://h:1", "--ephemeral")
    assert r.returncode == 2 and "does not define" in r.stderr


def test_a_data_dir_outlives_its_broker(tmp_path):
    data = tmp_path / "data"
    with MiniBroker.from_command_line(["--port", "0", "--data-dir", str(data)]) as b:
        addr = b.addresses[0]
        p = Producer({"bootstrap.servers": addr, "acks": "all"})
        p.produce("kept", value=b"x")
        assert p.flush(15) == 0
        assert b.stop() == 0
    assert (data / "kept-0").is_dir()  # not ephemeral: the data stays


def test_stale_ready_file_is_removed_before_start(tmp_path):
    import socket
    ready = tmp_path / "ready"
    ready.write_text("127.0.0.1:1\n")  # left by a broker that was killed
    with socket.socket() as busy:  # the new broker cannot bind, so it never gets ready
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        r = _cli("--port", str(busy.getsockname()[1]), "--ephemeral", "--ready-file", str(ready))
    assert r.returncode == 1 and "cannot listen on PLAINTEXT://127.0.0.1:" in r.stderr
    assert not ready.exists()  # a CI script waiting on it does not get the dead address


def test_sigterm_during_startup_stops_cleanly(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("MINIBROKER_")}
    env["TMPDIR"] = str(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "minibroker", "--port", "0", "--ephemeral"],
                            cwd=str(REPO_ROOT), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        # Wait until the ephemeral dir exists (the signal handlers are in place by then) but
        # the broker is not necessarily listening yet.
        deadline = time.monotonic() + 15
        while not list(tmp_path.glob("minibroker-ephemeral-*")) and time.monotonic() < deadline:
            time.sleep(0.002)
        proc.terminate()
        assert proc.wait(10) == 0, proc.stderr.read()
        assert not list(tmp_path.glob("minibroker-ephemeral-*"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_every_interface_is_one_dual_stack_port():
    # An empty host, like Kafka's PLAINTEXT://:9092, binds one socket for IPv4 and IPv6, so
    # port 0 gives one port and the advertised localhost works whatever it resolves to.
    with MiniBroker.from_command_line(["--listeners", "PLAINTEXT://:0", "--ephemeral"]) as b:
        (addr,) = b.addresses
        port = int(addr.rsplit(":", 1)[1])
        assert addr == f"localhost:{port}"
        for host in ("127.0.0.1", "::1"):
            r = _cli("health", "--bootstrap", f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
            assert r.returncode == 0, (host, r.stderr)


def test_ipv6_addresses_are_bracketed():
    with MiniBroker.from_command_line(["--host", "::1", "--port", "0", "--ephemeral"]) as b:
        (addr,) = b.addresses
        assert re.fullmatch(r"\[::1\]:\d+", addr), addr
        r = _cli("health", "--bootstrap", addr)
        assert r.returncode == 0 and f"healthy: {addr}" in r.stdout, r


def test_health_usage_errors_exit_1_not_2():
    # Docker reserves HEALTHCHECK exit code 2.
    for args in (["--bootstrap", "localhost"], ["--bootstrap", "h:70000"], ["--timeout", "0"]):
        r = _cli("health", *args)
        assert r.returncode == 1, (args, r)
