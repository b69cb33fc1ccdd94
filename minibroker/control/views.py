"""What the web console and ``/metrics`` show, read from the broker at the moment they ask.

Plain functions over a :class:`minibroker.broker.Broker` returning JSON-ready data: partitions
(log start, high watermark, last stable offset and the open transaction holding it back, size
on disk, producers), open transactions, consumer groups (classic and KIP-848) with their lag
under read_committed. Nothing here writes, and nothing is kept between calls: the console polls
and Prometheus scrapes, so the answer is always the broker's present state.

Both callers run on the broker's event loop, between requests, so every structure read here is
consistent without locks.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from minibroker_protocol.topics import is_internal

from ..coordinator.txn.inspect import transaction_row
from ..coordinator.txn.state import TxnState

# A transaction is open from its first partition until its markers are written: what holds
# back a partition's LSO and what transaction.timeout.ms is measured against.
OPEN_STATES = frozenset({TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                         TxnState.PREPARE_EPOCH_FENCE})


def transactional_ids_by_producer(broker: Any) -> dict[int, str]:
    """Producer id → transactional id, for naming who holds a partition's LSO back. The ids a
    transactional id rotated away from (or is about to move to) map to it too, so a
    partition still showing an old producer id is named; the current holder wins a clash."""
    out: dict[int, str] = {}
    current: dict[int, str] = {}
    for tid, meta in broker.txn_coordinator.live():
        current[meta.producer_id] = tid
        for other in (meta.last_producer_id, meta.next_producer_id):
            if other >= 0:
                out[other] = tid
    out.update(current)
    return out


def open_transactions(broker: Any, now_ms: int) -> list[dict[str, Any]]:
    """Every open transaction, oldest first, with its age against its timeout."""
    out = []
    for tid, meta in broker.txn_coordinator.live():
        if meta.state not in OPEN_STATES:
            continue
        start = meta.start_ms if meta.start_ms >= 0 else meta.last_update_ms
        out.append(transaction_row(tid, meta, max(0, now_ms - start)))
    out.sort(key=lambda t: -t["age_ms"])
    return out


def _logs(broker: Any, internal: bool) -> Iterator[tuple[str, int, Any]]:
    for info in sorted(broker.topics(), key=lambda i: i.name):
        if not internal and is_internal(info.name):
            continue
        for p in range(info.partitions):
            plog = broker.get_log(info.name, p)
            if plog is not None and not plog.closed:
                yield info.name, p, plog


def partition(topic: str, p: int, plog: Any, tids: dict[int, str]) -> dict[str, Any]:
    hw = plog.high_watermark
    lso = plog.last_stable_offset
    ongoing = sorted(plog.producer_state_manager.ongoing_transactions.items(), key=lambda kv: kv[1])
    open_txns = [{"producer_id": pid, "transactional_id": tids.get(pid), "first_offset": first}
                 for pid, first in ongoing]
    # The oldest open transaction is the one the LSO stops at (unless it began below the log
    # start, when the LSO is the log start: still that transaction's doing).
    held_by = open_txns[0] if open_txns and lso < hw else None
    producers = []
    for pid, entry in sorted(plog.producer_state.items()):
        producers.append({
            "producer_id": pid, "epoch": entry.epoch, "transactional_id": tids.get(pid),
            "last_sequence": entry.last_seq, "last_offset": entry.last_data_offset,
            "last_timestamp": entry.last_timestamp,
            "txn_first_offset": entry.current_txn_first_offset,
        })
    return {
        "topic": topic, "partition": p, "internal": is_internal(topic),
        "log_start_offset": plog.log_start_offset, "high_watermark": hw,
        "last_stable_offset": lso, "lso_lag": hw - lso, "size_bytes": plog.size_bytes,
        "segments": len(plog.segments), "held_by": held_by, "open_transactions": open_txns,
        "producers": producers,
    }


def partitions(broker: Any, *, internal: bool = True) -> list[dict[str, Any]]:
    tids = transactional_ids_by_producer(broker)
    return [partition(t, p, plog, tids) for t, p, plog in _logs(broker, internal)]


def _stable_offsets(broker: Any) -> dict[tuple[str, int], tuple[int, int]]:
    return {(t, p): (plog.last_stable_offset, plog.high_watermark)
            for t, p, plog in _logs(broker, True)}


def groups(broker: Any, offsets: dict[tuple[str, int], tuple[int, int]] | None = None
           ) -> list[dict[str, Any]]:
    """Consumer groups with their committed offsets and lag. Lag is what a read_committed
    consumer has yet to read: the LSO minus the committed offset (Kafka's
    kafka-consumer-groups.sh measures against the log end; under read_committed the records
    past the LSO cannot be read yet, so they are not counted as behind)."""
    stable = offsets if offsets is not None else _stable_offsets(broker)
    out = []
    for g in sorted(broker.group_coordinator.list_groups(), key=lambda g: g.group_id):
        rows = []
        for (topic, p), off in sorted(g.offsets.items()):
            lso_hw = stable.get((topic, p))
            lso, hw = lso_hw if lso_hw is not None else (None, None)
            rows.append({"topic": topic, "partition": p, "committed": off.offset,
                         "last_stable_offset": lso, "high_watermark": hw,
                         "lag": max(0, lso - off.offset) if lso is not None and off.offset >= 0 else None,
                         "pending_transaction": g.has_pending_txn_offset((topic, p))})
        out.append({
            "group_id": g.group_id, **_membership(broker, g), "offsets": rows,
            "lag": sum(r["lag"] for r in rows if r["lag"] is not None),
        })
    return out


def _membership(broker: Any, g: Any) -> dict[str, Any]:
    c = g.consumer
    if c is not None:  # KIP-848: the broker assigns, so it knows each member's partitions
        members = []
        for m in sorted(c.members.values(), key=lambda m: m.member_id):
            assigned = sorted((broker.topic_name_by_id(tid) or str(tid), p)
                              for tid, ps in m.assigned.items() for p in ps)
            members.append({"member_id": m.member_id, "client_id": m.client_id,
                            "client_host": m.client_host, "instance_id": m.instance_id,
                            "epoch": m.member_epoch, "assigned": [[t, p] for t, p in assigned]})
        return {"type": "consumer", "state": c.state, "epoch": c.group_epoch,
                "protocol_type": "consumer", "protocol": None, "members": members}
    # Classic: the leader assigns inside an opaque blob; members are listed without partitions.
    members = [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                "instance_id": m.instance_id, "epoch": g.generation, "assigned": None}
               for m in sorted(g.members.values(), key=lambda m: m.member_id)]
    return {"type": "classic", "state": g.state.value, "epoch": g.generation,
            "protocol_type": g.protocol_type, "protocol": g.protocol, "members": members}


def overview(broker: Any, now_ms: int, *, internal: bool = True) -> dict[str, Any]:
    """Everything the console's main page shows, in one answer (one poll)."""
    parts = partitions(broker, internal=True)
    stable = {(r["topic"], r["partition"]): (r["last_stable_offset"], r["high_watermark"])
              for r in parts}
    return {
        "now_ms": now_ms, "node_id": broker.node_id, "cluster_id": broker.cluster_id,
        "partitions": [r for r in parts if internal or not r["internal"]],
        "groups": groups(broker, stable),
        "telemetry": telemetry(broker),
    }


def telemetry(broker: Any) -> dict[str, Any]:
    """KIP-714: whether it is served, the subscriptions, and each client instance that asked for
    its subscription (``asks``: its GetTelemetrySubscriptions requests, as ``requests --counts``
    counts them), with what it was asked for and what it pushed. An instance Kafka has
    forgotten (disconnected, expired) is listed as gone with what it was asked for and its last
    push; one asked while no subscription matched it is listed too, asked for nothing."""
    from ..client_metrics.received import client_identity

    manager, received = broker.client_metrics, broker.received_metrics
    pushed = {c["client_instance_id"]: c for c in (received.all() if received is not None else [])}
    live = sorted(manager.live(), key=lambda i: -i.created_ms)
    clients = []
    for inst in [*live, *manager.gone()]:
        identity = client_identity(inst.instance_id, inst.attributes)
        row = pushed.pop(identity["client_instance_id"], None) or {
            **identity, "resource": {}, "pushes": 0, "bytes": 0, "last_push_ms": None,
            "terminated": False, "metrics": []}
        clients.append({**row, "live": inst.gone_reason is None, "gone": inst.gone_reason,
                        "gone_ms": inst.gone_ms, "asks": inst.gets, "push_requests": inst.pushes,
                        "requested_metrics": list(inst.metrics), "push_interval_ms": inst.interval_ms,
                        "subscription_id": inst.subscription_id, "refused": dict(inst.refused)})
    # pushed by an instance no longer remembered at all (beyond the last 1,000 gone)
    clients += [{**row, "live": False, "gone": "forgotten", "gone_ms": None, "asks": None,
                 "push_requests": None, "requested_metrics": None, "push_interval_ms": None,
                 "subscription_id": None, "refused": {}} for row in pushed.values()]
    return {"served": received is not None, "subscriptions": dict(manager.configs), "clients": clients}
