"""Run a scenario program of either client against one broker, bounded in time; its RESULT as a dict.

The Java program runs with the integration tests' kafka-clients (4.x, from Maven Central), found,
compiled and started by tests/integration/java_client.py's helpers.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.integration import java_client

JAVA_DIR = Path(__file__).resolve().parent / "java"
JAVA_MAIN = "ClientScenarios"
CLIENTS = ("confluent", "java")
CRASHPOINT = "CRASHPOINT"


class ProgramFailed(AssertionError):
    pass


def java_toolchain() -> java_client.JavaToolchain:
    return java_client.java_toolchain()


_compiled: dict[str, Path] = {}
_compile_lock = threading.Lock()


def java_classes(tc: java_client.JavaToolchain) -> Path:
    with _compile_lock:
        if "classes" not in _compiled:
            _compiled["classes"] = java_client.compile_drivers(tc, src_dir=JAVA_DIR)
        return _compiled["classes"]


def command(client: str, args: list[str]) -> list[str]:
    if client == "confluent":
        return [sys.executable, "-m", "tests.differential.clients.rdkafka_scenarios", *args]
    tc = java_toolchain()
    return java_client.driver_command(tc, java_classes(tc), JAVA_MAIN, args)


def _start(client: str, args: list[str]) -> tuple[subprocess.Popen, "queue.Queue[str | None]", list[str]]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen(command(client, args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, env=env, cwd=root)
    lines: "queue.Queue[str | None]" = queue.Queue()
    err: list[str] = []

    def pump_out() -> None:
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    def pump_err() -> None:
        for line in proc.stderr:
            if len(err) < 2000:
                err.append(line)

    threading.Thread(target=pump_out, daemon=True).start()
    threading.Thread(target=pump_err, daemon=True).start()
    return proc, lines, err


def _fail(proc: subprocess.Popen, what: str, out: list[str], err: list[str]) -> ProgramFailed:
    return ProgramFailed(f"{' '.join(map(str, proc.args[-9:]))}: {what}\n--- stdout ---\n"
                         + "\n".join(out)[-3000:] + "\n--- stderr ---\n" + "".join(err)[-3000:])


def _wait_line(proc, lines, err, want: str, timeout: float) -> tuple[str, list[str]]:
    """The first stdout line starting with ``want``; the program is killed (by PID) if none comes."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            line = lines.get(timeout=max(left, 0.01))
        except queue.Empty:
            proc.kill()
            proc.wait(10)
            raise _fail(proc, f"no {want} line within {timeout} s", seen, err) from None
        if line is None:
            proc.wait(10)
            raise _fail(proc, f"exited with {proc.returncode} before a {want} line", seen, err)
        seen.append(line)
        if line.startswith(want):
            return line, seen


def run(client: str, args: list[str], timeout: float = 120.0, *, pause: tuple[int, float] | None = None,
        pause_at: str = "PRODUCING") -> dict:
    """Run the program to its end; its RESULT.

    ``pause=(pid, seconds)``: once the program prints ``pause_at``, stop that broker process
    (SIGSTOP) for that long, then let it go on (SIGCONT): requests in flight time out in the
    client, which sends them again to a broker that may have written them (or gives up on them).
    """
    proc, lines, err = _start(client, args)
    if pause is not None:
        broker_pid, seconds = pause
        _wait_line(proc, lines, err, pause_at, timeout)
        os.kill(broker_pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            os.kill(broker_pid, signal.SIGCONT)
    line, _ = _wait_line(proc, lines, err, "RESULT ", timeout)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    res = json.loads(line[len("RESULT "):])
    # Partitions come back in whatever order the consumer fetched them; within one, by offset.
    for iso, records in res.get("records", {}).items():
        res["records"][iso] = sorted(records, key=lambda r: (r[0], r[1]))
    return res


def run_until_crashpoint_and_kill(client: str, args: list[str], timeout: float = 90.0) -> None:
    """Run the program until it says it is mid-transaction, then SIGKILL it (that process only)."""
    proc, lines, err = _start(client, args)
    _wait_line(proc, lines, err, CRASHPOINT, timeout)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
