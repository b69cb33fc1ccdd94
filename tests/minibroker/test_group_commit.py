"""--fsync always: a Produce answer waits for its sync, and waiting appends share one."""

from __future__ import annotations

import asyncio
import errno
import threading

import pytest

from minibroker.app import start
from minibroker.config import Config, FsyncPolicy
from protocol.errors import ErrorCode
from storage.sync_job import SyncJob

from . import requests as rq
from .conftest import RawClient


@pytest.fixture
async def always(tmp_path):
    cfg = Config(port=0, data_dir=tmp_path / "data", fsync=FsyncPolicy("always"), num_partitions=2)
    running = await start(cfg)
    clients = []

    async def connect() -> RawClient:
        c = await RawClient.connect(running.port)
        clients.append(c)
        return c

    running.connect = connect
    yield running
    for c in clients:
        await c.close()
    await running.close()


@pytest.fixture
def held_syncs(monkeypatch):
    """SyncJob.run blocks until ``gate`` is set; ``runs`` counts the jobs that ran."""
    gate = threading.Event()
    runs = []
    real_run = SyncJob.run

    def run(job):
        runs.append(len(job))
        assert gate.wait(30)
        real_run(job)

    monkeypatch.setattr(SyncJob, "run", run)
    return gate, runs


async def test_answer_waits_for_the_sync(always, held_syncs):
    gate, runs = held_syncs
    c = await always.connect()
    await c.call(rq.metadata(["gc"]))
    pending = asyncio.ensure_future(c.call(rq.produce("gc", 0, rq.batch(3))))
    for _ in range(100):  # bounded: the job starts within a second
        if runs:
            break
        await asyncio.sleep(0.01)
    assert runs, "no sync started"
    await asyncio.sleep(0.2)
    assert not pending.done()  # appended, not yet durable: no answer
    gate.set()
    resp = await asyncio.wait_for(pending, 10)
    part = resp.responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (ErrorCode.none, 0)


async def test_appends_waiting_together_share_one_sync(always, held_syncs):
    gate, runs = held_syncs
    c = await always.connect()
    await c.call(rq.metadata(["gc2"]))
    # One request first, to hold the sync; then 20 pipelined on two partitions.
    await c.send_raw(c.frame(rq.produce("gc2", 0, rq.batch(1))))
    for _ in range(100):
        if runs:
            break
        await asyncio.sleep(0.01)
    frames = [c.frame(rq.produce("gc2", i % 2, rq.batch(2))) for i in range(20)]
    await c.send_raw(b"".join(frames))
    await asyncio.sleep(0.2)
    gate.set()
    offsets = {0: [], 1: []}
    first_corr = c.corr - 20
    for i in range(21):
        corr, resp = await c.recv(0, 9)
        assert corr == first_corr + i  # answers stay in request order
        part = resp.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.none
        offsets[part.index].append(part.base_offset)
    assert offsets == {0: [0] + list(range(1, 21, 2)), 1: list(range(0, 20, 2))}
    # The first sync, then one for all 20 appends that arrived while it ran.
    assert len(runs) == 2 and always.broker.group_commit.syncs == 2


async def test_failed_sync_answers_storage_error(always, monkeypatch):
    c = await always.connect()
    await c.call(rq.metadata(["gc3"]))
    real_run = SyncJob.run

    def failing(job):
        job.close()
        job.error = OSError(errno.EIO, "injected")

    monkeypatch.setattr(SyncJob, "run", failing)
    resp = await c.call(rq.produce("gc3", 0, rq.batch(3)))
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.kafka_storage_error and part.base_offset == -1
    monkeypatch.setattr(SyncJob, "run", real_run)
    # The bytes were written; the next sync covers them too, and the log goes on.
    resp = await c.call(rq.produce("gc3", 0, rq.batch(3)))
    part = resp.responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (ErrorCode.none, 3)
