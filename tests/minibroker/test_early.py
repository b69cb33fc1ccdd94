"""The early listener (minibroker/net/early.py): its answers are the full broker's, byte for byte,
what it cannot answer reaches the broker unread, and a real client crosses the handover."""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from minibroker.app import build_dispatcher, start
from minibroker.broker import Broker
from minibroker.config import served_apis
from minibroker.config.listeners import Listener
from minibroker.config.options import Config, FsyncPolicy
from minibroker.net import early as early_listener
from minibroker_protocol import codec
from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.errors import ErrorCode
from minibroker_storage import feature_levels

from .conftest import RawClient

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _signals_restored():
    """early.start takes SIGINT and SIGTERM (a broker process's): give them back to pytest."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def _config(tmp_path: Path, **kw) -> Config:
    kw.setdefault("port", 0)
    return Config(host="127.0.0.1", data_dir=tmp_path / "data", fsync=FsyncPolicy("never"),
                  ready_file=tmp_path / "ready", **kw)


def _api_versions(version: int, corr: int, software: tuple[str, str] = ("mb-test", "1.0"),
                  **expected: object) -> bytes:
    cls = codec.request_type(ApiKey.ApiVersions, version)
    fields: dict[str, object] = dict(expected)  # v5: the cluster_id / node_id the client expects
    if version >= 3:
        fields |= {"client_software_name": software[0], "client_software_version": software[1]}
    body = codec.encode_request(cls(**fields), corr, "early-test")
    return struct.pack(">i", len(body)) + body


async def _raw_answer(c: RawClient) -> bytes:
    size = struct.unpack(">i", await asyncio.wait_for(c.reader.readexactly(4), 10))[0]
    return await asyncio.wait_for(c.reader.readexactly(size), 10)


async def _until(cond, what: str, limit: float = 5.0) -> None:
    deadline = time.monotonic() + limit
    while not cond():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("telemetry", ["off", "on"])
async def test_served_table_is_the_dispatchers(tmp_path, telemetry):
    cfg = _config(tmp_path, client_telemetry=telemetry)
    broker = Broker(cfg)
    try:
        assert served_apis.served(cfg) == build_dispatcher(broker).version_table()
    finally:
        await broker.stop()


async def test_early_answers_are_the_brokers_byte_for_byte(tmp_path):
    (tmp_path / "data").mkdir()
    feature_levels.save(tmp_path / "data", {"transaction.version": 1, "group.version": 1}, 5)
    cfg = _config(tmp_path, group_version=0)  # a level the command line changes: epoch 6
    early = early_listener.start(cfg)
    assert early is not None
    port = early.bound[0].port
    assert (tmp_path / "ready").read_text() == f"127.0.0.1:{port}\n"
    frames = [_api_versions(v, 100 + v) for v in range(6)]
    frames.append(struct.pack(">ihhih", 10, ApiKey.ApiVersions, 9, 109, -1))  # a future version
    c = await RawClient.connect(port)
    early_answers = []
    for f in frames:
        await c.send_raw(f)
        early_answers.append(await _raw_answer(c))
    running = await start(cfg, early)
    try:
        broker_answers = []
        for f in frames:  # the same connection, now the broker's
            await c.send_raw(f)
            broker_answers.append(await _raw_answer(c))
        assert early_answers == broker_answers
        assert len(set(early_answers)) == len(frames)
        features = running.broker.features
        assert (features.epoch, features.finalized()) == (6, [("transaction.version", 1),
                                                             ("share.version", 2),
                                                             ("streams.version", 1)])
        counts = running.broker.request_counts.counts
        # answered early and counted by the broker, with the software the connection had named
        # by then; the v9 one is refused, not counted
        assert counts[(ApiKey.ApiVersions, 5, "mb-test", "1.0")] == 2
        assert counts[(ApiKey.ApiVersions, 0, "unknown", "unknown")] == 1
        assert counts[(ApiKey.ApiVersions, 0, "mb-test", "1.0")] == 1
        assert not any(k[1] == 9 for k in counts)
        await c.close()
    finally:
        await running.close()
        early.close()  # what app.run does last
    assert not (tmp_path / "ready").exists()


async def test_what_it_cannot_answer_reaches_the_broker_unread(tmp_path):
    cfg = _config(tmp_path)
    early = early_listener.start(cfg)
    assert early is not None
    port = early.bound[0].port
    pipelined = await RawClient.connect(port)
    metadata = pipelined.frame(codec.request_type(ApiKey.Metadata, 12)(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False), corr=2)
    await pipelined.send_raw(_api_versions(3, 1) + metadata)
    first = await _raw_answer(pipelined)
    assert struct.unpack_from(">ih", first) == (1, 0)
    half = await RawClient.connect(port)
    whole = _api_versions(4, 7)
    await half.send_raw(whole[:9])
    bad_name = await RawClient.connect(port)
    await bad_name.send_raw(_api_versions(3, 8, ("-bad-", "1")))
    # v5 naming a broker (KIP-1242): the broker checks it, against its cluster id
    expecting = await RawClient.connect(port)
    await expecting.send_raw(_api_versions(5, 9, cluster_id="AAAAAAAAAAAAAAAAAAAAAA", node_id=1))
    gone = await RawClient.connect(port)
    await gone.close()
    await _until(lambda: len(early._conns) == 4, "the early listener sees 4 open connections")

    running = await start(cfg, early)
    try:
        corr, meta = await pipelined.recv(ApiKey.Metadata, 12)
        assert corr == 2 and meta.brokers[0].port == port
        await half.send_raw(whole[9:])
        corr, av = await half.recv(ApiKey.ApiVersions, 4)
        assert corr == 7 and av.error_code == ErrorCode.none
        corr, refused = await bad_name.recv(ApiKey.ApiVersions, 3)
        assert corr == 8 and refused.error_code == ErrorCode.invalid_request
        corr, elsewhere = await expecting.recv(ApiKey.ApiVersions, 5)
        assert corr == 9 and elsewhere.error_code == ErrorCode.rebootstrap_required
        assert elsewhere.api_keys == ()
        counts = running.broker.request_counts.counts
        # the software named to the early listener is the connection's for the broker too
        assert counts[(ApiKey.Metadata, 12, "mb-test", "1.0")] == 1
        for c in (pipelined, half, bad_name, expecting):
            await c.close()
    finally:
        await running.close()


async def test_a_real_client_crosses_the_handover(tmp_path):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    cfg = _config(tmp_path, num_partitions=1)
    early = early_listener.start(cfg)
    assert early is not None
    port = early.bound[0].port
    producer = confluent_kafka.Producer({"bootstrap.servers": f"127.0.0.1:{port}",
                                         "enable.idempotence": True, "message.timeout.ms": 20000})
    producer.produce("early-topic", b"first")
    # librdkafka's ApiVersions is answered early; its Metadata waits for the broker
    await _until(lambda: early._answered, "librdkafka's ApiVersions answered early")
    software = early._answered[0][2]
    assert software is not None and software[0].startswith("confluent-kafka-python")
    running = await start(cfg, early)
    try:
        loop = asyncio.get_running_loop()
        assert await loop.run_in_executor(None, producer.flush, 20) == 0
        log = running.broker.logs.get_log("early-topic", 0)
        assert log is not None and log.log_end_offset == 1
        by_api = running.broker.request_counts.by_api()
        assert by_api[ApiKey.Produce] == 1 and by_api[ApiKey.InitProducerId] == 1
    finally:
        await running.close()


async def test_not_used_where_its_answer_could_differ(tmp_path):
    cfg = _config(tmp_path)
    assert early_listener.start(replace(cfg, as_version="3.9")) is None
    assert early_listener.start(replace(cfg, max_api_versions=((0, 9),))) is None
    assert early_listener.start(replace(cfg, control_listener=("127.0.0.1", 0))) is None
    sasl_only = (Listener("SASL_PLAINTEXT", "127.0.0.1", 0, protocol="SASL_PLAINTEXT"),)
    assert early_listener.start(replace(cfg, listeners=sasl_only)) is None
    assert not (tmp_path / "ready").exists()


def test_not_used_when_another_broker_holds_the_data_dir(tmp_path):
    (tmp_path / "data").mkdir()
    fd = os.open(tmp_path / "data" / early_listener.LOCK_FILE, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert early_listener.start(_config(tmp_path)) is None
        assert not (tmp_path / "ready").exists()
    finally:
        os.close(fd)


def test_lock_file_is_the_storage_s():
    from minibroker_storage.manager import LOCK_FILE
    assert early_listener.LOCK_FILE == LOCK_FILE


def test_not_used_when_a_port_is_taken(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        assert early_listener.start(_config(tmp_path, port=taken.getsockname()[1])) is None
    finally:
        taken.close()


def test_close_takes_back_the_ready_file_and_the_port(tmp_path):
    early = early_listener.start(_config(tmp_path))
    assert early is not None and (tmp_path / "ready").exists()
    signal.raise_signal(signal.SIGTERM)  # caught: the broker would stop once its loop runs
    assert early.stop_requested
    port = early.bound[0].port
    early.close()
    assert not (tmp_path / "ready").exists()
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
    finally:
        s.close()


def test_a_sigterm_during_start_up_stops_cleanly(tmp_path):
    """SIGTERM as soon as the early listener announced the broker: exit 0, no ready file."""
    ready = tmp_path / "ready"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.Popen([sys.executable, "-m", "minibroker.cli.main", "--host", "127.0.0.1", "--port", "0",
                             "--data-dir", str(tmp_path / "data"), "--ready-file", str(ready)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert time.monotonic() < deadline and proc.poll() is None, "no ready file"
            time.sleep(0.002)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out.decode()
    assert b"Traceback" not in out
    assert not ready.exists()


def test_nothing_heavy_is_imported_before_the_first_answer(tmp_path):
    """The CLI's path to the early listener imports none of what the broker needs later:
    asyncio, uvloop, kio, structlog, the broker's own modules (issue 21's start-up budget)."""
    script = f"""
import sys, types
from pathlib import Path
fake = types.ModuleType("minibroker.app")
def run(config, started, early, sockets=None, control_sock=None, registry_sock=None):
    heavy = sorted(m for m in ("asyncio", "uvloop", "kio", "structlog", "minibroker.broker",
                               "minibroker.net.dispatch", "minibroker.net.server", "minibroker_storage.log")
                   if m in sys.modules)
    print("early", early is not None, "ready", Path({str(tmp_path / 'ready')!r}).exists(), "heavy", heavy)
    early.close()
fake.run = run
sys.modules["minibroker.app"] = fake
from minibroker.cli.main import main
main(["--host", "127.0.0.1", "--port", "0", "--data-dir", {str(tmp_path / 'data')!r},
      "--ready-file", {str(tmp_path / 'ready')!r}])
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "early True ready True heavy []"


async def test_bad_frames_are_left_to_the_broker(tmp_path):
    """Whatever the early listener cannot read is the broker's to refuse, as it always does:
    a negative or oversized size, a header cut short, an unknown api key. The broker stays up."""
    cfg = _config(tmp_path, max_request_bytes=1 << 20)
    early = early_listener.start(cfg)
    assert early is not None
    port = early.bound[0].port
    bad = [struct.pack(">i", -1) + b"\x00" * 8,
           struct.pack(">i", 1 << 30) + struct.pack(">hhih", ApiKey.ApiVersions, 0, 1, -1),
           struct.pack(">ihh", 4, ApiKey.ApiVersions, 0),
           struct.pack(">ihhih", 10, 9999, 0, 1, -1)]
    clients = []
    for frame in bad:
        c = await RawClient.connect(port)
        await c.send_raw(frame)
        clients.append(c)
    await _until(lambda: len(early._conns) == len(bad), "every connection accepted early")
    assert early._answered == []
    running = await start(cfg, early)
    try:
        for c in clients:
            assert await c.closed()
        good = await RawClient.connect(port)
        await good.send_raw(_api_versions(3, 5))
        assert struct.unpack_from(">ih", await _raw_answer(good)) == (5, 0)
        await good.close()
    finally:
        await running.close()
