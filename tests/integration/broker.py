"""A real minibroker process for integration tests.

``BrokerProcess`` starts ``python -m minibroker.cli`` on a free loopback port
with its own temporary data directory, captures its output to a log file in
that directory, and waits until the broker answers a real ApiVersions round
trip. It offers ``stop()`` (SIGTERM), ``kill9()`` (SIGKILL) and ``restart()``
(same port, same data dir), and ``close()`` always kills the process it
started — by PID, never by name — and removes its temp dir.

Set MINIBROKER_TEST_KEEP=1 to keep temp dirs (data + broker.log) after tests;
MINIBROKER_TEST_LOG_LEVEL=debug to start brokers with --log-level debug.
"""

from __future__ import annotations

import atexit
import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import wire

REPO_ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"

# Every BrokerProcess not yet closed, so atexit can still kill a forgotten one.
_LIVE: "set[BrokerProcess]" = set()


class BrokerStartError(RuntimeError):
    pass


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


def _socket_inodes(pid: int) -> set[str] | None:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    inodes = set()
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    return inodes


def pid_listens_on(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` owns a TCP socket listening on ``port`` (None: cannot tell).

    Guards against a bind race: another process that grabbed our port would
    answer ApiVersions too, and we would test the wrong broker.
    """
    inodes = _socket_inodes(pid)
    if inodes is None:
        return None
    seen_table = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        seen_table = True
        for line in lines:
            parts = line.split()
            if len(parts) < 10 or parts[3] != "0A":  # 0A = LISTEN
                continue
            if int(parts[1].rsplit(":", 1)[1], 16) == port and parts[9] in inodes:
                return True
    return False if seen_table else None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """preexec_fn: ask Linux to SIGKILL the broker if the test process dies."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:
        pass


class BrokerProcess:
    """One minibroker process (and its restarts) on one port and one data dir."""

    def __init__(self, extra_args=(), *, data_dir: str | Path | None = None, port: int | None = None,
                 startup_timeout: float = 15.0, name: str = "broker", env: dict | None = None) -> None:
        self.extra_args = list(extra_args)
        self.startup_timeout = startup_timeout
        self.name = name
        self._own_tmp = data_dir is None
        self.tmp_dir = Path(tempfile.mkdtemp(prefix=f"minibroker-it-{name}-")) if data_dir is None else None
        self.data_dir = Path(data_dir) if data_dir is not None else self.tmp_dir / "data"
        self.log_path = (self.tmp_dir or self.data_dir.parent) / f"{name}.log"
        self.port = port
        self._port_fixed = port is not None
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.returncodes: list[int] = []
        self.closed = False
        _LIVE.add(self)

    # -- info ----------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 80) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def command(self) -> list[str]:
        level = os.environ.get("MINIBROKER_TEST_LOG_LEVEL")
        args = [sys.executable, "-m", "minibroker.cli", "--host", HOST, "--port", str(self.port),
                "--data-dir", str(self.data_dir)]
        if level and "--log-level" not in self.extra_args:
            args += ["--log-level", level]
        return args + self.extra_args

    def __repr__(self) -> str:
        return f"<BrokerProcess {self.name} pid={self.pid} port={self.port} data={self.data_dir}>"

    # -- lifecycle -----------------------------------------------------------
    def start(self) -> "BrokerProcess":
        if self.closed:
            raise RuntimeError("this BrokerProcess was closed")
        if self.running():
            raise RuntimeError(f"{self!r} is already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        attempts = 1 if (self._port_fixed or self.starts) else 5
        last_error = None
        for attempt in range(attempts):
            if self.port is None or (attempt and not self._port_fixed):
                self.port = free_port()
            try:
                self._spawn_and_wait()
                self.starts += 1
                return self
            except _BindRace as e:
                last_error = e
                continue
        raise BrokerStartError(f"could not find a free port for the broker: {last_error}\n"
                               f"--- {self.log_path} (tail) ---\n{self.log_tail()}")

    def _spawn_and_wait(self) -> None:
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        # A stray MINIBROKER_* in the caller's environment must not change the test broker.
        for k in list(env):
            if (k.startswith("MINIBROKER_") and not k.startswith("MINIBROKER_TEST_")) or k.startswith("KAFKA_"):
                del env[k]
        if self.env:
            env.update(self.env)
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts + 1}: {' '.join(self.command())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.command(), cwd=str(REPO_ROOT), env=env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        last = "no attempt yet"
        while time.monotonic() < deadline:
            rc = self.proc.poll()
            if rc is not None:
                self.returncodes.append(rc)
                if not self._port_fixed and not self.starts and port_in_use(self.port):
                    raise _BindRace(f"port {self.port} was taken before the broker bound it")
                raise BrokerStartError(
                    f"minibroker exited with code {rc} during start-up ({self.command()})\n"
                    f"--- {self.log_path} (tail) ---\n{self.log_tail()}")
            try:
                wire.api_versions(self.port, timeout=2.0)
            except (OSError, ValueError, wire.ConnectionClosed) as e:
                last = repr(e)
                time.sleep(0.1)
                continue
            owned = pid_listens_on(self.proc.pid, self.port)
            if owned is False:
                # Someone else answers on our port; our broker will fail to bind.
                last = f"port {self.port} answered, but not by pid {self.proc.pid}"
                time.sleep(0.1)
                continue
            return
        pid = self.proc.pid
        self._kill_hard()
        raise BrokerStartError(
            f"minibroker (pid {pid}) did not answer ApiVersions on {self.bootstrap} within "
            f"{self.startup_timeout} s; last error: {last}\n"
            f"--- {self.log_path} (tail) ---\n{self.log_tail()}")

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait: the broker's graceful shutdown. Returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc is not None else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill_hard()
            raise AssertionError(
                f"minibroker pid {self.proc.pid} did not exit within {timeout} s of SIGTERM\n"
                f"--- {self.log_path} (tail) ---\n{self.log_tail()}") from None
        self.returncodes.append(rc)
        return rc

    def kill9(self) -> None:
        """SIGKILL: a crash, no shutdown code runs."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.returncodes.append(self.proc.wait(timeout=10))

    def restart(self, extra_args=None, graceful: bool = True) -> "BrokerProcess":
        """Stop (SIGTERM, or SIGKILL with graceful=False) and start on the same port and data dir."""
        if graceful:
            rc = self.stop()
            if rc != 0:
                raise AssertionError(f"minibroker exited with {rc} on SIGTERM\n{self.log_tail()}")
        else:
            self.kill9()
        if extra_args is not None:
            self.extra_args = list(extra_args)
        return self.start()

    def _kill_hard(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.kill()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass

    def close(self) -> None:
        """Kill the process if still running and remove the temp dir (unless kept)."""
        if self.closed:
            return
        self.closed = True
        _LIVE.discard(self)
        if self.running():
            try:
                self.stop(timeout=10)
            except AssertionError:
                pass
        self._kill_hard()
        if self._own_tmp and self.tmp_dir is not None and not os.environ.get("MINIBROKER_TEST_KEEP"):
            shutil.rmtree(self.tmp_dir, ignore_errors=True)

    def __enter__(self) -> "BrokerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- helpers for tests ---------------------------------------------------
    def log_files(self) -> list[Path]:
        return sorted(self.data_dir.rglob("*.log"))

    def dump_log(self, path: Path, print_data: bool = False, timeout: float = 120.0):
        """Run ``python -m minibroker.cli dump-log`` on one segment file."""
        cmd = [sys.executable, "-m", "minibroker.cli", "dump-log", str(path)]
        if print_data:
            cmd.append("--print-data-log")
        return subprocess.run(cmd, cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=timeout)


class _BindRace(Exception):
    pass


@atexit.register
def _kill_leftovers() -> None:
    for b in list(_LIVE):
        try:
            b.close()
        except Exception:
            pass
