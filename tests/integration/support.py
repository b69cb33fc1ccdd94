"""Small helpers the integration tests share: where the checkout is, free ports, dump-log.

Brokers are started with ``minibroker.testing.MiniBroker`` (the launcher users get); the
fixtures in conftest.py build them.
"""

from __future__ import annotations

import errno
import socket
import subprocess
import sys
from pathlib import Path

from minibroker.testing import MiniBroker

REPO_ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"


def free_port() -> int:
    """A loopback port that was free a moment ago (the OS picks it: bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError as e:
            return e.errno == errno.EADDRINUSE
        return False


def log_files(data_dir: Path) -> list[Path]:
    """Every segment file under a broker's data dir."""
    return sorted(Path(data_dir).rglob("*.log"))


def dump_log(path: Path, print_data: bool = False, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """Run ``python -m minibroker dump-log`` on one file."""
    cmd = [sys.executable, "-m", "minibroker", "dump-log", str(path)]
    if print_data:
        cmd.append("--print-data-log")
    return subprocess.run(cmd, cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=timeout)


def project_broker(args=(), **kwargs) -> MiniBroker:
    """A ``MiniBroker`` (not started) with the broker's own defaults: the project's tests were
    written against them, so the plugin's test default (no initial rebalance delay) is not applied."""
    kwargs.setdefault("group_initial_rebalance_delay_ms", None)
    return MiniBroker(args=list(args), **kwargs)
