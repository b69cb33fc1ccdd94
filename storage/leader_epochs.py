"""A partition's leader epochs: at which offset each leader epoch began.

Kafka's LeaderEpochFileCache and its ``leader-epoch-checkpoint`` file (the OffsetCheckpointFile
format: ``0``, a count, then ``epoch start_offset`` lines) in the partition directory. Every
batch appended is stamped with the current epoch; OffsetForLeaderEpoch answers from here, so a
consumer that saw a leader change can tell whether its position is still on the log.

With one broker the epoch is 0 forever, and a cache holding only epoch 0 answers the same
whatever offset it starts at: no file is written for it. The file exists once a leader change
(virtual brokers) added a second epoch.
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right

from .atomic_file import write_atomically

FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochs:
    def __init__(self, directory: str, entries: list[tuple[int, int]] | None = None) -> None:
        self.path = os.path.join(directory, FILE)
        self.entries: list[tuple[int, int]] = list(entries or [])  # (epoch, start offset), ascending

    @classmethod
    def load(cls, directory: str, start_offset: int, end_offset: int) -> LeaderEpochs:
        """The checkpointed epochs within the log's offsets; an unreadable file is treated as
        absent. Without any, epoch 0 from the log end (Kafka assigns the epoch at the log end on
        leading), which needs no file: opening a partition writes nothing."""
        cache = cls._read(directory)
        cache.truncate_from_end(end_offset)
        cache.truncate_from_start(start_offset)
        if not cache.entries:
            cache._put(0, end_offset)
        return cache

    @classmethod
    def _read(cls, directory: str) -> LeaderEpochs:
        cache = cls(directory)
        try:
            with open(cache.path) as f:
                lines = f.read().splitlines()
            if lines[0].strip() != "0" or int(lines[1]) != len(lines) - 2:
                raise ValueError
            for line in lines[2:]:
                epoch, start = line.split()
                cache._put(int(epoch), int(start))
        except (OSError, ValueError, IndexError):
            cache.entries = []
        return cache

    @property
    def latest_epoch(self) -> int | None:
        return self.entries[-1][0] if self.entries else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """A leader epoch begins at ``start_offset`` (LeaderEpochFileCache.assign: a later
        entry conflicting with it, a higher epoch or a start at or past it, goes)."""
        if self.entries and self.entries[-1][0] == epoch and start_offset >= self.entries[-1][1]:
            return False
        self._put(epoch, start_offset)
        self._save()
        return True

    def _put(self, epoch: int, start_offset: int) -> None:
        while self.entries and (self.entries[-1][0] >= epoch or self.entries[-1][1] >= start_offset):
            self.entries.pop()
        self.entries.append((epoch, start_offset))

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as LeaderEpochFileCache.endOffsetFor answers it."""
        if epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if self.entries[-1][0] == epoch:
            return epoch, log_end_offset
        epochs = [e for e, _ in self.entries]
        higher = bisect_right(epochs, epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        floor = higher - 1 if higher > 0 and epochs[higher - 1] <= epoch else None
        if floor is None:
            return epoch, self.entries[higher][1]
        return self.entries[floor][0], self.entries[higher][1]

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved (DeleteRecords, retention): entries before it collapse into one."""
        starts = [s for _, s in self.entries]
        gone = bisect_right(starts, start_offset)
        if gone:
            last_epoch = self.entries[gone - 1][0]
            self.entries = [(last_epoch, start_offset)] + self.entries[gone:]
            self._save()

    def truncate_from_end(self, end_offset: int) -> None:
        """A torn tail was cut at start-up: epochs that began past the end go."""
        keep = bisect_left([s for _, s in self.entries], end_offset)
        if keep < len(self.entries):
            self.entries = self.entries[:keep]
            self._save()

    def _save(self) -> None:
        if len(self.entries) <= 1 and (not self.entries or self.entries[0][0] == 0):
            if os.path.exists(self.path):
                os.unlink(self.path)
            return
        body = "".join(f"{e} {s}\n" for e, s in self.entries)
        write_atomically(self.path, f"0\n{len(self.entries)}\n{body}")
