"""Durability work split in two: the writes on the owner's thread, the waiting anywhere.

A periodic flush is mostly waiting: ``fdatasync`` of up to ``flush.ms`` worth of appends
can take hundreds of milliseconds, and a broker that waited on its event loop would serve
nobody meanwhile. Kafka flushes from its scheduler thread, never a request thread
(LogManager's ``kafka-log-flusher`` task, core/src/main/scala/kafka/log/LogManager.scala).

A :class:`SyncJob` owns its descriptors (a ``dup`` of a segment's or one opened for the
job), so the log may append to, roll, seal or delete a segment while the job runs: an
``fsync`` through any descriptor of a file writes that file's dirty pages, and an unlinked
file's descriptor still syncs harmlessly. The owner adds descriptors and callbacks, hands
:meth:`run` to a worker thread, and then calls :meth:`finish` on its own thread, so
every bookkeeping change ("synced up to here") happens where the log is mutated.
"""

from __future__ import annotations

import os
from collections.abc import Callable

__all__ = ["SyncJob"]


class SyncJob:
    __slots__ = ("_fds", "_done", "_undo", "error")

    def __init__(self) -> None:
        self._fds: list[tuple[int, bool]] = []
        self._done: list[Callable[[], None]] = []
        self._undo: list[Callable[[], None]] = []
        self.error: OSError | None = None

    def __len__(self) -> int:
        return len(self._fds)

    def add(self, fd: int, *, data_only: bool = False) -> None:
        """Take ownership of ``fd``; :meth:`run` syncs and closes it."""
        self._fds.append((fd, data_only))

    def open(self, path: str) -> bool:
        """Add a new read-only descriptor of ``path`` (a file or a directory); False if
        the path is gone, which leaves nothing of it to make durable."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        self.add(fd)
        return True

    def on_done(self, fn: Callable[[], None]) -> None:
        """Run by :meth:`finish` when every descriptor synced."""
        self._done.append(fn)

    def on_failure(self, fn: Callable[[], None]) -> None:
        """Run by :meth:`finish` when a sync failed: put back what must be retried."""
        self._undo.append(fn)

    def run(self) -> None:
        """Sync every descriptor, then close them all. Safe on any thread: it touches
        nothing but the job's own descriptors. A failure is kept in ``error``."""
        try:
            for fd, data_only in self._fds:
                if data_only:
                    os.fdatasync(fd)
                else:
                    os.fsync(fd)
        except OSError as exc:
            self.error = exc
        finally:
            self.close()

    def close(self) -> None:
        fds, self._fds = self._fds, []
        for fd, _ in fds:
            os.close(fd)

    def abandon(self) -> None:
        """Give the job up unrun: close its descriptors and put back what it held."""
        self.close()
        for fn in self._undo:
            fn()
        self._done.clear()
        self._undo.clear()

    def wait(self) -> None:
        """Run the job on this thread and record the outcome (:meth:`run`, then
        :meth:`finish`); raise the error if a sync failed."""
        self.run()
        error = self.finish()
        if error is not None:
            raise error

    def finish(self) -> OSError | None:
        """On the owner's thread, after :meth:`run`: record the outcome; returns the error."""
        for fn in self._undo if self.error is not None else self._done:
            fn()
        self._done.clear()
        self._undo.clear()
        return self.error
