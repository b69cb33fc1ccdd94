"""A seconds-long run of bench/ (issue 6), to keep the harness working; not a benchmark.

Every workload path that needs minibroker runs once with tiny sizes: cold start,
produce, consume (read_uncommitted and read_committed over a few MiB) and the
restarts after a clean stop and after kill -9. The figures are not looked at,
only that each row was measured and nothing was left behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_bench_smoke(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, TMPDIR=str(tmp_path))  # the brokers' data dirs land here
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "run.py"), "--quick", "--reps", "1", "--seconds", "0.5",
         "--only", "produce1k,consume,recovery,coldstart", "--brokers", "mb-never", "--consume-mib", "2",
         "--generator", "python", "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert time.monotonic() - t0 < 60
    result = json.loads((out / "results.json").read_text())
    assert result["notes"]["mb-never"] == []
    med = result["median"]["mb-never"]
    for stem in ("cold start to first ApiVersions ms", "cold start to first Metadata ms", "idle RSS MiB",
                 "produce 1 KiB idempotent acks=all 3p: MB/s",
                 "consume 2 MiB (10% aborted), read_committed: MB/s delivered",
                 "consume 2 MiB (10% aborted), read_uncommitted: log MB/s (whole log ÷ time to its end)",
                 "consume 2 MiB (10% aborted): read_committed ÷ read_uncommitted, log MB/s (medians)",
                 "clean stop (SIGTERM to exit) ms"):
        assert med.get(stem, 0) > 0, stem
    restarts = [k for k in med if k.startswith("restart with")]
    # after a clean stop and after kill -9, each to the first ApiVersions and to the first Metadata
    assert len(restarts) == 4 and all(med[k] > 0 for k in restarts)
    assert "| metric" in (out / "results.md").read_text()
    # Every data dir was removed with its broker.
    assert not [p for p in os.listdir(tmp_path) if p.startswith("bench-")]


def test_bench_baseline_runs_the_other_checkout(tmp_path):
    # A link to this checkout stands in for another one (git worktree add /tmp/base HEAD~1).
    base = tmp_path / "base"
    base.symlink_to(ROOT, target_is_directory=True)
    out = tmp_path / "out"
    env = dict(os.environ, TMPDIR=str(tmp_path))
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "run.py"), "--quick", "--reps", "1", "--seconds", "0.5",
         "--only", "produce1k", "--brokers", "mb-never,base-never", "--baseline", str(base), "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads((out / "results.json").read_text())
    assert result["brokers"]["base-never"]["label"] == f"minibroker at {base} fsync=never"
    assert result["median"]["base-never"]["produce 1 KiB idempotent acks=all 3p: MB/s"] > 0
    assert "mb-never ÷ base-never" in (out / "results.md").read_text()
    bad = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run.py"), "--brokers", "base-never"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "unknown broker" in bad.stderr


def test_bench_go_generator(tmp_path):
    """bench/loadgen (issue 21) drives produce and txn rows; skipped without a Go toolchain.
    The build (cached in ~/.cache/minibroker-bench/loadgen; ~50 s on this machine with empty
    caches) is done first and is not part of the timed run (~4 s)."""
    import pytest

    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        import go_loadgen
    finally:
        sys.path.pop(0)
    if go_loadgen.find_go() is None:
        if os.environ.get("MINIBROKER_TEST_REQUIRE_TOOLS"):
            pytest.fail("no go toolchain (MINIBROKER_TEST_REQUIRE_TOOLS is set)")
        pytest.skip("no go toolchain: bench/run.py falls back to the Python generator")
    go_loadgen.binary()
    out = tmp_path / "out"
    env = dict(os.environ, TMPDIR=str(tmp_path))
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "run.py"), "--quick", "--reps", "1", "--seconds", "0.5",
         "--only", "produce100,txn", "--brokers", "mb-never", "--generator", "go", "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert time.monotonic() - t0 < 30
    result = json.loads((out / "results.json").read_text())
    assert result["generator"] == "go" and result["notes"]["mb-never"] == []
    med = result["median"]["mb-never"]
    key = "produce 100 B idempotent acks=all 3p"
    for stem in (f"{key}: MB/s", f"{key}: broker CPU s per GB", f"{key}: client CPU s per GB (all processes)",
                 f"{key}: client CPU % per process (max)",
                 "txn 10x1KiB, 1 producer(s): txn/s", "txn 10x1KiB, 4 producer(s): txn/s",
                 "txn 10x1KiB, 4 producer(s): client CPU ms per txn (all processes)"):
        assert med.get(stem, 0) > 0, stem
    assert "Load generator of the produce and txn rows: go" in (out / "results.md").read_text()
    assert not [p for p in os.listdir(tmp_path) if p.startswith("bench-")]


def test_bench_share_row(tmp_path):
    """The share-consumer row (issue 31) with 1 and 4 ShareConsumers against minibroker."""
    out = tmp_path / "out"
    env = dict(os.environ, TMPDIR=str(tmp_path))
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "run.py"), "--quick", "--reps", "1", "--seconds", "0.5",
         "--only", "share", "--brokers", "mb-never", "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads((out / "results.json").read_text())
    assert result["notes"]["mb-never"] == [], result["notes"]
    med = result["median"]["mb-never"]
    for n in (1, 4):
        assert med.get(f"share consumer 100 B, {n} consumer(s): records acknowledged/s", 0) > 0, med
    assert not [p for p in os.listdir(tmp_path) if p.startswith("bench-")]


def test_produce_path_smoke(tmp_path):
    """bench/produce_path.py, every way (dispatcher, socket, handler alone), a few requests each: it
    runs and its own check (every partition's log end is requests x records) holds."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    for extra in ([], ["--socket", "--window", "3"], ["--handler"]):
        r = subprocess.run(
            [sys.executable, os.path.join(ROOT, "bench", "produce_path.py"), "--requests", "20", "--warmup", "2",
             "--records", "5", "--partitions", "2", "--reps", "1", *extra],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        assert "us CPU per request" in r.stdout
    assert os.listdir(tmp_path) == []  # the temp data dirs are gone


def test_registry_bench_smoke(tmp_path):
    """bench/registry.py with tiny sizes: every row measured, the throughput line printed."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    r = subprocess.run(
        [sys.executable, "-m", "bench.registry", "--schemas", "5", "--evolve", "3", "--lookups", "5",
         "--seconds", "0.5", "--clients", "1"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [line for line in r.stdout.splitlines() if line.startswith("| ") and "| n |" not in line]
    assert [row.split(" | ")[0].lstrip("| ") for row in rows] == [
        "register, new subject", "register, evolve (BACKWARD check)", "register, existing schema",
        "lookup", "get by id"]
    assert [row.split(" | ")[1] for row in rows] == ["5", "3", "5", "5", "5"]
    assert " lookups/s; broker CPU " in r.stdout
    assert not list(tmp_path.glob("minibroker-*")), "a data dir was left behind"
