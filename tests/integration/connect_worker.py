"""A Kafka Connect distributed worker (4.3.1) for tests/integration/test_connect_eos.py.

``python -m tests.integration.connect_worker fetch`` (run by tests/run.sh) copies connect-runtime,
connect-file and their runtime dependencies from Maven Central into
``~/.cache/minibroker-tests/kafka-connect-<version>/libs``. ``Worker`` writes a worker config,
starts ``ConnectDistributed`` as its own JVM (so a test can kill it with SIGKILL) and talks to
its REST API.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.reference import maven

from .java_client import _unavailable, cache_root

CONNECT_VERSION = "4.3.1"
POM = Path(__file__).resolve().parent / "connect" / "pom.xml"
JAR_PREFIXES = ("connect-runtime-", "connect-file-", "connect-api-", "kafka-clients-", "jetty-server-",
                "slf4j-simple-")


def libs_dir() -> Path:
    return cache_root() / f"kafka-connect-{CONNECT_VERSION}" / "libs"


def _complete(d: Path) -> bool:
    names = [p.name for p in d.glob("*.jar")] if d.is_dir() else []
    return all(any(n.startswith(p) and n[len(p):len(p) + 1].isdigit() for n in names) for p in JAR_PREFIXES)


def fetch(quiet: bool = False) -> Path:
    return maven.copy_dependencies(POM, libs_dir(), CONNECT_VERSION, _complete, "connect_worker", quiet)


class Worker:
    def __init__(self, bootstrap: str, workdir: Path, group: str, port: int, **extra: str) -> None:
        java = shutil.which("java")
        if not java:
            _unavailable("java not installed (tests/run.sh installs default-jdk-headless)")
        if not _complete(libs_dir()):
            _unavailable(f"Kafka Connect jars not in {libs_dir()} (tests/run.sh fetches them: "
                         "python -m tests.integration.connect_worker fetch)")
        self.java = java
        self.url = f"http://127.0.0.1:{port}"
        self.log = workdir / f"{group}.log"
        self.config = workdir / f"{group}.properties"
        props = {
            "bootstrap.servers": bootstrap, "group.id": group, "listeners": self.url,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": f"{group}-configs", "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status", "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1", "status.storage.replication.factor": "1",
            "offset.storage.partitions": "1", "status.storage.partitions": "1",
            "offset.flush.interval.ms": "500", "scheduled.rebalance.max.delay.ms": "1000",
            **extra,
        }
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        out = open(self.log, "a")
        try:
            self.proc = subprocess.Popen(
                [self.java, "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 "-Dorg.slf4j.simpleLogger.defaultLogLevel=info", "-Dorg.slf4j.simpleLogger.showDateTime=true",
                 "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS", "-cp", str(libs_dir() / "*"),
                 "org.apache.kafka.connect.cli.ConnectDistributed", str(self.config)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        finally:
            out.close()

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()  # this JVM only
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)

    def rest(self, method: str, path: str, body: object = None, timeout: float = 10.0) -> object:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            return json.loads(raw) if raw else None

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"the worker exited ({self.proc.returncode}):\n{self.tail()}")
            try:
                self.rest("GET", "/connectors")
                return
            except (urllib.error.URLError, OSError):
                time.sleep(0.3)
        raise AssertionError(f"the worker's REST API did not answer within {timeout} s:\n{self.tail()}")

    def tail(self, n: int = 4000) -> str:
        try:
            return self.log.read_text()[-n:]
        except OSError:
            return ""


if __name__ == "__main__":
    if sys.argv[1:] == ["fetch"]:
        print(f"connect_worker: jars in {fetch()}", file=sys.stderr)
        sys.exit(0)
    print("usage: python -m tests.integration.connect_worker fetch", file=sys.stderr)
    sys.exit(2)
