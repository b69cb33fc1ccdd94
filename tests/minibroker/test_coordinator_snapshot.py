"""Coordinator snapshots (issue 13, defect 5): restart replays only the log after the snapshot;
an unreadable or untrustworthy snapshot is ignored with a log line and the whole log replayed;
the state is the same either way."""

from __future__ import annotations

import os
import uuid

import pytest
from structlog.testing import capture_logs

from minibroker.app import start
from minibroker.config.options import Config, FsyncPolicy
from minibroker.coordinator import snapshot
from minibroker.coordinator.group.coordinator import GroupCoordinator
from minibroker.coordinator.txn.coordinator import TransactionCoordinator
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode

from . import requests as rq
from .conftest import RawClient
from .test_transactions import add_partitions, end_txn, init, prod_code, txn_batch

TXN_FILE = TransactionCoordinator.SNAPSHOT_FILE
GROUP_FILE = GroupCoordinator.SNAPSHOT_FILE


def cfg_for(tmp_path) -> Config:
    return Config(port=0, data_dir=tmp_path / "d", fsync=FsyncPolicy("never"), num_partitions=1,
                  offsets_topic_partitions=3, group_initial_rebalance_delay_ms=0)


def test_encode_decode_round_trip_and_damage():
    tid = uuid.uuid4()
    data = snapshot.encode(tid, {0: 17, 2: 5}, [b"a", b"", b"xyz" * 100])
    snap = snapshot.decode(data)
    assert (snap.topic_id, snap.offsets, snap.entries) == (tid, {0: 17, 2: 5}, [b"a", b"", b"xyz" * 100])
    for bad in (data[:-1], data[:10], b"", b"XXXX" + data[4:], data[:6] + b"\0\0\0\0" + data[10:],
                data + b"\0", data[:4] + b"\0\x09" + data[6:]):
        with pytest.raises(snapshot.SnapshotError):
            snapshot.decode(bad)
    flipped = bytearray(data)
    flipped[-3] ^= 0x40
    with pytest.raises(snapshot.SnapshotError, match="checksum"):
        snapshot.decode(bytes(flipped))


def test_write_atomic_replaces_whole(tmp_path):
    path = str(tmp_path / "x.snapshot")
    snapshot.write_atomic(path, b"one")
    snapshot.write_atomic(path, b"two")
    assert open(path, "rb").read() == b"two"
    assert os.listdir(tmp_path) == ["x.snapshot"]


def txn_state(running):
    return {tid: (m.producer_id, m.producer_epoch, m.state, frozenset(m.partitions), m.timeout_ms,
                  m.start_ms, m.last_update_ms)
            for tid, m in running.broker.txn_coordinator.txns.items()}


def group_state(running):
    return {gid: ({tp: (o.offset, o.metadata, o.log_offset) for tp, o in g.offsets.items()},
                  {pid: {tp: (o.offset, o.log_offset) for tp, o in offs.items()}
                   for pid, offs in g.txn_offsets.items()},
                  g.generation, g.protocol, g.leader, sorted(g.members))
            for gid, g in running.broker.group_coordinator.groups.items()}


def commit_offsets_req(group, topic, offsets):
    from kio.index import load_request_schema
    cls = load_request_schema(8, 8)
    T, P = nested(cls, "OffsetCommitRequestTopic"), nested(cls, "OffsetCommitRequestPartition")
    return build(cls, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                 group_instance_id=None, topics=(build(T, name=topic, partitions=tuple(
                     build(P, partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                           committed_metadata="m") for p, o in offsets.items())),))


def txn_offset_commit_req(tid, group, pid, epoch, topic, offsets):
    from kio.index import load_request_schema
    cls = load_request_schema(28, 3)
    T, P = nested(cls, "TxnOffsetCommitRequestTopic"), nested(cls, "TxnOffsetCommitRequestPartition")
    return build(cls, transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
                 generation_id=-1, member_id="", group_instance_id=None, topics=(build(T, name=topic, partitions=tuple(
                     build(P, partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                           committed_metadata=None) for p, o in offsets.items())),))


async def make_history(c, n_txns: int, tag: str, pending: bool = True):
    """Committed and aborted transactions, plain and transactional offset commits, and (if
    ``pending``) one transaction left open with offsets pending in it."""
    await c.call(rq.metadata([f"snap-{tag}"]))
    topic = f"snap-{tag}"
    for i in range(n_txns):
        tid = f"snap-{tag}-{i % 3}"
        r = await c.call(init(tid))
        pid, ep = r.producer_id, r.producer_epoch
        await c.call(add_partitions(tid, pid, ep, topic, [0]))
        assert prod_code(await c.call(rq.produce(topic, 0, txn_batch(pid, ep, 0)))) == 0
        group = f"g-{tag}-{i % 2}"
        await c.call(rq.req(25, 3, transactional_id=tid, producer_id=pid, producer_epoch=ep,
                            group_id=group))
        await c.call(txn_offset_commit_req(tid, group, pid, ep, topic, {0: 10 + i}))
        assert (await c.call(end_txn(tid, pid, ep, i % 4 != 3))).error_code == 0
        await c.call(commit_offsets_req(f"plain-{tag}", topic, {0: i}))
    if pending:
        tid = f"snap-{tag}-open"
        r = await c.call(init(tid))
        await c.call(add_partitions(tid, r.producer_id, r.producer_epoch, topic, [0]))
        await c.call(rq.req(25, 3, transactional_id=tid, producer_id=r.producer_id,
                            producer_epoch=r.producer_epoch, group_id=f"g-{tag}-open"))
        await c.call(txn_offset_commit_req(tid, f"g-{tag}-open", r.producer_id, r.producer_epoch,
                                           topic, {0: 99}))


async def restart(cfg):
    with capture_logs() as logs:
        running = await start(cfg)
    return running, logs


def events(logs, name):
    return [e for e in logs if e["event"] == name]


async def test_restart_from_snapshot_equals_full_replay(tmp_path):
    cfg = cfg_for(tmp_path)
    running = await start(cfg)
    c = await RawClient.connect(running.port)
    await make_history(c, 12, "a", pending=False)
    await c.close()
    await running.close()
    assert os.path.exists(cfg.data_dir / TXN_FILE) and os.path.exists(cfg.data_dir / GROUP_FILE)

    running, logs = await restart(cfg)
    try:
        from_snapshot = (txn_state(running), group_state(running))
        [loaded] = events(logs, "txn.coordinator_loaded")
        assert loaded["records"] == 0  # nothing after the snapshot
        assert events(logs, "txn.snapshot_loaded") and events(logs, "group.snapshot_loaded")
        [gl] = events(logs, "group.coordinator_loaded")
        assert gl["records"] == 0
    finally:
        await running.close()
    os.unlink(cfg.data_dir / TXN_FILE)
    os.unlink(cfg.data_dir / GROUP_FILE)
    running, logs = await restart(cfg)
    try:
        assert events(logs, "txn.coordinator_loaded")[0]["records"] > 0
        assert (txn_state(running), group_state(running)) == from_snapshot
    finally:
        await running.close()


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage", "other_topic_id", "beyond_log"])
async def test_untrustworthy_snapshot_means_full_replay(tmp_path, damage):
    cfg = cfg_for(tmp_path)
    running = await start(cfg)
    c = await RawClient.connect(running.port)
    await make_history(c, 6, "b")
    await c.close()
    await running.close()
    running, _ = await restart(cfg)  # the reference: loaded from a good snapshot
    reference = (txn_state(running), group_state(running))
    await running.close()
    for name in (TXN_FILE, GROUP_FILE):
        path = cfg.data_dir / name
        data = bytearray(path.read_bytes())
        if damage == "flip":
            data[len(data) // 2] ^= 0x01
        elif damage == "truncate":
            data = data[: len(data) - 7]
        elif damage == "garbage":
            data = bytearray(os.urandom(64))
        else:
            snap = snapshot.decode(bytes(data))
            if damage == "other_topic_id":
                data = snapshot.encode(uuid.uuid4(), snap.offsets, snap.entries)
            else:
                data = snapshot.encode(snap.topic_id, {p: o + 1000 for p, o in snap.offsets.items()},
                                       snap.entries)
        path.write_bytes(bytes(data))
    running, logs = await restart(cfg)
    try:
        assert len(events(logs, "txn.snapshot_ignored")) == 1
        assert len(events(logs, "group.snapshot_ignored")) == 1
        assert events(logs, "txn.coordinator_loaded")[0]["replayed_from"] == 0
        assert (txn_state(running), group_state(running)) == reference
        # and the open transaction still completes
        c = await RawClient.connect(running.port)
        meta = running.broker.txn_coordinator.txns["snap-b-open"]
        r = await c.call(end_txn("snap-b-open", meta.producer_id, meta.producer_epoch, True))
        assert r.error_code == ErrorCode.none
        await c.close()
    finally:
        await running.close()


async def test_periodic_snapshot_then_more_history_then_crash(tmp_path, monkeypatch):
    """A snapshot taken while running, more transactions, then no clean shutdown (the process
    state is simply dropped, as by kill -9): the replay after the snapshot's offset covers it."""
    monkeypatch.setattr(snapshot, "EVERY_RECORDS", 10)
    cfg = cfg_for(tmp_path)
    running = await start(cfg)
    for task in running.broker.background.tasks:  # this test takes the periodic snapshot itself
        task.cancel()
    c = await RawClient.connect(running.port)
    await make_history(c, 6, "c", pending=False)
    for name, coord in running.broker.background.coordinators:
        assert coord.snapshots.due()
        running.broker._snapshot_writer.write(name, running.broker._snapshot_writer.ticket(),
                                              coord.capture_snapshot(), "periodic")
    covered = snapshot.decode((cfg.data_dir / TXN_FILE).read_bytes()).offsets[0]
    await make_history(c, 5, "d")  # after the snapshot, one transaction left open
    expected = (txn_state(running), group_state(running))
    await c.close()
    # "kill -9": no final snapshot, logs released without the clean-shutdown marker (the
    # real process is killed in tests/integration/test_coordinator_snapshot_kill9.py)
    for server in running.servers:
        server.close()
    from minibroker_storage.manager import _unlock
    manager = running.broker.logs
    manager._close_logs(clean=False)
    _unlock(manager._lock_fd)
    manager._lock_fd = -1
    running, logs = await restart(cfg)
    try:
        [loaded] = events(logs, "txn.coordinator_loaded")
        assert loaded["replayed_from"] == covered and loaded["records"] > 0
        assert (txn_state(running), group_state(running)) == expected
    finally:
        await running.close()
