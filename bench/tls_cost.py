"""TLS's cost on produce (issues 20, 33): MB/s and broker CPU seconds per GB written over a PLAINTEXT,
an SSL and a SASL_SSL (SCRAM-SHA-512) listener of the same minibroker, beside the same PLAINTEXT/SSL pair
on Apache Kafka 4.4 (the anchor: what TLS costs a JVM broker on this machine) and, with ``--baseline
DIR``, on another minibroker checkout. One confluent-kafka idempotent producer (1 KiB values,
acks=all), 150,000 records per run; every (broker, listener) pair once per repetition, the order
rotating, so load from elsewhere on the machine falls on every column alike.

    cd "$(mktemp -d)" && python -m minibroker certs certs && python /path/to/bench/tls_cost.py \\
        [--baseline /tmp/base] [--no-kafka] [--reps 3] [--records 150000]

Kafka's SSL listener uses the same PEM certificate (ssl.keystore.type=PEM, key and chain in one
file) and Kafka's defaults otherwise (TLS 1.2/1.3, ssl.client.auth=none), the JVM settings of
kafka-server-start.sh (bench/run.py's Kafka). Broker CPU is user+system from /proc/PID/stat over
the timed window (clock ticks: ±0.01 s a run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Producer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # tests.reference: Kafka's launcher; another checkout's PYTHONPATH
sys.path.insert(0, str(HERE))

from run import Kafka as BenchKafka  # noqa: E402
from run import stop_proc  # noqa: E402

SIZE = 1024
CERTS = Path("certs")


def security(listener: str) -> dict:
    ca = str(CERTS / "ca.crt")
    return {
        "PLAINTEXT": {},
        "SSL": {"security.protocol": "SSL", "ssl.ca.location": ca},
        "SASL_SSL": {"security.protocol": "SASL_SSL", "ssl.ca.location": ca,
                     "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench",
                     "sasl.password": "bench-secret"},
    }[listener]


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    from tests.reference.kafka import free_port as kafka_free_port
    return kafka_free_port()


class MiniBroker:
    listeners = ("PLAINTEXT", "SSL", "SASL_SSL")

    def __init__(self, name: str, root: Path) -> None:
        self.name, self.root = name, root
        self.ports = {name: free_port() for name in self.listeners}
        self.dir = Path(f"tls-bench-{name}")  # not "minibroker": -m would import it
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir()
        (self.dir / "users").write_text("bench:bench-secret\n")
        env = dict(os.environ)
        if self.root != ROOT:
            from tests.reference.checkout import checkout_path
            env["PYTHONPATH"] = checkout_path(str(self.root))
        ready = self.dir / "ready"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "minibroker", "--data-dir", str(self.dir / "data"), "--listeners",
             ",".join(f"{k}://127.0.0.1:{p}" for k, p in self.ports.items()),
             "--ssl-certfile", str(CERTS / "broker.crt"), "--ssl-keyfile", str(CERTS / "broker.key"),
             "--sasl-users", str(self.dir / "users"), "--ready-file", str(ready), "--log-level", "warning"],
            env=env, stdin=subprocess.DEVNULL)
        for _ in range(600):
            if ready.exists() and ready.stat().st_size:
                return
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name}: minibroker exited with {self.proc.returncode}")
            time.sleep(0.05)
        raise SystemExit(f"{self.name}: no ready file within 30 s")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def stop(self) -> None:
        if self.proc is not None:
            stop_proc(self.proc, timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)


class Kafka:
    """Apache Kafka 4.4 with a PLAINTEXT and an SSL listener (bench/run.py's JVM and defaults)."""

    listeners = ("PLAINTEXT", "SSL")
    name = "kafka"

    def __init__(self) -> None:
        from tests.reference.kafka import KafkaReference

        self.ssl_port = free_port()
        # One PEM file holding the unencrypted PKCS#8 key and the chain: Kafka's
        # ssl.keystore.type=PEM (KIP-651) with ssl.keystore.location.
        self.pem = (CERTS / "broker-kafka.pem").resolve()
        self.pem.write_text((CERTS / "broker.key").read_text() + (CERTS / "broker.crt").read_text())
        ssl_port = self.ssl_port

        class WithSSL(KafkaReference):
            def properties(self) -> dict[str, str]:
                props = super().properties()
                props["listeners"] += f",SSL://127.0.0.1:{ssl_port}"
                props["advertised.listeners"] += f",SSL://127.0.0.1:{ssl_port}"
                props["listener.security.protocol.map"] += ",SSL:SSL"
                return props

        self.ref = WithSSL({**BenchKafka.DEFAULTS, "ssl.keystore.type": "PEM",
                            "ssl.keystore.location": str(self.pem)},
                           transaction_version=None, group_version=None, jvm_flags=BenchKafka.JVM)

    def start(self) -> None:
        self.ref.start()

    @property
    def pid(self) -> int:
        assert self.ref.proc is not None
        return self.ref.proc.pid

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ref.port if listener == 'PLAINTEXT' else self.ssl_port}"

    def stop(self) -> None:
        self.ref.stop()


def run(broker, listener: str, rep: int, records: int) -> tuple[float, float]:
    """(MB/s, broker CPU s per GB) of one run."""
    conf = {"bootstrap.servers": broker.bootstrap(listener), "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "batch.size": 262144, "queue.buffering.max.messages": 500000,
            **security(listener)}
    p = Producer(conf)
    topic = f"tls-bench-{listener.lower()}-{rep}"
    p.produce(topic, value=b"warm")
    if p.flush(60):
        raise SystemExit(f"{broker.name} {listener}: the first record was not acknowledged in 60 s")
    value = b"x" * SIZE
    c0, t0 = cpu_seconds(broker.pid), time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, value=value)
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(120):
        raise SystemExit(f"{broker.name} {listener}: records not acknowledged within 120 s")
    elapsed, cpu = time.perf_counter() - t0, cpu_seconds(broker.pid) - c0
    return records * SIZE / elapsed / 1e6, cpu / (records * SIZE / 1e9)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, help="another minibroker checkout, run as the 'base' column")
    ap.add_argument("--no-kafka", action="store_true", help="without the Apache Kafka 4.4 anchor")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--records", type=int, default=150_000)
    a = ap.parse_args()
    if not (CERTS / "ca.crt").exists():
        ap.error("no certs/ here: run `python -m minibroker certs certs` in this directory first")
    brokers: list = [MiniBroker("minibroker", ROOT)]
    if a.baseline:
        if not (a.baseline / "minibroker").is_dir():
            ap.error(f"--baseline {a.baseline}: no minibroker checkout there")
        brokers.append(MiniBroker("base", a.baseline.resolve()))
    if not a.no_kafka:
        brokers.append(Kafka())
    pairs = [(b, listener) for b in brokers for listener in b.listeners]
    results: dict[tuple[str, str], list[tuple[float, float]]] = {(b.name, li): [] for b, li in pairs}
    started: list = []
    try:
        for b in brokers:
            b.start()
            started.append(b)
        for rep in range(a.reps):
            k = rep * len(pairs) // max(a.reps, 1)
            for b, listener in pairs[k:] + pairs[:k]:
                results[(b.name, listener)].append(run(b, listener, rep, a.records))
                print(f"rep {rep} {b.name} {listener}: {results[(b.name, listener)][-1][0]:.0f} MB/s "
                      f"{results[(b.name, listener)][-1][1]:.2f} s/GB", file=sys.stderr, flush=True)
    finally:
        for b in started:
            b.stop()
    print(f"{a.records} records of {SIZE} B per run, {a.reps} reps, medians\n")
    print("| broker | listener | MB/s | broker CPU s per GB | MB/s ÷ PLAINTEXT | CPU/GB ÷ PLAINTEXT "
          "| runs (MB/s, s/GB) |")
    print("|---|---|---:|---:|---:|---:|---|")
    for b in brokers:
        base = results[(b.name, "PLAINTEXT")]
        mbs0 = statistics.median(r[0] for r in base)
        cpu0 = statistics.median(r[1] for r in base)
        for listener in b.listeners:
            runs = results[(b.name, listener)]
            mbs, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
            print(f"| {b.name} | {listener} | {mbs:.0f} | {cpu:.2f} | {mbs / mbs0:.2f} | "
                  f"{cpu / cpu0 if cpu0 else float('nan'):.1f} | "
                  f"{', '.join(f'{x:.0f}/{y:.2f}' for x, y in runs)} |")


if __name__ == "__main__":
    main()
