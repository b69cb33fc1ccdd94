"""The wheel a user builds: what it holds, its metadata, and that it works once installed.

The install checks put the wheel into a plain venv (no system site-packages, so a missing
dependency shows) for each CPython that pyproject's classifiers name, and run there what a
new user runs: ``minibroker --version``, the imports, ``minibroker audit`` without Spark,
and the testing README's example test under the ``[pytest]`` extra.
"""

from __future__ import annotations

import re
import subprocess
import zipfile
from pathlib import Path

import pytest

import minibroker

from .wheel import (
    REPO_ROOT,
    build_wheel,
    classified_minors,
    clean_env,
    copy_sources,
    install_wheel,
    interpreter,
    packages_on_disk,
    pyproject,
    unlisted_packages,
)

TOP_LEVEL = {"minibroker", "minibroker_protocol", "minibroker_storage"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    return build_wheel(copy_sources(tmp / "src"), tmp / "dist")


@pytest.fixture(scope="module")
def wheel_files(wheel) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as z:
        return {n: z.read(n) for n in z.namelist()}


def _dist_info(wheel_files, name: str) -> str:
    matches = [n for n in wheel_files if re.fullmatch(rf"minibroker-[^/]+\.dist-info/{name}", n)]
    assert len(matches) == 1, matches
    return wheel_files[matches[0]].decode()


# -- the explicit package list ------------------------------------------------------------------


def test_every_subpackage_is_in_the_packages_list():
    missing, absent, namespace = unlisted_packages()
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {missing}"
    assert not absent, f"listed in pyproject.toml but not on disk: {absent}"
    assert not namespace, f"folders with .py files but no __init__.py (not shipped): {namespace}"


def test_a_new_subpackage_missing_from_the_list_is_found(tmp_path):
    (tmp_path / "pyproject.toml").write_text((REPO_ROOT / "pyproject.toml").read_text())
    for folder in ("minibroker", "protocol", "storage"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    for pkg in pyproject()["tool"]["setuptools"]["packages"]:
        name, *rest = pkg.split(".")
        folder = {"minibroker": "minibroker", "minibroker_protocol": "protocol",
                  "minibroker_storage": "storage"}[name]
        d = tmp_path.joinpath(folder, *rest)
        d.mkdir(parents=True, exist_ok=True)
        (d / "__init__.py").write_text("")
    assert unlisted_packages(tmp_path) == ([], [], [])
    (tmp_path / "storage" / "compaction").mkdir()
    (tmp_path / "storage" / "compaction" / "__init__.py").write_text("")
    (tmp_path / "minibroker" / "plugins").mkdir()
    (tmp_path / "minibroker" / "plugins" / "x.py").write_text("")
    assert unlisted_packages(tmp_path) == (["minibroker_storage.compaction"], [], ["minibroker/plugins"])


# -- what the wheel holds ---------------------------------------------------------------------------


def test_wheel_top_level_names(wheel_files):
    tops = {n.split("/")[0] for n in wheel_files}
    dist_info = {t for t in tops if t.endswith(".dist-info")}
    assert dist_info == {f"minibroker-{minibroker.__version__}.dist-info"}
    assert tops - dist_info == TOP_LEVEL
    assert set(_dist_info(wheel_files, "top_level.txt").split()) == TOP_LEVEL


def test_wheel_ships_every_module_and_the_package_data(wheel_files):
    found, _ = packages_on_disk()
    dirs = pyproject()["tool"]["setuptools"]["package-dir"]
    expected = set()
    for pkg in found:
        name, *rest = pkg.split(".")
        src = REPO_ROOT.joinpath(dirs[name], *rest)
        expected |= {"/".join((name, *rest, f.name)) for f in src.glob("*.py")}
    assert expected - set(wheel_files) == set()
    assert b"minibroker_factory" in wheel_files["minibroker/testing/README.md"]
    assert not [n for n in wheel_files if "__pycache__" in n or n.endswith(".pyc")]
    assert not [n for n in wheel_files if n.startswith(("tests/", "bench/", "docker/", "examples/"))]


def test_wheel_metadata(wheel_files):
    meta = _dist_info(wheel_files, "METADATA")
    assert re.search(r"^Metadata-Version: 2\.[4-9]$", meta, re.M), meta[:300]
    assert f"\nVersion: {minibroker.__version__}\n" in meta
    assert "\nLicense-Expression: Apache-2.0\n" in meta
    assert "\nLicense-File: LICENSE\n" in meta
    # PEP 639: the SPDX expression replaces the license classifiers and the free-text License.
    assert "Classifier: License ::" not in meta and "\nLicense: " not in meta
    assert "\nClassifier: Framework :: Pytest\n" in meta
    assert "\nRequires-Python: >=3.11\n" in meta
    assert classified_minors(meta) and min(classified_minors(meta)) == 11
    for extra in ("pytest", "spark", "test"):
        assert f"\nProvides-Extra: {extra}\n" in meta
    assert 'Requires-Dist: confluent-kafka>=2.3; extra == "pytest"' in meta
    license_text = _dist_info(wheel_files, "licenses/LICENSE")
    assert license_text == (REPO_ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in license_text
    entry_points = _dist_info(wheel_files, "entry_points.txt")
    assert "minibroker = minibroker.launch:main" in entry_points
    assert "[pytest11]\nminibroker = minibroker.testing.pytest_plugin" in entry_points


# -- installed into a fresh venv ------------------------------------------------------------------

README_EXAMPLE = re.compile(r"```python\n(# test_orders\.py.*?)```", re.S)


def _classified() -> list[int]:
    return sorted(int(c.rsplit(".", 1)[1]) for c in pyproject()["project"]["classifiers"]
                  if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c))


@pytest.mark.parametrize("minor", _classified(), ids=lambda m: f"py3{m}")
def test_installed_wheel_works(wheel, tmp_path, minor):
    python = interpreter(minor)
    if python is None:
        pytest.skip(f"no CPython 3.{minor} on this machine: the classifier for it is not checked here")
    venv = tmp_path / "venv"
    install_wheel(python, venv, wheel, "pytest")
    work = tmp_path / "work"  # not the repo: its folders must not be what gets imported
    work.mkdir()

    def run(*cmd: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=timeout,
                              env=clean_env())

    bin_ = venv / "bin"
    proc = run(str(bin_ / "minibroker"), "--version")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == f"minibroker {minibroker.__version__}"

    proc = run(str(bin_ / "python"), "-c",
               "import importlib.util as u, sys, minibroker, minibroker_protocol, minibroker_storage\n"
               "import minibroker.spark, minibroker.testing\n"
               "assert sys.version_info[:2] == (3, %d), sys.version\n"
               "assert u.find_spec('protocol') is None and u.find_spec('storage') is None\n"
               "print(minibroker.__file__)" % minor)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().startswith(str(venv)), proc.stdout

    # No [spark] extra in this venv: the real case, not a simulated one.
    proc = run(str(bin_ / "minibroker"), "audit", str(work))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "pip install 'minibroker[spark]'" in proc.stderr

    # The testing README's example, exactly as written, with only the [pytest] extra.
    blocks = README_EXAMPLE.findall((REPO_ROOT / "minibroker" / "testing" / "README.md").read_text())
    assert len(blocks) == 1
    (work / "test_orders.py").write_text(blocks[0])
    proc = run(str(bin_ / "python"), "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_orders.py",
               timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert re.search(r"\b2 passed\b", proc.stdout), proc.stdout[-2000:]
