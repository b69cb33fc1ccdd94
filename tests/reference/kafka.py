"""Apache Kafka itself, one single-node KRaft process, as the reference for differential tests.

The broker's jars (org.apache.kafka:kafka_2.13 and its runtime dependencies, pinned in
tests/reference/pom.xml) are fetched by ``tests/run.sh`` with Maven into
``~/.cache/minibroker-tests/kafka-<version>/libs`` (``python -m tests.reference.kafka fetch``
does the same); ``MINIBROKER_TEST_KAFKA_LIBS`` names another directory of jars.

``KafkaReference`` formats a temporary KRaft storage directory (``kafka.tools.StorageTool
format``, what ``kafka-storage.sh format`` runs in 4.x) and starts ``kafka.Kafka`` with
``process.roles=broker,controller`` on free loopback ports, every internal topic at
replication factor and min ISR 1, and the settings of tests/reference/settings.py, the
same ones minibroker gets. ``start()`` returns once Kafka answers Metadata with itself as
a broker; ``stop()`` sends SIGTERM, kills after a bound, and removes the directory.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from tests.reference import maven

KAFKA_VERSION = "4.4.0"
HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
LOG4J_CONFIG = HERE / "log4j2.properties"
ENV_LIBS = "MINIBROKER_TEST_KAFKA_LIBS"
# Enough for a few topics and transactional ids on a 2-core machine; the client compiler alone
# starts the broker about twice as fast as tiered compilation here.
JVM_FLAGS = ["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true"]


class KafkaUnavailable(RuntimeError):
    """java or the Kafka jars are missing."""


class KafkaError(RuntimeError):
    """Kafka did not format, start or stop as asked."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "minibroker-tests"


def default_libs_dir() -> Path:
    return cache_root() / f"kafka-{KAFKA_VERSION}" / "libs"


def libs_dir() -> Path:
    env = os.environ.get(ENV_LIBS)
    return Path(env) if env else default_libs_dir()


def jars_present(d: Path) -> bool:
    return ((d / f"kafka_2.13-{KAFKA_VERSION}.jar").is_file()
            and (d / f"kafka-tools-{KAFKA_VERSION}.jar").is_file()
            and any(d.glob("log4j-slf4j2-impl-*.jar")))


def fetch_jars(quiet: bool = False) -> Path:
    """``mvn dependency:copy-dependencies`` into the cache, unless it is already complete there."""
    try:
        return maven.copy_dependencies(POM, default_libs_dir(), KAFKA_VERSION, jars_present,
                                       "reference kafka", quiet)
    except RuntimeError as e:
        raise KafkaUnavailable(str(e)) from None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def random_cluster_id() -> str:
    # What `kafka-storage.sh random-uuid` prints: 16 random bytes, URL-safe base64, unpadded;
    # like Kafka's Uuid.randomUuid, never one starting with "-" (the tool would read it as an option).
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def proc_status_kib(pid: int, field: str = "VmRSS") -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class KafkaReference:
    """One single-node Kafka (KRaft, broker+controller in one JVM) on loopback, in a temp dir."""

    def __init__(self, properties: dict[str, str] | None = None, *, libs: Path | None = None,
                 startup_timeout: float = 120.0, stop_timeout: float = 30.0,
                 transaction_version: int | None = 1, group_version: int | None = 1,
                 jvm_flags: list[str] | None = None, classpath: list[Path] | None = None,
                 sasl_users: dict[str, str] | None = None):
        self.libs = libs or libs_dir()
        # directories of plugin classes (metric.reporters) after Kafka's jars
        self.classpath = list(classpath or [])
        self.jvm_flags = list(JVM_FLAGS if jvm_flags is None else jvm_flags)
        self.extra = dict(properties or {})
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        # Format Kafka at the feature levels the differential pair runs (tests/reference/settings.py):
        # transactions v1 (tests of v2 switch both to 2) and group.version 1 (KIP-848 consumer groups
        # beside classic ones, Kafka 4's and minibroker's default). None: the release's default.
        self.transaction_version = transaction_version
        self.group_version = group_version
        # name -> password: a second listener, SASL_PLAINTEXT with PLAIN, for principals that are
        # not User:ANONYMOUS (the ACL tests); None: PLAINTEXT only
        self.sasl_users = dict(sasl_users) if sasl_users else None
        self.sasl_port: int | None = None
        self.work_dir: Path | None = None
        self.port: int | None = None
        self.controller_port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.start_seconds: float | None = None
        self.format_seconds: float | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        assert self.work_dir is not None
        return self.work_dir / "server.log"

    def java(self) -> str:
        java = shutil.which("java")
        if not java:
            raise KafkaUnavailable("java not found (Kafka 4 needs Java 17; tests/run.sh installs it)")
        if not jars_present(self.libs):
            raise KafkaUnavailable(f"Kafka {KAFKA_VERSION} jars not found in {self.libs} (tests/run.sh fetches "
                                   f"them: python -m tests.reference.kafka fetch; or set {ENV_LIBS})")
        return java

    def properties(self) -> dict[str, str]:
        assert self.work_dir is not None
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.work_dir / "data"),
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "log.flush.interval.messages": "9223372036854775807",
        }
        if self.sasl_users:
            sasl = f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
            props["listeners"] += "," + sasl
            props["advertised.listeners"] += "," + sasl
            props["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
            props["sasl.enabled.mechanisms"] = "PLAIN"
            props["listener.name.sasl_plaintext.sasl.enabled.mechanisms"] = "PLAIN"
            users = " ".join(f'user_{u}="{pw}"' for u, pw in self.sasl_users.items())
            props["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};")
        props.update(self.extra)
        return props

    def _java_cmd(self, java: str, main: str, *args: str) -> list[str]:
        assert self.work_dir is not None
        return [java, *self.jvm_flags, f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
                f"-Dkafka.logs.dir={self.work_dir}", "-cp",
                os.pathsep.join([str(self.libs / "*"), *map(str, self.classpath)]), main, *args]

    def start(self) -> "KafkaReference":
        t0 = time.monotonic()
        self.format()
        self.launch()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    def format(self) -> None:
        """What ``kafka-storage.sh format`` does: a temp dir, free ports, server.properties, the
        KRaft metadata log. Not part of a cold start (bench/ times ``launch`` alone)."""
        java = self.java()
        t0 = time.monotonic()
        self.work_dir = Path(tempfile.mkdtemp(prefix="kafka-reference-"))
        self.port, self.controller_port = free_port(), free_port()
        self.sasl_port = free_port() if self.sasl_users else None
        config = self.work_dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        fmt = self._java_cmd(java, "kafka.tools.StorageTool", "format", "-t", random_cluster_id(),
                             "-c", str(config), "--ignore-formatted")
        if self.transaction_version is not None:
            fmt += ["--feature", f"transaction.version={self.transaction_version}"]
        if self.group_version is not None:
            fmt += ["--feature", f"group.version={self.group_version}"]
        r = subprocess.run(fmt, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise KafkaError(f"kafka-storage format failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        self.format_seconds = time.monotonic() - t0

    def launch(self) -> subprocess.Popen:
        """Start the ``kafka.Kafka`` JVM on the formatted dir (again after ``halt``); returns at once."""
        assert self.work_dir is not None, "format() first"
        out = open(self.work_dir / "stdout.log", "ab")
        try:
            self.proc = subprocess.Popen(
                self._java_cmd(self.java(), "kafka.Kafka", str(self.work_dir / "server.properties")),
                cwd=str(self.work_dir), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        finally:
            out.close()
        return self.proc

    def halt(self, kill: bool) -> None:
        """Stop the JVM but keep the data dir (a restart is ``launch`` + ``wait_ready``)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        if kill:
            proc.kill()
        else:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)

    def wait_ready(self) -> None:
        from tests.reference.client import Connection, req

        deadline = time.monotonic() + self.startup_timeout
        last: object = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise KafkaError(f"Kafka exited with {self.proc.returncode} during start-up\n{self.log_tail()}")
            try:
                with Connection("127.0.0.1", self.port, timeout=5) as conn:
                    md = conn.call(req(3, 12, topics=None, allow_auto_topic_creation=False,
                                       include_topic_authorized_operations=False))
                    if md.brokers:
                        return
                    last = "Metadata lists no broker yet"
            except OSError as e:
                last = e
            time.sleep(0.2)
        raise KafkaError(f"Kafka did not answer Metadata within {self.startup_timeout} s ({last})\n"
                         f"{self.log_tail()}")

    def rss_kib(self, field: str = "VmRSS") -> int | None:
        """Resident set size of the Kafka JVM (``VmHWM`` for its peak), or None when it is not running."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        return proc_status_kib(self.proc.pid, field)

    def log_tail(self, lines: int = 40) -> str:
        if self.work_dir is None:
            return ""
        text = []
        for name in ("stdout.log", "server.log"):
            try:
                text += (self.work_dir / name).read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                pass
        return "\n".join(text)

    def stop(self) -> None:
        try:
            self.halt(kill=False)
        finally:
            if self.work_dir is not None and not os.environ.get("MINIBROKER_TEST_KEEP"):
                shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> "KafkaReference":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str]) -> int:
    if argv[:1] == ["fetch"]:
        print(fetch_jars())
        return 0
    if argv[:1] == ["measure"]:
        from tests.reference.settings import kafka_properties

        with KafkaReference(kafka_properties()) as k:
            time.sleep(1.0)
            print(f"Kafka {KAFKA_VERSION} ready in {k.start_seconds:.2f} s (format {k.format_seconds:.2f} s + start), "
                  f"RSS {k.rss_kib()} KiB, port {k.port}")
        return 0
    print("usage: python -m tests.reference.kafka fetch|measure", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
