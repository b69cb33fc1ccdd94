"""The quick tier (tests/run.sh --quick) holds what tests/conftest.py says, and never quietly less.

A renamed folder or test, or a collection rule gone wrong, would otherwise shrink the tier without
a failure: it would just get faster. The tier is collected twice in child processes, once with
``--quick`` (the folders that hold no quick test are not even imported) and once the plain way,
and both must agree with the lists in tests/conftest.py.

This test runs in the full suite, not in the tier it checks: a tier that lost its tests would
have lost this one too. (Within the tier, conftest refuses a smoke entry that matches no test,
and pytest exits 5 when nothing is collected.)
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import NOT_QUICK, QUICK_DIRS, QUICK_SMOKE, _matches

ROOT = Path(__file__).resolve().parents[1]


def _collect(*args: str) -> list[str]:
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", *args],
                       cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    ids = [line for line in r.stdout.splitlines() if "::" in line and not line.startswith(" ")]
    assert re.search(r"\d+(/\d+)? tests? collected", r.stdout), r.stdout[-2000:]
    return ids


def _in_dirs(nodeid: str) -> bool:
    parts = nodeid.split("::")[0].split("/")
    return (len(parts) == 2 and parts[1].startswith("test_")) or parts[1] in QUICK_DIRS


def test_the_quick_tier_is_what_conftest_lists():
    quick = _collect("--quick", "tests")
    paths = [f"tests/{d}" for d in QUICK_DIRS] + sorted(str(p.relative_to(ROOT)) for p in
                                                        (ROOT / "tests").glob("test_*.py"))
    paths += sorted({e.split("::")[0] for e in QUICK_SMOKE})
    everything = _collect(*paths)

    # Every entry of the lists still names a test (a rename must update the list).
    for entry in (*NOT_QUICK, *QUICK_SMOKE):
        assert any(_matches(i, entry) for i in everything), f"tests/conftest.py names no test: {entry}"
    # Every folder of the tier still holds quick tests.
    for d in QUICK_DIRS:
        assert any(i.startswith(f"tests/{d}/") for i in quick), f"no quick test in tests/{d}"

    # --quick collects exactly the rule: the folders minus NOT_QUICK, plus the smoke tests.
    expected = [i for i in everything
                if (_in_dirs(i) and not any(_matches(i, e) for e in NOT_QUICK))
                or any(_matches(i, e) for e in QUICK_SMOKE)]
    assert sorted(quick) == sorted(expected)
    assert sum(not _in_dirs(i) for i in quick) == len(QUICK_SMOKE)
    # ~2,550 today: far fewer means a rule broke, not that the project lost its tests.
    assert len(quick) > 1000, len(quick)
