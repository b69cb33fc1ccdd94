"""The stock Java Kafka client (kafka-clients 4.4.0) for integration tests.

The jars come from Maven Central: ``fetch_jars()`` (run by tests/run.sh as ``python -m
tests.integration.java_client fetch``) runs ``mvn dependency:copy-dependencies`` on
tests/integration/java/pom.xml into a cache directory outside the repository
(``~/.cache/minibroker-tests/kafka-clients-<version>/libs``; Maven's own repository stays
``~/.m2``); it does nothing when they are already cached. Jars are never committed.

Tests call ``java_toolchain()`` to find ``java``/``javac`` and the jars
(``MINIBROKER_TEST_JAVA_LIBS`` names a directory of jars to use instead of the
cache), ``compile_drivers()`` to compile ``tests/integration/java/*.java``
into the cache (keyed by a hash of the sources, the jars and the JDK), and
``run_driver()`` to run one with a bounded timeout. Without java, javac or the
jars the test is skipped, or fails when MINIBROKER_TEST_REQUIRE_TOOLS is set.

slf4j: kafka-clients brings slf4j-api alone (no binding), so the drivers log nothing and
slf4j prints one warning.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.reference import maven

KAFKA_CLIENTS_VERSION = "4.4.0"
# Jar name prefixes (then a version and ".jar") that kafka-clients needs at run time.
JAR_PREFIXES = ("kafka-clients-", "slf4j-api-", "lz4-java-", "snappy-java-", "zstd-jni-",
                "jackson-databind-", "jackson-core-", "jackson-annotations-")
JAVA_SRC_DIR = Path(__file__).resolve().parent / "java"
POM = JAVA_SRC_DIR / "pom.xml"
ENV_LIBS = "MINIBROKER_TEST_JAVA_LIBS"


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "minibroker-tests"


def default_libs_dir() -> Path:
    return cache_root() / f"kafka-clients-{KAFKA_CLIENTS_VERSION}" / "libs"


def jars_in(libs_dir: Path) -> list[Path] | None:
    """The needed jars in ``libs_dir`` (one per prefix), or None if any is missing."""
    if not libs_dir.is_dir():
        return None
    found = []
    for prefix in JAR_PREFIXES:
        hits = sorted(p for p in libs_dir.glob(f"{prefix}*.jar")
                      if p.name[len(prefix):len(prefix) + 1].isdigit())
        if not hits:
            return None
        found.append(hits[-1])
    return found


def libs_dir() -> Path:
    env = os.environ.get(ENV_LIBS)
    return Path(env) if env else default_libs_dir()


def fetch_jars(quiet: bool = False) -> list[Path]:
    """``mvn dependency:copy-dependencies`` into the cache, unless the jars are already there."""
    target = maven.copy_dependencies(POM, default_libs_dir(), KAFKA_CLIENTS_VERSION,
                                     lambda d: jars_in(d) is not None, "java_client", quiet)
    jars = jars_in(target)
    assert jars is not None
    if not quiet:
        print(f"java_client: {', '.join(p.name for p in jars)} in {target}", file=sys.stderr)
    return jars


@dataclass
class JavaToolchain:
    java: str
    javac: str
    jars: list[Path]

    def classpath(self, classes: Path) -> str:
        return os.pathsep.join([str(classes)] + [str(j) for j in self.jars])


def _unavailable(msg: str):
    import pytest

    if os.environ.get("MINIBROKER_TEST_REQUIRE_TOOLS"):
        pytest.fail(msg)
    pytest.skip(msg)


def java_toolchain() -> JavaToolchain:
    """java + javac + the jars, or skip (fail under MINIBROKER_TEST_REQUIRE_TOOLS)."""
    java, javac = shutil.which("java"), shutil.which("javac")
    if not java or not javac:
        _unavailable("java/javac not installed (tests/run.sh installs default-jdk-headless)")
    d = libs_dir()
    jars = jars_in(d)
    if jars is None:
        _unavailable(f"kafka-clients jars not found in {d} (need {', '.join(JAR_PREFIXES)}; "
                     f"tests/run.sh fetches them: python -m tests.integration.java_client fetch; "
                     f"or set {ENV_LIBS})")
    return JavaToolchain(java, javac, jars)


def _javac_version(javac: str) -> str:
    r = subprocess.run([javac, "-version"], capture_output=True, text=True, timeout=60)
    return (r.stdout + r.stderr).strip()


def compile_drivers(tc: JavaToolchain, timeout: float = 120.0, src_dir: Path | None = None) -> Path:
    """Compile ``src_dir``/*.java (default tests/integration/java; once per sources+jars+JDK); the classes dir."""
    src_dir = JAVA_SRC_DIR if src_dir is None else src_dir
    sources = sorted(src_dir.glob("*.java"))
    if not sources:
        raise RuntimeError(f"no Java sources in {src_dir}")
    h = hashlib.sha256()
    for src in sources:
        h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    for jar in tc.jars:
        h.update(str(jar).encode() + b"\0")
    h.update(_javac_version(tc.javac).encode())
    # One family of builds per source dir: a build is pruned only by a newer one of its own sources
    # (the reference Kafka's telemetry sink must not go because the drivers changed).
    family = src_dir.name
    out = cache_root() / "java-classes" / f"{family}-{h.hexdigest()[:16]}"
    if (out / ".complete").exists():
        os.utime(out)  # used now: the newest of its family
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="javac-", dir=out.parent))
    try:
        cmd = [tc.javac, "-nowarn", "-encoding", "UTF-8", "-d", str(tmp),
               "-cp", os.pathsep.join(str(j) for j in tc.jars)] + [str(s) for s in sources]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"javac failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        (tmp / ".complete").write_text("ok\n")
        try:
            tmp.rename(out)
        except OSError:  # compiled concurrently by someone else: theirs is as good
            if not (out / ".complete").exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    _prune_old_builds(out.parent, family, keep=out)
    return out


def _prune_old_builds(parent: Path, family: str, keep: Path, max_builds: int = 3) -> None:
    """Remove all but the newest ``max_builds`` builds of one source dir (each change adds one)."""
    try:
        builds = sorted((d for d in parent.iterdir() if d.is_dir() and d.name.startswith(family + "-")),
                        key=lambda d: d.stat().st_mtime, reverse=True)
    except OSError:
        return
    for d in builds[max_builds:]:
        if d != keep:
            shutil.rmtree(d, ignore_errors=True)


def driver_command(tc: JavaToolchain, classes: Path, main: str, args, heap: str = "256m") -> list[str]:
    return [tc.java, f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-cp", tc.classpath(classes), main] + [str(a) for a in args]


def start_driver(tc: JavaToolchain, classes: Path, main: str, args, heap: str = "256m") -> subprocess.Popen:
    """Start ``main`` in the background (stdout/stderr piped); finish it with ``finish_driver``."""
    return subprocess.Popen(driver_command(tc, classes, main, args, heap), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def finish_driver(proc: subprocess.Popen, timeout: float) -> subprocess.CompletedProcess:
    """Wait for a started driver, at most ``timeout`` s; after that it is killed (by its PID)."""
    try:
        out, err = proc.communicate(timeout=max(timeout, 0.1))
    except subprocess.TimeoutExpired:
        proc.kill()  # this JVM only
        out, err = proc.communicate(timeout=30)
        what = " ".join(str(a) for a in proc.args[proc.args.index("-cp") + 2:])
        raise AssertionError(f"java {what} did not finish within {timeout} s\n"
                             f"--- stdout ---\n{out[-4000:]}\n--- stderr ---\n{err[-4000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run_driver(tc: JavaToolchain, classes: Path, main: str, args, *, timeout: float = 180.0,
               heap: str = "256m") -> subprocess.CompletedProcess:
    """Run ``main`` with ``args``; bounded by ``timeout`` (the JVM is killed by PID after it)."""
    return finish_driver(start_driver(tc, classes, main, args, heap), timeout)


def json_driver(main: str, *, timeout: float = 60.0) -> Callable[..., dict]:
    """A runner of the driver ``main`` that prints its answer as JSON on its last line:
    ``run(bootstrap, *args)`` -> that JSON, asserting the driver exited 0."""
    tc = java_toolchain()
    classes = compile_drivers(tc)

    def run(bootstrap: str, *args: str) -> dict:
        r = run_driver(tc, classes, main, [bootstrap, *args], timeout=timeout)
        assert r.returncode == 0, f"{r.stdout}\n{r.stderr[-3000:]}"
        return json.loads(r.stdout.strip().splitlines()[-1])

    return run


def main(argv: list[str]) -> int:
    if argv[:1] == ["fetch"]:
        fetch_jars()
        return 0
    if argv[:1] == ["path"]:
        print(libs_dir())
        return 0
    print("usage: java_client.py fetch|path", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
