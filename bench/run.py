"""Benchmark minibroker against peer brokers in one run (issue 6).

    python bench/run.py [--quick] [--reps N] [--only W[,W...]] [--brokers B[,B...]] [--seconds S]
                        [--baseline DIR] [--generator go|python]

Starts each broker on a free loopback port, runs each workload with the same client settings
(bench/workloads.py) against each, stops it, and prints one table of medians over --reps runs
with the ratio minibroker ÷ peer per row; also writes bench/results.md and bench/results.json.
The produce1k, produce100 and txn rows are driven by --generator: ``go`` (bench/loadgen, franz-go,
compiled on first use; the default when a Go toolchain is found) or ``python`` (workloads.py,
confluent-kafka). Every throughput row has the load generator's CPU beside the broker's, and a
value driven by a generator near a full core per process is marked client-bound.

Workloads (names for --only): produce1k, produce100, latency, txn, share, consume, recovery, coldstart.
Brokers (names for --brokers): mb-never, mb-1000, mb-always, mb-ctl (fsync 1000 with
--control-listener: the request log and fault-rule checks on every request), mock, tansu; with --baseline DIR
(another checkout of minibroker, e.g. `git worktree add /tmp/base HEAD~1`) also base-never,
base-1000, base-always: that code in the same run, interleaved rep by rep like every peer, which
is the only fair A/B of a hot-path change on a machine whose speed drifts from run to run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = sys.executable
sys.path.insert(0, HERE)
sys.path.insert(1, ROOT)  # tests.reference: Apache Kafka's launcher, another checkout's PYTHONPATH
import go_loadgen  # noqa: E402
import peers  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
# A load generator process at or above this share of one core (its user+system CPU over the
# run's wall time) may be what limits the row: the value is marked "client-bound".
CLIENT_BOUND_PCT = 90.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


# ApiVersions v0 (every broker answers it) and Metadata v4 (all topics, no auto-creation; v4 is
# in every peer's range, Kafka 4's included), on one connection as a client asks them.
API_VERSIONS_V0 = _frame(struct.pack(">hhih", 18, 0, 1, 5) + b"bench")
METADATA_V4 = _frame(struct.pack(">hhih", 3, 4, 2, 5) + b"bench" + struct.pack(">ib", -1, 0))


def read_answer(s: socket.socket, corr: int) -> bytes:
    """The answer to request ``corr``, whole (correlation id first), read off ``s``."""
    def exactly(n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = s.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed before the answer")
            out += chunk
        return bytes(out)
    size = struct.unpack(">i", exactly(4))[0]
    answer = exactly(size)
    if struct.unpack(">i", answer[:4])[0] != corr:
        raise ConnectionError("an answer with another correlation id")
    return answer


def first_answers(host: str, port: int, t0: float, timeout: float = 10.0) -> tuple[float, float]:
    """(s to the ApiVersions answer, s to the Metadata answer after it) since ``t0``; OSError
    while the port does not take the connection. minibroker answers ApiVersions while the rest of
    it still loads (minibroker/net/early.py): Metadata is when a client can start its work."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(API_VERSIONS_V0)
        read_answer(s, 1)
        api = time.perf_counter() - t0
        s.sendall(METADATA_V4)
        read_answer(s, 2)
        return api, time.perf_counter() - t0


def wait_api_versions(bootstrap: str, t0: float, proc: subprocess.Popen | None,
                      limit: float = 20) -> tuple[float, float]:
    """(s to the first answered ApiVersions, s to the first answered Metadata) since ``t0``."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    while time.perf_counter() - t0 < limit:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode} before answering ApiVersions")
        try:
            return first_answers(host, int(port), t0)
        except OSError:
            time.sleep(0.002)
    raise RuntimeError("no ApiVersions and Metadata answers within %ss" % limit)


_READY_FILE: dict[str, bool] = {}
BASELINE: list[str] = []  # --baseline DIR, once parsed


def has_ready_file(root: str = ROOT) -> bool:
    """Whether the minibroker in ``root`` has --ready-file (asked once)."""
    if root not in _READY_FILE:
        out = subprocess.run([PY, "-m", "minibroker", "--help"], cwd=root, capture_output=True, text=True)
        _READY_FILE[root] = "--ready-file" in out.stdout
    return _READY_FILE[root]


def wait_ready_file(path: str, t0: float, proc: subprocess.Popen, limit: float) -> str:
    """The first listener's host:port, once the broker has written its ready file."""
    while time.perf_counter() - t0 < limit:
        try:
            with open(path) as f:
                first = f.readline().strip()
            if first:
                return first
        except FileNotFoundError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode} before it was ready")
        time.sleep(0.001)
    raise RuntimeError(f"no ready file within {limit}s")


def proc_status(pid: int) -> dict:
    out = {}
    try:
        for line in open(f"/proc/{pid}/status"):
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[k] = int(v.split()[0]) / 1024  # MiB
    except OSError:
        pass
    return out


def proc_cpu(pid: int) -> float:
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / CLK_TCK
    except (OSError, IndexError):
        return float("nan")


def machine_busy() -> tuple[float, float]:
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    idle = f[3] + f[4]
    return sum(f) - idle, sum(f)


def stop_proc(p: subprocess.Popen, timeout: float = 5.0) -> None:
    """SIGTERM, then SIGKILL if ``p`` has not ended within ``timeout`` seconds."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout)


class Broker:
    name = "?"
    label = "?"
    in_memory = True

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.bootstrap = ""
        self.cold_start = float("nan")
        self.first_metadata = float("nan")

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        if self.proc is not None:
            stop_proc(self.proc)
            self.proc = None

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc else -1


class MiniBroker(Broker):
    in_memory = False

    def __init__(self, fsync: str, root: str = ROOT, control: bool = False):
        super().__init__()
        self.fsync = fsync
        self.root = root
        self.baseline = root != ROOT
        # --control-listener on: every request is recorded in the request log and checked
        # against the (empty) fault rules — what that costs is mb-ctl against mb-1000.
        self.control = control
        self.name = f"base-{fsync}" if self.baseline else f"mb-{fsync}"
        if control:
            self.name = "mb-ctl"
        self.label = (f"minibroker{' at ' + root if self.baseline else ''} fsync={fsync}"
                      + (" with --control-listener" if control else ""))
        self.dir: str | None = None
        self.ready_time: float | None = None

    def start(self, keep_data: bool = False) -> None:
        """Start on a new temp data dir, or with ``keep_data`` on the last one (restarts)."""
        if not (keep_data and self.dir):
            self.dir = tempfile.mkdtemp(prefix=f"bench-{self.name}-")
        ready = self.dir + ".ready"
        if has_ready_file(self.root):
            # Port 0 and --ready-file: the broker picks a free port itself (no race with
            # other processes for the one free_port() saw) and says when it listens.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(ready)
            port, extra = 0, ["--ready-file", ready]
        else:
            port, extra = free_port(), []
            self.bootstrap = f"127.0.0.1:{port}"
        t0 = time.perf_counter()
        env = None
        if self.baseline:
            from tests.reference.checkout import checkout_path
            env = {**os.environ, "PYTHONPATH": checkout_path(self.root)}
        self.proc = subprocess.Popen([PY, "-m", "minibroker", "--port", str(port), "--data-dir", self.dir,
                                      "--fsync", self.fsync, "--log-level", "warning", *extra,
                                      *(["--control-listener", "127.0.0.1:0"] if self.control else [])],
                                     cwd=self.root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=open(self.dir + ".err", "a"), env=env)
        if extra:
            self.bootstrap = wait_ready_file(ready, t0, self.proc, limit=120)
            # What a CI script waiting on --ready-file sees (issue 7's target: <= 300 ms).
            self.ready_time = time.perf_counter() - t0
        # Cold start is still process start -> first answered ApiVersions, measured here.
        self.cold_start, self.first_metadata = wait_api_versions(self.bootstrap, t0, self.proc, limit=120)

    def halt(self, kill: bool) -> float:
        """Stop the process but keep its data: SIGTERM (clean) or SIGKILL; seconds it took."""
        t0 = time.perf_counter()
        if kill:
            self.proc.kill()
            self.proc.wait(30)
        else:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(120)
        self.proc = None
        return time.perf_counter() - t0

    def stop(self) -> None:
        super().stop()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            for suffix in (".err", ".ready"):
                with contextlib.suppress(OSError):
                    os.unlink(self.dir + suffix)
            self.dir = None


class Mock(Broker):
    name = "mock"
    label = "librdkafka mock"

    def start(self) -> None:
        t0 = time.perf_counter()
        self.proc = subprocess.Popen([PY, os.path.join(HERE, "peers.py"), "mock"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("BOOTSTRAP "):
            self.stop()
            raise RuntimeError("mock cluster did not report its bootstrap address")
        self.bootstrap = line.split()[1]
        self.cold_start, self.first_metadata = wait_api_versions(self.bootstrap, t0, self.proc)

    def stop(self) -> None:
        if self.proc is not None and self.proc.stdin:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        super().stop()


class Tansu(Broker):
    name = "tansu"
    label = "Tansu 0.6"

    def start(self) -> None:
        binary = peers.tansu_binary()
        port = free_port()
        self.bootstrap = f"127.0.0.1:{port}"
        t0 = time.perf_counter()
        self.proc = subprocess.Popen([binary, "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
                                      "--advertised-listener-url", f"tcp://127.0.0.1:{port}",
                                      "--storage-engine", "memory://tansu/"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.cold_start, self.first_metadata = wait_api_versions(self.bootstrap, t0, self.proc)


class Kafka(Broker):
    """Apache Kafka (tests/reference/kafka.py's jars and KRaft set-up) with its own defaults: the
    JVM settings of kafka-server-start.sh / kafka-run-class.sh and the broker's default thread
    counts; only what one node needs (replication factors and min ISR 1) differs."""

    name = "kafka"
    in_memory = False
    # kafka-server-start.sh's KAFKA_HEAP_OPTS and kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS.
    JVM = ["-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
           "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
           "-Djava.awt.headless=true"]
    DEFAULTS = {"num.network.threads": "3", "num.io.threads": "8", "background.threads": "10",
                "log.flush.interval.messages": "9223372036854775807", "num.partitions": "1"}

    def __init__(self):
        super().__init__()
        from tests.reference.kafka import KAFKA_VERSION, KafkaReference
        self.label = f"Apache Kafka {KAFKA_VERSION}"
        # transaction_version=None: formatted at the release's default feature levels.
        self.ref = KafkaReference(dict(self.DEFAULTS), transaction_version=None, group_version=None, jvm_flags=self.JVM)
        self.format_seconds = float("nan")

    def start(self, keep_data: bool = False) -> None:
        if not (keep_data and self.ref.work_dir):
            self.ref.format()  # kafka-storage.sh format: set-up, not part of the cold start
            self.format_seconds = self.ref.format_seconds
        self.bootstrap = self.ref.bootstrap_servers
        t0 = time.perf_counter()
        self.proc = self.ref.launch()
        self.cold_start, self.first_metadata = wait_api_versions(self.bootstrap, t0, self.proc, limit=120)
        self.ref.wait_ready()  # Metadata lists the broker: ready for clients

    def halt(self, kill: bool) -> float:
        t0 = time.perf_counter()
        self.ref.halt(kill)
        self.proc = None
        return time.perf_counter() - t0

    def stop(self) -> None:
        self.ref.stop()
        self.proc = None
        self.ref.work_dir = None

    @property
    def dir(self) -> str | None:
        return str(self.ref.work_dir / "data") if self.ref.work_dir else None


def make_brokers(names):
    table = {"mb-never": lambda: MiniBroker("never"), "mb-1000": lambda: MiniBroker("1000"),
             "mb-always": lambda: MiniBroker("always"), "mb-ctl": lambda: MiniBroker("1000", control=True),
             "mock": Mock, "tansu": Tansu, "kafka": Kafka}
    for root in BASELINE:
        for fsync in ("never", "1000", "always"):
            table[f"base-{fsync}"] = lambda fsync=fsync: MiniBroker(fsync, root)
    unknown = [n for n in names if n not in table]
    if unknown:
        raise SystemExit(f"unknown broker(s) {', '.join(unknown)}; known: {', '.join(table)}")
    return [table[n]() for n in names]


def create_topic(b: "Broker", topic: str, partitions: int) -> None:
    """CreateTopics, except on the librdkafka mock, whose Metadata names controller 0 while its
    only broker is 1 (so admin requests time out "waiting for controller"): there the topic is
    auto-created by Metadata with the mock's default of 4 partitions, and the load generators
    address partitions explicitly so that every broker gets the same partition count in use."""
    import gc

    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 0})
    try:
        if not isinstance(b, Mock):
            fs = a.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10, request_timeout=15)
            for f in fs.values():
                f.result(20)
        deadline = time.time() + 10
        while time.time() < deadline:  # wait until metadata shows every partition
            md = a.list_topics(topic, timeout=5)
            t = md.topics.get(topic)
            if t is not None and t.error is None and len(t.partitions) >= partitions:
                return
            time.sleep(0.05)
        raise RuntimeError(f"topic {topic} not visible with {partitions} partitions")
    finally:
        del a
        gc.collect()


def run_clients(args_list: list[list[str]], timeout: float, loadgen: str | None = None) -> list[dict]:
    """One load generator process per argument list, all at once; their JSON lines.
    ``loadgen``: the compiled generator's binary (bench/loadgen) instead of workloads.py."""
    cmd = [loadgen] if loadgen else [PY, os.path.join(HERE, "workloads.py")]
    procs = [subprocess.Popen([*cmd, *a], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for a in args_list]
    out = []
    deadline = time.time() + timeout
    for p in procs:
        try:
            so, se = p.communicate(timeout=max(1, deadline - time.time()))
        except BaseException as e:  # timeout or Ctrl-C: leave no load generator behind
            for q in procs:
                if q.poll() is None:
                    q.kill()
                    q.wait()
            if isinstance(e, subprocess.TimeoutExpired):
                raise RuntimeError("load generator timed out") from None
            raise
        lines = [ln for ln in so.splitlines() if ln.startswith("{")]
        if not lines:
            raise RuntimeError(f"load generator failed: {se.strip()[-300:]}")
        r = json.loads(lines[-1])
        if "error" in r:
            raise RuntimeError(r["error"])
        out.append(r)
    return out


# --- workloads: each returns {metric_name: value} for one repetition --------------------------

class Ctx:
    def __init__(self, a, loadgen: str | None = None):
        self.a = a
        self.seq = 0
        self.loadgen = loadgen  # bench/loadgen's binary when --generator go
        self.bound: list[tuple[str, str]] = []  # (metric, why) of this repetition's client-bound values

    def client_bound(self, rs: list[dict], metrics: list[str]) -> float:
        """The busiest generator process's CPU in % of one core; when it is near a full core,
        ``metrics`` of this repetition are noted as client-bound."""
        pct = max(100 * r["cpu"] / max(1e-9, r["end"] - r["start"]) for r in rs)
        if pct >= CLIENT_BOUND_PCT:
            self.bound += [(m, f"{pct:.0f} %") for m in metrics]
        return pct

    def topic(self, stem: str) -> str:
        self.seq += 1
        return f"bench-{stem}-{self.seq}-{int(time.time() * 1000) % 100000}"


class RssSampler:
    """Peak anonymous and file-backed RSS of a process, sampled every 20 ms in a thread
    (VmHWM alone cannot tell a heap that grows from mapped segment pages)."""

    def __init__(self, pid: int) -> None:
        import threading
        self.pid = pid
        self.anon = self.file = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            st = proc_status(self.pid)
            self.anon = max(self.anon, st.get("RssAnon", 0))
            self.file = max(self.file, st.get("RssFile", 0))
            self._stop.wait(0.02)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def delete_topic(b: "Broker", topic: str) -> None:
    """DeleteTopics once a timed run is over, so that seven brokers writing at up to 0.8 GB/s
    each do not fill the disk (a full run without it did, 2026-11-26: every disk-backed broker
    then failed the later workloads). Not on the mock (no controller, see create_topic); best
    effort, since the figures are already taken."""
    if isinstance(b, Mock):
        return
    import gc

    from confluent_kafka.admin import AdminClient
    a = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 0})
    try:
        for f in a.delete_topics([topic], operation_timeout=10, request_timeout=15).values():
            f.result(20)
    except Exception as e:  # noqa: BLE001
        print(f"   {b.name}: could not delete {topic}: {e}", file=sys.stderr, flush=True)
    finally:
        del a
        gc.collect()


def w_produce(ctx, b: Broker, size: int, key: str) -> dict:
    topic = ctx.topic(f"p{size}")
    create_topic(b, topic, 3)
    try:
        return _produce(ctx, b, size, key, topic)
    finally:
        delete_topic(b, topic)
        # What this run left dirty in the page cache is written back now, not during the next
        # broker's timed run (the kernel's flusher threads share the same 2 cores): which broker
        # ran last no longer decides who pays for the writeback.
        t = time.perf_counter()
        os.sync()
        print(f"   sync after {b.name}: {time.perf_counter() - t:.1f}s", file=sys.stderr, flush=True)


def _produce(ctx, b: Broker, size: int, key: str, topic: str) -> dict:
    a = ctx.a
    cpu0 = proc_cpu(b.pid)
    busy0 = machine_busy()
    try:  # reset the peak-RSS counter (VmHWM) so it covers this run only
        with open(f"/proc/{b.pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    sampler = RssSampler(b.pid) if b.pid > 0 else None
    args = [["produce", "--bootstrap", b.bootstrap, "--topic", topic, "--size", str(size),
             "--seconds", str(a.seconds), "--partitions", "3"] for _ in range(a.producers)]
    try:
        rs = run_clients(args, a.seconds + 90, ctx.loadgen)
    finally:
        if sampler:
            sampler.stop()
    busy1 = machine_busy()
    start, end = min(r["start"] for r in rs), max(r["end"] for r in rs)
    wall = end - start
    recs = sum(r["records"] for r in rs)
    errs = sum(r["errors"] for r in rs)
    if errs:
        raise RuntimeError(f"{errs} delivery errors, e.g. {next(r['first_error'] for r in rs if r['errors'])}")
    out = {f"{key}: MB/s": recs * size / wall / 1e6,
           f"{key}: records/s": recs / wall}
    cpu = proc_cpu(b.pid) - cpu0 if b.pid > 0 else None
    # The broker's CPU and the load generator's side by side: what each costs per byte, whatever
    # the machine allowed, and whether a generator process was near a full core (client-bound).
    if cpu is not None:
        out[f"{key}: broker CPU %"] = 100 * cpu / wall
    out[f"{key}: client CPU % per process (max)"] = ctx.client_bound(rs, [f"{key}: MB/s",
                                                                          f"{key}: records/s"])
    if cpu is not None:
        out[f"{key}: broker CPU s per GB"] = cpu / (recs * size / 1e9)
    out[f"{key}: client CPU s per GB (all processes)"] = sum(r["cpu"] for r in rs) / (recs * size / 1e9)
    out[f"{key}: machine CPU busy % (all cores)"] = 100 * (busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1])
    if isinstance(b, (MiniBroker, Tansu, Kafka)):
        st = proc_status(b.pid)
        out[f"{key}: broker peak RSS MiB (VmHWM)"] = st.get("VmHWM", float("nan"))
        out[f"{key}: broker peak RSS, anonymous MiB"] = sampler.anon
        out[f"{key}: broker peak RSS, file-backed MiB"] = sampler.file
    return out


def w_latency(ctx, b: Broker) -> dict:
    a = ctx.a
    topic = ctx.topic("lat")
    create_topic(b, topic, 3)
    cpu0, t0 = proc_cpu(b.pid), time.time()
    r = run_clients([["latency", "--bootstrap", b.bootstrap, "--topic", topic, "--size", "1024",
                      "--rate", "2000", "--seconds", str(a.seconds), "--partitions", "3"]], a.seconds + 60)[0]
    wall = time.time() - t0  # the client's whole life (start-up, metadata): a little more than the run
    if r["errors"]:
        raise RuntimeError(f"{r['errors']} errors: {r['first_error']}")
    k = "latency @2000 rec/s 1 KiB"
    out = {f"{k}: p50 ms": r["p50_ms"], f"{k}: p99 ms": r["p99_ms"],
           f"{k}: achieved rec/s": r["achieved_rate"]}
    if b.pid > 0:
        out[f"{k}: broker CPU %"] = 100 * (proc_cpu(b.pid) - cpu0) / wall
    # workloads.py's paced generator (no Go counterpart) over the paced window. It waits for each
    # send time in poll() calls of at most 0.5 ms, so its CPU is high whatever the broker does, and
    # the row is not marked client-bound; achieved rec/s says whether it kept the pace.
    out[f"{k}: client CPU %"] = 100 * r["cpu"] / a.seconds
    return out


def w_txn(ctx, b: Broker) -> dict:
    a = ctx.a
    out = {}
    for n in (1, 4):
        topic = ctx.topic(f"txn{n}")
        create_topic(b, topic, n)
        cpu0 = proc_cpu(b.pid)
        rs = run_clients([["txn", "--bootstrap", b.bootstrap, "--topic", topic, "--partition", str(i),
                           "--seconds", str(a.seconds)] for i in range(n)], a.seconds + 90, ctx.loadgen)
        cpu = proc_cpu(b.pid) - cpu0
        bad = [r for r in rs if r.get("errors") and r.get("generator") == "go"]  # go: a failed transaction
        if bad:
            raise RuntimeError(f"txn: {bad[0]['errors']} errors, e.g. {bad[0]['first_error']}")
        wall = max(r["end"] for r in rs) - min(r["start"] for r in rs)
        k = f"txn 10x1KiB, {n} producer(s)"
        txns = sum(r["transactions"] for r in rs)
        out[f"{k}: txn/s"] = txns / wall
        # The broker's CPU includes the generators' start-up (connect, InitProducerId, warm-up),
        # a little more than the timed window; per transaction rather than per GB (10 KiB each).
        if b.pid > 0:
            out[f"{k}: broker CPU %"] = 100 * cpu / wall
        out[f"{k}: client CPU % per process (max)"] = ctx.client_bound(rs, [f"{k}: txn/s"])
        if b.pid > 0 and txns:
            out[f"{k}: broker CPU ms per txn"] = 1000 * cpu / txns
        if txns:
            out[f"{k}: client CPU ms per txn (all processes)"] = 1000 * sum(r["cpu"] for r in rs) / txns
    return out


SHARE_RATE_CEILING = 2_000_000  # records/s the preload is sized for (per timed second)


def _serves_share_groups(b: Broker) -> bool:
    """ApiVersions lists ShareGroupHeartbeat (76): the librdkafka mock and Tansu do not."""
    host, port = b.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(API_VERSIONS_V0)
        size = struct.unpack(">i", _exactly(s, 4))[0]
        body = _exactly(s, size)
    # v0: correlation id, error code, then (key, min, max) int16 triples
    (n,) = struct.unpack_from(">i", body, 6)
    return 76 in {struct.unpack_from(">h", body, 10 + 6 * i)[0] for i in range(max(0, n))}


def _exactly(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed before the answer")
        out += chunk
    return bytes(out)


def w_share(ctx, b: Broker) -> dict:
    """Share consumers (KIP-932) of one group, confluent-kafka's ShareConsumer with implicit
    acknowledgement, one process each, on a topic of 4 partitions preloaded with 100 B records:
    the records acknowledged per second by 1 and by 4 consumers."""
    a = ctx.a
    if not _serves_share_groups(b):
        raise RuntimeError("does not serve share groups (ApiVersions lists no ShareGroupHeartbeat)")
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
    out = {}
    for n in (1, 4):
        topic = ctx.topic(f"share{n}")
        create_topic(b, topic, 4)
        count = int(SHARE_RATE_CEILING * a.seconds)
        fill = run_clients([["fill", "--bootstrap", b.bootstrap, "--topic", topic, "--count", str(count),
                             "--size", "100", "--partitions", "4"]], 300)[0]
        if fill["errors"]:
            raise RuntimeError(f"preload: {fill['errors']} errors: {fill['first_error']}")
        group = f"{topic}-g"
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        res = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        try:
            admin.incremental_alter_configs([res])[res].result(timeout=15)
        except Exception as e:  # noqa: BLE001 - the mock's admin requests wait for a controller
            raise RuntimeError("share.auto.offset.reset=earliest not set (IncrementalAlterConfigs on "
                               f"a GROUP: {type(e).__name__} {e}): its share groups not measured") from None
        cpu0 = proc_cpu(b.pid)
        rs = run_clients([["share", "--bootstrap", b.bootstrap, "--topic", topic, "--group", group,
                           "--seconds", str(a.seconds), "--timeout", str(a.seconds + 60)]
                          for _ in range(n)], a.seconds + 120)
        cpu = proc_cpu(b.pid) - cpu0
        bad = [r for r in rs if r["errors"]]
        if bad:
            raise RuntimeError(f"share: {bad[0]['errors']} errors, e.g. {bad[0]['first_error']}")
        got = [r for r in rs if r["records"]]
        if not got:
            raise RuntimeError("share: no record acknowledged")
        k = f"share consumer 100 B, {n} consumer(s)"
        wall = max(r["end"] for r in got) - min(r["start"] for r in got)
        acked = sum(r["records"] for r in got)
        out[f"{k}: records acknowledged/s"] = acked / wall
        if acked >= count:  # drained before the window closed: a lower bound
            print(f"   warning: {b.name} {k}: the {count} preloaded records ran out within the window",
                  file=sys.stderr, flush=True)
        if b.pid > 0:
            out[f"{k}: broker CPU %"] = 100 * cpu / wall
        out[f"{k}: client CPU % per process (max)"] = ctx.client_bound(got, [f"{k}: records acknowledged/s"])
        delete_topic(b, topic)
    return out


MOCK_LOG_LIMIT = ("the librdkafka mock keeps only the last 5 MiB / 100,000 batches of each partition "
                  "(rdkafka_mock.c: mpart->max_size, max_cnt) and discards older records, so it cannot "
                  "serve a 1 GiB read")


def du_mib(path: str) -> float:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(root, f)).st_blocks * 512
            except OSError:
                pass
    return total / 2**20


def rotated(items: list, rep: int) -> list:
    """``items`` starting at a different one each repetition, so that no broker always
    runs first (or right after the same neighbour) while other load comes and goes."""
    k = rep % len(items) if items else 0
    return items[k:] + items[:k]


def consume_and_recovery(ctx, protos: list[Broker], do_consume: bool, do_recovery: bool, record, note) -> None:
    """Workloads (4) and (7), each broker on a fresh instance of its kind so that its log holds
    exactly the ~``--consume-mib`` MiB loaded here (the produce runs write GBs elsewhere).
    Every instance is loaded once; then each repetition reads every instance once each way,
    brokers interleaved; then each minibroker is restarted ``--reps`` times after a clean
    stop and ``--reps`` times after kill -9."""
    a = ctx.a
    key = f"consume {a.consume_mib} MiB (10% aborted)"
    a_size = 1024  # the loader's value size
    loaded: list[tuple[Broker, Broker, str, int, int]] = []  # (proto, instance, topic, committed, total)
    try:
        for proto in protos:
            if isinstance(proto, Mock):
                if do_consume:
                    note(proto, f"consume: n/a: {MOCK_LOG_LIMIT}")
                continue
            if not do_consume and not isinstance(proto, (MiniBroker, Kafka)):
                continue
            b = make_brokers([proto.name])[0]
            try:
                b.start()
                topic = ctx.topic("cons")
                create_topic(b, topic, 3)
                t = time.time()
                r = run_clients([["load", "--bootstrap", b.bootstrap, "--topic", topic,
                                  "--mib", str(a.consume_mib)]], 1800)[0]
                if r["errors"]:
                    raise RuntimeError(f"load: {r['errors']} errors: {r['first_error']}")
            except Exception as e:  # noqa: BLE001
                b.stop()
                note(proto, f"consume/recovery: {e}")
                continue
            print(f"== {proto.label}: loaded {a.consume_mib} MiB in {time.time() - t:.1f}s",
                  file=sys.stderr, flush=True)
            loaded.append((proto, b, topic, r["committed"], r["committed"] + r["aborted"]))
        failed: set[str] = set()
        for rep in range(a.reps if do_consume else 0):
            for proto, b, topic, committed, total in rotated(loaded, rep):
                if proto.name in failed:
                    continue
                res = {}
                ctx.bound = []
                order = [("read_uncommitted", total), ("read_committed", committed)]
                try:
                    for iso, expect in (order if rep % 2 == 0 else order[::-1]):  # no order bias
                        cpu0, busy0 = proc_cpu(b.pid), machine_busy()
                        c = run_clients([["consume", "--bootstrap", b.bootstrap, "--topic", topic,
                                          "--isolation", iso, "--count", str(expect),
                                          "--timeout", str(60 if a.quick else 600)]], 120 if a.quick else 900)[0]
                        cpu1, busy1 = proc_cpu(b.pid), machine_busy()
                        if not c["complete"]:
                            raise RuntimeError(f"{iso}: read {c['records']} of {expect} records")
                        if not c["exact"]:
                            note(proto, f"consume {iso}: read {c['records']:,} records where {expect:,} were "
                                        "expected" + (" (aborted records delivered)" if iso == "read_committed"
                                                      else ""))
                        wall = c["end"] - c["start"]
                        res[f"{key}, {iso}: MB/s delivered"] = c["bytes"] / wall / 1e6
                        # Both read the same log to its end; read_committed delivers 10 % less
                        # (the aborted records), so the log's size over the time is what compares.
                        res[f"{key}, {iso}: log MB/s (whole log ÷ time to its end)"] = (
                            total * a_size / wall / 1e6)
                        res[f"{key}, {iso}: client CPU %"] = 100 * c["cpu"] / wall
                        if res[f"{key}, {iso}: client CPU %"] >= CLIENT_BOUND_PCT:
                            ctx.bound += [(m, f"{res[f'{key}, {iso}: client CPU %']:.0f} %")
                                          for m in (f"{key}, {iso}: MB/s delivered",
                                                    f"{key}, {iso}: log MB/s (whole log ÷ time to its end)")]
                        # The consumer process's whole life (connect, metadata) is in these two,
                        # a little more than the timed window: they say who was busy, not scores.
                        res[f"{key}, {iso}: broker CPU %"] = 100 * (cpu1 - cpu0) / wall
                        res[f"{key}, {iso}: machine CPU busy % (all cores)"] = (
                            100 * (busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1]))
                except Exception as e:  # noqa: BLE001
                    failed.add(proto.name)
                    note(proto, f"consume: {e}")
                    continue
                record(proto, res)
                print(f"   {proto.name} consume rep {rep + 1}: " + ", ".join(
                    f"{k.split(', ')[-1]}={v:.4g}" for k, v in res.items()), file=sys.stderr, flush=True)
        for proto, b, _topic, _c, _t in loaded if do_recovery else ():
            if not isinstance(b, (MiniBroker, Kafka)):
                continue
            size = du_mib(b.dir)
            try:
                for kill in (False, True):
                    what = "after kill -9" if kill else "after clean stop"
                    for rep in range(a.reps):
                        stop_s = b.halt(kill)
                        b.start(keep_data=True)
                        row = f"restart with {size / 1024:.2f} GiB of log {what}"
                        res = {f"{row}: ms to first ApiVersions": b.cold_start * 1000,
                               f"{row}: ms to first Metadata": b.first_metadata * 1000}
                        if not kill:
                            res["clean stop (SIGTERM to exit) ms"] = stop_s * 1000
                        record(proto, res)
                        print(f"   {proto.name} restart {what} rep {rep + 1}: {b.cold_start * 1000:.0f} ms",
                              file=sys.stderr, flush=True)
            except Exception as e:  # noqa: BLE001
                note(proto, f"recovery: {e}")
    finally:
        for _proto, b, *_ in loaded:
            b.stop()


# --- the harness --------------------------------------------------------------------------------

WORKLOADS = ["produce1k", "produce100", "latency", "txn", "share", "consume", "recovery", "coldstart"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short runs (2 s per workload, 32 MiB consume)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--brokers", default="mb-never,mb-1000,mb-always,mock,tansu")
    ap.add_argument("--seconds", type=float, default=None, help="duration of each timed run")
    ap.add_argument("--producers", type=int, default=2, help="producer processes for produce1k/produce100")
    ap.add_argument("--consume-mib", type=int, default=None)
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--baseline", metavar="DIR", help="another minibroker checkout: brokers base-never, "
                    "base-1000, base-always run its code, and the table compares each mb-* with it")
    ap.add_argument("--generator", choices=("go", "python"), default=None,
                    help="load generator of produce1k, produce100 and txn: go (bench/loadgen, franz-go, "
                    "built into ~/.cache/minibroker-bench on first use) or python (workloads.py, "
                    "confluent-kafka); default go when a Go toolchain is found, else python")
    a = ap.parse_args()
    if a.baseline:
        marks = ("__main__.py", "cli.py")  # cli.py before issue 30's layout
        if not any(os.path.isfile(os.path.join(a.baseline, "minibroker", f)) for f in marks):
            ap.error(f"--baseline {a.baseline}: no minibroker checkout there")
        BASELINE.append(os.path.abspath(a.baseline))
    a.seconds = a.seconds or (2.0 if a.quick else 5.0)
    a.consume_mib = a.consume_mib or (32 if a.quick else 1024)
    only = [w.strip() for w in a.only.split(",") if w.strip()]
    for w in only:
        if w not in WORKLOADS:
            ap.error(f"unknown workload {w}")
    generator_note = ""
    if a.generator is None:
        a.generator = "go" if go_loadgen.find_go() else "python"
        if a.generator == "python":
            generator_note = ("no Go toolchain found (PATH, /usr/local/go/bin/go): the Python generator "
                              "is used")
            print(f"== note: {generator_note}", file=sys.stderr, flush=True)
    loadgen = None
    if a.generator == "go" and any(w in only for w in ("produce1k", "produce100", "txn")):
        loadgen = go_loadgen.binary()  # built before any broker starts, outside every timed run
    ctx = Ctx(a, loadgen)
    brokers = make_brokers([x.strip() for x in a.brokers.split(",") if x.strip()])
    samples: dict[str, dict[str, list[float]]] = {}   # broker -> metric -> values
    notes: dict[str, list[str]] = {}
    metric_order: list[str] = []
    bound: dict[str, dict[str, list[str]]] = {}  # broker -> metric -> generator CPU of each client-bound rep

    def record(bname, res):
        for k, v in res.items():
            if k not in metric_order:
                metric_order.append(k)
            samples.setdefault(bname, {}).setdefault(k, []).append(v)
        for k, why in ctx.bound:  # what the repetition just measured marked as client-bound
            if k in res:
                bound.setdefault(bname, {}).setdefault(k, []).append(why)
        ctx.bound = []

    for b in brokers:
        notes[b.name] = []

    def note(b, text):
        notes[b.name].append(text)
        print(f"   {b.name}: {text}", file=sys.stderr, flush=True)

    # Every workload is run rep by rep, and within a rep broker by broker in a rotating
    # order: the other load on this shared machine then falls on every column alike.
    if "coldstart" in only:
        print("== cold start", file=sys.stderr, flush=True)
        dead: set[str] = set()
        for rep in range(a.reps):
            for b in rotated(brokers, rep):
                if b.name in dead:
                    continue
                try:  # separate start/stop cycles, idle RSS a moment after the first answer
                    b.start()
                    time.sleep(0.5)
                    res = {"cold start to first ApiVersions ms": b.cold_start * 1000,
                           "cold start to first Metadata ms": b.first_metadata * 1000}
                    if isinstance(b, Kafka):
                        res["kafka-storage.sh format before the start (not in cold start) ms"] = (
                            b.format_seconds * 1000)
                    if getattr(b, "ready_time", None) is not None:
                        res["process start to --ready-file written ms"] = b.ready_time * 1000
                    if not isinstance(b, Mock):
                        res["idle RSS MiB"] = proc_status(b.pid).get("VmRSS", float("nan"))
                    record(b.name, res)
                except Exception as e:  # noqa: BLE001
                    note(b, f"coldstart: {e}")
                    dead.add(b.name)
                finally:
                    b.stop()
    if "consume" in only or "recovery" in only:
        consume_and_recovery(ctx, brokers, "consume" in only, "recovery" in only,
                             lambda b, res: record(b.name, res), note)
    main_workloads = [w for w in only if w not in ("coldstart", "consume", "recovery")]
    running = []
    try:
        if main_workloads:
            print("== " + ", ".join(main_workloads), file=sys.stderr, flush=True)
        for b in brokers if main_workloads else ():
            try:
                b.start()
                running.append(b)
            except Exception as e:  # noqa: BLE001
                note(b, f"did not start: {e}")
        failed: set[tuple[str, str]] = set()
        for w in main_workloads:
            for rep in range(a.reps):
                for b in rotated(running, rep):
                    if (b.name, w) in failed or b.proc is None:
                        continue
                    t = time.time()
                    ctx.bound = []
                    try:
                        if w == "produce1k":
                            res = w_produce(ctx, b, 1024, "produce 1 KiB idempotent acks=all 3p")
                        elif w == "produce100":
                            res = w_produce(ctx, b, 100, "produce 100 B idempotent acks=all 3p")
                        elif w == "latency":
                            res = w_latency(ctx, b)
                        elif w == "txn":
                            res = w_txn(ctx, b)
                        elif w == "share":
                            res = w_share(ctx, b)
                        record(b.name, res)
                        print(f"   {b.name} {w} rep {rep + 1}: {time.time() - t:.1f}s "
                              + ", ".join(f"{k.split(': ')[-1]}={v:.4g}" for k, v in res.items()),
                              file=sys.stderr, flush=True)
                    except Exception as e:  # noqa: BLE001
                        failed.add((b.name, w))
                        note(b, f"{w}: {e}")
                        if b.proc is not None and b.proc.poll() is not None:
                            note(b, f"broker exited ({b.proc.returncode})")
                            b.proc = None
    finally:
        for b in running:
            b.stop()

    med = {b.name: {k: statistics.median(v) for k, v in samples.get(b.name, {}).items()} for b in brokers}
    # Derived rows, from the medians.
    for m in med.values():
        for k in list(m):
            if ", read_committed: log MB/s" in k:
                ru = m.get(k.replace("read_committed", "read_uncommitted"))
                if ru:
                    d = k.split(", read_committed")[0] + ": read_committed ÷ read_uncommitted, log MB/s (medians)"
                    m[d] = m[k] / ru
                    if d not in metric_order:
                        metric_order.insert(metric_order.index(k) + 2, d)
    reps = {b.name: {k: len(v) for k, v in samples.get(b.name, {}).items()} for b in brokers}
    mbs = [b for b in brokers if isinstance(b, MiniBroker) and not b.baseline]
    peers_ = [b for b in brokers if b not in mbs]
    ratio_cols = [(m, p) for m in mbs for p in peers_]

    def fmt(v):
        if v is None or v != v:
            return "n/a"
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"

    def cell(b, k):
        text = fmt(med[b.name].get(k))
        nb = len(bound.get(b.name, {}).get(k, []))
        if nb:
            n = len(samples[b.name][k])
            text += " (client-bound)" if nb == n else f" (client-bound {nb}/{n})"
        return text

    hdr = ["metric (median of %d)" % a.reps] + [b.label + (" (in memory)" if b.in_memory else "") for b in brokers]
    hdr += [f"{m.name} ÷ {p.name}" for m, p in ratio_cols]
    rows = []
    for k in metric_order:
        row = [k] + [cell(b, k) for b in brokers]
        for m, p in ratio_cols:
            x, y = med[m.name].get(k), med[p.name].get(k)
            row.append(f"{x / y:.2f}" if x is not None and y else "n/a")
        rows.append(row)
    md = ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    md += ["| " + " | ".join(r) + " |" for r in rows]
    md.append("")
    md.append("Peers (librdkafka mock, Tansu with memory:// storage) keep data in memory only; minibroker "
              "writes every record to its log on disk (fsync policy in the column name). "
              "Throughput: higher is better; latency, cold start and RSS: lower is better (ratios too). "
              "CPU and RSS rows describe the run, they are not scores.")
    gen = ("go: bench/loadgen (franz-go)" if a.generator == "go"
           else "python: bench/workloads.py (confluent-kafka)")
    md.append("")
    md.append(f"Load generator of the produce and txn rows: {gen}, {a.producers} producer process(es) for "
              "produce; latency and consume use workloads.py. `client CPU` is the load generators' "
              "user+system CPU beside the broker's; a value marked (client-bound) was measured while a load "
              "generator "
              f"process used ≥ {CLIENT_BOUND_PCT:.0f} % of a core, so the client may be what limited it."
              + (f" Note: {generator_note}." if generator_note else ""))
    for b in brokers:
        for n in notes[b.name]:
            md.append(f"- n/a / failure, {b.label}: {n}")
    text = "\n".join(md)
    print(text)
    cmd = "python bench/run.py " + " ".join(sys.argv[1:])
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write(f"# Benchmark results\n\n`{cmd}` — {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, "
                f"{os.cpu_count()} CPUs\n\n{text}\n")
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"command": cmd, "time": time.time(), "seconds": a.seconds, "reps": a.reps,
                   "producers": a.producers, "consume_mib": a.consume_mib, "generator": a.generator,
                   "generator_note": generator_note, "client_bound_pct": CLIENT_BOUND_PCT,
                   "client_bound": bound,
                   "brokers": {b.name: {"label": b.label, "in_memory": b.in_memory} for b in brokers},
                   "median": med, "samples": samples, "n": reps, "notes": notes}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
