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

import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.integration import franz_go  # noqa: E402  (the same build as the Go test programs')

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
    return franz_go.sources_hash(go, Path(SRC), go_env())


def binary(go: str | None = None, timeout: float = 600.0) -> str:
    """The loadgen binary for the current sources, built into the cache when missing."""
    go = go or find_go()
    if go is None:
        raise RuntimeError(f"no go toolchain (not on PATH, not /usr/local/go/bin/go; set {ENV_GO})")
    out_dir = os.path.join(CACHE, "loadgen")
    out = os.path.join(out_dir, f"loadgen-{sources_hash(go)}")
    if os.path.exists(out):
        return out
    print(f"== building {SRC} -> {out}", file=sys.stderr, flush=True)
    franz_go.go_build(go, Path(SRC), Path(out), "build-", go_env(), timeout)
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
