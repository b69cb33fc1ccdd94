"""Every Java client release since exactly-once began, for tests/integration/test_java_matrix.py.

``python -m tests.integration.client_matrix fetch`` (run by tests/run.sh) gets each release's
kafka-clients jar (and slf4j-api) into Maven's repository (``~/.m2``) with ``mvn dependency:get``.
java_matrix/MatrixDriver.java is compiled once against the oldest (0.11.0.3) and run with each.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from tests.reference.release_apis import SLF4J, _artifact, jar

from .java_client import JavaToolchain, _unavailable, compile_drivers

# 0.11 (exactly-once), 1.1, 2.0, 2.4 (KIP-360), 2.5 (KIP-447), 2.8, 3.0, 3.9, 4.0, the newest 4.x
VERSIONS = ("0.11.0.3", "1.1.1", "2.0.1", "2.4.1", "2.5.1", "2.8.2", "3.0.2", "3.9.1", "4.0.2", "4.4.0")
SRC_DIR = Path(__file__).resolve().parent / "java_matrix"


def slf4j() -> Path:
    return _artifact("org.slf4j", "slf4j-api", SLF4J)


def fetch() -> list[Path]:
    return [jar(v) for v in VERSIONS] + [slf4j()]


def toolchain() -> tuple[str, Path]:
    """java and the driver's classes; skip (fail under MINIBROKER_TEST_REQUIRE_TOOLS) without them."""
    java, javac = shutil.which("java"), shutil.which("javac")
    if not java or not javac:
        _unavailable("java/javac not installed (tests/run.sh installs default-jdk-headless)")
    try:
        jars = fetch()
    except Exception as e:  # no mvn, or Maven Central unreachable
        _unavailable(f"kafka-clients jars not available ({e}; tests/run.sh fetches them: "
                     "python -m tests.integration.client_matrix fetch)")
    return java, compile_drivers(JavaToolchain(java, javac, [jars[0], jars[-1]]), src_dir=SRC_DIR)


def command(java: str, classes: Path, version: str, *args: object) -> list[str]:
    classpath = ":".join(str(p) for p in (classes, jar(version), slf4j()))
    return [java, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath, "MatrixDriver",
            *map(str, args)]


if __name__ == "__main__":
    if sys.argv[1:] == ["fetch"]:
        print(f"client_matrix: {len(fetch())} jars in ~/.m2", file=sys.stderr)
        sys.exit(0)
    print("usage: python -m tests.integration.client_matrix fetch", file=sys.stderr)
    sys.exit(2)
