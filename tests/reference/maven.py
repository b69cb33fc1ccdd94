"""Jars from Maven Central into the test cache: ``mvn dependency:copy-dependencies`` of a pom.

Used for Apache Kafka's broker (tests/reference/pom.xml) and for the Java client
(tests/integration/java/pom.xml). The copy goes to a staging directory beside the target and is
renamed into place with a ``.complete`` marker, so a half-copied cache never counts.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

COMPLETE_MARKER = ".complete"


def cached(target: Path, complete: Callable[[Path], bool]) -> bool:
    return (target / COMPLETE_MARKER).exists() and complete(target)


def copy_dependencies(pom: Path, target: Path, version: str, complete: Callable[[Path], bool],
                      label: str, quiet: bool = False) -> Path:
    """Fill ``target`` from ``pom`` unless it is already complete there; ``complete(dir)`` says
    whether a directory holds every jar needed. Raises RuntimeError without mvn or jars."""
    if cached(target, complete):
        if not quiet:
            print(f"{label}: jars already cached in {target}", file=sys.stderr)
        return target
    mvn = shutil.which("mvn")
    if not mvn:
        raise RuntimeError("mvn not found (tests/run.sh installs Debian's maven)")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="libs-", dir=target.parent))
    try:
        cmd = [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies", "-DincludeScope=runtime",
               f"-DoutputDirectory={staging}"]
        if not quiet:
            print(f"{label}: {' '.join(cmd)}", file=sys.stderr)
        subprocess.run(cmd, check=True, timeout=1800, stdin=subprocess.DEVNULL)
        if not complete(staging):
            raise RuntimeError(f"mvn left jars out of {staging}: found "
                               f"{sorted(p.name for p in staging.iterdir())}")
        (staging / COMPLETE_MARKER).write_text(version + "\n")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)  # same file system: atomic
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
