"""Log compaction against Kafka 4.4: the same writes to a compacted topic on both brokers, and
after each cleaning round the stored batches compared as a Fetch returns them.

The writes: plain keyed records with a tombstone, an aborted and a committed transaction
(confluent-kafka, one batch per record). A write after ``segment.ms`` rolls the segment, and
with ``min.cleanable.dirty.ratio`` near 0 each broker's cleaner (``log.cleaner.backoff.ms``
100 ms on both, tests/reference/settings.py) runs a round. Three rounds, ``delete.retention.ms``
apart, show each rule at work: superseded records and aborted batches go and the tombstone gets
its delete horizon; then the tombstone goes and the ABORT marker gets its horizon; then the
marker goes. Compared per batch: offsets, record count, attributes (with the KIP-534
delete-horizon bit), producer id (by order of appearance), epoch, sequence, and the records'
offsets, keys and values; and the aborted transactions a read_committed Fetch lists. Timestamps
differ between the brokers' clocks and are left out.
"""

from __future__ import annotations

import datetime
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from minibroker.testing.broker import MiniBroker, topic_name
from minibroker_protocol.batch import iter_headers
from minibroker_protocol.records import decode_batch
from tests.reference import settings
from tests.reference.client import Connection, part, req

FETCH, DELETE_RECORDS = 1, 21
SEGMENT_MS = 600
DELETE_RETENTION_MS = 1500
CONFIGS = {"cleanup.policy": "compact", "segment.ms": str(SEGMENT_MS),
           "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": str(DELETE_RETENTION_MS)}


@pytest.fixture(scope="module")
def minibroker_ref():
    with MiniBroker(name="compaction-diff", **settings.minibroker_options()) as mb:
        yield mb


def _fetch(conn: Connection, topic: str, offset: int, isolation: int):
    base = (FETCH, 12)
    fp = part(base, "FetchPartition", partition=0, current_leader_epoch=-1, fetch_offset=offset,
              last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
    r = conn.call(req(FETCH, 12, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0,
                      max_bytes=1 << 20, isolation_level=isolation, session_id=0, session_epoch=-1,
                      rack_id="", forgotten_topics_data=(),
                      topics=(part(base, "FetchTopic", topic=topic, partitions=(fp,)),)))
    p = r.responses[0].partitions[0]
    assert p.error_code == 0, p
    return p


def _listing(port: int, topic: str) -> dict:
    """The whole log as Fetches return it (one segment per answer), and the aborted
    transactions a read_committed Fetch from 0 lists."""
    conn = Connection("127.0.0.1", port)
    try:
        batches: list[tuple] = []
        offset, hw = 0, None
        for _ in range(50):
            p = _fetch(conn, topic, offset, 0)
            hw = p.high_watermark
            got = _batches(p.records or b"")
            if not got:
                break
            batches += got
            offset = got[-1][0] + got[-1][1] + 1
            if offset >= hw:
                break
        aborted = sorted((a.producer_id, a.first_offset)
                         for a in _fetch(conn, topic, 0, 1).aborted_transactions or ())
        return _normalise({"batches": batches, "high_watermark": hw, "aborted": aborted})
    finally:
        conn.close()


def _batches(records: bytes) -> list[tuple]:
    out = []
    for h in iter_headers(records, 0, len(records)):
        recs = decode_batch(memoryview(records)[h.position:h.end])
        out.append((h.base_offset, h.last_offset_delta, h.record_count, h.attributes, h.producer_id,
                    h.producer_epoch, h.base_sequence, h.partition_leader_epoch,
                    tuple((r.offset, r.key, r.value) for r in recs)))
    return out


def _normalise(listing: dict) -> dict:
    pids: dict[int, int] = {}

    def pid(p: int) -> int:
        return p if p < 0 else pids.setdefault(p, len(pids))
    listing["batches"] = [(b[0], b[1], b[2], b[3], pid(b[4]), *b[5:]) for b in listing["batches"]]
    listing["aborted"] = [(pid(p), o) for p, o in listing["aborted"]]
    return listing


def _scenario(bootstrap: str, port: int, topic: str) -> list[dict]:
    """The writes, and the listing after each of the three rounds."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1, config=CONFIGS)],
                        operation_timeout=30)[topic].result(timeout=30)
    for _ in range(100):  # Kafka answers CreateTopics before its partition serves Fetch
        try:
            _listing(port, topic)
            break
        except AssertionError:
            time.sleep(0.1)
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "acks": "all",
                      "linger.ms": 0})
    txp = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-txn", "linger.ms": 0})
    txp.init_transactions(30)

    def send(producer, key: str, value: str | None) -> None:
        producer.produce(topic, key=key, value=value, partition=0)
        assert producer.flush(10) == 0

    for key, value in [("k1", "a1"), ("k2", "b1"), ("k1", "a2"), ("k3", "c1"), ("k2", None)]:
        send(plain, key, value)
    txp.begin_transaction()
    send(txp, "k1", "aborted")
    send(txp, "k4", "aborted")
    txp.abort_transaction(30)
    txp.begin_transaction()
    send(txp, "k3", "c2")
    txp.commit_transaction(30)

    # A transaction left open across the second round: that round stops at the base of the
    # segment holding it (the last stable offset's), on both brokers
    txo = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-open", "linger.ms": 0})
    txo.init_transactions(30)
    rounds = []
    for n in range(3):
        time.sleep((SEGMENT_MS if n == 0 else DELETE_RETENTION_MS) / 1000 + 0.2)
        if n == 1:
            # this append rolls: the open transaction starts the new segment, and the round
            # cleans only what is below it
            txo.begin_transaction()
            send(txo, "k1", "open")
        send(plain, f"k{5 + n}", f"v{n}")  # rolls the segment: what was before it becomes cleanable
        time.sleep(1.0)  # ten cleaner backoffs on either broker: the round is done
        after = _listing(port, topic)
        for _ in range(20):  # settled: two looks half a second apart agree
            time.sleep(0.5)
            again = _listing(port, topic)
            if again == after:
                break
            after = again
        rounds.append(after)
        if n == 1:
            txo.commit_transaction(30)
    rounds.append({"delete_records": _delete_records(port, topic)})
    return rounds


def _delete_records(port: int, topic: str) -> int:
    """DeleteRecords on the compacted topic: Kafka refuses it (POLICY_VIOLATION)."""
    base = (DELETE_RECORDS, 2)
    conn = Connection("127.0.0.1", port)
    try:
        r = conn.call(req(DELETE_RECORDS, 2, timeout=datetime.timedelta(seconds=5), topics=(
            part(base, "DeleteRecordsTopic", name=topic, partitions=(
                part(base, "DeleteRecordsPartition", partition_index=0, offset=1),)),)))
        return r.topics[0].partitions[0].error_code
    finally:
        conn.close()


def test_compaction_rounds_match_kafka(kafka_reference, minibroker_ref):
    topic = topic_name("compaction-diff")
    with ThreadPoolExecutor(2) as pool:
        kafka = pool.submit(_scenario, kafka_reference.bootstrap_servers, kafka_reference.port, topic)
        mini = pool.submit(_scenario, minibroker_ref.bootstrap_servers, minibroker_ref.port, topic)
        k_rounds, m_rounds = kafka.result(timeout=120), mini.result(timeout=120)
    for n, (k, m) in enumerate(zip(k_rounds, m_rounds)):
        assert m == k, f"round {n + 1}: Kafka {k}\n minibroker {m}"
    # and the outcome is compaction's, so two brokers that fail alike do not pass
    first, second, third, refused = k_rounds
    assert refused == {"delete_records": 44}  # POLICY_VIOLATION
    assert (b"k1", b"open") in [(r[1], r[2]) for b in second["batches"] for r in b[8]]
    kv = [(r[1], r[2]) for b in third["batches"] for r in b[8] if not b[3] & 0x20]
    assert (b"k1", b"a1") not in kv and (b"k1", b"aborted") not in kv and (b"k1", b"a2") not in kv
    assert (b"k1", b"open") in kv  # committed in the end: the latest k1
    assert (b"k3", b"c2") in kv and not [v for k, v in kv if k == b"k2"]
    assert first["aborted"] and not third["aborted"]
