"""Apache Avro (Java) as the reference of the AVRO schema format (issue 34).

``python -m tests.differential.avro_java fetch`` (tests/run.sh's full-run setup) copies avro and
its runtime jars from Maven Central (tests/differential/avro_java/pom.xml) into
``~/.cache/minibroker-tests/avro-<version>/libs`` and compiles AvroCheck.java against them into
``~/.cache/minibroker-tests/java-classes`` (keyed by a hash of the source, the jars and the JDK).
``AvroJava`` runs that program once and feeds it many schema pairs over stdin (one JVM for a
whole test). Without java, javac or the jars the test skips (fails under
MINIBROKER_TEST_REQUIRE_TOOLS).
"""
from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.integration.java_client import (
    JavaToolchain,
    _unavailable,
    cache_root,
    compile_drivers,
    driver_command,
)
from tests.reference import maven

AVRO_VERSION = "1.12.2"
SRC_DIR = Path(__file__).resolve().parent / "avro_java"
POM = SRC_DIR / "pom.xml"
JAR_PREFIXES = ("avro-", "jackson-core-", "jackson-databind-", "jackson-annotations-", "slf4j-api-",
                "commons-compress-")
ENV_LIBS = "MINIBROKER_TEST_AVRO_LIBS"
# Another java to run AvroCheck with (e.g. a JDK >= 19, whose Double.toString is the shortest).
ENV_JAVA = "MINIBROKER_TEST_AVRO_JAVA"


def default_libs_dir() -> Path:
    return cache_root() / f"avro-{AVRO_VERSION}" / "libs"


def jars_in(libs_dir: Path) -> list[Path] | None:
    """Every jar in ``libs_dir`` when each needed one is there, else None."""
    if not libs_dir.is_dir():
        return None
    jars = sorted(libs_dir.glob("*.jar"))
    for prefix in JAR_PREFIXES:
        if not any(j.name.startswith(prefix) and j.name[len(prefix):len(prefix) + 1].isdigit() for j in jars):
            return None
    return jars


def fetch(quiet: bool = False) -> Path:
    target = maven.copy_dependencies(POM, default_libs_dir(), AVRO_VERSION,
                                     lambda d: jars_in(d) is not None, "avro_java", quiet)
    tc = toolchain()
    return compile_drivers(tc, src_dir=SRC_DIR) if tc else target


def toolchain() -> JavaToolchain | None:
    java, javac = shutil.which("java"), shutil.which("javac")
    env = os.environ.get(ENV_LIBS)
    jars = jars_in(Path(env) if env else default_libs_dir())
    if not java or not javac or jars is None:
        return None
    return JavaToolchain(java, javac, jars)


class AvroJava:
    """One AvroCheck JVM for a whole test: ``ask(request)`` sends one {"id", "reader", "writer",
    "refs"} line and reads its answer, each bounded by ``timeout``; ``close()`` ends the JVM."""

    def __init__(self, timeout: float = 60.0) -> None:
        tc = toolchain()
        if tc is None:
            _unavailable(f"java/javac or the avro {AVRO_VERSION} jars missing (tests/run.sh fetches them: "
                         f"python -m tests.differential.avro_java fetch; or set {ENV_LIBS})")
        assert tc is not None
        classes = compile_drivers(tc, src_dir=SRC_DIR)
        self.timeout = timeout
        command = driver_command(tc, classes, "AvroCheck", [])
        command[0] = os.environ.get(ENV_JAVA) or command[0]
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     encoding="utf-8", bufsize=1)

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        assert ready, f"AvroCheck did not answer within {self.timeout} s: {request}"
        line = self.proc.stdout.readline()
        assert line, f"AvroCheck exited ({self.proc.poll()}) on {request}"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # this JVM only, by its PID
            self.proc.wait(timeout=30)


if __name__ == "__main__":
    if sys.argv[1:] == ["fetch"]:
        print(fetch(), file=sys.stderr)
        sys.exit(0)
    print("usage: python -m tests.differential.avro_java fetch", file=sys.stderr)
    sys.exit(2)
