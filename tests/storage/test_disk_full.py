"""Appends near a full disk (issue 13, defect 3).

Reserving blocks ahead is an optimisation: when the disk cannot hold the
reservation, an append asks for its own bytes only, and is refused only when
even those do not fit.
"""

import errno
import os
import shutil
import subprocess
import uuid

import pytest

from minibroker_storage import LogConfig, PartitionLog, StorageError

from .batches import make_batch

CONFIG = LogConfig(segment_bytes=64 << 20)


class FakeDisk:
    """posix_fallocate against a budget of free bytes shared by every file."""

    def __init__(self, free: int) -> None:
        self.free = free
        self.calls: list[int] = []

    def __call__(self, fd: int, offset: int, length: int) -> None:
        self.calls.append(length)
        if length > self.free:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.free -= length


def test_reservation_falls_back_to_the_batch_size(tmp_path, monkeypatch):
    """The issue's case: with 4 MiB free one partition took writes, another
    refused every append, even of 1 KiB batches."""
    disk = FakeDisk(free=(4 << 20) + (64 << 10))
    monkeypatch.setattr(os, "posix_fallocate", disk)
    a = PartitionLog.open(str(tmp_path / "a-0"), CONFIG)
    b = PartitionLog.open(str(tmp_path / "b-0"), CONFIG)
    batch = make_batch(1, 1000)
    try:
        for _ in range(40):
            a.append(batch)
        for _ in range(40):
            b.append(batch)
        assert b.log_end_offset == 40
        # When not even the batch fits, the append is refused, cleanly.
        disk.free = 0
        with pytest.raises(StorageError, match="no space left"):
            for _ in range(100_000):
                b.append(batch)
        # Space freed elsewhere: appends resume.
        disk.free = 1 << 20
        b.append(batch)
    finally:
        a.close()
        b.close()


def test_idle_partition_reserves_little(tmp_path, monkeypatch):
    disk = FakeDisk(free=1 << 40)
    monkeypatch.setattr(os, "posix_fallocate", disk)
    log = PartitionLog.open(str(tmp_path / "t-0"), CONFIG)
    log.append(make_batch(1, 100))
    assert sum(disk.calls) <= 64 << 10
    for _ in range(4000):
        log.append(make_batch(1, 1000))
    # A busy partition still reserves in large steps, not once per batch.
    assert len(disk.calls) < 20
    log.close()


@pytest.fixture
def tiny_fs(tmp_path):
    """A 6 MiB tmpfs (root only); skipped where mounting is not permitted."""
    mnt = tmp_path / f"tiny-{uuid.uuid4().hex[:8]}"
    mnt.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mnt)],
                         capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {res.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)


def test_two_partitions_on_a_nearly_full_filesystem(tiny_fs):
    # Leave about 4.5 MiB free, as in the issue.
    with open(tiny_fs / "filler", "wb") as f:
        f.write(b"\x01" * ((6 << 20) - (4 << 20) - (512 << 10)))
    a = PartitionLog.open(str(tiny_fs / "a-0"), CONFIG)
    b = PartitionLog.open(str(tiny_fs / "b-0"), CONFIG)
    batch = make_batch(1, 1000)
    try:
        for _ in range(200):
            a.append(batch)
        for _ in range(200):
            b.append(batch)
        assert (a.log_end_offset, b.log_end_offset) == (200, 200)
        refused = 0
        for _ in range(10_000):
            try:
                b.append(batch)
            except StorageError as exc:
                assert "no space left" in str(exc)
                refused += 1
                break
        assert refused == 1  # the disk really filled up, and said so
        # Nothing torn: what was acknowledged reads back.
        assert len(b.read(0, 1 << 20)) > 0
    finally:
        a.release()
        b.release()
