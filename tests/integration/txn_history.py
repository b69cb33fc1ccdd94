"""A long ``__transaction_state`` history, written directly with the broker's own writers.

Running a million client transactions would take hours; the coordinator's log is what a
restart has to read, so this writes that log as the coordinator would: for every committed
transaction the Ongoing, PrepareCommit and CompleteCommit records (one batch each, Kafka's
TransactionLogKey/Value via minibroker_protocol.txn_log), spread over ``ids`` transactional
ids that were each initialised first (Empty). Used by the restart-time tests and::

    python -m tests.integration.txn_history --data-dir DIR --transactions 1000000 \
        [--offset-commits 1000000]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from minibroker_protocol import txn_log as tl
from minibroker_protocol.records import build_batch
from minibroker_protocol.topics import TRANSACTION_STATE_TOPIC
from minibroker_storage.config import LogConfig
from minibroker_storage.manager import LogManager

FIRST_PID = 1_000_000


def generate(data_dir: Path, transactions: int, ids: int = 100, topic: str = "gen-data",
             segment_bytes: int = 100 * 1024 * 1024) -> dict[str, tuple[int, int]]:
    """Write the history; {transactional id: (producer id, epoch)} as it ends."""
    data_dir.mkdir(parents=True, exist_ok=True)
    logs = LogManager(data_dir, LogConfig(segment_bytes=segment_bytes))
    try:
        if logs.topic(TRANSACTION_STATE_TOPIC) is None:
            logs.create_topic(TRANSACTION_STATE_TOPIC, 1, {"cleanup.policy": "compact"})
        plog = logs.get_log(TRANSACTION_STATE_TOPIC, 0)
        now = int(time.time() * 1000)
        keys = [tl.encode_key(f"gen-{i}") for i in range(ids)]

        def write(i: int, state: int, partitions=(), start=-1) -> None:
            value = tl.TxnLogValue(FIRST_PID + i, 0, 60_000, state, partitions, now, start)
            plog.append(build_batch([{"key": keys[i], "value": tl.encode_value(value),
                                      "timestamp": now}]), origin="coordinator")

        for i in range(min(ids, transactions) or ids):
            write(i, tl.EMPTY)
        parts = ((topic, 0),)
        for n in range(transactions):
            i = n % ids
            write(i, tl.ONGOING, parts, now)
            write(i, tl.PREPARE_COMMIT, parts, now)
            write(i, tl.COMPLETE_COMMIT, (), -1)
    finally:
        logs.close_all()
    return {f"gen-{i}": (FIRST_PID + i, 0) for i in range(ids)}


def generate_offsets(data_dir: Path, commits: int, groups: int = 10, partitions: int = 10,
                     topic: str = "gen-data", offsets_partitions: int = 50,
                     segment_bytes: int = 100 * 1024 * 1024) -> None:
    """Plain OffsetCommit history in ``__consumer_offsets`` as the group coordinator writes
    it (one batch per commit, OffsetCommitKey v1 / OffsetCommitValue v3, each group on its
    Kafka partition)."""
    from minibroker.core.java_hash import java_string_hash
    from minibroker_protocol import group_log as gl
    from minibroker_protocol.topics import GROUP_METADATA_TOPIC

    data_dir.mkdir(parents=True, exist_ok=True)
    logs = LogManager(data_dir, LogConfig(segment_bytes=segment_bytes))
    try:
        if logs.topic(GROUP_METADATA_TOPIC) is None:
            logs.create_topic(GROUP_METADATA_TOPIC, offsets_partitions, {"cleanup.policy": "compact"})
        n_parts = logs.topic(GROUP_METADATA_TOPIC).partitions
        now = int(time.time() * 1000)
        names = [f"gen-group-{g}" for g in range(groups)]
        plogs = [logs.get_log(GROUP_METADATA_TOPIC, (java_string_hash(n) & 0x7FFFFFFF) % n_parts)
                 for n in names]
        for n in range(commits):
            g, p = n % groups, (n // groups) % partitions
            value = gl.encode_offset(gl.OffsetValue(n, -1, "", now))
            plogs[g].append(build_batch([{"key": gl.offset_key(names[g], topic, p), "value": value,
                                          "timestamp": now}]), origin="coordinator")
    finally:
        logs.close_all()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--transactions", type=int, default=1_000_000)
    p.add_argument("--ids", type=int, default=100)
    p.add_argument("--offset-commits", type=int, default=0,
                   help="also write this many plain offset commits to __consumer_offsets")
    a = p.parse_args()
    t0 = time.perf_counter()
    generate(a.data_dir, a.transactions, a.ids)
    print(f"wrote {a.transactions} transactions ({3 * a.transactions + a.ids} records) in "
          f"{time.perf_counter() - t0:.1f} s")
    if a.offset_commits:
        t0 = time.perf_counter()
        generate_offsets(a.data_dir, a.offset_commits)
        print(f"wrote {a.offset_commits} offset commits in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
