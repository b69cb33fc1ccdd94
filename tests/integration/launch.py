"""Start ``python -m minibroker`` the way a CI script would: with --ready-file, no port chosen
by the test. Used by the listener and CI-target tests; killed by PID, temp dir removed."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .broker import REPO_ROOT


class Launched:
    def __init__(self, args: list[str], *, timeout: float = 15.0, env: dict | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="minibroker-launch-"))
        self.ready_file = self.dir / "ready"
        self.log_path = self.dir / "broker.log"
        child_env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIBROKER_", "KAFKA_"))}
        # --ephemeral makes its temp dir under TMPDIR: inside ours, close() removes it even when
        # the broker was killed and could not.
        child_env["TMPDIR"] = str(self.dir)
        child_env.update(env or {})
        self.started = time.perf_counter()
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "minibroker", *args, "--ready-file", str(self.ready_file)],
            cwd=str(REPO_ROOT), env=child_env, stdin=subprocess.DEVNULL,
            stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not self.ready_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"broker not ready (exit {self.proc.returncode}):\n{self.log()}")
            time.sleep(0.01)
        self.ready_seconds = time.perf_counter() - self.started
        self.addresses = self.ready_file.read_text().split()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def terminate(self, timeout: float = 10.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Launched":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
