"""Helpers for the packaging tests: what pyproject declares, building the wheel, fresh venvs.

The wheel is built from a copy of the sources (the way ``pip wheel .`` sees them) so that
no ``build/`` or ``*.egg-info`` is written into the work tree, with this interpreter's
setuptools (``--no-build-isolation``: no download, about a second).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

# What `pip wheel .` reads: pyproject, the readme and license it names, the package folders.
SOURCE_FILES = ("pyproject.toml", "README.md", "LICENSE")

BUILD_TIMEOUT = 120
INSTALL_TIMEOUT = 180
DOWNLOAD_TIMEOUT = 300


def pyproject(root: Path = REPO_ROOT) -> dict:
    with open(root / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def package_dirs(root: Path = REPO_ROOT) -> dict[str, str]:
    return pyproject(root)["tool"]["setuptools"]["package-dir"]


def packages_on_disk(root: Path = REPO_ROOT) -> tuple[set[str], set[str]]:
    """(import names of every directory with an ``__init__.py`` under the package folders,
    directories holding .py files but no ``__init__.py``: a namespace package, which the
    explicit ``packages`` list would silently leave out of the wheel)."""
    found, namespace = set(), set()
    for name, folder in package_dirs(root).items():
        base = root / folder
        for d, subdirs, files in os.walk(base):
            subdirs[:] = [s for s in subdirs if s != "__pycache__" and not s.endswith(".egg-info")]
            rel = Path(d).relative_to(base).parts
            dotted = ".".join((name, *rel))
            if "__init__.py" in files:
                found.add(dotted)
            elif any(f.endswith(".py") for f in files):
                namespace.add(str(Path(folder, *rel)))
    return found, namespace


def unlisted_packages(root: Path = REPO_ROOT) -> tuple[list[str], list[str], list[str]]:
    """(packages on disk missing from ``packages``, listed ones not on disk, namespace dirs)."""
    listed = set(pyproject(root)["tool"]["setuptools"]["packages"])
    found, namespace = packages_on_disk(root)
    return sorted(found - listed), sorted(listed - found), sorted(namespace)


def copy_sources(dst: Path) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for f in SOURCE_FILES:
        shutil.copy2(REPO_ROOT / f, dst / f)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for folder in sorted(set(package_dirs().values())):
        shutil.copytree(REPO_ROOT / folder, dst / folder, ignore=ignore)
    return dst


def build_wheel(src: Path, out: Path) -> Path:
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                           "--no-build-isolation", "--no-index", "-w", str(out), str(src)],
                          capture_output=True, text=True, timeout=BUILD_TIMEOUT, env=clean_env())
    assert proc.returncode == 0, f"pip wheel failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    wheels = glob.glob(str(out / "minibroker-*.whl"))
    assert len(wheels) == 1, wheels
    return Path(wheels[0])


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without what would make a child see the work tree or the test venv,
    or configure a broker behind the test's back."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not k.startswith("MINIBROKER_")}
    env.update(extra)
    return env


def interpreter(minor: int) -> str | None:
    """A working CPython 3.<minor> on this machine: this one, one on PATH, or pyenv's."""
    if sys.version_info[:2] == (3, minor):
        return getattr(sys, "_base_executable", sys.executable)
    pyenv_root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates = [shutil.which(f"python3.{minor}")]
    candidates += sorted(glob.glob(f"{pyenv_root}/versions/3.{minor}.*/bin/python3"), reverse=True)
    for c in candidates:
        if not c:
            continue
        try:
            proc = subprocess.run([c, "-c", "import sys, venv; print(sys.version_info[1])"],
                                  capture_output=True, text=True, timeout=30, env=clean_env())
        except (OSError, subprocess.TimeoutExpired):
            continue
        if proc.returncode == 0 and proc.stdout.strip() == str(minor):
            return c
    return None


def classified_minors(metadata: str) -> list[int]:
    return sorted(int(m) for m in re.findall(r"^Classifier: Programming Language :: Python :: 3\.(\d+)$",
                                             metadata, re.M))


def wheelhouse() -> Path:
    """Downloaded dependency wheels, kept between runs (beside the other test caches) so that an
    install is offline after the first."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    path = Path(base) / "minibroker-tests" / "wheels"
    path.mkdir(parents=True, exist_ok=True)
    return path


def install_wheel(python: str, venv: Path, wheel: Path, extras: str) -> None:
    """A plain venv (no system site-packages: a missing dependency must show) with
    ``minibroker[extras]`` from ``wheel``; dependencies from the wheelhouse, fetched into it
    with pip download only when something is missing there."""
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60,
                   env=clean_env())
    house = wheelhouse()
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
    want = f"minibroker[{extras}]" if extras else "minibroker"
    links = ["--find-links", str(wheel.parent), "--find-links", str(house)]
    install = pip + ["install", "--quiet", "--no-index", *links, want]
    proc = subprocess.run(install, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, env=clean_env())
    if proc.returncode != 0:
        download = pip + ["download", "--quiet", "--only-binary", ":all:", "-d", str(house),
                          "--find-links", str(wheel.parent), want]
        got = subprocess.run(download, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT,
                             env=clean_env())
        # The wheel under test is not a dependency to cache: a later build of the same version
        # must not be shadowed by this one.
        for stale in house.glob("minibroker-*"):
            stale.unlink()
        assert got.returncode == 0, (f"fetching the dependencies of {want} for {python} failed "
                                     f"(needs the package registry once):\n{got.stderr[-3000:]}")
        proc = subprocess.run(install, capture_output=True, text=True, timeout=INSTALL_TIMEOUT,
                              env=clean_env())
    assert proc.returncode == 0, f"installing {want} into a fresh venv failed:\n{proc.stderr[-3000:]}"
