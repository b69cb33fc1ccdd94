"""Idempotent produce over the wire: duplicates, sequence gaps, fencing by epoch."""

from __future__ import annotations

import datetime

from minibroker.app import start
from minibroker.config.options import Config, FsyncPolicy
from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.records import build_batch

from . import requests as rq
from .conftest import RawClient


def init_pid(version: int = 4, txn_id=None):
    return rq.req(22, version, transactional_id=txn_id,
                  transaction_timeout=datetime.timedelta(seconds=60),
                  producer_id=-1, producer_epoch=-1)


def idem_batch(pid: int, epoch: int, seq: int, n: int = 3) -> bytes:
    return build_batch([{"key": f"k{seq + i}".encode(), "value": b"v"} for i in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def part(resp):
    return resp.responses[0].partition_responses[0]


async def test_init_producer_id_hands_out_fresh_ids(broker):
    c = await broker.connect()
    ids = []
    for v in range(0, 6):
        resp = await c.call(init_pid(v))
        assert resp.error_code == ErrorCode.none and resp.producer_epoch == 0
        ids.append(resp.producer_id)
    assert len(set(ids)) == len(ids) and ids == sorted(ids)


async def test_producer_ids_survive_restart(tmp_path):
    cfg = Config(port=0, data_dir=tmp_path / "d", fsync=FsyncPolicy("never"))
    seen = []
    for _ in range(3):
        running = await start(cfg)
        c = await RawClient.connect(running.port)
        for _ in range(3):
            seen.append((await c.call(init_pid())).producer_id)
        await c.close()
        await running.close()
    assert len(set(seen)) == 9 and seen == sorted(seen)


async def test_duplicate_batch_is_answered_with_original_offset(broker):
    c = await broker.connect()
    await c.call(rq.metadata(["idem-dup"]))
    pid = (await c.call(init_pid())).producer_id
    await c.call(rq.produce("idem-dup", 0, rq.batch(2)))  # something before, so offsets differ from 0
    first = part(await c.call(rq.produce("idem-dup", 0, idem_batch(pid, 0, 0))))
    second = part(await c.call(rq.produce("idem-dup", 0, idem_batch(pid, 0, 3))))
    assert (first.error_code, first.base_offset) == (0, 2)
    assert (second.error_code, second.base_offset) == (0, 5)
    retry = part(await c.call(rq.produce("idem-dup", 0, idem_batch(pid, 0, 0))))
    assert (retry.error_code, retry.base_offset) == (0, 2)
    lo = await c.call(rq.list_offsets("idem-dup", 0, -1))
    assert lo.topics[0].partitions[0].offset == 8  # 2 + 3 + 3, the retry was not appended


async def test_sequence_gap_is_out_of_order(broker):
    c = await broker.connect()
    await c.call(rq.metadata(["idem-gap"]))
    pid = (await c.call(init_pid())).producer_id
    assert part(await c.call(rq.produce("idem-gap", 0, idem_batch(pid, 0, 0)))).error_code == 0
    gap = part(await c.call(rq.produce("idem-gap", 0, idem_batch(pid, 0, 7))))
    assert gap.error_code == ErrorCode.out_of_order_sequence_number
    assert gap.base_offset == -1


async def test_stale_epoch_is_invalid_producer_epoch(broker):
    c = await broker.connect()
    await c.call(rq.metadata(["idem-epoch"]))
    pid = (await c.call(init_pid())).producer_id
    assert part(await c.call(rq.produce("idem-epoch", 0, idem_batch(pid, 1, 0)))).error_code == 0
    stale = part(await c.call(rq.produce("idem-epoch", 0, idem_batch(pid, 0, 3))))
    assert stale.error_code == ErrorCode.invalid_producer_epoch


async def test_unknown_producer_with_nonzero_sequence(broker):
    # Kafka >= 2.5 (KIP-360): a producer whose state expired comes back at its own
    # sequence and is accepted; the sequence must follow from there.
    c = await broker.connect()
    await c.call(rq.metadata(["idem-unknown"]))
    resp = part(await c.call(rq.produce("idem-unknown", 0, idem_batch(424242, 0, 5))))
    assert (resp.error_code, resp.base_offset) == (ErrorCode.none, 0)
    gap = part(await c.call(rq.produce("idem-unknown", 0, idem_batch(424242, 0, 9))))
    assert gap.error_code == ErrorCode.out_of_order_sequence_number


async def test_partitions_of_one_request_are_judged_separately(broker):
    c = await broker.connect()
    await c.call(rq.metadata(["idem-multi"]))  # 2 partitions
    pid = (await c.call(init_pid())).producer_id
    await c.call(rq.produce("idem-multi", 0, idem_batch(pid, 0, 0)))
    await c.call(rq.produce("idem-multi", 1, idem_batch(pid, 0, 0)))
    from kio.index import load_request_schema

    from minibroker_protocol.build import build, nested
    cls = load_request_schema(0, 9)
    T, P = nested(cls, "TopicProduceData"), nested(cls, "PartitionProduceData")
    req = build(cls, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5),
                topic_data=(build(T, name="idem-multi", partition_data=(
                    build(P, index=0, records=idem_batch(pid, 0, 0)),   # duplicate
                    build(P, index=1, records=idem_batch(pid, 0, 4)),   # a gap on p1 (3 expected)
                )),))
    resp = await c.call(req)
    codes = {p.index: (p.error_code, p.base_offset) for p in resp.responses[0].partition_responses}
    assert codes == {0: (0, 0), 1: (ErrorCode.out_of_order_sequence_number, -1)}


async def test_duplicate_recognised_after_restart(tmp_path):
    cfg = Config(port=0, data_dir=tmp_path / "d", fsync=FsyncPolicy("never"))
    running = await start(cfg)
    c = await RawClient.connect(running.port)
    await c.call(rq.metadata(["idem-restart"]))
    pid = (await c.call(init_pid())).producer_id
    offsets = [part(await c.call(rq.produce("idem-restart", 0, idem_batch(pid, 0, s)))).base_offset
               for s in (0, 3, 6)]
    await c.close()
    await running.close()
    running = await start(cfg)
    c = await RawClient.connect(running.port)
    for seq, off in zip((0, 3, 6), offsets):
        retry = part(await c.call(rq.produce("idem-restart", 0, idem_batch(pid, 0, seq))))
        assert (retry.error_code, retry.base_offset) == (0, off)
    nxt = part(await c.call(rq.produce("idem-restart", 0, idem_batch(pid, 0, 9))))
    assert (nxt.error_code, nxt.base_offset) == (0, 9)
    await c.close()
    await running.close()


async def test_idle_producer_state_expires(tmp_path):
    import asyncio
    cfg = Config(port=0, data_dir=tmp_path / "d", fsync=FsyncPolicy("never"),
                 producer_id_expiration_ms=300, producer_id_expiration_check_interval_ms=100)
    running = await start(cfg)
    c = await RawClient.connect(running.port)
    await c.call(rq.metadata(["idem-expire"]))
    pid = (await c.call(init_pid())).producer_id
    assert part(await c.call(rq.produce("idem-expire", 0, idem_batch(pid, 0, 0)))).error_code == 0
    await asyncio.sleep(0.8)
    # the producer is forgotten, and its next batch is accepted at its own sequence, as
    # Kafka >= 2.5 accepts it (KIP-360): no UNKNOWN_PRODUCER_ID, no abort for the client
    late = part(await c.call(rq.produce("idem-expire", 0, idem_batch(pid, 0, 3))))
    assert (late.error_code, late.base_offset) == (ErrorCode.none, 3)
    # a retry of its batch from before the expiry can no longer be recognised: Kafka
    # behaves the same (OutOfOrderSequence against the state rebuilt from seq 3)
    old = part(await c.call(rq.produce("idem-expire", 0, idem_batch(pid, 0, 0))))
    assert old.error_code == ErrorCode.out_of_order_sequence_number
    await c.close()
    await running.close()
