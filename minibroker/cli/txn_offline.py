"""`minibroker txn ... --data-dir DIR`: the same answers from a data directory, no broker needed
(read-only: the broker may be running on it, or may never start again after a crash).

The coordinator's view is the last value of each transactional id in ``__transaction_state``,
the history is ``txn-history.jsonl`` (``minibroker_storage.txn_history``), the partitions' open
transactions are what a walk of each log leaves open (``minibroker_storage.offline``).
"""

from __future__ import annotations

from typing import Any

from minibroker_protocol import txn_log as tl
from minibroker_protocol.records import decode_batch
from minibroker_protocol.topics import TRANSACTION_STATE_TOPIC
from minibroker_storage import offline
from minibroker_storage.txn_history import read_history

from ..coordinator.txn.explain import Explanation, explain, explain_producer
from ..coordinator.txn.inspect import transaction_row
from ..coordinator.txn.state import TxnState
from ..coordinator.txn.timeline import BROKER_KEY, pid_key, txn_key


def coordinator_view(data_dir: str) -> dict[str, tl.TxnLogValue]:
    """Each transactional id's last value in __transaction_state (expired ids left out)."""
    out: dict[str, tl.TxnLogValue] = {}
    for pdir in offline.partition_dirs(data_dir):
        if pdir.topic != TRANSACTION_STATE_TOPIC:
            continue
        for header, batch, _seg in offline.iter_batches(pdir.path):
            if header.is_control:
                continue
            for rec in decode_batch(batch):
                try:
                    tid = tl.decode_key(rec.key)
                    value = tl.decode_value(rec.value) if rec.value is not None else None
                except tl.TxnLogFormatError:
                    continue
                if value is None:
                    out.pop(tid, None)
                else:
                    out[tid] = value
    return out


def list_transactions(data_dir: str) -> list[dict[str, Any]]:
    return [transaction_row(tid, v, None) for tid, v in sorted(coordinator_view(data_dir).items())
            if TxnState(v.state) != TxnState.DEAD]


def timeline(data_dir: str, tid: str) -> Explanation:
    history = read_history(data_dir)
    events = history.get(txn_key(tid), [])
    v = coordinator_view(data_dir).get(tid)
    open_txn = None
    if v is not None and TxnState(v.state) == TxnState.ONGOING:
        # A data dir has no "now": the story stops at the last thing written.
        open_txn = {"start_ms": v.start_ms, "timeout_ms": v.timeout_ms, "partitions": sorted(v.partitions)}
    last = max((e.get("ts", 0) for e in events), default=None)
    x = explain(tid, events, last if open_txn else None, open_txn, history.get(BROKER_KEY, []))
    x.known = x.known or v is not None
    return x


def producer_timeline(data_dir: str, producer_id: int) -> Explanation:
    return explain_producer(producer_id, read_history(data_dir).get(pid_key(producer_id), []))


def hanging(data_dir: str) -> list[dict[str, Any]]:
    """Transactions left open in a partition's log that the coordinator does not hold open there."""
    view = coordinator_view(data_dir)
    by_pid = {v.producer_id: (tid, v) for tid, v in view.items()}
    out = []
    for pdir in offline.partition_dirs(data_dir):
        summary = offline.summarize(pdir.path)
        for pid, first in summary.open_txns.items():
            tid, v = by_pid.get(pid, (None, None))
            if (v is not None and TxnState(v.state) == TxnState.ONGOING
                    and (pdir.topic, pdir.partition) in v.partitions):
                continue
            out.append({"topic": pdir.topic, "partition": pdir.partition, "producer_id": pid,
                        "start_offset": first, "transactional_id": tid,
                        "reason": "the coordinator does not hold this transaction open here"})
    return out
