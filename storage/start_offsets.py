"""``log-start-offset-checkpoint``: log start offsets that DeleteRecords moved into a segment.

Kafka's own file and format (OffsetCheckpointFile: a version line ``0``, a count, then
``topic partition offset`` lines) in the data dir, replaced atomically and fsynced before
DeleteRecords is answered: records a client was told are deleted never come back after a crash.
A start offset that sits on a segment boundary needs no entry (the first segment says it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .atomic_file import write_atomically

FILE = "log-start-offset-checkpoint"
CLEANER_FILE = "cleaner-offset-checkpoint"  # the log cleaner's (storage/cleaner.py), same format


class StartOffsetsError(ValueError):
    pass


def load(data_dir: str | os.PathLike, file: str = FILE) -> dict[tuple[str, int], int]:
    """Any of Kafka's OffsetCheckpointFiles (the log cleaner's uses it too)."""
    path = Path(data_dir) / file
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as e:
        raise StartOffsetsError(f"{path}: {e}") from None
    try:
        if lines[0].strip() != "0" or int(lines[1]) != len(lines) - 2:
            raise ValueError("not version 0 with a matching count")
        out = {}
        for line in lines[2:]:
            topic, partition, offset = line.rsplit(" ", 2)
            out[(topic, int(partition))] = int(offset)
        return out
    except (IndexError, ValueError) as e:
        raise StartOffsetsError(f"{path}: {e}") from None


def save(data_dir: str | os.PathLike, offsets: Mapping[tuple[str, int], int], file: str = FILE) -> None:
    body = "".join(f"{t} {p} {o}\n" for (t, p), o in sorted(offsets.items()))
    write_atomically(Path(data_dir) / file, f"0\n{len(offsets)}\n{body}", sync_dir=True)
