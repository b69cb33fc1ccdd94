"""Hostile connections against a real broker (issue 13, defect 2).

A 4-byte size prefix announcing 100 MB used to make the broker allocate (and zero) 128 MiB
at once: 20 connections sending 14 bytes each took it from 34 MB to 2.6 GB. Now a frame's
buffer grows with what arrives, all connections share --queued-max-request-bytes, and a
refused accept at the file-descriptor limit is logged instead of silently resetting clients.
"""

from __future__ import annotations

import resource
import socket
import struct
import time

import pytest

from minibroker.testing import MiniBroker

from . import wire
from .support import project_broker

METADATA = 3


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def open_fds(pid: int) -> int:
    import os

    return len(os.listdir(f"/proc/{pid}/fd"))


def wait_for_log(b: MiniBroker, needle: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = b.log_text()
        if needle in text:
            return text
        time.sleep(0.1)
    raise AssertionError(f"{needle!r} not in the broker log\n{b.log_tail()}")


def announce(port: int, size: int, body: bytes) -> socket.socket:
    s = wire.connect(port)
    s.sendall(struct.pack(">i", size) + body)
    return s


def metadata_v4(topics: list[str], correlation_id: int) -> bytes:
    Req = wire._kio_request(METADATA, 4)
    import kio.schema.metadata.v4.request as m
    from kio.schema.types import TopicName

    req = Req(topics=tuple(m.MetadataRequestTopic(name=TopicName(t)) for t in topics),
              allow_auto_topic_creation=False)
    return wire.encode_request(req, correlation_id)


def test_announced_sizes_cost_nothing_until_the_bytes_arrive():
    with project_broker(name="conn-mem-announce") as b:
        base = rss_mib(b.pid)
        socks = []
        try:
            for _ in range(20):
                socks.append(announce(b.port, 104_857_590, b"x" * 10))
            time.sleep(1.0)
            after = rss_mib(b.pid)
            # Before the fix: 2.6 GB (20 x 128 MiB zeroed at once).
            assert after < 200, f"RSS {after:.0f} MiB with 20 connections of 14 bytes (was {base:.0f})"
            assert after - base < 60, f"RSS grew from {base:.0f} to {after:.0f} MiB"
            t0 = time.monotonic()
            versions = wire.api_versions(b.port, timeout=5.0)
            assert versions and time.monotonic() - t0 < 2.0
        finally:
            for s in socks:
                s.close()


def test_past_the_budget_connections_wait_and_the_broker_keeps_serving():
    budget = 2_000_000
    with project_broker(["--queued-max-request-bytes", str(budget)], name="conn-mem-budget") as b:
        base = rss_mib(b.pid)
        socks = []
        try:
            chunk = b"y" * 1_500_000
            for _ in range(8):
                s = announce(b.port, 50_000_000, b"")
                s.settimeout(0.5)
                socks.append(s)
            sent = [0] * len(socks)
            # Each sends 1.5 MB of its 50 MB frame, as far as the broker reads it.
            deadline = time.monotonic() + 10
            for i, s in enumerate(socks):
                s.setblocking(False)
                while sent[i] < len(chunk) and time.monotonic() < deadline:
                    try:
                        sent[i] += s.send(chunk[sent[i]:])
                    except BlockingIOError:
                        break
            text = wait_for_log(b, "connection.reads_paused")
            assert f"limit={budget}" in text
            time.sleep(0.5)
            held = rss_mib(b.pid) - base
            # The budget, plus the one frame allowed past it (grown to what arrived), plus
            # what a paused connection's last read brought: far from 8 x 50 MB.
            assert held < 60, f"RSS grew {held:.0f} MiB past a {budget} byte budget"
            assert wire.api_versions(b.port, timeout=5.0)
        finally:
            for s in socks:
                s.close()
        wait_for_log(b, "connection.reads_resumed")
        # A request larger than the whole budget still goes through (one frame may pass it).
        topics = [f"absent-topic-{i:06d}-{'x' * 40}" for i in range(45_000)]
        payload = metadata_v4(topics, 7)
        assert len(payload) > 1.2 * budget
        with wire.connect(b.port, timeout=20.0) as s:
            wire.send_frame(s, payload)
            resp = wire._decode_response(METADATA, 4, wire.recv_frame(s), 7)
        assert len(resp.topics) == len(topics)


@pytest.mark.skipif(not hasattr(resource, "prlimit"), reason="needs prlimit (Linux)")
def test_refused_accepts_at_the_fd_limit_are_logged_and_the_broker_serves_on():
    with project_broker(name="conn-mem-fdlimit") as b:
        limit = open_fds(b.pid) + 8
        resource.prlimit(b.pid, resource.RLIMIT_NOFILE, (limit, limit))
        socks = []
        try:
            for _ in range(30):
                socks.append(wire.connect(b.port, timeout=5.0))
            text = wait_for_log(b, "listener.accept_failed")
            line = next(x for x in text.splitlines() if "listener.accept_failed" in x)
            assert "errno=EMFILE" in line and f"rlimit_nofile={limit}" in line, line
            # The connections past the limit wait in the backlog instead of being reset
            # (libuv's way): nothing has closed them.
            for s in socks:
                s.settimeout(0.01)
                with pytest.raises(TimeoutError):
                    assert s.recv(1) != b""
        finally:
            for s in socks:
                s.close()
        # Descriptors free again: the broker serves a new connection.
        deadline = time.monotonic() + 10
        while True:
            try:
                assert wire.api_versions(b.port, timeout=2.0)
                break
            except (OSError, wire.ConnectionClosed):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert b.running
        assert "Traceback" not in b.log_text()
