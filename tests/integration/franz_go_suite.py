"""franz-go's own integration tests (package ``pkg/kgo`` of github.com/twmb/franz-go) as a test
binary, for tests/integration/test_franz_go_suite.py.

franz-go tests itself against a real cluster: its ``*_test.go`` files read the seed brokers from
``KGO_SEEDS``, create every topic with replication factor ``KGO_TEST_RF`` (3 unless set: the
suite is written for a three-broker cluster) and produce ``KGO_TEST_RECORDS`` records through its
group and transactional ETL chains. The module zip on the Go module proxy holds those test files,
so ``build()`` compiles them, unchanged, with ``go test -c`` — at the franz-go version that
tests/go/mbgo/go.mod pins — into ``~/.cache/minibroker-tests/go-bin/kgo-suite-<version>-<hash>``.
The module cache is read-only, so the module is copied to a temporary directory to build; the
binary runs in the package's directory of the module cache (a few unit tests read the package's
own sources, e.g. config.go). Nothing is written to the checkout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from .franz_go import GO_SRC_DIR, cache_root, fetch_toolchain, find_go, go_env

MODULE = "github.com/twmb/franz-go"
PACKAGE = "./pkg/kgo"


def pinned_version() -> str:
    """The franz-go version tests/go/mbgo/go.mod requires (the one the other Go tests use)."""
    m = re.search(rf"^\s*(?:require\s+)?{re.escape(MODULE)}\s+(v\S+)", (GO_SRC_DIR / "go.mod").read_text(), re.M)
    if m is None:
        raise RuntimeError(f"{GO_SRC_DIR / 'go.mod'} does not require {MODULE}")
    return m.group(1)


def binary_path(go: str, version: str) -> Path:
    goversion = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, timeout=60,
                               env=go_env(), cwd=GO_SRC_DIR).stdout.strip() or "unknown"
    return cache_root() / "go-bin" / f"kgo-suite-{version}-{goversion}"


def module_dir(go: str, version: str, timeout: float = 600.0) -> Path:
    """The module's source in the module cache (downloaded from the proxy when missing)."""
    r = subprocess.run([go, "mod", "download", "-json", f"{MODULE}@{version}"], capture_output=True, text=True,
                       timeout=timeout, env=go_env(), cwd=GO_SRC_DIR)
    if r.returncode != 0:
        raise RuntimeError(f"go mod download {MODULE}@{version} failed:\n{r.stdout}\n{r.stderr}")
    return Path(json.loads(r.stdout)["Dir"])


def package_dir(go: str) -> Path:
    """Where the test binary runs: pkg/kgo of the pinned module in the module cache."""
    return module_dir(go, pinned_version()) / PACKAGE


def build(go: str | None = None, timeout: float = 900.0) -> Path:
    """Compile franz-go's pkg/kgo tests into the cache unless already there; the binary's path."""
    go = go or find_go()
    if go is None:
        raise RuntimeError("no go toolchain (see tests/integration/franz_go.py)")
    version = pinned_version()
    out = binary_path(go, version)
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    src = module_dir(go, version)
    work = Path(tempfile.mkdtemp(prefix="kgo-suite-"))
    try:
        tree = work / "franz-go"
        shutil.copytree(src, tree)
        for root, dirs, files in os.walk(tree):
            for name in dirs + files:
                p = Path(root) / name
                p.chmod(p.stat().st_mode | stat.S_IWUSR)
        tmp = out.parent / f".{out.name}.{os.getpid()}"
        r = subprocess.run([go, "test", "-c", "-o", str(tmp), PACKAGE], cwd=tree, env=go_env(),
                           capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"go test -c {PACKAGE} of {MODULE}@{version} failed ({r.returncode}):\n"
                               f"{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
        os.replace(tmp, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for old in out.parent.glob("kgo-suite-*"):
        if old != out and not old.name.startswith("."):
            old.unlink(missing_ok=True)
    return out


def binary() -> Path:
    """The suite binary (built on first use), or skip (fail under MINIBROKER_TEST_REQUIRE_TOOLS)."""
    import pytest

    go = find_go()
    if go is None:
        msg = "Go is not installed: franz-go's own test suite cannot be built"
        if os.environ.get("MINIBROKER_TEST_REQUIRE_TOOLS"):
            pytest.fail(msg)
        pytest.skip(msg)
    try:
        return build(go)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        pytest.fail(f"building franz-go's test suite failed (module proxy unreachable?):\n{e}")


def command(go: str, test_binary: Path, *args: str) -> list[str]:
    """The suite run through ``go tool test2json``: one JSON event per line, each naming its test,
    so parallel tests' interleaved output is still told apart."""
    return [go, "tool", "test2json", "-t", str(test_binary), "-test.v=test2json", *args]


def outcomes(stdout: str) -> dict[str, dict]:
    """Top-level tests: {name: {"action": pass|fail|skip, "elapsed": s, "log": [lines]}}."""
    tests: dict[str, dict] = {}
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        name = event.get("Test")
        if not name or "/" in name:
            continue
        t = tests.setdefault(name, {"action": None, "elapsed": 0.0, "log": []})
        action = event.get("Action")
        if action == "output":
            text = event.get("Output", "").strip()
            if text and not text.startswith(("=== ", "--- ")):
                t["log"].append(text)
        elif action in ("pass", "fail", "skip"):
            t["action"], t["elapsed"] = action, event.get("Elapsed", 0.0)
    return tests


def main(argv: list[str]) -> int:
    if argv[:1] == ["build"]:
        go = find_go() or fetch_toolchain()
        print(build(go))
        return 0
    if argv[:1] == ["run"] and len(argv) >= 2:
        # by hand: the suite against running brokers, franz-go's own -test.v output
        go = find_go() or fetch_toolchain()
        env = {**os.environ, "KGO_SEEDS": argv[1], "KGO_TEST_RECORDS": os.environ.get("KGO_TEST_RECORDS", "20000")}
        return subprocess.run([str(build(go)), "-test.v", *argv[2:]], cwd=package_dir(go), env=env).returncode
    print("usage: python -m tests.integration.franz_go_suite build\n"
          "       python -m tests.integration.franz_go_suite run SEEDS [-test.run REGEX ...]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
