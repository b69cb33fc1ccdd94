"""The fault proxy itself, and proof that the fault tests have teeth.

- Against a tiny framed echo server in this process: frames pass whole and in
  order, a drop silences the connection, a cut resets it, a delay holds the
  response, counters count, stop() closes everything.
- Against a real broker with a NON-idempotent confluent-kafka producer: the same
  faults as test_idempotence_faults.py make the log hold duplicates, and the
  exactly-once check there reports them. So when those tests pass, it is the
  broker's duplicate detection at work, not luck of the fault schedule.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from . import wire
from .clients import create_topic
from .faultproxy import FaultConfig, FaultProxy
from .test_idempotence_faults import (
    BROKER_ARGS,
    FAULTS,
    PARTITIONS,
    check_exactly_once_in_order,
    expected_value,
    msg_id,
    read_back_directly,
)


class FramedEcho:
    """A loopback server answering each request frame (api_key, ver, corr, ...) with (corr, payload)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.stop_flag = threading.Event()
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        for _ in range(100_000):
            if self.stop_flag.is_set():
                return
            try:
                c, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.conns.append(c)
            threading.Thread(target=self._echo, args=(c,), daemon=True).start()

    def _echo(self, c: socket.socket) -> None:
        c.settimeout(10)
        try:
            for _ in range(100_000):
                frame = wire.recv_frame(c)
                corr = struct.unpack_from(">i", frame, 4)[0]
                wire.send_frame(c, struct.pack(">i", corr) + frame[8:])
        except (OSError, wire.ConnectionClosed, ValueError):
            pass
        finally:
            c.close()

    def close(self) -> None:
        self.stop_flag.set()
        self.thread.join(5)
        self.sock.close()
        for c in self.conns:
            try:
                c.close()
            except OSError:
                pass


def _request(api_key: int, corr: int, payload: bytes = b"x" * 10) -> bytes:
    return struct.pack(">hhi", api_key, 1, corr) + payload


@pytest.fixture
def echo():
    e = FramedEcho()
    try:
        yield e
    finally:
        e.close()


def _roundtrip(sock, api_key, corr, payload=b"hello"):
    wire.send_frame(sock, _request(api_key, corr, payload))
    frame = wire.recv_frame(sock)
    assert struct.unpack_from(">i", frame, 0)[0] == corr
    assert frame[4:] == payload
    return frame


def test_proxy_forwards_whole_frames_in_order(echo):
    with FaultProxy(echo.port, seed=3) as px:
        with wire.connect(px.port) as s:
            for corr in range(200):
                _roundtrip(s, 3, corr, bytes([corr % 256]) * (corr * 37 % 5000))
        s = px.stats()
        assert s["connections"] == 1 and s["requests"] == 200 and s["forwarded"] == 200
        assert s.get("drops", 0) == s.get("cuts", 0) == s.get("delays", 0) == 0


def test_proxy_drop_silences_the_connection(echo):
    cfg = FaultConfig(drop=1.0, api_keys=frozenset({0}), warmup=2)
    with FaultProxy(echo.port, seed=3, config=cfg) as px:
        with wire.connect(px.port, timeout=1.0) as s:
            _roundtrip(s, 0, 1)  # warm-up
            _roundtrip(s, 3, 2)  # not an eligible api key
            _roundtrip(s, 0, 3)  # warm-up
            wire.send_frame(s, _request(0, 4))  # dropped
            wire.send_frame(s, _request(3, 5))  # silenced: nothing after a drop gets through
            with pytest.raises(socket.timeout):
                wire.recv_frame(s)
        st = px.stats()
        assert st["drops"] == 1 and st["drops.Produce"] == 1 and st["silenced"] == 1, st
        assert px.drops_of(0) == 1
        # A new connection works again.
        px.faults_enabled = False
        with wire.connect(px.port) as s:
            _roundtrip(s, 0, 6)


def test_proxy_drop_every_forces_drops(echo):
    cfg = FaultConfig(drop=0.0, drop_every=3, max_drops=2)
    with FaultProxy(echo.port, seed=3, config=cfg) as px:
        for round_ in range(2):
            with wire.connect(px.port, timeout=1.0) as s:
                _roundtrip(s, 3, 100)  # not a Produce response: does not count
                for corr in range(3):
                    _roundtrip(s, 0, corr)
                wire.send_frame(s, _request(0, 3))  # the 4th Produce response since the last drop
                with pytest.raises(socket.timeout):
                    wire.recv_frame(s)
        with wire.connect(px.port, timeout=1.0) as s:  # max_drops reached
            for corr in range(10):
                _roundtrip(s, 0, corr)
        assert px.drops_of(0) == 2, px.summary()


def test_proxy_cut_resets_and_delay_holds(echo):
    with FaultProxy(echo.port, seed=5, config=FaultConfig(cut=1.0, max_cuts=1)) as px:
        with wire.connect(px.port, timeout=5.0) as s:
            wire.send_frame(s, _request(0, 1))
            with pytest.raises((wire.ConnectionClosed, ConnectionResetError)):
                wire.recv_frame(s)
        assert px.stats()["cuts"] == 1 and px.cuts_of(0) == 1
        with wire.connect(px.port) as s:  # max_cuts reached: passes again
            _roundtrip(s, 0, 2)
    cfg = FaultConfig(delay=1.0, delay_range=(0.3, 0.3), max_delays=1)
    with FaultProxy(echo.port, seed=5, config=cfg) as px:
        with wire.connect(px.port) as s:
            t = time.monotonic()
            _roundtrip(s, 0, 1)
            assert time.monotonic() - t >= 0.25
            t = time.monotonic()
            _roundtrip(s, 0, 2)
            assert time.monotonic() - t < 0.25
        assert px.stats()["delays"] == 1


def test_proxy_refuses_while_upstream_is_down_and_stops_cleanly(echo):
    px = FaultProxy(None, seed=1).start()
    try:
        # No upstream yet: the connection is reset at once (the reset may already hit connect()).
        with pytest.raises((wire.ConnectionClosed, ConnectionResetError, BrokenPipeError)):
            with wire.connect(px.port, timeout=2.0) as s:
                wire.send_frame(s, _request(18, 1))
                wire.recv_frame(s)
        px.set_upstream(echo.port)
        s = wire.connect(px.port, timeout=2.0)
        _roundtrip(s, 18, 2)
        t = time.monotonic()
        px.stop()
        assert time.monotonic() - t < 5
        with pytest.raises((wire.ConnectionClosed, ConnectionResetError, OSError)):
            wire.send_frame(s, _request(18, 3))
            wire.recv_frame(s)
        s.close()
        with pytest.raises(OSError):
            wire.connect(px.port, timeout=1.0).close()
        assert px.stats()["upstream_refused"] == 1
    finally:
        px.stop()


# -- the fault tests would see duplicates --------------------------------------------------

@pytest.mark.timeout(120)
def test_faults_make_duplicates_without_idempotence(broker_factory, topic):
    """enable.idempotence=false through the same faults: the exactly-once check must fail."""
    from confluent_kafka import Producer

    count = 10_000
    proxy = FaultProxy(seed=7, config=FaultConfig(**FAULTS))
    proxy.faults_enabled = False
    proxy.start()
    try:
        b = broker_factory(BROKER_ARGS + ["--advertised-port", str(proxy.port)])
        proxy.set_upstream(b.port)
        create_topic(b.bootstrap_servers, topic, PARTITIONS)
        proxy.faults_enabled = True
        producer = Producer({
            "bootstrap.servers": proxy.bootstrap, "enable.idempotence": False, "acks": "all",
            "max.in.flight.requests.per.connection": 5, "message.timeout.ms": 60000,
            "socket.timeout.ms": 2500, "request.timeout.ms": 2500, "retry.backoff.ms": 50,
            "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
            "linger.ms": 2, "batch.num.messages": 200, "log_level": 3,
        })
        failed = []
        # Produce in slices, so the faults hit Produce responses however fast the broker is.
        deadline = time.monotonic() + 90
        for i in range(count):
            p, s = i % PARTITIONS, i // PARTITIONS
            producer.produce(topic, key=msg_id(p, s).encode(), value=expected_value(p, s), partition=p,
                             on_delivery=lambda err, msg: failed.append(err) if err else None)
            if i % 500 == 499:
                producer.flush(max(0.1, deadline - time.monotonic()))
            if proxy.drops_of(0) >= 2 or time.monotonic() > deadline:
                break
        sent = i + 1
        assert producer.flush(max(0.1, deadline - time.monotonic())) == 0
        del producer  # no reconnect attempts to the stopped proxy from here on
        assert proxy.drops_of(0) > 0, f"no Produce response dropped: {proxy.summary()}"
        counts = {p: sent // PARTITIONS + (1 if p < sent % PARTITIONS else 0) for p in range(PARTITIONS)}
        ends, records = read_back_directly(proxy, b, topic)
        with pytest.raises(AssertionError, match=r"[1-9]\d* messages duplicated"):
            check_exactly_once_in_order(ends, records, counts)
        print(f"sent {sent}, log holds {sum(ends.values())}; proxy {proxy.summary()}")
    finally:
        proxy.stop()
