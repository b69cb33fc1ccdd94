"""The "throw-away broker in any CI" snippet of docs/testing-your-app.md, run as written from the
repository root: its install step included (a fresh venv and `pip install` of this checkout), with
only its /tmp paths moved into the test's own directories."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from .clients import require_tool
from .support import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "testing-your-app.md"


def _snippet() -> list[str]:
    page = PAGE.read_text()
    section = page.split("## As a throw-away broker in any CI", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return block.splitlines()


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIBROKER_", "PIP_REQUIRE_VIRTUALENV"))}
    env["TMPDIR"] = str(tmp_path)  # mktemp's ready file and the ephemeral data dir land here
    return env


def _client_tests_line(lines: list[str]) -> str:
    return next(line for line in lines if line.startswith("npm test"))


def test_ci_snippet_runs(tmp_path: Path, tmp_path_factory):
    kcat = require_tool("kcat")
    lines = _snippet()
    install = next(line for line in lines if "pip install" in line)
    assert install.startswith("python3 -m venv /tmp/mb && /tmp/mb/bin/pip install")
    venv = tmp_path_factory.mktemp("ci-venv") / "mb"
    script = "\n".join(lines).replace("/tmp/mb.log", f"{tmp_path}/mb.log").replace("/tmp/mb", str(venv))
    # The client library's tests: here, kcat lists the broker it was given.
    script = script.replace(_client_tests_line(lines),
                            f'{kcat} -L -b "$KAFKA_BOOTSTRAP_SERVERS" -m 10 > {tmp_path}/listing')
    r = subprocess.run(["bash", "-e", "-c", script], cwd=str(REPO_ROOT), capture_output=True,
                       text=True, timeout=600, env=_env(tmp_path))
    log = (tmp_path / "mb.log").read_text() if (tmp_path / "mb.log").exists() else ""
    assert r.returncode == 0, (r.stdout, r.stderr, log)
    assert (venv / "bin" / "minibroker").exists()  # the snippet's own install served the broker
    listing = (tmp_path / "listing").read_text()
    assert re.search(r"broker 1 at 127\.0\.0\.1:\d+", listing), listing
    assert '"event": "broker.stopped"' in log
    # The ready file and the ephemeral data dir are gone after the SIGTERM of the EXIT trap.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["listing", "mb.log"]


def test_ci_snippet_fails_loudly_when_the_tests_fail(tmp_path: Path):
    lines = _snippet()
    # The install step is the previous test's; here this interpreter's minibroker serves.
    start = next(i for i, line in enumerate(lines) if line.startswith("READY="))
    script = "\n".join(lines[start:]).replace("/tmp/mb/bin/minibroker", f"{sys.executable} -m minibroker")
    script = script.replace("/tmp/mb.", f"{tmp_path}/mb.")
    script = script.replace(_client_tests_line(lines), "false  # the client library's tests fail")
    r = subprocess.run(["bash", "-e", "-c", script], cwd=str(REPO_ROOT), capture_output=True,
                       text=True, timeout=60, env=_env(tmp_path))
    assert r.returncode != 0
    assert '"event": "broker.stopped"' in (tmp_path / "mb.log").read_text()  # still stopped
