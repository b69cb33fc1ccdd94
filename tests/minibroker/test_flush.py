"""--fsync MS: the broker's flusher syncs due logs on a worker thread, never on the loop."""

from __future__ import annotations

import asyncio
import os
import threading

from minibroker.app import start
from minibroker.config.options import Config, FsyncPolicy
from minibroker_protocol.errors import ErrorCode

from . import requests as rq
from .conftest import RawClient


async def test_periodic_flush_runs_off_the_event_loop(tmp_path, monkeypatch):
    loop_thread = threading.get_ident()
    synced_on: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced_on.append(threading.get_ident()), real(fd))[1])
    running = await start(Config(port=0, data_dir=tmp_path / "data", fsync=FsyncPolicy("interval", 50),
                                 num_partitions=1))
    c = await RawClient.connect(running.port)
    try:
        await c.call(rq.metadata(["fl"]))
        for _ in range(5):  # appends keep landing while flush.ms passes: none flushes inline
            resp = await c.call(rq.produce("fl", 0, rq.batch(3)))
            assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none
            await asyncio.sleep(0.03)
        for _ in range(100):  # bounded: 50 ms flush.ms, a few seconds at most
            if synced_on:
                break
            await asyncio.sleep(0.02)
        assert synced_on, "the partition was never flushed"
        assert loop_thread not in synced_on
    finally:
        await c.close()
        await running.close()


async def test_on_a_virtual_clock_flush_deadlines_wait_for_an_advance(tmp_path, monkeypatch):
    """--clock virtual: flush.ms is a deadline of the broker's clock, which stands still until the
    control plane advances it (then the flusher, which looks at least every second, syncs)."""
    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(fd), real(fd))[1])
    running = await start(Config(port=0, data_dir=tmp_path / "data", fsync=FsyncPolicy("interval", 50),
                                 num_partitions=1, clock="virtual"))
    c = await RawClient.connect(running.port)
    try:
        await c.call(rq.metadata(["vf"]))
        resp = await c.call(rq.produce("vf", 0, rq.batch(3)))
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none
        synced.clear()
        await asyncio.sleep(1.3)  # real time passes, the broker's does not
        assert not synced, "flushed although the virtual clock stood still"
        running.broker.clock.advance(100)
        for _ in range(100):  # bounded: the flusher looks again within a second
            if synced:
                break
            await asyncio.sleep(0.05)
        assert synced, "the advance past flush.ms did not flush"
    finally:
        await c.close()
        await running.close()
