"""Build and locate bench/loadgen, the compiled (Go, franz-go) load generator (issue 21).

    python bench/go_loadgen.py            # build it (if needed) and print the binary's path

``binary()`` compiles bench/loadgen with ``go build`` into ~/.cache/minibroker-bench/loadgen/
(outside the repository), once per content of its sources, go.mod, go.sum and the Go version:
an edit to main.go makes the next run rebuild. Modules come from the Go module proxy at the
versions pinned in go.mod/go.sum (``-mod=readonly``: a build never changes them) and are cached
in ~/.cache/minibroker-bench/go/. ``find_go()`` is None without a Go toolchain (PATH,
/usr/local/go/bin/go, or ``$MINIBROKER_BENCH_GO``); run.py then falls back to the Python generator.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "loadgen")
CACHE = os.path.expanduser("~/.cache/minibroker-bench")
ENV_GO = "MINIBROKER_BENCH_GO"


def find_go() -> str | None:
    for candidate in (os.environ.get(ENV_GO), shutil.which("go"), "/usr/local/go/bin/go"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def go_env() -> dict[str, str]:
    base = os.path.join(CACHE, "go")
    env = dict(os.environ)
    env.update({"GOMODCACHE": os.path.join(base, "mod"), "GOCACHE": os.path.join(base, "build"),
                "GOPATH": os.path.join(base, "path"), "GOFLAGS": "-mod=readonly -modcacherw",
                "GOTOOLCHAIN": env.get("GOTOOLCHAIN", "auto"), "CGO_ENABLED": "0"})
    return env


def sources_hash(go: str) -> str:
    h = hashlib.sha256()
    for name in sorted(n for n in os.listdir(SRC) if n.endswith(".go")) + ["go.mod", "go.sum"]:
        with open(os.path.join(SRC, name), "rb") as f:
            h.update(name.encode() + b"\0" + f.read() + b"\0")
    v = subprocess.run([go, "version"], capture_output=True, text=True, timeout=60, env=go_env())
    h.update(v.stdout.encode())
    return h.hexdigest()[:16]


def binary(go: str | None = None, timeout: float = 600.0) -> str:
    """The loadgen binary for the current sources, built into the cache when missing."""
    go = go or find_go()
    if go is None:
        raise RuntimeError(f"no go toolchain (not on PATH, not /usr/local/go/bin/go; set {ENV_GO})")
    out_dir = os.path.join(CACHE, "loadgen")
    out = os.path.join(out_dir, f"loadgen-{sources_hash(go)}")
    if os.path.exists(out):
        return out
    os.makedirs(out_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="build-", dir=out_dir)
    os.close(fd)
    try:
        print(f"== building {SRC} -> {out}", file=sys.stderr, flush=True)
        r = subprocess.run([go, "build", "-trimpath", "-o", tmp, "."], cwd=SRC, env=go_env(),
                           capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"go build of {SRC} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        os.replace(tmp, out)  # atomic: a concurrent build's result is as good
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    for name in os.listdir(out_dir):  # older builds
        p = os.path.join(out_dir, name)
        if name.startswith("loadgen-") and p != out:
            try:
                os.unlink(p)
            except OSError:
                pass
    return out


if __name__ == "__main__":
    print(binary())
