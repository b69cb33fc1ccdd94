"""The history of share-partition record deliveries, kept in the data directory so that "why was
record 42 delivered three times?" can still be answered after a restart or a kill -9.

One file, ``share-history.jsonl``, written and bounded exactly as ``txn-history.jsonl`` is
(:mod:`minibroker_storage.txn_history`: one ``O_APPEND`` write per event-loop turn, the last
``per_key`` events of each key and the ``max_keys`` keys most recently written, rewritten from
memory when the file outgrows ``max_bytes``, a torn last line skipped at load). A key is one
share partition, ``[group, topic, partition]`` as JSON (group ids and topic names may hold any
character, so no separator would be safe); an event covers a range of offsets::

    {"key": "[\\"g\\",\\"t\\",0]", "ts": 1700000000000, "first": 40, "last": 49,
     "action": "acquired", "member": "m-1", "state": "ACQUIRED", "count": 1, "lock_ms": ...}

The key ``broker`` holds the broker's starts (``{"ts", "kind": "started"}``): an acquisition is
never persisted (as in Kafka), so a restart silently gives acquired records back, and the story
can only say so by knowing when the broker started.

This is an explanation, not the state: the state is ``__share_group_state``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .txn_history import TxnHistory

HISTORY_FILE = "share-history.jsonl"
BROKER_KEY = "broker"

# A busy partition writes one event per acquisition and one per acknowledgement batch: 4096
# events keep the last few thousand deliveries of each partition.
PER_KEY = 4096
MAX_KEYS = 10_000
MAX_BYTES = 32 * 1024 * 1024


def partition_key(group: str, topic: str, partition: int) -> str:
    return json.dumps([group, topic, partition], ensure_ascii=False, separators=(",", ":"))


def parse_key(key: str) -> tuple[str, str, int] | None:
    """The (group, topic, partition) of a partition key; None for the broker's key or junk."""
    try:
        value = json.loads(key)
    except ValueError:
        return None
    if (isinstance(value, list) and len(value) == 3 and isinstance(value[0], str)
            and isinstance(value[1], str) and isinstance(value[2], int)):
        return value[0], value[1], value[2]
    return None


class ShareHistoryFile(TxnHistory):
    """:class:`TxnHistory`'s file discipline over ``share-history.jsonl``."""

    def __init__(self, data_dir: str | os.PathLike, *, per_key: int = PER_KEY,
                 max_keys: int = MAX_KEYS, max_bytes: int = MAX_BYTES) -> None:
        super().__init__(data_dir, per_key=per_key, max_keys=max_keys, max_bytes=max_bytes)
        self.path = os.path.join(os.fspath(data_dir), HISTORY_FILE)


def read_share_history(data_dir: str | os.PathLike) -> dict[str, list[dict[str, Any]]]:
    """Every key's kept events in a data directory, without writing (for the offline tools)."""
    return ShareHistoryFile.read(data_dir)
