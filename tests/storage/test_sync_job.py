"""Flushes whose waiting happens off the owner's thread (storage/sync_job.py)."""

import errno
import os
import threading

import pytest

from minibroker_storage import FlushPolicy, LogConfig, LogManager, SyncJob

from .batches import TS0, make_batch

BACKGROUND = LogConfig(segment_bytes=4096, flush=FlushPolicy("interval", 100, background=True))


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def run_on_thread(job: SyncJob) -> None:
    t = threading.Thread(target=job.run)
    t.start()
    t.join(30)
    assert not t.is_alive()


@pytest.fixture
def syncs(monkeypatch):
    """Every fsync/fdatasync call made, by kind."""
    calls = []
    real_fsync, real_fdatasync = os.fsync, os.fdatasync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "fdatasync", lambda fd: (calls.append("fdatasync"), real_fdatasync(fd))[1])
    return calls


def test_background_log_never_flushes_inline(open_log, clock, syncs):
    log = open_log(BACKGROUND)
    for i in range(3):
        clock.now += 500  # flush.ms passed before every append
        log.append(make_batch(1, 100, timestamp=TS0 + i))
    assert syncs == []
    # Without an owner flushing it, the append that finds flush.ms elapsed does it.
    inline = open_log(LogConfig(flush=FlushPolicy("interval", 100)), name="t-1")
    clock.now += 500
    inline.append(make_batch())
    assert "fdatasync" in syncs


def test_job_syncs_active_sealed_and_directory_then_nothing_is_left(open_log, clock, syncs):
    log = open_log(BACKGROUND)
    for i in range(8):
        log.append(make_batch(1, 1500, timestamp=TS0 + i))
    assert len(log.segments) > 2
    before = open_fds()
    job = SyncJob()
    log.add_flush(job)
    # The active segment's data (fdatasync), each sealed segment's .log and indexes, the directory.
    files = len(job)
    assert files > 3
    syncs.clear()  # rolls fsync producer-state snapshots of their own
    run_on_thread(job)
    assert open_fds() == before  # run() closed every descriptor it owned
    assert job.finish() is None
    assert syncs.count("fdatasync") == 1 and syncs.count("fsync") == files - 1
    again = SyncJob()
    log.add_flush(again)
    assert len(again) == 0  # everything written so far is durable
    log.append(make_batch(1, 100, timestamp=TS0 + 9))
    log.add_flush(again)
    assert len(again) == 1  # only the active segment's new bytes
    again.abandon()


def test_failed_job_puts_everything_back(open_log, monkeypatch):
    log = open_log(BACKGROUND)
    for i in range(8):
        log.append(make_batch(1, 1500, timestamp=TS0 + i))
    job = SyncJob()
    log.add_flush(job)
    wanted = len(job)

    def eio(fd):
        raise OSError(errno.EIO, "injected")

    monkeypatch.setattr(os, "fsync", eio)
    monkeypatch.setattr(os, "fdatasync", eio)
    job.run()
    assert job.finish().errno == errno.EIO
    monkeypatch.undo()
    retry = SyncJob()
    log.add_flush(retry)
    assert len(retry) == wanted
    retry.run()
    assert retry.finish() is None
    last = SyncJob()
    log.add_flush(last)
    assert len(last) == 0


def test_segments_deleted_while_the_job_runs(open_log, clock):
    log = open_log(LogConfig(segment_bytes=4096, retention_bytes=4096,
                             flush=FlushPolicy("interval", 100, background=True)))
    for i in range(8):
        log.append(make_batch(1, 1500, timestamp=TS0 + i))
    job = SyncJob()
    log.add_flush(job)
    assert log.apply_retention(clock.now) > 0  # unlinks segments the job holds
    run_on_thread(job)
    assert job.finish() is None
    log.append(make_batch(1, 100, timestamp=TS0 + 9))
    log.flush()


def test_manager_flushes_due_logs_and_says_when_next(tmp_path, clock):
    m = LogManager(tmp_path / "data", BACKGROUND, clock=clock)
    try:
        m.create_topic("t", 2)
        m.create_topic("never", 1, {"flush.ms": str(2**63 - 1)})
        m.create_topic("fast", 1, {"flush.ms": "30"})
        assert m.get_log("fast", 0).config.flush.background  # overrides keep the owner's flag
        for topic, p in (("t", 0), ("t", 1), ("never", 0), ("fast", 0)):
            m.get_log(topic, p).append(make_batch())
        job = SyncJob()
        assert m.add_due_flushes(job) == 30  # nothing due yet; "fast" is next
        assert len(job) == 0
        clock.now += 40
        assert m.add_due_flushes(job) == 30  # "fast" flushed and due again in 30; "t" in 60
        assert len(job) == 1
        clock.now += 70
        # Both "t" partitions, and "fast" again: the job holding its first sync has not run.
        assert m.add_due_flushes(job) == 30
        assert len(job) == 4
        job.run()
        assert job.finish() is None
    finally:
        m.close_all()
    other = LogManager(tmp_path / "other", LogConfig())
    try:
        other.create_topic("t", 1)
        assert other.add_due_flushes(SyncJob()) is None  # no log flushes on an interval
    finally:
        other.close_all()


def test_clock_going_back_does_not_postpone_the_flush(tmp_path, clock):
    m = LogManager(tmp_path / "data", BACKGROUND, clock=clock)
    try:
        m.create_topic("t", 1)
        m.get_log("t", 0).append(make_batch())
        clock.now += 200
        job = SyncJob()
        assert m.add_due_flushes(job) == 100
        clock.now -= 3_600_000  # the wall clock stepped back an hour
        assert m.add_due_flushes(job) == 100  # still due within flush.ms, not in an hour
        job.abandon()
    finally:
        m.close_all()
