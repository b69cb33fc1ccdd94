"""Issue 33: a broker builds a handler family on the first request of one of its APIs, and the
group and share coordinators when first needed (when the data dir holds no state of theirs),
so the start to a client's first Metadata and Produce imports neither."""

from __future__ import annotations

import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from minibroker.handlers.api import Api, Response
from minibroker.net.dispatch import Disconnect, Dispatcher
from minibroker_protocol import codec
from minibroker_protocol.api_keys import ApiKey

ROOT = Path(__file__).resolve().parents[2]


def _frame(api_key: int, version: int) -> memoryview:
    return memoryview(codec.encode_request(codec.request_type(api_key, version)(key="g"), 7, "t"))


def test_a_family_is_built_on_its_first_request_and_keeps_the_placeholders_ranges():
    built = []

    def handler(ctx, req):
        return Response.encoded([b"ok"], 2)

    def load():
        built.append(1)
        return [Api(ApiKey.FindCoordinator, 0, 6, handler), Api(ApiKey.Heartbeat, 0, 4, handler)]

    d = Dispatcher()
    d.register_lazy(ApiKey.FindCoordinator, 0, 2, load)  # capped (as --as-version does) to v2
    d.register_lazy(ApiKey.Heartbeat, 0, 4, load)
    assert d.version_table() == ((10, 0, 2), (12, 0, 4), (18, 0, 5))
    try:
        d.handle(_frame(ApiKey.FindCoordinator, 3), None)
        raise AssertionError("v3 is outside the placeholder's range")
    except Disconnect as e:
        assert e.reason == "unsupported_version"
    assert built == []  # a refused request builds nothing
    assert d.handle(_frame(ApiKey.FindCoordinator, 1), None).size == 2
    assert d.handle(_frame(ApiKey.FindCoordinator, 2), None).size == 2
    assert built == [1]
    assert all(a.load is None and a.handler is handler for k, a in d.apis.items() if k != 18)
    assert d.version_table() == ((10, 0, 2), (12, 0, 4), (18, 0, 5))


def _imported(log: Path) -> set[str]:
    # -X importtime writes a line per module as its import ends (unbuffered stderr)
    return {line.rsplit("|", 1)[1].strip() for line in log.read_text().splitlines()
            if line.startswith("import time:") and "|" in line}


GROUPS = {"minibroker.coordinator.group.coordinator", "minibroker.coordinator.share.coordinator",
          "minibroker.handlers.group", "minibroker.config.group_configs"}
# Not needed by a start's first requests: the log cleaner (made after its first backoff) and
# argparse (a command line of whole options is read without it, options.plain_serve_args)
NOT_YET = {"minibroker_storage.cleaner", "argparse"}
UNASKED = {"minibroker.handlers.fetch", "minibroker.handlers.share", "minibroker.handlers.acls",
           "minibroker.handlers.admin", "minibroker.handlers.streams_group",
           "minibroker.handlers.consumer_group", "minibroker.handlers.configs"}


def _start_with_importtime(tmp_path: Path, log: Path, ready: Path) -> subprocess.Popen:
    """A broker on a free port whose ``-X importtime`` lines go to ``log``."""
    with open(log, "w") as err:
        return subprocess.Popen([sys.executable, "-X", "importtime", "-m", "minibroker", "--host", "127.0.0.1",
                                 "--port", "0", "--data-dir", str(tmp_path / "data"), "--ready-file", str(ready)],
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)


def _ready_port(proc: subprocess.Popen, ready: Path) -> int:
    deadline = time.monotonic() + 60
    while not (ready.exists() and ready.read_text()):
        assert time.monotonic() < deadline and proc.poll() is None, "no ready file"
        time.sleep(0.01)
    return int(ready.read_text().split()[0].rsplit(":", 1)[1])


def test_first_metadata_and_produce_import_no_other_family_nor_the_group_coordinators(tmp_path):
    """A real broker process, an idempotent producer's first requests (bench/startup.py's
    probe: ApiVersions, Metadata auto-creating a topic, InitProducerId, Produce acks=all); then
    ListGroups, which builds the group coordinators; then SIGTERM, which builds nothing more."""
    sys.path.insert(0, str(ROOT))
    from bench.startup import first_useful

    log, ready = tmp_path / "imports.txt", tmp_path / "ready"
    proc = _start_with_importtime(tmp_path, log, ready)
    try:
        port = _ready_port(proc, ready)
        first_useful("127.0.0.1", port, time.perf_counter())
        before = _imported(log)
        assert "minibroker.handlers.produce" in before and "minibroker.handlers.metadata" in before
        assert not (GROUPS | UNASKED | NOT_YET) & before
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(struct.pack(">ihhih", 10, ApiKey.ListGroups, 0, 9, -1))
            size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
            answer = s.recv(size, socket.MSG_WAITALL)
        corr, error, groups = struct.unpack(">ihi", answer)
        assert (corr, error, groups) == (9, 0, 0)
        assert GROUPS <= _imported(log)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        assert not UNASKED & _imported(log)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_events_below_the_level_do_not_import_structlog():
    """--log-level warning: the info events of a broker's first requests are dropped before
    structlog is imported for them; a warning still imports it and is written."""
    code = ("import sys\n"
            "from minibroker.core import logs\n"
            "from minibroker_storage.lazylog import get_logger\n"
            "logs.configure('warning')\n"
            "log = get_logger('t')\n"
            "log.info('below', n=1)\n"
            "print('structlog' in sys.modules)\n"
            "log.warning('above', n=2)\n"
            "print('structlog' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["False", "True"]
    assert "above" in out.stderr and "below" not in out.stderr


async def test_held_start_up_events_wait_for_a_pause_in_the_requests(monkeypatch):
    """app._release_logs_when_quiet: the events held since start are written once no request
    came for LOG_RELEASE_S, or at the latest by the deadline, not in the middle of a client's
    first requests (importing structlog costs ~20 ms)."""
    import asyncio
    from types import SimpleNamespace

    from minibroker import app

    released: list[float] = []
    gc_released: list[float] = []
    monkeypatch.setattr(app.logs, "release", lambda: released.append(time.monotonic()))
    monkeypatch.setattr(app.startup_gc, "release", lambda: gc_released.append(time.monotonic()))
    counts = SimpleNamespace(bytes_in=0)
    t0 = time.monotonic()
    app._release_logs_when_quiet(counts, t0 + 30, -1)  # a request came: checks again later
    assert released == [] and gc_released == []
    busy_until = t0 + 0.15
    while time.monotonic() < busy_until:  # a client's requests, one after another
        counts.bytes_in += 100
        await asyncio.sleep(0.002)
    for _ in range(500):
        if released:
            break
        await asyncio.sleep(0.01)
    assert released and released[0] >= busy_until
    assert len(gc_released) == len(released) == 1  # the garbage collector comes back on then too
    # a client that never pauses: the deadline
    released.clear()
    t1 = time.monotonic()
    app._release_logs_when_quiet(counts, t1 + 0.1, -1)
    for _ in range(1000):
        if released:
            break
        counts.bytes_in += 100
        await asyncio.sleep(0.002)
    assert released and released[0] >= t1 + 0.1


def test_the_dataclasses_a_start_makes_have_docstrings():
    """@dataclass writes a class without a docstring its signature as __doc__, through
    inspect.signature: ~0.15-0.3 ms per class, and a start makes ~70 dataclasses (issue 33).
    Ours on the way to the first Metadata and Produce each have a docstring of their own."""
    code = (
        "import dataclasses, sys\n"
        "sys.modules['hypothesis'] = None\n"
        "plain = dataclasses._process_class\n"
        "missing = []\n"
        "def check(cls, *a, **k):\n"
        "    if cls.__module__.split('.')[0] in ('minibroker', 'minibroker_protocol', 'minibroker_storage') \\\n"
        "            and cls.__dict__.get('__doc__') is None:\n"
        "        missing.append(f'{cls.__module__}.{cls.__qualname__}')\n"
        "    return plain(cls, *a, **k)\n"
        "dataclasses._process_class = check\n"
        "import minibroker.cli.main, minibroker.net.early, minibroker.app\n"
        "import minibroker.handlers.metadata, minibroker.handlers.txn, minibroker.handlers.produce\n"
        "print(len(missing), *missing)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=ROOT, check=True)
    assert out.stdout.split() == ["0"], out.stdout


def test_the_garbage_collector_is_off_until_the_first_requests_pause(tmp_path):
    """core/startup_gc.py: a broker started as users start it (the console script's
    minibroker.launch) collects no garbage while it starts and serves its first requests, and
    collects again once they pause; a tool run the same way collects as any program does."""
    code = (
        "import gc, sys, threading, time\n"
        "import minibroker.launch\n"
        "seen = [gc.isenabled()]\n"
        "from minibroker import app\n"
        "quiet = app._release_logs_when_quiet\n"
        "def spy(*a):\n"
        "    quiet(*a)\n"
        "    seen.append(gc.isenabled())\n"
        "    if seen[-1]:\n"
        "        print(*seen, flush=True)\n"
        "        import os, signal; os.kill(os.getpid(), signal.SIGTERM)\n"
        "app._release_logs_when_quiet = spy\n"
        "sys.exit(minibroker.launch.main())\n")
    out = subprocess.run([sys.executable, "-c", code, "--host", "127.0.0.1", "--port", "0",
                          "--data-dir", str(tmp_path / "d"), "--log-level", "warning"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "False" and out.stdout.split()[-1] == "True", out.stdout
    tool = ("import gc, sys\n"
            "import minibroker.launch\n"
            "from minibroker.cli import scrub\n"
            "scrub.main = lambda argv: print(gc.isenabled()) or 0\n"
            "sys.exit(minibroker.launch.main())\n")
    out = subprocess.run([sys.executable, "-c", tool, "scrub", str(tmp_path)], capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.split() == ["True"], out


def test_the_transaction_coordinator_is_built_on_the_first_request_that_needs_it(tmp_path):
    """An empty data dir: Metadata (auto-creating a topic) is answered without the transaction
    coordinator's modules; InitProducerId builds it."""
    sys.path.insert(0, str(ROOT))
    from bench.startup import INIT_PRODUCER_ID_V0, _answer, _check_metadata, _metadata_v4_auto

    log, ready = tmp_path / "imports.txt", tmp_path / "ready"
    coordinator = "minibroker.coordinator.txn.coordinator"
    proc = _start_with_importtime(tmp_path, log, ready)
    try:
        port = _ready_port(proc, ready)
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(_metadata_v4_auto(b"lazy-txn"))
            _check_metadata(_answer(s, 2), b"lazy-txn")
            assert coordinator not in _imported(log)
            s.sendall(INIT_PRODUCER_ID_V0)
            r = _answer(s, 3)
            _throttle, error, producer_id = r.take(">ihq")
            assert error == 0 and producer_id >= 0
        assert coordinator in _imported(log)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
