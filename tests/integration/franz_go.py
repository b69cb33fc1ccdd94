"""franz-go (github.com/twmb/franz-go), the Go client, for integration tests: tests/go/mbgo.

``build()`` (run by tests/run.sh as ``python -m tests.integration.franz_go build``) compiles
tests/go/mbgo with the Go toolchain, its modules fetched through the Go module proxy at the
versions go.mod/go.sum pin, into a cache outside the repository
(``~/.cache/minibroker-tests/go/`` for modules and build cache, ``go-bin/mbgo-<hash>`` for the
binary, keyed by a hash of the sources); it does nothing when that binary exists. franz-go 1.22
needs Go ≥ 1.26: an older ``go`` (≥ 1.21) downloads that toolchain itself (GOTOOLCHAIN=auto).

Tests call ``mbgo()`` for the binary (skipped without Go, failed when
MINIBROKER_TEST_REQUIRE_TOOLS is set) and ``run()`` to run a subcommand with a timeout and read
its JSON lines.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "go" / "mbgo"


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "minibroker-tests"


def go_command() -> str | None:
    found = shutil.which("go")
    if found:
        return found
    fallback = Path("/usr/local/go/bin/go")
    return str(fallback) if fallback.exists() else None


def _source_hash() -> str:
    h = hashlib.sha256()
    for name in ("go.mod", "go.sum", "main.go"):
        h.update((SRC / name).read_bytes())
    return h.hexdigest()[:16]


def binary_path() -> Path:
    return cache_root() / "go-bin" / f"mbgo-{_source_hash()}"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    root = cache_root() / "go"
    env.update(GOMODCACHE=str(root / "mod"), GOCACHE=str(root / "build"),
               GOFLAGS="-mod=readonly -modcacherw", GOTOOLCHAIN=env.get("GOTOOLCHAIN", "auto"))
    return env


class GoUnavailable(RuntimeError):
    pass


def build(quiet: bool = False) -> Path:
    target = binary_path()
    if target.exists():
        return target
    go = go_command()
    if go is None:
        raise GoUnavailable("go not found (tests/run.sh installs it; franz-go needs Go >= 1.26)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
    r = subprocess.run([go, "build", "-o", str(tmp), "."], cwd=str(SRC), env=_env(),
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise GoUnavailable(f"go build of {SRC} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    os.replace(tmp, target)
    if not quiet:
        print(f"built {target}")
    return target


def mbgo() -> Path:
    """The built program, or skip the test (fail under MINIBROKER_TEST_REQUIRE_TOOLS)."""
    import pytest

    try:
        return build(quiet=True)
    except (GoUnavailable, subprocess.TimeoutExpired) as e:
        if os.environ.get("MINIBROKER_TEST_REQUIRE_TOOLS"):
            pytest.fail(str(e))
        pytest.skip(str(e))


def run(args: list[str], timeout: float = 120) -> tuple[int, list[dict], str]:
    """(exit code, JSON lines of stdout, stderr) of ``mbgo ARGS``."""
    r = subprocess.run([str(mbgo()), *args], capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    return r.returncode, lines, r.stderr


if __name__ == "__main__":
    if sys.argv[1:] != ["build"]:
        sys.exit("usage: python -m tests.integration.franz_go build")
    try:
        build()
    except GoUnavailable as e:
        sys.exit(str(e))
