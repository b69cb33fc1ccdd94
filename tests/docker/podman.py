"""A private podman for the container tests: its own storage, config and API socket.

Every ``Podman`` keeps everything under one temporary directory (``--root``, ``--runroot``, a
``containers.conf``, netavark's network files, podman's tmp dir, the Docker-compatible API
socket), so the tests neither see nor touch other images or containers on the machine, and
``close()`` removes it all: the containers it started (``podman rm -f`` by the names the tests
chose), the API service it started (by PID), then the storage (``podman system reset``) and
the directory.

The configuration is what works on these machines (Debian's podman 4.3, root, no systemd):
runc (crun fails on cgroups here), cgroupfs, explicit ulimits (the defaults fail on setrlimit),
netavark with aardvark-dns (compose service names resolve), file event logging.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]
log_driver = "k8s-file"

[network]
network_backend = "netavark"
network_config_dir = "{dir}/networks"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
tmp_dir = "{dir}/tmp"
"""


class PodmanError(RuntimeError):
    pass


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


class Podman:
    def __init__(self, prefix: str = "minibroker-podman-") -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=prefix))
        (self.dir / "networks").mkdir()
        (self.dir / "tmp").mkdir()
        self.conf = self.dir / "containers.conf"
        self.conf.write_text(CONTAINERS_CONF.format(dir=self.dir))
        self.env = {**os.environ, "CONTAINERS_CONF": str(self.conf)}
        self.containers: set[str] = set()   # names we started, removed by close()
        self.service: subprocess.Popen | None = None
        self.socket_path = self.dir / "podman.sock"

    # -- commands --------------------------------------------------------------------------
    def argv(self, *args: str) -> list[str]:
        return ["podman", "--root", str(self.dir / "root"), "--runroot", str(self.dir / "runroot"),
                *args]

    def run(self, *args: str, timeout: float = 60, check: bool = True,
            input: bytes | None = None) -> subprocess.CompletedProcess:
        try:
            proc = subprocess.run(self.argv(*args), env=self.env, input=input, timeout=timeout,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except subprocess.TimeoutExpired as e:
            raise PodmanError(f"podman {' '.join(args)}: no answer in {timeout} s") from e
        if check and proc.returncode != 0:
            raise PodmanError(f"podman {' '.join(args)} exited {proc.returncode}:\n"
                              f"{proc.stderr.decode(errors='replace')[-4000:]}")
        return proc

    def out(self, *args: str, timeout: float = 60) -> str:
        return self.run(*args, timeout=timeout).stdout.decode()

    def inspect(self, name: str, kind: str = "container") -> dict:
        return json.loads(self.out("inspect", "--type", kind, name))[0]

    def container(self, name: str) -> str:
        """Remember a container name so that close() removes it."""
        self.containers.add(name)
        return name

    def healthy(self, name: str, timeout: float = 30) -> bool:
        """``podman healthcheck run`` returns 0 when the image's HEALTHCHECK passes."""
        try:
            return self.run("healthcheck", "run", name, timeout=timeout, check=False).returncode == 0
        except PodmanError:
            return False

    def wait_healthy(self, name: str, timeout: float = 30) -> float:
        """Seconds until the container's health check first passes (bounded by ``timeout``)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.healthy(name, timeout=max(1.0, timeout - (time.monotonic() - t0))):
                return time.monotonic() - t0
            time.sleep(0.2)
        raise PodmanError(f"{name} not healthy within {timeout} s; logs:\n{self.logs(name)}")

    def logs(self, name: str) -> str:
        proc = self.run("logs", name, check=False, timeout=30)
        return (proc.stdout + proc.stderr).decode(errors="replace")[-6000:]

    # -- the Docker-compatible API (for docker-compose) ----------------------------------
    def start_service(self, timeout: float = 30) -> str:
        """Start ``podman system service`` on a socket in our dir; returns its DOCKER_HOST."""
        if self.service is None:
            log = open(self.dir / "service.log", "wb")
            self.service = subprocess.Popen(
                self.argv("system", "service", "--time=0", f"unix://{self.socket_path}"),
                env=self.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            log.close()
            deadline = time.monotonic() + timeout
            while True:
                if self.service.poll() is not None:
                    raise PodmanError("podman system service exited:\n"
                                      + (self.dir / "service.log").read_text(errors="replace"))
                if self._ping():
                    break
                if time.monotonic() > deadline:
                    raise PodmanError(f"podman system service did not answer in {timeout} s")
                time.sleep(0.1)
        return f"unix://{self.socket_path}"

    def _ping(self) -> bool:
        if not self.socket_path.exists():
            return False
        conn = _UnixHTTPConnection(str(self.socket_path), timeout=2)
        try:
            conn.request("GET", "/_ping")
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    def health_pump(self, name: str, interval: float = 1.0) -> "HealthPump":
        return HealthPump(self, name, interval)

    # -- clean-up --------------------------------------------------------------------------
    def close(self) -> None:
        for name in sorted(self.containers):
            self.run("rm", "-f", "-t", "2", name, check=False, timeout=60)
        if self.service is not None:
            if self.service.poll() is None:
                self.service.terminate()   # the process we started, by its PID
                try:
                    self.service.wait(10)
                except subprocess.TimeoutExpired:
                    self.service.kill()
                    self.service.wait(10)
            self.service = None
        try:
            self.run("system", "reset", "--force", check=False, timeout=120)
        except PodmanError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


class HealthPump:
    """Runs ``podman healthcheck run NAME`` every ``interval`` seconds in a thread.

    Docker runs a container's HEALTHCHECK on its own schedule; podman delegates the schedule to
    systemd timers, and these machines have no systemd. Without this, a container here would
    stay "starting" for ever and compose's ``condition: service_healthy`` would never be met.
    The check itself is the image's own (``minibroker health``), run by podman.
    """

    def __init__(self, podman: Podman, name: str, interval: float) -> None:
        self.podman, self.name, self.interval = podman, name, interval
        self.stop_event = threading.Event()
        self.passes = 0
        self.thread = threading.Thread(target=self._loop, name=f"health-{name}", daemon=True)

    def __enter__(self) -> "HealthPump":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_event.set()
        self.thread.join(30)

    def _loop(self) -> None:
        while not self.stop_event.is_set():
            if self.podman.healthy(self.name, timeout=10):
                self.passes += 1
            self.stop_event.wait(self.interval)
