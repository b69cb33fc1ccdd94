"""TLS's cost on produce (issue 20): one minibroker with a PLAINTEXT, an SSL and a SASL_SSL (SCRAM-SHA-512)
listener, one confluent-kafka idempotent producer (1 KiB values, acks=all), 150,000 records per run, the
listeners interleaved over 3 reps (the order rotating); MB/s and the broker's CPU seconds per GB written.

    cd "$(mktemp -d)" && python -m minibroker certs certs && python /path/to/bench/tls_cost.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from confluent_kafka import Producer

RECORDS, SIZE, REPS = 150_000, 1024, 3
LISTENERS = {"PLAINTEXT": "127.0.0.1:29092", "SSL": "127.0.0.1:29093", "SASL_SSL": "127.0.0.1:29094"}
SECURITY = {
    "PLAINTEXT": {},
    "SSL": {"security.protocol": "SSL", "ssl.ca.location": "certs/ca.crt"},
    "SASL_SSL": {"security.protocol": "SASL_SSL", "ssl.ca.location": "certs/ca.crt",
                 "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench",
                 "sasl.password": "bench-secret"},
}


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def run(broker_pid: int, listener: str, rep: int) -> tuple[float, float]:
    """(MB/s, broker CPU s per GB) of one run."""
    conf = {"bootstrap.servers": LISTENERS[listener], "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "batch.size": 262144, "queue.buffering.max.messages": 500000,
            **SECURITY[listener]}
    p = Producer(conf)
    topic = f"tls-bench-{listener.lower()}-{rep}"
    p.produce(topic, value=b"warm")
    p.flush(30)
    value = b"x" * SIZE
    c0, t0 = cpu_seconds(broker_pid), time.perf_counter()
    for _ in range(RECORDS):
        while True:
            try:
                p.produce(topic, value=value)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(60)
    elapsed, cpu = time.perf_counter() - t0, cpu_seconds(broker_pid) - c0
    return RECORDS * SIZE / elapsed / 1e6, cpu / (RECORDS * SIZE / 1e9)


def main() -> None:
    with open("users", "w") as f:
        f.write("bench:bench-secret\n")
    broker = subprocess.Popen([sys.executable, "-m", "minibroker", "--data-dir", "data", "--listeners",
                               ",".join(f"{k}://{v}" for k, v in LISTENERS.items()),
                               "--ssl-certfile", "certs/broker.crt", "--ssl-keyfile", "certs/broker.key",
                               "--sasl-users", "users", "--ready-file", "ready", "--log-level", "warning"])
    for _ in range(200):
        if os.path.exists("ready") and os.path.getsize("ready"):
            break
        time.sleep(0.05)
    names = list(LISTENERS)
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    try:
        for rep in range(REPS):
            for name in names[rep % len(names):] + names[:rep % len(names)]:
                results[name].append(run(broker.pid, name, rep))
    finally:
        broker.terminate()
        broker.wait(30)
    print("| listener | MB/s | broker CPU s per GB | runs (MB/s, s/GB) |")
    print("|---|---:|---:|---|")
    for name in names:
        runs = results[name]
        print(f"| {name} | {statistics.median(r[0] for r in runs):.0f} | "
              f"{statistics.median(r[1] for r in runs):.2f} | "
              f"{', '.join(f'{a:.0f}/{b:.2f}' for a, b in runs)} |")


if __name__ == "__main__":
    main()
