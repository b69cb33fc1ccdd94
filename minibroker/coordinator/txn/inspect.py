"""What `minibroker txn list|hanging|abort|explain` read from a running broker, as plain data.

``list_transactions`` is the coordinator's view (kafka-transactions.sh ``list`` / ``describe``);
``hanging`` is the partitions' view (``find-hanging``): a transaction open in a partition's
producer state that the coordinator does not hold open with that partition — its marker will
never come, and the partition's last stable offset is stuck behind it until someone aborts it —
or one open longer than ``transaction.max.timeout.ms``. ``abort`` writes that abort marker
(``kafka-transactions.sh abort``, Kafka's WriteTxnMarkers to the leader).
"""

from __future__ import annotations

from typing import Any

from minibroker_protocol.errors import ErrorCode

from .explain import explain, explain_producer
from .state import TxnState

COORDINATOR_EPOCH = 0


def transaction_row(tid: str, v: Any, age_ms: int | None) -> dict[str, Any]:
    """One transactional id as `txn list`, /v1/transactions and the console show it; ``v`` is
    the coordinator's TxnMetadata or a TxnLogValue read from __transaction_state."""
    return {"transactional_id": tid, "producer_id": v.producer_id, "epoch": v.producer_epoch,
            "state": TxnState(v.state).kafka_name, "timeout_ms": v.timeout_ms, "start_ms": v.start_ms,
            "age_ms": age_ms, "last_update_ms": v.last_update_ms,
            "partitions": sorted([t, p] for t, p in v.partitions)}


def list_transactions(broker: Any) -> list[dict[str, Any]]:
    now = broker.clock.wall_ms()
    return [transaction_row(tid, meta, now - meta.start_ms
                            if meta.state == TxnState.ONGOING and meta.start_ms > 0 else None)
            for tid, meta in broker.txn_coordinator.live()]


def timeline(broker: Any, tid: str) -> dict[str, Any]:
    meta = broker.txn_coordinator.describe(tid)
    open_txn = None
    if meta is not None and meta.state == TxnState.ONGOING:
        open_txn = {"start_ms": meta.start_ms, "timeout_ms": meta.timeout_ms,
                    "partitions": sorted(meta.partitions)}
    x = explain(tid, broker.timeline.events(tid), broker.clock.wall_ms(), open_txn,
                broker.timeline.broker_events())
    x.known = x.known or meta is not None
    out = x.as_dict()
    out["state"] = meta.state_name if meta is not None else None
    out["text"] = x.text()
    return out


def producer_timeline(broker: Any, producer_id: int) -> dict[str, Any]:
    x = explain_producer(producer_id, broker.timeline.producer_events(producer_id))
    return {**x.as_dict(), "producer_id": producer_id, "text": x.text()}


def hanging(broker: Any, max_age_ms: int | None = None) -> list[dict[str, Any]]:
    """Open transactions of every partition that the coordinator will not end, or that are
    older than ``max_age_ms`` (default: transaction.max.timeout.ms)."""
    now = broker.clock.wall_ms()
    limit = broker.config.transaction_max_timeout_ms if max_age_ms is None else max_age_ms
    machine = broker.txn_coordinator.machine
    out = []
    for info in broker.logs.topics():
        for p in range(info.partitions):
            plog = broker.logs.get_log(info.name, p)
            if plog is None:
                continue
            states = plog.producer_state
            for pid, first in plog.producer_state_manager.ongoing_transactions.items():
                entry = states.get(pid)
                tid = machine.transactional_id_of(pid)
                meta = machine.txns.get(tid) if tid is not None else None
                known = (meta is not None and meta.state == TxnState.ONGOING
                         and (info.name, p) in meta.partitions)
                last_ts = entry.last_timestamp if entry is not None else -1
                age = now - last_ts if last_ts > 0 else None
                if known and (age is None or age <= limit):
                    continue
                out.append({"topic": info.name, "partition": p, "producer_id": pid,
                            "producer_epoch": entry.epoch if entry is not None else -1,
                            "coordinator_epoch": entry.coordinator_epoch if entry is not None else -1,
                            "start_offset": first, "last_timestamp": last_ts, "age_ms": age,
                            "transactional_id": tid,
                            "reason": ("open longer than transaction.max.timeout.ms" if known else
                                       "the coordinator does not hold this transaction open here")})
    return out


class AbortError(ValueError):
    pass


def abort(broker: Any, topic: str, partition: int, *, start_offset: int | None = None,
          producer_id: int | None = None, producer_epoch: int | None = None) -> dict[str, Any]:
    """Write an abort marker for an open transaction of one partition, found by its first
    offset (``--start-offset``) or given by producer id and epoch."""
    info = broker.logs.topic(topic)
    if info is None or not 0 <= partition < info.partitions:
        raise AbortError(f"no partition {topic}-{partition}")
    plog = broker.logs.get_log(topic, partition)
    ongoing = dict(plog.producer_state_manager.ongoing_transactions)
    if start_offset is not None:
        found = [pid for pid, first in ongoing.items() if first == start_offset]
        if not found:
            raise AbortError(f"no open transaction starts at offset {start_offset} of {topic}-{partition}")
        producer_id = found[0]
    if producer_id is None:
        raise AbortError("give start_offset, or producer_id (and producer_epoch)")
    entry = plog.producer_state.get(producer_id)
    if producer_id not in ongoing:
        raise AbortError(f"producer {producer_id} has no open transaction in {topic}-{partition}")
    epoch = producer_epoch if producer_epoch is not None else (entry.epoch if entry is not None else 0)
    coordinator = broker.txn_coordinator
    errors = coordinator.write_markers_told(producer_id, epoch, False, COORDINATOR_EPOCH,
                                            [(topic, partition)], by="txn abort (an operator)")
    code = errors.get((topic, partition), ErrorCode.unknown_server_error)
    offset = next((marker_offset for t, p, _first, marker_offset in coordinator.write_markers.written
                   if (t, p) == (topic, partition)), None)
    return {"topic": topic, "partition": partition, "producer_id": producer_id, "producer_epoch": epoch,
            "error": code.name.upper(), "marker_offset": offset}
