"""TLS's cost on produce (issue 20): one minibroker with a PLAINTEXT and an SSL listener, one
confluent-kafka idempotent producer (1 KiB values, acks=all), 150,000 records per run, the two
listeners interleaved over 3 reps; MB/s and the broker's CPU seconds per GB written.

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
PLAIN, TLS = "127.0.0.1:29092", "127.0.0.1:29093"


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def run(broker_pid: int, tls: bool, rep: int) -> tuple[float, float]:
    """(MB/s, broker CPU s per GB) of one run."""
    conf = {"bootstrap.servers": TLS if tls else PLAIN, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "batch.size": 262144, "queue.buffering.max.messages": 500000}
    if tls:
        conf.update({"security.protocol": "SSL", "ssl.ca.location": "certs/ca.crt"})
    p = Producer(conf)
    topic = f"tls-bench-{'ssl' if tls else 'plain'}-{rep}"
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
    broker = subprocess.Popen([sys.executable, "-m", "minibroker", "--data-dir", "data", "--listeners",
                               f"PLAINTEXT://{PLAIN},SSL://{TLS}", "--ssl-certfile", "certs/broker.crt",
                               "--ssl-keyfile", "certs/broker.key", "--ready-file", "ready",
                               "--log-level", "warning"])
    for _ in range(200):
        if os.path.exists("ready") and os.path.getsize("ready"):
            break
        time.sleep(0.05)
    results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    try:
        for rep in range(REPS):
            for tls in (False, True) if rep % 2 == 0 else (True, False):
                results[tls].append(run(broker.pid, tls, rep))
    finally:
        broker.terminate()
        broker.wait(30)
    print("| listener | MB/s | broker CPU s per GB | runs (MB/s, s/GB) |")
    print("|---|---:|---:|---|")
    for tls in (False, True):
        runs = results[tls]
        print(f"| {'SSL' if tls else 'PLAINTEXT'} | {statistics.median(r[0] for r in runs):.0f} | "
              f"{statistics.median(r[1] for r in runs):.2f} | "
              f"{', '.join(f'{a:.0f}/{b:.2f}' for a, b in runs)} |")


if __name__ == "__main__":
    main()
