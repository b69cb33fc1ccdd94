"""Replacing segments with cleaned ones so that a crash at any step leaves either the old
segments or the new ones, never a mix and never neither.

The cleaner writes the new segments' files (``.log`` and its indexes, named as usual) in
``<partition>/.cleaning/``. Then:

1. **commit**: a ``replaces`` file listing the old segments' base offsets is written into
   that directory, everything in it is fsynced, and the directory is renamed
   ``.swap`` (atomic). From here on the swap happens, whatever stops it.
2. the old segments' files are deleted, then ``replaces`` (the last moment an old file
   could be mistaken for a new one of the same name);
3. the new files are renamed into the partition directory, and ``.swap`` goes.

Opening a partition (``recover``) drops a ``.cleaning`` left by a crash (step 1 never
happened) and finishes a ``.swap`` from where it stopped. Kafka does the same with
``.cleaned`` and ``.swap`` file suffixes (LogLoader); directories keep Kafka's own loader,
which lists only files, clear of them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable

from .atomic_file import fsync_dir, write_atomically
from .lazylog import get_logger

log = get_logger(__name__)

STAGING_DIR = ".cleaning"
SWAP_DIR = ".swap"
_REPLACES = "replaces"


def staging_dir(partition_path: str) -> str:
    """An empty staging directory (mkdir, not makedirs: a partition deleted meanwhile must
    not come back)."""
    path = os.path.join(partition_path, STAGING_DIR)
    shutil.rmtree(path, ignore_errors=True)
    os.mkdir(path)
    return path


def discard(partition_path: str) -> None:
    """Drop what a round staged (it was thrown away, or failed)."""
    shutil.rmtree(os.path.join(partition_path, STAGING_DIR), ignore_errors=True)


def sync_staged(partition_path: str) -> None:
    """fsync every staged file (the cleaner's thread does it, so ``commit`` on the broker's
    event loop finds them clean and its own fsyncs cost nothing)."""
    staging = os.path.join(partition_path, STAGING_DIR)
    for name in os.listdir(staging):
        fd = os.open(os.path.join(staging, name), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def commit(partition_path: str, old_bases: Iterable[int]) -> str:
    """Step 1: make the staged segments the partition's, durably. Returns the swap dir."""
    staging = os.path.join(partition_path, STAGING_DIR)
    if os.path.isdir(os.path.join(partition_path, SWAP_DIR)):
        # a swap whose finish failed (an I/O error) would block this one's rename
        raise FileExistsError(f"{partition_path}: an unfinished swap is in the way")
    sync_staged(partition_path)
    write_atomically(os.path.join(staging, _REPLACES),
                     "".join(f"{b}\n" for b in old_bases), sync_dir=True)
    swap = os.path.join(partition_path, SWAP_DIR)
    os.rename(staging, swap)
    fsync_dir(partition_path)
    return swap


def finish(partition_path: str, delete_old: Callable[[int], None]) -> list[int]:
    """Steps 2 and 3. ``delete_old(base)`` removes an old segment's files (the live log
    releases its maps on the way). Returns the base offsets of the new segments."""
    swap = os.path.join(partition_path, SWAP_DIR)
    replaces = os.path.join(swap, _REPLACES)
    try:
        with open(replaces) as f:
            old = [int(line) for line in f if line.strip()]
    except FileNotFoundError:
        old = None  # step 2 was done
    if old is not None:
        for base in old:
            delete_old(base)
        fsync_dir(partition_path)
        os.unlink(replaces)
        fsync_dir(swap)
    new_bases = set()
    for name in sorted(os.listdir(swap)):
        stem = name.partition(".")[0]
        if stem.isdigit():
            new_bases.add(int(stem))
        os.rename(os.path.join(swap, name), os.path.join(partition_path, name))
    fsync_dir(partition_path)
    os.rmdir(swap)
    fsync_dir(partition_path)
    return sorted(new_bases)


def recover(partition_path: str, delete_old: Callable[[int], None]) -> None:
    """At open: drop an uncommitted clean, finish a committed one."""
    staging = os.path.join(partition_path, STAGING_DIR)
    if os.path.isdir(staging):
        shutil.rmtree(staging, ignore_errors=True)
        log.info("cleaner.uncommitted_dropped", path=staging)
    if os.path.isdir(os.path.join(partition_path, SWAP_DIR)):
        new = finish(partition_path, delete_old)
        log.info("cleaner.swap_finished", path=partition_path, segments=new)
