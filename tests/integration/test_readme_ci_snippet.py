"""The README's "throw-away broker in any CI" snippet, run as written (install line aside)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from .clients import require_tool
from .support import REPO_ROOT


def _snippet() -> list[str]:
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("### As a throw-away broker in any CI", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return block.splitlines()


def test_ci_snippet_runs(tmp_path: Path):
    kcat = require_tool("kcat")
    lines = _snippet()
    assert lines[0].startswith("python3 -m venv /tmp/mb")  # the install step, done by the suite
    script = "\n".join(lines[1:])
    script = script.replace("/tmp/mb/bin/minibroker", f"{sys.executable} -m minibroker")
    script = script.replace("/tmp/mb.", f"{tmp_path}/mb.")
    test_line = next(l for l in lines if l.startswith("npm test"))
    # The client library's tests: here, kcat lists the broker it was given.
    script = script.replace(test_line, f'{kcat} -L -b "$KAFKA_BOOTSTRAP_SERVERS" -m 10 > {tmp_path}/listing')
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINIBROKER_")}
    env["TMPDIR"] = str(tmp_path)  # mktemp's ready file and the ephemeral data dir land here
    r = subprocess.run(["bash", "-e", "-c", script], cwd=str(REPO_ROOT), capture_output=True,
                       text=True, timeout=60, env=env)
    assert r.returncode == 0, (r.stdout, r.stderr, (tmp_path / "mb.log").read_text())
    listing = (tmp_path / "listing").read_text()
    assert re.search(r"broker 1 at 127\.0\.0\.1:\d+", listing), listing
    assert '"event": "broker.stopped"' in (tmp_path / "mb.log").read_text()
    # The ready file and the ephemeral data dir are gone after the SIGTERM of the EXIT trap.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["listing", "mb.log"]


def test_ci_snippet_fails_loudly_when_the_tests_fail(tmp_path: Path):
    lines = _snippet()
    script = "\n".join(lines[1:]).replace("/tmp/mb/bin/minibroker", f"{sys.executable} -m minibroker")
    script = script.replace("/tmp/mb.", f"{tmp_path}/mb.")
    test_line = next(l for l in lines if l.startswith("npm test"))
    script = script.replace(test_line, "false  # the client library's tests fail")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINIBROKER_")}
    env["TMPDIR"] = str(tmp_path)
    r = subprocess.run(["bash", "-e", "-c", script], cwd=str(REPO_ROOT), capture_output=True,
                       text=True, timeout=60, env=env)
    assert r.returncode != 0
    assert '"event": "broker.stopped"' in (tmp_path / "mb.log").read_text()  # still stopped
