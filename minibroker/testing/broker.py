"""``MiniBroker``: one real minibroker process for a test or a script.

The broker runs as ``python -m minibroker`` in a subprocess, on loopback, with
its data in a temporary directory (unless ``data_dir`` is given) and its
output in ``broker.log`` next to it. ``stop()``, ``kill9()``, ``start()`` and
``restart()`` keep the data directory and the port, so clients that were
connected before simply reconnect.

Only the standard library is imported here: this module is loaded by the
pytest plugin, which every pytest run of a project with minibroker installed
loads.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from pathlib import Path

from .control import Control
from .ports import listening_ports

__all__ = ["MiniBroker", "MiniBrokerError", "topic_name", "TEST_DEFAULTS"]

# What Kafka's own test harnesses (and Testcontainers' KafkaContainer) set: a
# consumer group's first rebalance waits 3 s by default, which every
# group-using test would pay.
TEST_DEFAULTS: dict[str, object] = {"group_initial_rebalance_delay_ms": 0}

_TOPIC_ILLEGAL = re.compile(r"[^a-zA-Z0-9._-]+")
_TOPIC_MAX = 249  # Kafka's Topic.MAX_NAME_LENGTH

# Brokers started and not yet closed, so a script that forgets close() (or drops its last
# reference to the handle) does not leave a process or a temp dir behind: a strong set, since a
# weak one would forget exactly the handles nobody holds any more.
_LIVE: set[MiniBroker] = set()


class MiniBrokerError(RuntimeError):
    """The broker did not start, or did not stop when asked to."""


def topic_name(hint: str = "topic") -> str:
    """A topic name nobody else uses: ``hint`` made legal for Kafka, plus a random suffix.

    Kafka allows ``[a-zA-Z0-9._-]`` and at most 249 characters; names starting
    with ``__`` are internal, so leading ``_`` and ``.`` are dropped.
    """
    suffix = uuid.uuid4().hex[:12]
    safe = _TOPIC_ILLEGAL.sub("-", hint).lstrip("-._").rstrip("-")
    safe = safe[: _TOPIC_MAX - len(suffix) - 1]
    return f"{safe}-{suffix}" if safe else f"topic-{suffix}"


def _flag(name: str, value: object) -> list[str]:
    if isinstance(value, bool):
        value = "true" if value else "false"
    return ["--" + name.replace("_", "-"), str(value)]


def _package_root() -> Path:
    import minibroker

    return Path(minibroker.__file__).resolve().parents[1]


def _child_pythonpath(env: dict[str, str]) -> None:
    """Let the child find minibroker even when it is imported from a checkout that is not installed."""
    root = str(_package_root())
    site_dirs = set(site.getsitepackages() + [site.getusersitepackages()])
    if root in site_dirs or root in env.get("PYTHONPATH", "").split(os.pathsep):
        return
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # If the test process is killed (even with SIGKILL) the broker must not outlive it.
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class _PortTaken(Exception):
    pass


def _free_port(host: str) -> int:
    import socket
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


# minibroker/core/crash_points.py reads this in the broker process (not imported here: this module
# stays standard-library only).
_SNAPSHOT_RECORDS_VARIABLE = "MINIBROKER_TEST_SNAPSHOT_RECORDS"


class MiniBroker:
    """A minibroker process on loopback: start, stop, ``kill -9``, restart, same data dir and port.

    ``MiniBroker(**options)`` passes each option to the broker's command line
    (``num_partitions=4`` → ``--num-partitions 4``, ``fsync="always"``,
    ``log_level="debug"``, ``auto_create_topics=False``); ``args`` adds raw
    arguments. ``TEST_DEFAULTS`` (``group_initial_rebalance_delay_ms=0``) apply
    unless overridden. ``MINIBROKER_*`` variables of the caller's environment
    are not passed on (they would configure the broker behind the test's back);
    ``env`` adds variables for the broker, e.g. ``{"MINIBROKER_CRASH_AT": ...}``.

    The first start binds a free port (``port=0``); later starts reuse that
    port so clients reconnect. ``data_dir=None`` uses a temporary directory,
    removed by ``close()`` together with the log (``keep=True`` or
    ``MINIBROKER_TEST_KEEP=1`` keeps both). Used as a context manager it starts
    on entry and closes on exit.

    Should the port be taken by another process when the broker restarts, start()
    retries for ``port_wait`` seconds, then starts on a new port with a
    ``RuntimeWarning`` (``bootstrap_servers`` changes); with an explicit ``port``
    it raises ``MiniBrokerError`` instead. Once the broker reports itself ready,
    start() also checks (on Linux, from /proc) that the listening socket on that
    port belongs to the process it started, so a test never talks to a stranger.

    ``control=True`` turns the control plane on (``--control-listener`` on a free loopback
    port, kept across restarts): :attr:`control` adds fault rules, advances the clock and
    reads the request log.

    ``schema_registry=True`` turns the built-in Schema Registry on (``--schema-registry-listener``
    on a free loopback port, kept across restarts): :attr:`schema_registry_url` is what
    confluent-kafka's ``SchemaRegistryClient({"url": ...})`` takes.

    Test-only hooks (older crash tests; a ``crash`` fault rule does the same):
    ``crash_at="txn.after_prepare"`` makes the broker SIGKILL itself at that step (a crash
    rule passed with ``--faults``; minibroker/control/faults/rules.py names the points);
    ``snapshot_records=6`` writes a coordinator snapshot every 6 records.
    ``restart(args=[...])`` restarts with other raw arguments, ``restart(crash_at=None)``
    without the crash point.

    :meth:`from_command_line` starts ``python -m minibroker ARGS`` exactly as a CI
    script would (no host, port or data dir added), for tests of the command line
    itself; :attr:`addresses` lists every listener's address from the ready file.
    """

    port_wait = 5.0

    def __init__(
        self,
        data_dir: str | os.PathLike | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        args: list[str] | tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        startup_timeout: float = 30.0,
        stop_timeout: float = 20.0,
        name: str = "minibroker",
        keep: bool | None = None,
        crash_at: str | None = None,
        snapshot_records: int | None = None,
        control: bool = False,
        schema_registry: bool = False,
        **options: object,
    ) -> None:
        if "advertised_port" in options and not port:
            raise ValueError("advertised_port needs an explicit port= (the bound port is not reported)")
        for reserved in ("host", "port", "data_dir", "ready_file"):
            if reserved in options:
                raise ValueError(f"{reserved} is managed by MiniBroker")
        self.name = name
        self.host = host
        level = os.environ.get("MINIBROKER_TEST_LOG_LEVEL")
        defaults = {**TEST_DEFAULTS, **({"log_level": level} if level else {})}
        self.options = {**defaults, **options}
        self.args = list(args)
        self.env = dict(env or {})
        self.crash_at = crash_at
        self.snapshot_records = snapshot_records
        # The control plane's port: chosen at the first start, kept across restarts.
        self.control_port: int | None = _free_port(host) if control else None
        # The Schema Registry's port, likewise.
        self.registry_port: int | None = _free_port(host) if schema_registry else None
        self._command_line_only = False
        self.ready_seconds: float | None = None
        self._log_start = 0
        self._started_at = 0.0
        self.addresses: list[str] = []
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.keep = bool(os.environ.get("MINIBROKER_TEST_KEEP")) if keep is None else keep
        safe_name = _TOPIC_ILLEGAL.sub("-", name)[:40]
        self.work_dir = Path(tempfile.mkdtemp(prefix=f"minibroker-{safe_name}-"))
        self._own_data = data_dir is None
        self.data_dir = self.work_dir / "data" if data_dir is None else Path(data_dir).resolve()
        self.log_path = self.work_dir / "broker.log"
        self._ready_path = self.work_dir / "ready"
        self._requested_port = port
        self.port: int | None = port or None
        self._bootstrap: str | None = None
        self._proc: subprocess.Popen | None = None
        self.starts = 0
        self.returncodes: list[int] = []
        self.closed = False
        _LIVE.add(self)

    # ------------------------------------------------------------------ info

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` for ``bootstrap.servers`` (the address the broker advertises)."""
        if self._bootstrap is None:
            raise MiniBrokerError(f"{self!r} has not been started")
        return self._bootstrap

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def ready_file(self) -> Path:
        """The ``--ready-file`` this handle passes: one advertised address per listener, once ready."""
        return self._ready_path

    @property
    def proc(self) -> subprocess.Popen | None:
        """The broker's process of the last start (``poll()``, ``wait()``), or None before any."""
        return self._proc

    @classmethod
    def from_command_line(cls, args: list[str] | tuple[str, ...], *, env: dict[str, str] | None = None,
                          startup_timeout: float = 30.0, name: str = "launched",
                          keep: bool | None = None) -> MiniBroker:
        """A broker started as ``python -m minibroker ARGS --ready-file F``, nothing else added.

        Its ``TMPDIR`` is the handle's own directory, so ``--ephemeral`` data is removed by
        ``close()`` even after a kill. Not started yet: use ``start()`` or ``with``.
        """
        b = cls(env=env, startup_timeout=startup_timeout, name=name, keep=keep)
        b._command_line_only = True
        b.args = list(args)
        b.env.setdefault("TMPDIR", str(b.work_dir))
        return b

    def command(self, port: int | None = None) -> list[str]:
        if self._command_line_only:
            return [sys.executable, "-m", "minibroker", *self.args, "--ready-file", str(self._ready_path)]
        cmd = [sys.executable, "-m", "minibroker", "--host", self.host,
               "--port", str(self.port if port is None else port), "--data-dir", str(self.data_dir),
               "--ready-file", str(self._ready_path)]
        for key, value in self.options.items():
            if value is not None:
                cmd += _flag(key, value)
        if self.control_port is not None:
            cmd += ["--control-listener", f"{self.host}:{self.control_port}"]
        if self.registry_port is not None:
            cmd += ["--schema-registry-listener", self.schema_registry_url]
        if self.crash_at:
            # A crash rule of the fault-injection API (minibroker/control/faults/rules.py), from a file.
            faults = self.work_dir / "crash-at.json"
            import json
            faults.write_text(json.dumps({"rules": [{"action": "crash", "point": self.crash_at,
                                                     "count": -1}]}) + "\n")
            cmd += ["--faults", str(faults)]
        return cmd + self.args

    @property
    def control(self) -> Control:
        """The broker's control plane (``MiniBroker(control=True)``): fault rules, the clock,
        the request log (minibroker/testing/control.py)."""
        if self.control_port is None:
            raise MiniBrokerError(f"{self!r} was made without control=True")
        return Control(f"{self.host}:{self.control_port}")

    @property
    def schema_registry_url(self) -> str:
        """``http://host:port`` of the built-in Schema Registry (``MiniBroker(schema_registry=True)``)."""
        if self.registry_port is None:
            raise MiniBrokerError(f"{self!r} was made without schema_registry=True")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.registry_port}"

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<MiniBroker {self.name} {state} pid={self.pid} port={self.port} data={self.data_dir}>"

    # ------------------------------------------------------------- lifecycle

    def start(self, wait: bool = True) -> MiniBroker:
        """Start the broker (again) and wait until it accepts connections.

        ``wait=False`` returns as soon as the process is spawned (for a broker that waits for
        something first, e.g. ``--wait-for-config``); :meth:`wait_ready` finishes the start.
        """
        if self.closed:
            raise MiniBrokerError(f"{self!r} was closed")
        if self.running:
            raise MiniBrokerError(f"{self!r} is already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not wait:
            self._started_at = time.perf_counter()
            self._log_start = self._spawn(self.port or 0)
            self.starts += 1
            return self
        port = self.port or 0
        # The port is normally free again at once (the broker sets SO_REUSEADDR);
        # another process may hold it for a moment, rarely for good.
        deadline = time.monotonic() + self.port_wait
        for _ in range(50):
            try:
                self._spawn_and_wait(port)
                break
            except _PortTaken:
                if self._requested_port:
                    raise MiniBrokerError(
                        f"port {port} is in use; {self.name} was asked to listen there\n"
                        + self._tail_section()) from None
                if time.monotonic() > deadline:
                    old, port = port, 0
                    warnings.warn(f"minibroker {self.name}: port {old} stayed taken; restarting on a "
                                  "new port, so clients must be given the new bootstrap_servers",
                                  RuntimeWarning, stacklevel=2)
                else:
                    time.sleep(0.1)
        else:  # pragma: no cover - bounded by the deadline above
            raise MiniBrokerError(f"{self.name}: could not bind a port\n" + self._tail_section())
        self.starts += 1
        return self

    def wait_ready(self, timeout: float | None = None) -> MiniBroker:
        """Finish a ``start(wait=False)``: wait until the broker accepts connections."""
        if self._proc is None:
            raise MiniBrokerError(f"{self!r} has not been started")
        self._wait_ready(self.port or 0, self._log_start, self._started_at,
                         self.startup_timeout if timeout is None else timeout)
        return self

    def wait_for_log(self, text: str, timeout: float = 15.0) -> str:
        """Wait until ``text`` appears in the broker's output of this start; returns the output.

        Fails when the broker exits first or after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            out = self._log_since(self._log_start)
            if text in out:
                return out
            if self._proc is None or self._proc.poll() is not None:
                rc = self._proc.returncode if self._proc is not None else None
                raise MiniBrokerError(f"minibroker {self.name} exited ({rc}) before logging {text!r}\n"
                                      + self._tail_section())
            if time.monotonic() > deadline:
                raise MiniBrokerError(f"minibroker {self.name} did not log {text!r} within {timeout} s\n"
                                      + self._tail_section())
            time.sleep(0.05)

    def _spawn_and_wait(self, port: int) -> None:
        started = time.perf_counter()
        log_start = self._spawn(port)
        self._wait_ready(port, log_start, started, self.startup_timeout)

    def _spawn(self, port: int) -> int:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIBROKER_", "KAFKA_"))}
        env["PYTHONUNBUFFERED"] = "1"
        _child_pythonpath(env)
        env.update(self.env)
        if self.snapshot_records is not None:
            env[_SNAPSHOT_RECORDS_VARIABLE] = str(self.snapshot_records)
        try:
            self._ready_path.unlink()
        except FileNotFoundError:
            pass
        cmd = self.command(port)
        with open(self.log_path, "ab") as log:
            log_start = log.tell()
            log.write(f"===== start #{self.starts + 1}: {' '.join(cmd)}\n".encode())
            log.flush()
            on_main = threading.current_thread() is threading.main_thread()
            self._proc = subprocess.Popen(
                cmd, cwd=str(self.work_dir), env=env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                # PDEATHSIG follows the forking *thread*: from any other thread the
                # broker would die when that thread ends.
                preexec_fn=_die_with_parent if on_main and sys.platform.startswith("linux") else None,
            )
        self._log_start = log_start
        return log_start

    def _wait_ready(self, port: int, log_start: int, started: float, timeout: float) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + timeout
        delay = 0.01
        while True:
            rc = self._proc.poll()
            if rc is not None:
                self.returncodes.append(rc)
                said = self._log_since(log_start)
                # the CLI's one line (and the log event of releases before it)
                if port and ("address already in use" in said or "broker.listen_failed" in said):
                    raise _PortTaken()
                raise MiniBrokerError(
                    f"minibroker {self.name} exited with code {rc} during start-up\n" + self._tail_section())
            addresses = self._read_ready()
            if addresses:
                self.ready_seconds = time.perf_counter() - started
                self.addresses = addresses
                self._bootstrap = addresses[0]
                if self._command_line_only:
                    self.port = int(addresses[0].rsplit(":", 1)[1])
                else:
                    self.port = self._bound_port(port, int(addresses[0].rsplit(":", 1)[1]))
                self._wait_started_logged(log_start)
                return
            if time.monotonic() > deadline:
                pid = self._proc.pid
                self._kill_hard()
                raise MiniBrokerError(
                    f"minibroker {self.name} (pid {pid}) did not accept connections within "
                    f"{timeout} s\n" + self._tail_section())
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

    def _wait_started_logged(self, log_start: int, timeout: float = 5.0) -> None:
        """The broker writes its start-up's log events a moment after its ready file (they are
        held so that importing the logging library does not delay the first answers): wait for
        them, so a test reading the log right after start sees them. Not at warning level and
        above, where there is nothing to wait for."""
        argv = self.command()
        level = (self.env or {}).get("MINIBROKER_LOG_LEVEL", "info")
        for i, arg in enumerate(argv[:-1]):
            if arg == "--log-level":
                level = argv[i + 1]
        if level not in ("debug", "info"):
            return
        deadline = time.monotonic() + timeout
        while "broker.started" not in self._log_since(log_start) and time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                return
            time.sleep(0.01)

    def _bound_port(self, asked: int, advertised: int) -> int:
        """The port the broker bound, which later starts reuse (the ready file holds advertised
        addresses, and ``--advertised-port`` may differ). Checks the socket is the process's own:
        a test must never talk to another process that holds the port."""
        assert self._proc is not None
        ports = listening_ports(self._proc.pid)
        if ports is None:  # not Linux: trust the broker's own report
            return asked or advertised
        if asked and asked not in ports or not ports:
            pid = self._proc.pid
            self._kill_hard()
            raise MiniBrokerError(
                f"minibroker {self.name} (pid {pid}) reported ready, but the socket listening on port "
                f"{asked or advertised} is not that process's (it listens on {sorted(ports)})\n"
                + self._tail_section())
        if asked:
            return asked
        return advertised if advertised in ports else min(ports)

    def _read_ready(self) -> list[str]:
        # Written atomically by the broker once it accepts connections: one address per listener,
        # the first is the bootstrap address.
        try:
            return self._ready_path.read_text().split()
        except OSError:
            return []

    def _log_since(self, position: int) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(position)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float | None = None) -> int:
        """Graceful stop (SIGTERM). Returns the exit code; raises if the broker had to be killed."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return proc.returncode if proc is not None else 0
        timeout = self.stop_timeout if timeout is None else timeout
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill_hard()
            raise MiniBrokerError(f"minibroker {self.name} (pid {proc.pid}) did not exit within "
                                  f"{timeout} s of SIGTERM; killed\n" + self._tail_section()) from None
        self.returncodes.append(rc)
        return rc

    def kill9(self) -> int | None:
        """SIGKILL: a crash of the broker process; no shutdown code runs. Returns the exit code."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return proc.returncode if proc is not None else None
        proc.send_signal(signal.SIGKILL)
        rc = proc.wait(timeout=30)
        self.returncodes.append(rc)
        return rc

    def restart(self, graceful: bool = True, *, args: list[str] | tuple[str, ...] | None = None,
                crash_at: str | None | object = ..., snapshot_records: int | None | object = ...,
                ) -> MiniBroker:
        """Stop (SIGTERM; SIGKILL when ``graceful=False``) and start again: same port, same data.

        ``args`` replaces the raw arguments, ``crash_at``/``snapshot_records`` the test hooks
        (``None`` turns one off) for this and later starts.
        """
        if graceful:
            rc = self.stop()
            if rc != 0:
                raise MiniBrokerError(f"minibroker {self.name} exited with {rc} on SIGTERM\n"
                                      + self._tail_section())
        else:
            self.kill9()
        if args is not None:
            self.args = list(args)
        if crash_at is not ...:
            self.crash_at = crash_at  # type: ignore[assignment]
        if snapshot_records is not ...:
            self.snapshot_records = snapshot_records  # type: ignore[assignment]
        return self.start()

    def close(self) -> None:
        """Stop the broker (killing it if it will not stop) and remove the temporary directory."""
        if self.closed:
            return
        self.closed = True
        _LIVE.discard(self)
        try:
            self.stop(timeout=min(self.stop_timeout, 10.0))
        except MiniBrokerError:
            pass
        finally:
            self._kill_hard()
            if not self.keep:
                shutil.rmtree(self.work_dir, ignore_errors=True)

    def _kill_hard(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                proc.kill()
                proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass

    def _tail_section(self) -> str:
        return f"--- {self.log_path} (last lines) ---\n{self.log_tail()}"

    def __enter__(self) -> MiniBroker:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --------------------------------------------------------------- helpers

    def create_topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None,
                     timeout: float = 30.0) -> str:
        """Create a topic with confluent-kafka's AdminClient (which must be installed); returns its name."""
        try:
            from confluent_kafka.admin import AdminClient, NewTopic
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise MiniBrokerError("create_topic needs confluent-kafka, which the [pytest] extra brings "
                                  "(or: pip install confluent-kafka); "
                                  "topics are also created on first use") from e
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=dict(config or {}))],
            operation_timeout=timeout, request_timeout=timeout)
        futures[name].result(timeout=timeout)
        return name


@atexit.register
def _close_leftovers() -> None:
    for broker in list(_LIVE):
        try:
            broker.close()
        except Exception:
            pass
