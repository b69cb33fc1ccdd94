"""Replace a small file whole: a temp file written and fsynced, then renamed over it; and the
directory fsync that makes such renames durable."""

from __future__ import annotations

import os


def write_atomically(path: str | os.PathLike, data: bytes | str, *, sync_dir: bool = False) -> None:
    """``sync_dir``: also fsync the directory, so the rename itself survives a crash."""
    path = os.fspath(path)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data.encode() if isinstance(data, str) else data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync_dir:
        fsync_dir(os.path.dirname(path) or ".")


def fsync_dir(path: str | os.PathLike) -> None:
    """Make the directory's entries (files created, renamed or removed in it) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
