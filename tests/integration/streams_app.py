"""Kafka Streams 4.4.0 for the exactly-once application test (streams/EosStreamsApp.java).

``python -m tests.integration.streams_app fetch`` (run by tests/run.sh) copies kafka-streams and
its runtime dependencies from Maven Central into ``~/.cache/minibroker-tests/kafka-streams-<v>/libs``
(Maven's own repository stays ``~/.m2``; nothing is fetched when they are there). The app is
compiled once per source, jars and JDK (java_client.compile_drivers) and run as its own JVM, so a
test can kill it with SIGKILL.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.reference import maven

from .java_client import JavaToolchain, _unavailable, cache_root, compile_drivers

STREAMS_VERSION = "4.4.0"
SRC_DIR = Path(__file__).resolve().parent / "streams"
POM = SRC_DIR / "pom.xml"
JAR_PREFIXES = ("kafka-streams-", "kafka-clients-", "rocksdbjni-", "slf4j-api-", "lz4-java-", "snappy-java-",
                "zstd-jni-")


def libs_dir() -> Path:
    return cache_root() / f"kafka-streams-{STREAMS_VERSION}" / "libs"


def jars_in(d: Path) -> list[Path] | None:
    if not d.is_dir():
        return None
    jars = sorted(d.glob("*.jar"))
    names = [j.name for j in jars]
    if not all(any(n.startswith(p) and n[len(p):len(p) + 1].isdigit() for n in names) for p in JAR_PREFIXES):
        return None
    return jars


def fetch(quiet: bool = False) -> list[Path]:
    target = maven.copy_dependencies(POM, libs_dir(), STREAMS_VERSION, lambda d: jars_in(d) is not None,
                                     "streams_app", quiet)
    jars = jars_in(target)
    assert jars is not None
    return jars


def toolchain() -> tuple[JavaToolchain, Path]:
    """java, javac, the jars and the compiled app; skip (fail under MINIBROKER_TEST_REQUIRE_TOOLS)."""
    java, javac = shutil.which("java"), shutil.which("javac")
    if not java or not javac:
        _unavailable("java/javac not installed (tests/run.sh installs default-jdk-headless)")
    jars = jars_in(libs_dir())
    if jars is None:
        _unavailable(f"kafka-streams jars not in {libs_dir()} (tests/run.sh fetches them: "
                     "python -m tests.integration.streams_app fetch)")
    tc = JavaToolchain(java, javac, jars)
    return tc, compile_drivers(tc, src_dir=SRC_DIR)


def start(tc: JavaToolchain, classes: Path, bootstrap: str, app: str, state_dir: Path, instance: str,
          log: Path, protocol: str = "classic") -> subprocess.Popen:
    """The app as its own JVM, output to ``log``; stop it with SIGKILL or SIGTERM (by its PID).
    ``protocol``: the group protocol, ``classic`` or ``streams`` (KIP-1071)."""
    out = open(log, "a")
    try:
        return subprocess.Popen([tc.java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                                 "-cp", tc.classpath(classes), "EosStreamsApp", bootstrap, app, str(state_dir),
                                 instance, protocol], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ})
    finally:
        out.close()


if __name__ == "__main__":
    if sys.argv[1:] == ["fetch"]:
        print(f"streams_app: {len(fetch())} jars in {libs_dir()}", file=sys.stderr)
        sys.exit(0)
    print("usage: python -m tests.integration.streams_app fetch", file=sys.stderr)
    sys.exit(2)
