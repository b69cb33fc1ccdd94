"""franz-go (github.com/twmb/franz-go, pure Go) for integration tests: tests/go/mbgo.

``build()`` (run by tests/run.sh as ``python -m tests.integration.franz_go build``) compiles
tests/go/mbgo with the Go toolchain into a cache outside the repository
(``~/.cache/minibroker-tests/go-bin/mbgo-<hash>``, keyed by a hash of the program's sources,
go.mod, go.sum and the Go version); the modules come from the Go module proxy at the versions
pinned in go.mod/go.sum (``-mod=readonly``: a build never changes them; GOTOOLCHAIN=auto, so a go
older than 1.26 but >= 1.21 fetches the go1.26 toolchain module) and are cached in
``~/.cache/minibroker-tests/go/``. Nothing is written to the checkout.

Tests call ``binary()`` (builds when missing; without Go the test is skipped, or fails under
MINIBROKER_TEST_REQUIRE_TOOLS) and ``run()``/``start()`` a subcommand, which prints JSON lines
(``events()`` parses them) and franz-go's own log on stderr. ``MINIBROKER_TEST_GO`` names the go
binary when it is not on PATH or in /usr/local/go/bin.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from .java_client import cache_root

GO_SRC_DIR = Path(__file__).resolve().parents[1] / "go" / "mbgo"
ENV_GO = "MINIBROKER_TEST_GO"
SOFTWARE_NAME = "kgo"  # franz-go's ClientSoftwareName in ApiVersions v3+ (KIP-511)


# The Go release fetched when the machine has none (or one too old to fetch its own):
# the Go module proxy serves every release as the module golang.org/toolchain.
TOOLCHAIN = "go1.26.8"


def find_go() -> str | None:
    for candidate in (os.environ.get(ENV_GO), shutil.which("go"), "/usr/local/go/bin/go",
                      str(_toolchain_dir() / "bin" / "go")):
        if candidate and os.access(candidate, os.X_OK) and _recent_enough(candidate):
            return candidate
    return None


def _recent_enough(go: str) -> bool:
    # GOTOOLCHAIN=auto (fetching go.mod's go1.26) needs go >= 1.21; Debian 12's golang-go is 1.19.
    try:
        out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "GOTOOLCHAIN": "local"}).stdout.strip()
        major, minor = (int(x) for x in out.removeprefix("go").split(".")[:2])
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return False
    return (major, minor) >= (1, 21)


def _arch() -> str:
    import platform

    return {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def _toolchain_dir() -> Path:
    return cache_root() / "go-toolchain" / f"{TOOLCHAIN}.linux-{_arch()}"


def fetch_toolchain(timeout: float = 600.0) -> str:
    """Download TOOLCHAIN from the Go module proxy into the cache (once); its go binary."""
    import urllib.request
    import zipfile

    target = _toolchain_dir()
    go = target / "bin" / "go"
    if go.exists():
        return str(go)
    if not sys.platform.startswith("linux"):
        raise RuntimeError("no go toolchain, and fetching one is only done on Linux")
    proxy = (os.environ.get("GOPROXY") or "https://proxy.golang.org").split(",")[0].rstrip("/")
    version = f"v0.0.1-{TOOLCHAIN}.linux-{_arch()}"
    url = f"{proxy}/golang.org/toolchain/@v/{version}.zip"
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="toolchain-", dir=target.parent))
    try:
        archive = staging / "toolchain.zip"
        with urllib.request.urlopen(url, timeout=timeout) as r, open(archive, "wb") as f:
            shutil.copyfileobj(r, f)
        prefix = f"golang.org/toolchain@{version}/"
        unpacked = staging / "go"
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                if not info.filename.startswith(prefix) or info.is_dir():
                    continue
                dest = unpacked / info.filename[len(prefix):]
                dest.parent.mkdir(parents=True, exist_ok=True)
                with z.open(info) as src, open(dest, "wb") as out:
                    shutil.copyfileobj(src, out)
                mode = (info.external_attr >> 16) & 0o777
                if mode:
                    dest.chmod(mode)
        if not (unpacked / "bin" / "go").exists():
            raise RuntimeError(f"{url} holds no bin/go")
        (unpacked / "bin" / "go").chmod(0o755)
        os.replace(unpacked, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return str(go)


def go_env() -> dict[str, str]:
    """The environment of every go command: caches outside the checkout, go.mod/go.sum as committed."""
    base = cache_root() / "go"
    env = dict(os.environ)
    env.update({"GOMODCACHE": str(base / "mod"), "GOCACHE": str(base / "build"), "GOPATH": str(base / "path"),
                # -modcacherw: the module cache can be deleted like any other cache; GOTOOLCHAIN=auto:
                # a go older than go.mod's 1.26 (>= 1.21) fetches go1.26 as a module from the proxy.
                "GOFLAGS": "-mod=readonly -modcacherw", "GOTOOLCHAIN": env.get("GOTOOLCHAIN", "auto"),
                "CGO_ENABLED": "0"})
    return env


def sources_hash(go: str, src: Path = GO_SRC_DIR, env: dict[str, str] | None = None) -> str:
    """A Go program's sources, go.mod, go.sum and the Go version, hashed: its build's name."""
    h = hashlib.sha256()
    for path in sorted(src.glob("*.go")) + [src / "go.mod", src / "go.sum"]:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    version = subprocess.run([go, "version"], capture_output=True, text=True, timeout=60,
                             env=env or go_env())
    h.update(version.stdout.encode())
    return h.hexdigest()[:16]


def go_build(go: str, src: Path, out: Path, tmp_prefix: str, env: dict[str, str], timeout: float) -> None:
    """``go build`` of ``src`` into ``out``, through a temp file renamed into place."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=tmp_prefix, dir=out.parent)
    os.close(fd)
    try:
        r = subprocess.run([go, "build", "-trimpath", "-o", tmp, "."], cwd=src, env=env,
                           capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"go build of {src} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        os.replace(tmp, out)  # atomic: a concurrent build's result is as good
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def binary_path(go: str) -> Path:
    return cache_root() / "go-bin" / f"mbgo-{sources_hash(go)}"


def build(go: str | None = None, timeout: float = 900.0, quiet: bool = False) -> Path:
    """Compile tests/go/mbgo into the cache unless already there; the binary's path."""
    go = go or find_go()
    if go is None:
        raise RuntimeError(f"no go toolchain (not on PATH, not /usr/local/go/bin/go; set {ENV_GO})")
    out = binary_path(go)
    if out.exists():
        return out
    go_build(go, GO_SRC_DIR, out, "mbgo-build-", go_env(), timeout)
    _prune(out)
    if not quiet:
        print(f"franz_go: built {out}", file=sys.stderr)
    return out


def _prune(keep: Path, max_builds: int = 4) -> None:
    builds = sorted((p for p in keep.parent.glob("mbgo-*") if "build" not in p.name),
                    key=lambda p: p.stat().st_mtime, reverse=True)
    for p in builds[max_builds:]:
        if p != keep:
            p.unlink(missing_ok=True)


_built: dict[str, Path] = {}


def binary() -> Path:
    """The mbgo binary (built on first use), or skip (fail under MINIBROKER_TEST_REQUIRE_TOOLS)."""
    import pytest

    if "bin" in _built:
        return _built["bin"]
    go = find_go()
    if go is None:
        msg = (f"Go is not installed (need go >= 1.26 on PATH or /usr/local/go/bin/go, or {ENV_GO}) "
               "to build the franz-go test program tests/go/mbgo")
        if os.environ.get("MINIBROKER_TEST_REQUIRE_TOOLS"):
            pytest.fail(msg)
        pytest.skip(msg)
    try:
        _built["bin"] = build(go, quiet=True)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        pytest.fail(f"building tests/go/mbgo failed (module proxy unreachable? see below):\n{e}")
    return _built["bin"]


mbgo = binary  # the name tests/integration/test_franz_go.py used on main before these tests


def command(subcommand: str, *args: object) -> list[str]:
    return [str(binary()), subcommand, *[str(a) for a in args]]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def start(subcommand: str, *args: object, stdout=subprocess.PIPE, stderr=subprocess.PIPE) -> subprocess.Popen:
    """Start a subcommand in the background; finish it with ``finish()`` (or kill it by its PID).

    Started from the main thread, it dies with the test process (PR_SET_PDEATHSIG follows the
    starting thread, so not from worker threads; there its own -timeout bounds it)."""
    on_main = threading.current_thread() is threading.main_thread() and sys.platform.startswith("linux")
    return subprocess.Popen(command(subcommand, *args), stdout=stdout, stderr=stderr, text=True,
                            stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent if on_main else None)


def finish(proc: subprocess.Popen, timeout: float) -> subprocess.CompletedProcess:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()  # this process only
        out, err = proc.communicate(timeout=30)
        raise AssertionError(f"{' '.join(proc.args)} did not finish within {timeout} s\n"
                             f"--- stdout ---\n{(out or '')[-4000:]}\n--- stderr ---\n{(err or '')[-4000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run(subcommand: str, *args: object, timeout: float = 120.0, check: bool = True) -> list[dict]:
    """Run a subcommand (its own -timeout should be shorter than ``timeout``); its JSON events.

    With ``check`` a non-zero exit fails, showing franz-go's log."""
    r = finish(start(subcommand, *args), timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(r.args)} exited {r.returncode}\n--- stdout ---\n{r.stdout[-4000:]}\n"
                             f"--- stderr (franz-go's log) ---\n{r.stderr[-6000:]}")
    return events(r.stdout)


def events(stdout: str, kind: str | None = None) -> list[dict]:
    out = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return out if kind is None else [e for e in out if e["event"] == kind]


def start_or_skip(broker, option: str = "--transaction-version"):
    """Start ``broker``; skip the test only if the broker refuses ``option`` as a usage error
    (exit code 2, an ``error:`` line naming it): that is a broker from before the option or its
    level existed. Any other failure to start fails the test."""
    import pytest

    from minibroker.testing import MiniBrokerError

    try:
        return broker.start()
    except MiniBrokerError:
        rc = broker.returncodes[-1] if broker.returncodes else None
        names = (option.lstrip("-"), option.lstrip("-").replace("-", "."))
        refusals = [line for line in broker.log_text().splitlines()
                    if "error:" in line and any(n in line for n in names)]
        broker.close()
        if rc == 2 and refusals:
            pytest.skip(f"this broker refuses {option}: {refusals[-1].strip()}")
        raise


def events_of(evs: list[dict], kind: str) -> list[dict]:
    return [e for e in evs if e["event"] == kind]


def main(argv: list[str]) -> int:
    if argv[:1] == ["build"]:
        go = find_go()
        if go is None:
            print(f"franz_go: no go >= 1.21 found; fetching {TOOLCHAIN} from the Go module proxy",
                  file=sys.stderr)
            go = fetch_toolchain()
        print(build(go))
        return 0
    print("usage: python -m tests.integration.franz_go build", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
