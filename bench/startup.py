"""Start-up time (issues 21, 33): ms from process start to ``--ready-file``, to the first answered
ApiVersions, to the first answered Metadata that auto-creates a topic and to the first acked
idempotent produce (InitProducerId, then Produce acks=all), on one connection as a client asks
them (the early listener answers ApiVersions; the rest needs the whole broker), with an empty data
dir, with 1 GiB of log, and with 1,000,000 committed transactions in the coordinator's history;
and where the time goes (``-X importtime``).

    python -m bench.startup [--runs 7] [--work DIR] [--baseline DIR] [--scenarios empty,log1g,txn1m]
    python -m bench.startup --importtime [--baseline DIR]
    python -m bench.startup --installed VENV_PYTHON ...   # also an installed minibroker (pip install .)
    python -m bench.startup --schema-registry [--scenarios empty]   # each tree with and without
                                                                     # --schema-registry-listener

Each start is a new ``python -m minibroker`` with ``--port 0``, polled with ``first_useful``'s requests
every 2 ms once its ready file names the port it bound; the data dirs of the loaded scenarios
are made once under ``--work`` (kept there when given) and copied per run, so every start
recovers the same state. ``--baseline DIR`` (another checkout, e.g. ``git worktree add /tmp/base
main~5``) runs interleaved with this tree, start by start. Medians are printed as a table.
``--importtime`` prints the cumulative import time of each module the serving path imports
directly (the top of ``-X importtime`` of a real start, stopped once ready), median of 5.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from run import _frame, read_answer, stop_proc  # noqa: E402

from minibroker_protocol.records import build_batch  # noqa: E402  (not in a timed probe)

PY = sys.executable
SCENARIOS = ("empty", "log1g", "txn1m")


def _env(root: Path) -> dict[str, str]:
    # Bytecode as an installed package has it (pip compiles it): a PYTHONDONTWRITEBYTECODE
    # inherited from a test environment would make every start compile every module again.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if root not in (ROOT, INSTALLED):
        from tests.reference.checkout import checkout_path
        env["PYTHONPATH"] = checkout_path(str(root))
    return env


INSTALLED = Path("installed")  # a root standing for --installed's interpreter
_installed_python: list[str] = []


# What a client does first, on one connection, as librdkafka's idempotent producer asks it:
# ApiVersions v0; Metadata v4 naming a topic that does not exist yet, with
# allow_auto_topic_creation (the broker creates it, and answers with its leader); InitProducerId
# v0 (no transactional id: an idempotent producer id); Produce v3 acks=all of one idempotent
# batch (sequence 0) to partition 0. Every answer is read whole and its error codes checked.
# The topic's name is new per start, so a data dir made by an earlier start never has it.
API_VERSIONS_V0 = _frame(struct.pack(">hhih", 18, 0, 1, 5) + b"bench")
INIT_PRODUCER_ID_V0 = _frame(struct.pack(">hhih", 22, 0, 3, 5) + b"bench" + struct.pack(">hi", -1, 60000))


def _metadata_v4_auto(topic: bytes) -> bytes:
    return _frame(struct.pack(">hhih", 3, 4, 2, 5) + b"bench"
                  + struct.pack(">ih", 1, len(topic)) + topic + b"\x01")


def _produce_v3(topic: bytes, producer_id: int, epoch: int) -> bytes:
    batch = build_batch([(None, b"v" * 1024)], producer_id=producer_id, producer_epoch=epoch,
                        base_sequence=0)
    return _frame(struct.pack(">hhih", 0, 3, 4, 5) + b"bench"
                  + struct.pack(">hhii", -1, -1, 30000, 1) + struct.pack(">h", len(topic)) + topic
                  + struct.pack(">iii", 1, 0, len(batch)) + batch)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> tuple:
        out = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return out

    def string(self) -> bytes | None:
        (n,) = self.take(">h")
        if n < 0:
            return None
        self.at += n
        return self.data[self.at - n:self.at]


def _answer(s: socket.socket, corr: int) -> _Reader:
    r = _Reader(read_answer(s, corr))
    r.take(">i")  # the correlation id, checked
    return r


class ProbeError(Exception):
    """An answer with an error: the start is reported as failed, not timed."""


def _check_metadata(r: _Reader, topic: bytes) -> None:
    r.take(">i")  # throttle
    for _ in range(r.take(">i")[0]):  # brokers
        r.take(">i"), r.string(), r.take(">i"), r.string()
    r.string(), r.take(">i")  # cluster id, controller
    (topics,) = r.take(">i")
    error, name = r.take(">h")[0], r.string()
    r.take(">b")  # is_internal
    (partitions,) = r.take(">i")
    p_error, _index, leader = r.take(">hii") if partitions else (0, 0, -1)
    if topics != 1 or name != topic or error or not partitions or p_error or leader < 0:
        raise ProbeError(f"Metadata: topic {name!r} error {error}, {partitions} partitions, "
                         f"partition error {p_error}, leader {leader}")


def first_useful(host: str, port: int, t0: float, timeout: float = 30.0) -> tuple[float, float, float]:
    """(s to the ApiVersions answer, to the Metadata answer that auto-created the topic, to the
    acked idempotent Produce) since ``t0``; OSError while the port does not take the connection."""
    topic = f"bench-start-{os.urandom(4).hex()}".encode()
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(API_VERSIONS_V0)
        _answer(s, 1)
        api = time.perf_counter() - t0
        s.sendall(_metadata_v4_auto(topic))
        _check_metadata(_answer(s, 2), topic)
        metadata = time.perf_counter() - t0
        s.sendall(INIT_PRODUCER_ID_V0)
        _throttle, error, pid, epoch = _answer(s, 3).take(">ihqh")
        if error:
            raise ProbeError(f"InitProducerId: error {error}")
        s.sendall(_produce_v3(topic, pid, epoch))
        r = _answer(s, 4)
        r.take(">i"), r.string(), r.take(">i")  # 1 topic, its name, 1 partition
        _index, error, base_offset = r.take(">ihq")
        if error or base_offset != 0:
            raise ProbeError(f"Produce: error {error}, base offset {base_offset}")
        return api, metadata, time.perf_counter() - t0


COLUMNS = ("ready file", "first ApiVersions", "first Metadata (auto-creates)", "first acked produce",
           "CPU ms to the produce")


def cpu_ms(pid: int) -> float:
    """CPU time of ``pid``'s threads alive now, in ms (schedstat's ns: the machine's other load
    does not count, as it does in the wall-clock columns). A thread that ended is not counted
    (the early listener's, which answers a few requests)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e6


def one_start(root: Path, data_dir: Path, extra: tuple[str, ...] = (), limit: float = 120.0,
              importtime: Path | None = None, registry: bool = False) -> tuple[float, ...]:
    """ms to the ready file, to the first answered ApiVersions, to the first answered
    Metadata (auto-creating a topic) and to the first acked idempotent produce, and the CPU ms
    the broker used until then, of one start; with ``registry`` (--schema-registry-listener on a
    free port) also the ms to the registry's first 200 to ``GET /subjects``."""
    registry_port = _free_port() if registry else None
    if registry_port is not None:
        extra = (*extra, "--schema-registry-listener", f"http://127.0.0.1:{registry_port}")
    python, cwd = PY, root
    if root == INSTALLED:
        # the installed package, as a user runs it: not from a checkout on sys.path
        python, cwd = _installed_python[0], data_dir.parent
    ready = data_dir.with_name(data_dir.name + ".ready")
    ready.unlink(missing_ok=True)
    argv = [python, *(["-X", "importtime"] if importtime else []), "-m", "minibroker",
            "--host", "127.0.0.1", "--port", "0", "--data-dir", str(data_dir),
            "--ready-file", str(ready), "--log-level", "warning", *extra]
    err = open(importtime, "w") if importtime else subprocess.DEVNULL
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=_env(root), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=err)
    ready_at = None
    answered: list[tuple[float, ...]] = []
    failed: list[BaseException] = []

    def probe() -> None:
        # In its own thread: the Metadata answer can come long after the ready file, which the
        # loop below must see when it appears, not after the probe returns.
        # --port 0: the broker picks a free port and names it in the ready file (written whole,
        # then renamed), so no other process can take it between a pick and the bind.
        port = None
        while time.perf_counter() - t0 < limit and proc.poll() is None:
            if port is None:
                try:
                    first = ready.read_text().split()
                except FileNotFoundError:
                    first = []
                if not first:
                    time.sleep(0.001)
                    continue
                port = int(first[0].rsplit(":", 1)[1])
            try:
                times = first_useful("127.0.0.1", port, t0)
                answered.append((*times, cpu_ms(proc.pid)))
                return
            except ProbeError as e:
                failed.append(e)
                return
            except OSError:
                time.sleep(0.002)

    registry_answered: list[float] = []

    def probe_registry() -> None:
        import http.client
        while registry_port is not None and time.perf_counter() - t0 < limit and proc.poll() is None:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", registry_port, timeout=limit)
                conn.request("GET", "/subjects")
                if conn.getresponse().status == 200:
                    registry_answered.append(time.perf_counter() - t0)
                    return
            except OSError:
                pass
            time.sleep(0.002)

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    registry_prober = threading.Thread(target=probe_registry, daemon=True)
    if registry_port is not None:
        registry_prober.start()

    def waiting() -> bool:
        return ready_at is None or not answered or (registry_port is not None and not registry_answered)

    try:
        while time.perf_counter() - t0 < limit and waiting():
            if failed:
                raise RuntimeError(str(failed[0]))
            if proc.poll() is not None:
                raise RuntimeError(f"exited with {proc.returncode} before it was ready")
            if ready_at is None and ready.exists() and ready.stat().st_size:
                ready_at = time.perf_counter() - t0
            time.sleep(0.001)
        if waiting():
            raise RuntimeError(f"not ready within {limit} s")
        *times, cpu = answered[0]
        out = (ready_at * 1000, *(x * 1000 for x in times), cpu)
        return (*out, registry_answered[0] * 1000) if registry_answered else out
    finally:
        stop_proc(proc, timeout=30)
        prober.join(15)  # ends with the process (its socket closes, or polls see it gone)
        if registry_port is not None:
            registry_prober.join(15)
        if importtime:
            err.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the loaded scenarios ----------------------------------------------------------------------

def _quiet() -> None:
    import logging

    import structlog
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def make_log1g(target: Path) -> None:
    """1 GiB of 1 KiB records in 8 partitions of one topic, in idempotent batches of 100 records,
    appended through the broker's own log code with its default segment size."""
    from minibroker_storage.config import LogConfig
    from minibroker_storage.manager import LogManager

    _quiet()
    value = b"v" * 1024
    records = [(None, value)] * 100
    with LogManager(target, LogConfig()) as logs:
        logs.create_topic("bench", 8)
        written = 0
        n = 0
        while written < 2**30:
            p = n % 8
            plog = logs.get_log("bench", p)
            assert plog is not None
            batch = build_batch(records, producer_id=1000 + p, producer_epoch=0,
                                base_sequence=(n // 8) * 100)
            plog.append(batch)
            written += len(batch)
            n += 1


def scenario_dir(name: str, work: Path) -> Path | None:
    """The data dir a scenario starts from (made once); None for the empty one."""
    if name == "empty":
        return None
    path = work / name
    if path.exists():
        return path
    tmp = work / (name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    t0 = time.perf_counter()
    if name == "log1g":
        make_log1g(tmp)
    else:
        _quiet()
        from tests.integration.txn_history import generate
        generate(tmp, 1_000_000)
        # the state a broker that wrote this history leaves when it stops cleanly: its
        # coordinator snapshot (the first start replays the whole log to make it)
        one_start(ROOT, tmp, limit=900)
    tmp.rename(path)
    print(f"made {name} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return path


# -- -X importtime -----------------------------------------------------------------------------

_ROW = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def import_table(root: Path, runs: int = 5) -> dict[str, float]:
    """Cumulative ms of each module imported at the top level of a real start, median of runs."""
    samples: dict[str, list[float]] = {}
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="startup-imports-") as d:
            log = Path(d) / "importtime.txt"
            one_start(root, Path(d) / "data", importtime=log)
            rows = [m for m in map(_ROW.match, log.read_text().splitlines()) if m]
            for m in rows:
                if len(m.group(3)) == 1:
                    samples.setdefault(m.group(4), []).append(int(m.group(2)) / 1000)
            total = sum(int(m.group(1)) for m in rows) / 1000
            samples.setdefault(ALL, []).append(total)
            samples.setdefault(FIRST_ANSWER, []).append(_before_first_answer(rows, total))
    return {k: statistics.median(v) for k, v in samples.items() if len(v) == runs}


ALL = "(every import of the start, self times summed)"
FIRST_ANSWER = "(the imports before the first answer)"


def _before_first_answer(rows: list[re.Match], total: float) -> float:
    """Self ms of the imports made before the early listener answers (minibroker/net/early.py): all
    those printed before ``minibroker.app``'s, which the CLI imports after starting it. Without
    an early listener (an older checkout), every import comes before the first answer."""
    names = [m.group(4) for m in rows]
    if not {"minibroker.net.early", "minibroker.early"} & set(names) or "minibroker.app" not in names:
        return total
    end = names.index("minibroker.app")
    start = end
    # -X importtime prints a module when its import ends, after the modules it imported (each
    # indented deeper): minibroker.app's block is the run of deeper rows just before it.
    while start > 0 and len(rows[start - 1].group(3)) > len(rows[end].group(3)):
        start -= 1
    return sum(int(m.group(1)) for m in rows[:start]) / 1000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--work", type=Path, default=None, help="make and keep the loaded data dirs here")
    p.add_argument("--baseline", type=Path, default=None, help="another checkout, started interleaved")
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--importtime", action="store_true", help="print the import table instead")
    p.add_argument("--installed", default=None,
                   help="the python of a venv with minibroker installed (pip install .), measured too")
    p.add_argument("--schema-registry", action="store_true",
                   help="start each tree with and without --schema-registry-listener, interleaved")
    a = p.parse_args()
    roots = [("this tree", ROOT)] + ([("baseline", a.baseline.resolve())] if a.baseline else [])
    if a.installed:
        _installed_python.append(a.installed)
        roots.append(("installed", INSTALLED))
    if a.importtime:
        for _label, root in roots:
            with tempfile.TemporaryDirectory(prefix="startup-warm-") as d:
                one_start(root, Path(d) / "data")
        tables = {label: import_table(root) for label, root in roots}
        names = sorted(set().union(*tables.values()),
                       key=lambda n: -max(t.get(n, 0) for t in tables.values()))
        print("| module (imported at the top level) | " + " | ".join(f"{lb} ms" for lb, _ in roots) + " |")
        print("|---|" + "---:|" * len(roots))
        for n in names:
            if max(t.get(n, 0) for t in tables.values()) >= 1.0:
                print(f"| `{n}` | " + " | ".join(f"{t[n]:.1f}" if n in t else "—" for t in tables.values())
                      + " |")
        return
    work = a.work or Path(tempfile.mkdtemp(prefix="startup-"))
    work.mkdir(parents=True, exist_ok=True)
    for _label, root in roots:  # a first start writes the bytecode, untimed
        with tempfile.TemporaryDirectory(prefix="startup-warm-", dir=work) as d:
            one_start(root, Path(d) / "data")
    scenarios = [s for s in a.scenarios.split(",") if s]
    sources = {s: scenario_dir(s, work) for s in scenarios}
    # (label, root, with the registry)
    variants = [(lb, root, False) for lb, root in roots]
    if a.schema_registry:
        variants = [v for lb, root in roots for v in ((lb, root, False), (f"{lb} +registry", root, True))]
    columns = COLUMNS + (("first GET /subjects",) if a.schema_registry else ())
    results: dict[tuple[str, str], list[tuple[float, ...]]] = {}
    for run in range(a.runs):
        for scenario in scenarios:
            for label, root, registry in (variants if run % 2 == 0 else variants[::-1]):
                with tempfile.TemporaryDirectory(prefix="startup-run-", dir=work) as d:
                    data = Path(d) / "data"
                    if sources[scenario] is not None:
                        shutil.copytree(sources[scenario], data)
                    results.setdefault((scenario, label), []).append(
                        one_start(root, data, registry=registry))
        print(f"run {run + 1}/{a.runs} done", file=sys.stderr)
    print(f"\nms from process start, median of {a.runs} (cpus: {os.cpu_count()}, load before: "
          f"{os.getloadavg()[0]:.2f})\n")
    print("| data dir | " + " | ".join(f"{lb}: {c}" for lb, _, _ in variants for c in columns) + " |")
    print("|---|" + "---:|" * len(columns) * len(variants))
    for scenario in scenarios:
        cells = []
        for label, _, _ in variants:
            runs = results[(scenario, label)]
            cells += [f"{statistics.median(r[i] for r in runs):.0f}" if len(runs[0]) > i else "—"
                      for i in range(len(columns))]
        print(f"| {scenario} | " + " | ".join(cells) + " |")
    if a.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
