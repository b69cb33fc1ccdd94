"""Damage in __transaction_state and __consumer_offsets never stops the broker from starting
(issue 13, defect 1): after a clean stop, a well-formed batch whose records do not decode and
20 garbage bytes are appended to each internal segment; the broker starts, says what it
skipped, and the committed transaction's records and offsets are all still there."""

from __future__ import annotations

import os
import struct

from confluent_kafka import Consumer, TopicPartition
from crc32c import crc32c

from minibroker_protocol.batch import CRC_START, HEADER_SIZE, iter_headers, set_base_offset
from minibroker_protocol.records import build_batch

from .clients import create_topic
from .support import log_files
from .test_txn_support import (
    READ_COMMITTED,
    TXN_BROKER_ARGS,
    log_events,
    produce_sync,
    read_all,
    txn_id,
    txn_producer,
)

GARBAGE = bytes(range(0xEC, 0x100))  # 20 bytes


def undecodable_batch(base_offset: int) -> bytes:
    """CRC right (storage keeps it), records wrong: the first record's length is negative."""
    b = bytearray(build_batch([{"key": b"\x00\x01garbage", "value": b"\xff" * 8}]))
    b[HEADER_SIZE] = 0x7F
    struct.pack_into(">I", b, CRC_START - 4, crc32c(bytes(b[CRC_START:])))
    set_base_offset(b, 0, base_offset)
    return bytes(b)


def damage(segment) -> None:
    data = segment.read_bytes()
    next_offset = 0
    for h in iter_headers(data):
        next_offset = h.next_offset
    with open(segment, "ab") as f:
        f.write(undecodable_batch(next_offset) + GARBAGE)
        f.flush()
        os.fsync(f.fileno())


def committed(bootstrap: str, group: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=15)[0].offset
    finally:
        c.close()


def test_damaged_internal_topics_are_skipped_at_start(broker_factory, topic):
    b = broker_factory(TXN_BROKER_ARGS)
    create_topic(b.bootstrap_servers, topic, 1)
    group = f"g-{topic}"
    tid = txn_id("damage")
    p = txn_producer(b.bootstrap_servers, tid)
    p.init_transactions(30)
    p.begin_transaction()
    acked = produce_sync(p, topic, [(0, f"c|{i}".encode()) for i in range(5)])
    meta = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": group})
    p.send_offsets_to_transaction([TopicPartition(topic, 0, 77)], meta.consumer_group_metadata(), 30)
    meta.close()
    p.commit_transaction(30)
    del p

    assert b.stop() == 0
    damaged = [seg for seg in log_files(b.data_dir)
               if seg.parent.name.startswith(("__transaction_state-", "__consumer_offsets-"))
               and seg.stat().st_size > 0]
    assert {s.parent.name.split("-")[0] for s in damaged} == {"__transaction_state", "__consumer_offsets"}
    for seg in damaged:
        damage(seg)

    b.start()
    assert b.running
    skipped = log_events(b, "txn_log.record_skipped") + log_events(b, "group_log.record_skipped")
    assert skipped, b.log_tail(40)
    assert all(e.get("reason") and e.get("offset") for e in skipped), skipped
    assert committed(b.bootstrap_servers, group, topic) == 77
    got = read_all(b, topic, [0], READ_COMMITTED)
    assert sorted(v for _, _, v in got[0]) == sorted(acked)

    # the coordinator still knows the transactional id: a new instance carries on
    p = txn_producer(b.bootstrap_servers, tid)
    p.init_transactions(30)
    p.begin_transaction()
    more = produce_sync(p, topic, [(0, b"d|1")])
    p.commit_transaction(30)
    got = read_all(b, topic, [0], READ_COMMITTED)
    assert sorted(v for _, _, v in got[0]) == sorted(list(acked) + list(more))
