"""``MiniBroker`` edge cases: a taken port on restart, a broker that cannot start, topic names."""

from __future__ import annotations

import re
import socket
import threading
import time

import pytest

from minibroker.testing import MiniBroker, MiniBrokerError, topic_name


def _occupy(port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


def test_restart_keeps_the_port_and_waits_for_it_to_free_up() -> None:
    with MiniBroker(name="portwait") as b:
        port = b.port
        b.stop()
        squatter = _occupy(port)
        try:
            # Released while start() is retrying: the broker must come back on the same port.
            threading.Timer(0.5, squatter.close).start()
            t0 = time.monotonic()
            b.start()
        finally:
            squatter.close()
        assert b.port == port and b.bootstrap_servers == f"127.0.0.1:{port}"
        assert time.monotonic() - t0 > 0.4


def test_port_taken_for_good_moves_to_a_new_port_with_a_warning() -> None:
    with MiniBroker(name="portmove") as b:
        port = b.port
        b.stop()
        b.port_wait = 0.5
        with _occupy(port):
            with pytest.warns(RuntimeWarning, match=f"port {port} stayed taken"):
                b.start()
        assert b.running and b.port != port and b.bootstrap_servers.endswith(f":{b.port}")


def test_explicit_port_taken_is_an_error() -> None:
    with _occupy(0) as squatter:
        port = squatter.getsockname()[1]
        b = MiniBroker(name="explicit", port=port)
        try:
            with pytest.raises(MiniBrokerError, match=f"port {port} is in use"):
                b.start()
        finally:
            b.close()


def test_start_failure_shows_the_broker_log() -> None:
    b = MiniBroker(name="bad", num_partitions="many")
    with pytest.raises(MiniBrokerError) as info:
        with b:
            pass
    message = str(info.value)
    assert "exited with code 2 during start-up" in message
    assert "--num-partitions" in message and "broker.log" in message
    assert b.closed and not b.work_dir.exists()


def test_caller_data_dir_is_kept(tmp_path) -> None:
    data = tmp_path / "data"
    with MiniBroker(data, name="own-dir") as b:
        assert b.data_dir == data
    assert (data / "meta.properties").exists() and not b.work_dir.exists()


@pytest.mark.parametrize("hint, prefix", [
    ("test_x[1-a]", "test_x-1-a-"),
    ("__consumer_offsets", "consumer_offsets-"),
    ("../..", "topic-"),
    ("", "topic-"),
])
def test_topic_name(hint: str, prefix: str) -> None:
    name = topic_name(hint)
    assert name.startswith(prefix) and re.fullmatch(r"[a-zA-Z0-9._-]{1,249}", name), name
    assert len(topic_name("y" * 1000)) == 249
    assert topic_name(hint) != name
