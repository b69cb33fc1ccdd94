"""``minibroker scrub`` and the background scrub (issue 13, defect 4)."""

import asyncio
import json
import os
import time

import pytest

from minibroker.background.scrubber import RateLimit, Scrubber
from minibroker.cli.scrub import main as scrub_main
from minibroker_storage import LogConfig, LogManager
from minibroker_storage.scrub import scrub_data_dir
from minibroker_storage.verify import CorruptBatch

from .batches import make_batch

CONFIG = LogConfig(segment_bytes=16 * 1024, index_interval_bytes=512)


def flip(path, position):
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x5A]))


@pytest.fixture
def data_dir(tmp_path):
    """Two topics, several sealed segments each; the manager is closed (clean stop)."""
    d = tmp_path / "data"
    with LogManager(d, CONFIG) as mgr:
        mgr.create_topic("orders", 2)
        mgr.create_topic("audit", 1)
        infos = {}
        for (topic, p), plog in sorted(mgr.logs().items()):
            infos[(topic, p)] = [plog.append(make_batch(2, 150, fill=i)) for i in range(120)]
    return str(d), infos


def segment_of(data, topic, partition, info):
    path = os.path.join(data, f"{topic}-{partition}")
    bases = sorted(int(n[:20]) for n in os.listdir(path) if n.endswith(".log"))
    base = max(b for b in bases if b <= info.base_offset)
    assert base != bases[-1], "want a sealed segment"
    return os.path.join(path, f"{base:020d}.log")


def run_cli(argv, capsys):
    code = scrub_main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_clean_data_dir_exits_0(data_dir, capsys):
    data, _ = data_dir
    code, out, _ = run_cli(["--data-dir", data, "--json"], capsys)
    doc = json.loads(out)
    assert code == 0 and doc["bad_batches"] == [] and doc["partitions"] == 3
    assert doc["batches"] == 360


def test_every_bad_batch_reported_with_topic_partition_offset_position(data_dir, capsys):
    data, infos = data_dir
    v1 = infos[("orders", 1)][10]
    v2 = infos[("orders", 1)][40]
    v3 = infos[("audit", 0)][5]
    flip(segment_of(data, "orders", 1, v1), v1.start_position + 100)
    flip(segment_of(data, "orders", 1, v2), v2.start_position + 64)
    flip(segment_of(data, "audit", 0, v3), v3.start_position + 3)  # base offset: outside the CRC
    code, out, _ = run_cli(["--data-dir", data, "--json"], capsys)
    assert code == 1
    got = sorted((b["topic"], b["partition"], b["offset"], b["position"]) for b in json.loads(out)["bad_batches"])
    assert got == sorted([
        ("orders", 1, v1.base_offset, v1.start_position),
        ("orders", 1, v2.base_offset, v2.start_position),
        ("audit", 0, v3.base_offset, v3.start_position),
    ])
    code, out, _ = run_cli(["--data-dir", data, "--topic", "orders"], capsys)
    assert code == 1
    assert f"BAD orders-1 offset {v1.base_offset} position {v1.start_position}" in out
    assert "audit" not in out and "2 bad batches" in out
    code, out, _ = run_cli(["--data-dir", data, "--topic", "orders", "--json"], capsys)
    assert len(json.loads(out)["bad_batches"]) == 2


@pytest.mark.parametrize("argv", [["--bogus"], ["--data-dir"], ["--data-dir", "/nonexistent/x"]])
def test_usage_errors_exit_2(argv, capsys):
    code, out, err = run_cli(argv, capsys)
    assert code == 2 and "error" in err and "Traceback" not in err


def test_unknown_topic_exits_2(data_dir, capsys):
    code, _, err = run_cli(["--data-dir", data_dir[0], "--topic", "nope"], capsys)
    assert code == 2 and "nope" in err


def test_preallocated_tail_of_a_running_broker_is_not_bad(tmp_path, capsys):
    d = tmp_path / "live"
    mgr = LogManager(d, CONFIG)
    try:
        mgr.create_topic("t", 1)
        for i in range(20):
            mgr.get_log("t", 0).append(make_batch(1, 100, fill=i))
        report = scrub_data_dir(str(d))  # the active segment is still preallocated
        assert report.findings == [] and report.notes
    finally:
        mgr.close_all()


def test_rate_limit_paces_and_stops():
    import threading

    stop = threading.Event()
    limit = RateLimit(4 << 20, stop)
    t = time.monotonic()
    for _ in range(5):
        limit(1 << 20)
    assert time.monotonic() - t >= 0.9  # 5 MiB at 4 MiB/s: the first MiB is free
    stop.set()
    with pytest.raises(Exception):
        limit(1)


def test_background_scrub_finds_rot_and_fetch_refuses_it(tmp_path):
    """Bit rot that leaves size and mtime alone passes the open; the scrub finds it."""
    d = tmp_path / "data"
    with LogManager(d, CONFIG) as mgr:
        mgr.create_topic("t", 1)
        infos = [mgr.get_log("t", 0).append(make_batch(2, 150, fill=i)) for i in range(120)]
    victim = infos[30]
    path = segment_of(str(d), "t", 0, victim)
    st = os.stat(path)
    flip(path, victim.start_position + 99)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

    mgr = LogManager(d, CONFIG)
    try:
        plog = mgr.get_log("t", 0)
        assert not plog.bad_batches()
        assert len(plog.read(victim.base_offset, 1 << 20))  # served: nobody knows yet
        sealed = sum(s.size for s in plog.segments[:-1])
        rate = 2 * sealed  # one pass takes about half a second
        scrubber = Scrubber(mgr, rate, pass_interval_s=3600, window=4096)

        async def go():
            lags = []

            async def ticker():
                while True:
                    t = time.monotonic()
                    await asyncio.sleep(0.005)
                    lags.append(time.monotonic() - t - 0.005)

            tick = asyncio.create_task(ticker())
            task = asyncio.create_task(scrubber.run())
            t0 = time.monotonic()
            for _ in range(400):
                if scrubber.passes:
                    break
                await asyncio.sleep(0.025)
            took = time.monotonic() - t0
            task.cancel()
            tick.cancel()
            await asyncio.gather(task, tick, return_exceptions=True)
            return took, max(lags)

        took, worst_lag = asyncio.run(go())
        assert scrubber.passes == 1 and scrubber.found == 1
        assert took >= 0.3  # rate-limited: about sealed / rate seconds
        assert worst_lag < 0.25  # the loop kept running while it read
        with pytest.raises(CorruptBatch) as err:
            plog.read(victim.base_offset, 1 << 20)
        assert err.value.bad.position == victim.start_position
    finally:
        mgr.close_all()
    # Known bad: the next open checks that segment again, and finds it again.
    with LogManager(d, CONFIG) as mgr:
        assert [b.position for _, b in mgr.get_log("t", 0).bad_batches()] == [victim.start_position]
