"""``MiniBroker`` edge cases: a taken port on restart, a broker that cannot start, topic names."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
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


# -- what the project's own integration tests use (issue 15: one launcher) -----------------------

def _environ(pid: int) -> dict[str, str]:
    raw = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def test_listens_on_tells_whose_socket_it_is() -> None:
    import os

    from minibroker.testing.ports import listening_ports, listens_on

    with _occupy(0) as mine:
        port = mine.getsockname()[1]
        assert listens_on(os.getpid(), port) is True and port in listening_ports(os.getpid())
        other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            assert listens_on(other.pid, port) is False
        finally:
            other.kill()
            other.wait()
    assert listens_on(2**22 + 12345, port) is None  # no such process


def test_a_port_answered_by_another_process_is_refused(monkeypatch) -> None:
    import minibroker.testing.broker as handle

    b = MiniBroker(name="stranger")
    try:
        b.start()
        # As if the restarted broker's port were held by a socket of some other process.
        monkeypatch.setattr(handle, "listening_ports", lambda pid: {1})
        with pytest.raises(MiniBrokerError, match="is not that process's"):
            b.restart()
        assert not b.running
    finally:
        b.close()


def test_the_bound_port_is_kept_when_another_is_advertised() -> None:
    # --advertised-port (a proxy in front): clients get the advertised port, restarts the bound one.
    with _occupy(0) as proxy:
        advertised = proxy.getsockname()[1]
        with MiniBroker(name="advertised", args=["--advertised-port", str(advertised)]) as b:
            assert b.bootstrap_servers == f"127.0.0.1:{advertised}" and b.port != advertised
            port = b.port
            b.restart()
            assert b.port == port


def test_restart_with_other_arguments_and_crash_hooks() -> None:
    with MiniBroker(name="hooks", crash_at="txn.after_prepare", snapshot_records=6) as b:
        env = _environ(b.pid)
        first = b.log_text().split("===== start #1: ")[1].splitlines()[0]
        assert "--faults " in first and "crash-at.json" in first  # the crash point is a fault rule
        assert "fault.added" in b.log_text() and "txn.after_prepare" in b.log_text()
        assert env["MINIBROKER_TEST_SNAPSHOT_RECORDS"] == "6"
        b.restart(args=["--num-partitions", "3"], crash_at=None)
        env = _environ(b.pid)
        assert env["MINIBROKER_TEST_SNAPSHOT_RECORDS"] == "6"
        second = b.log_text().split("===== start #2: ")[1].splitlines()[0]
        assert second.endswith("--num-partitions 3") and "--faults" not in second


def test_from_command_line_adds_nothing_but_the_ready_file() -> None:
    with MiniBroker.from_command_line(["--port", "0", "--ephemeral"], name="cmdline") as b:
        assert b.command()[3:] == ["--port", "0", "--ephemeral", "--ready-file", str(b.ready_file)]
        (addr,) = b.addresses
        assert addr == b.bootstrap_servers and b.ready_seconds is not None and b.ready_seconds > 0
        assert b.stop() == 0 and not b.ready_file.exists()


def test_from_command_line_that_fails_reports_the_exit_code() -> None:
    b = MiniBroker.from_command_line(["--port", "0", "--num-partitions", "0"], name="badcmd")
    with pytest.raises(MiniBrokerError, match="exited with code 2"):
        b.start()
    assert b.returncodes == [2]
    b.close()


def test_start_without_waiting_then_wait_for_log_and_ready(tmp_path) -> None:
    late = tmp_path / "late.properties"
    b = MiniBroker.from_command_line(["--port", "0", "--ephemeral", "--wait-for-config", str(late)],
                                     name="nowait", startup_timeout=20)
    try:
        b.start(wait=False)
        b.wait_for_log("config.waiting_for_file", timeout=15)
        assert not b.ready_file.exists() and b.running
        late.write_text("num.partitions=2\n")
        b.wait_ready()
        assert b.addresses and b.stop() == 0
    finally:
        b.close()
