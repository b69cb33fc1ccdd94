"""The built-in Schema Registry's speed (issue 34): register and lookup latency, and lookups/s.

    python -m bench.registry [--schemas 300] [--lookups 3000] [--seconds 10] [--clients 4]
                             [--fsync always|1000ms] [--log-level warning]

One minibroker (``--schema-registry-listener`` on a free loopback port, a temporary data dir;
minibroker.testing.MiniBroker, its test defaults but for ``--fsync``). Latencies are of one client
on one keep-alive HTTP/1.1 connection (``http.client``), each request waited for, with the
content type Confluent's clients send:

- register, new subject: ``POST /subjects/s-i/versions`` of a schema no subject has (a new id and
  a ``_schemas`` record appended, acks=all semantics: answered once in the log);
- register, evolve: one subject gains a version per request (BACKWARD: the new schema is
  checked against the latest before it is written);
- register, existing: a schema the subject already has (what a serializer with
  auto.register.schemas does on its first record: no write);
- lookup: ``POST /subjects/s-i`` (a serializer with use.latest/auto.register off);
- get by id: ``GET /schemas/ids/{id}`` (a deserializer meeting an id for the first time).

Then ``--clients`` processes, each on its own connection, send lookups for ``--seconds``: the
lookups/s they got, and the broker's CPU seconds meanwhile (/proc/PID/stat) per lookup. Clients
are Python processes on the same machine: on a small machine they compete with the broker for
the CPU, which the CPU-per-lookup column shows apart from the rate. There is no other Schema
Registry available offline here (Confluent's and Karapace's are not on the registries this
machine reaches), so nothing runs beside it.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minibroker.testing import MiniBroker  # noqa: E402

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
HEADERS = {"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE}


def schema(name: str, fields: int) -> str:
    """An Avro record ``name`` with ``fields`` fields; from the second on each has a default, so
    adding one is a BACKWARD compatible change."""
    fs = [{"name": "id", "type": "long"}]
    fs += [{"name": f"f{i}", "type": ["null", "string"], "default": None} for i in range(1, fields)]
    return json.dumps({"type": "record", "name": name, "namespace": "bench", "fields": fs})


class Client:
    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
        self.conn.request(method, path, body=None if body is None else json.dumps(body), headers=HEADERS)
        resp = self.conn.getresponse()
        data = resp.read()
        return resp.status, json.loads(data)

    def timed(self, method: str, path: str, body: dict | None = None,
              expect: int = 200) -> tuple[float, object]:
        t0 = time.perf_counter()
        status, answer = self.call(method, path, body)
        elapsed = time.perf_counter() - t0
        if status != expect:
            raise RuntimeError(f"{method} {path}: {status} {answer}")
        return elapsed, answer


def _stats(name: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return (f"| {name} | {len(ms)} | {statistics.median(ms):.2f} | {p99:.2f} | {statistics.fmean(ms):.2f} "
            f"| {1000 / statistics.fmean(ms):.0f} |")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _lookup_loop(port: int, subjects: list[tuple[str, str]], seconds: float,
                 out: multiprocessing.Queue) -> None:
    c = Client(port)
    n = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        subject, text = subjects[n % len(subjects)]
        status, _ = c.call("POST", f"/subjects/{quote(subject, safe='')}", {"schema": text})
        if status != 200:
            raise RuntimeError(f"lookup: {status}")
        n += 1
    out.put(n)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--schemas", type=int, default=300, help="subjects registered (one schema each)")
    p.add_argument("--evolve", type=int, default=100, help="versions added to one subject")
    p.add_argument("--lookups", type=int, default=3000, help="timed lookups and gets by id, each")
    p.add_argument("--seconds", type=float, default=10.0, help="the throughput run's length")
    p.add_argument("--clients", type=int, default=4, help="client processes in the throughput run")
    p.add_argument("--fsync", default="1000ms", help="the broker's --fsync (always: each write synced)")
    p.add_argument("--log-level", default="warning")
    a = p.parse_args()

    with MiniBroker(name="bench-registry", schema_registry=True, fsync=a.fsync, log_level=a.log_level) as b:
        port = int(b.schema_registry_url.rsplit(":", 1)[1])
        c = Client(port)
        deadline = time.monotonic() + 30
        while True:  # the registry serves once the Kafka listeners do
            try:
                if c.call("GET", "/subjects")[0] == 200:
                    break
            except OSError:
                c = Client(port)
            if time.monotonic() > deadline:
                raise RuntimeError("the registry did not answer within 30 s")
            time.sleep(0.05)
        rows = []
        subjects = [(f"s-{i}", schema(f"R{i}", 1 + i % 8)) for i in range(a.schemas)]
        ids = []
        reg = []
        for subject, text in subjects:
            t, answer = c.timed("POST", f"/subjects/{subject}/versions", {"schema": text})
            reg.append(t)
            ids.append(answer["id"])  # type: ignore[index]
        rows.append(_stats("register, new subject", reg))
        evolve = [c.timed("POST", "/subjects/evolving/versions", {"schema": schema("E", 1 + i)})[0]
                  for i in range(a.evolve)]
        rows.append(_stats("register, evolve (BACKWARD check)", evolve))
        again = [c.timed("POST", f"/subjects/{s}/versions", {"schema": t})[0]
                 for s, t in (subjects[i % len(subjects)] for i in range(a.lookups))]
        rows.append(_stats("register, existing schema", again))
        look = [c.timed("POST", f"/subjects/{s}", {"schema": t})[0]
                for s, t in (subjects[i % len(subjects)] for i in range(a.lookups))]
        rows.append(_stats("lookup", look))
        by_id = [c.timed("GET", f"/schemas/ids/{ids[i % len(ids)]}")[0] for i in range(a.lookups)]
        rows.append(_stats("get by id", by_id))
        c.conn.close()

        pid = b.pid
        assert pid is not None
        queue: multiprocessing.Queue = multiprocessing.Queue()
        ctx = multiprocessing.get_context("fork")
        procs = [ctx.Process(target=_lookup_loop, args=(port, subjects, a.seconds, queue))
                 for _ in range(a.clients)]
        cpu0, t0 = _cpu_seconds(pid), time.perf_counter()
        for pr in procs:
            pr.start()
        counts = [queue.get(timeout=a.seconds + 60) for _ in procs]
        elapsed, cpu = time.perf_counter() - t0, _cpu_seconds(pid) - cpu0
        for pr in procs:
            pr.join(30)
        total = sum(counts)

    print(f"\nminibroker's Schema Registry, {a.schemas} subjects, --fsync {a.fsync} "
          f"(cpus: {os.cpu_count()}, load: {os.getloadavg()[0]:.2f})\n")
    print("| request | n | p50 ms | p99 ms | mean ms | requests/s (one client, sequential) |")
    print("|---|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    print(f"\n{a.clients} client processes, {a.seconds:.0f} s of lookups: {total / elapsed:.0f} lookups/s; "
          f"broker CPU {cpu:.2f} s = {cpu / total * 1e6:.0f} µs per lookup ({cpu / elapsed:.2f} cores busy)")


if __name__ == "__main__":
    main()
