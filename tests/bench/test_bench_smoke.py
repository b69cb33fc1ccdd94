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
         "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert time.monotonic() - t0 < 60
    result = json.loads((out / "results.json").read_text())
    assert result["notes"]["mb-never"] == []
    med = result["median"]["mb-never"]
    for stem in ("cold start to first ApiVersions ms", "idle RSS MiB",
                 "produce 1 KiB idempotent acks=all 3p: MB/s",
                 "consume 2 MiB (10% aborted), read_committed: MB/s delivered",
                 "consume 2 MiB (10% aborted), read_uncommitted: log MB/s (whole log ÷ time to its end)",
                 "consume 2 MiB (10% aborted): read_committed ÷ read_uncommitted, log MB/s (medians)",
                 "clean stop (SIGTERM to exit) ms"):
        assert med.get(stem, 0) > 0, stem
    restarts = [k for k in med if k.startswith("restart with")]
    assert len(restarts) == 2 and all(med[k] > 0 for k in restarts)
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
