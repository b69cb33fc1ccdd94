"""Without the [spark] extra, what needs Spark says in one line how to install it.

The extra is hidden from a child interpreter by a ``None`` entry in ``sys.modules`` (the
import system's own "not importable" mark), so these run in the test venv, which has it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.integration.support import REPO_ROOT

INSTALL = "pip install 'minibroker[spark]'"


def _run(code: str, *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=str(REPO_ROOT), capture_output=True,
                          text=True, timeout=60, env=env)


def _cli_without(module: str, argv: list[str]) -> subprocess.CompletedProcess:
    return _run(f"import sys; sys.modules[{module!r}] = None\n"
                f"from minibroker.cli.main import main; sys.exit(main({argv!r}))")


@pytest.mark.parametrize("module", ["pyspark", "pyarrow"])
def test_audit_without_the_extra_says_how_to_install_it(tmp_path, module):
    proc = _cli_without(module, ["audit", str(tmp_path)])
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "[spark] extra" in lines[0] and INSTALL in lines[0] and module in lines[0]
    assert "--local" in lines[0]
    assert proc.stdout == ""


def test_audit_local_needs_no_spark(tmp_path):
    proc = _cli_without("pyspark", ["audit", "--local", str(tmp_path)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "result: OK" in proc.stdout


def test_register_without_the_extra_raises_one_clear_import_error():
    proc = _run("import sys; sys.modules['pyspark'] = None\n"
                "from minibroker.spark import register\n"
                "from minibroker.spark.extra import SparkExtraMissing\n"
                "try:\n"
                "    register(None)\n"
                "except SparkExtraMissing as e:\n"
                "    assert isinstance(e, ImportError) and e.name == 'pyspark'\n"
                "    print(e)\n")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "minibroker.spark needs the [spark] extra" in proc.stdout and INSTALL in proc.stdout


def test_audit_without_java_says_so(tmp_path):
    pytest.importorskip("pyspark", reason="the [spark] extra is not installed")
    pytest.importorskip("pyarrow", reason="the [spark] extra is not installed")
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAVA_HOME", "PYSPARK_GATEWAY_PORT", "SPARK_HOME")}
    env["PATH"] = str(empty)
    proc = subprocess.run([sys.executable, "-m", "minibroker.cli.main", "audit", str(tmp_path)],
                          cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "Java" in proc.stderr and "--local" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
