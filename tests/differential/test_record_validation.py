"""What the broker checks and stamps in each produced record, against Kafka 4.4 (LogValidator):
message.timestamp.type=LogAppendTime (the batch's attribute bit and maxTimestamp, the answer's
log_append_time_ms, the payload of a compressed batch untouched, idempotent batches too),
message.timestamp.before/after.max.ms refusing records per index with INVALID_TIMESTAMP, a
producer's own LogAppendTime refused, and a compacted topic refusing records without a key
(INVALID_RECORD, one record error per keyless record).

Each answer is compared field by field with Kafka's: error codes, record errors (index and
message, the broker's time in the message replaced by "NOW-bounds"), the error message, and
what a Fetch returns of the stored batch.
"""

from __future__ import annotations

import datetime
import re
import time
import uuid

import pytest

from minibroker_protocol.batch import TIMESTAMP_TYPE_BIT, iter_headers
from minibroker_protocol.records import build_batch, decode_batch
from tests.reference.client import part, req

PRODUCE, FETCH, CREATE_TOPICS, INIT_PID = 0, 1, 19, 22
HOUR = 3_600_000
SUFFIX = uuid.uuid4().hex[:6]


def _name(what: str) -> str:
    return f"rv-{what}-{SUFFIX}"


def _create(pair, name: str, configs: dict[str, str]) -> None:
    base = (CREATE_TOPICS, 5)
    for s in pair.sides:
        r = s.call(req(CREATE_TOPICS, 5, topics=(part(
            base, "CreatableTopic", name=name, num_partitions=1, replication_factor=1, assignments=(),
            configs=tuple(part(base, "CreatableTopicConfig", name=k, value=v) for k, v in configs.items())),),
            timeout=datetime.timedelta(seconds=10), validate_only=False))
        assert r.topics[0].error_code == 0, (s.name, r.topics[0])
        pair._await_leaders(s, [name], 1)


@pytest.fixture(scope="module")
def topics(differential_pair):
    made = {
        "lat": {"message.timestamp.type": "LogAppendTime"},
        "bounded": {"message.timestamp.before.max.ms": str(HOUR), "message.timestamp.after.max.ms": str(HOUR)},
        "create": {},
        "compacted": {"cleanup.policy": "compact"},
        "compacted-lat": {"cleanup.policy": "compact,delete", "message.timestamp.type": "LogAppendTime"},
    }
    for what, configs in made.items():
        _create(differential_pair, _name(what), configs)
    return {what: _name(what) for what in made}


def _produce(topic: str, blob: bytes, version: int = 11):
    base = (PRODUCE, version)
    pd = part(base, "PartitionProduceData", index=0, records=blob)
    return req(PRODUCE, version, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5),
               topic_data=(part(base, "TopicProduceData", name=topic, partition_data=(pd,)),))


def _fetch(s, topic: str, offset: int):
    base = (FETCH, 12)
    fp = part(base, "FetchPartition", partition=0, current_leader_epoch=-1, fetch_offset=offset,
              last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
    r = s.call(req(FETCH, 12, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20,
                   isolation_level=0, session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=(),
                   topics=(part(base, "FetchTopic", topic=topic, partitions=(fp,)),)))
    p = r.responses[0].partitions[0]
    assert p.error_code == 0, (s.name, p)
    return bytes(p.records or b"")


def _ms(when: datetime.datetime | None) -> int:
    """log_append_time_ms as kio decodes it (-1 is None)."""
    return -1 if when is None else round(when.timestamp() * 1000)


# the broker's own time in a message: "[1700000000000, 1700003600000]" and similar
_BOUNDS = re.compile(r"\[-?\d+, -?\d+\]")


def _answer(r) -> dict:
    p = r.responses[0].partition_responses[0]
    return {"error": p.error_code, "base_offset": p.base_offset, "log_start_offset": p.log_start_offset,
            "stamped": _ms(p.log_append_time) != -1,
            "message": _BOUNDS.sub("[NOW-bounds]", message) if (message := getattr(p, "error_message", None))
            else None,
            "record_errors": [(e.batch_index, _BOUNDS.sub("[NOW-bounds]", e.batch_index_error_message or ""))
                              for e in getattr(p, "record_errors", ())]}


def _both(pair, what: str, topic: str, blob: bytes, version: int = 11) -> tuple[dict, list[int]]:
    """Both answers equal; returns Kafka's and the log_append_time of each."""
    before = int(time.time() * 1000)
    k, m = pair.both(lambda s: _produce(topic, blob, version))
    after = int(time.time() * 1000)
    ak, am = _answer(k), _answer(m)
    assert ak == am, f"{what}:\n  kafka      {ak}\n  minibroker {am}"
    times = [_ms(r.responses[0].partition_responses[0].log_append_time) for r in (k, m)]
    for t in times:
        assert t == -1 or before - 1000 <= t <= after + 1000, (what, times, before, after)
    return ak, times


def _stored(pair, topic: str, offset: int) -> list[dict]:
    """The batches each broker returns from ``offset``, as comparable dicts (timestamps checked apart)."""
    out = []
    for s in pair.sides:
        data = _fetch(s, topic, offset)
        out.append([{"base_offset": h.base_offset, "attributes": h.attributes, "count": h.record_count,
                     "max_timestamp": h.max_timestamp, "base_timestamp": h.base_timestamp,
                     "records": [(r.offset, r.timestamp, r.key, r.value) for r in decode_batch(data, h.position)]}
                    for h in iter_headers(data)])
    return out


def test_log_append_time_stamps_each_batch(differential_pair, topics):
    pair, topic = differential_pair, topics["lat"]
    old = int(time.time() * 1000) - 5 * HOUR
    records = [{"key": b"k%d" % i, "value": b"v%d" % i, "timestamp": old + i} for i in range(3)]
    offset = 0
    # (not lz4: the reference Kafka answers UNKNOWN_SERVER_ERROR to the frames build_batch makes)
    for codec in ("none", "gzip", "zstd", "snappy"):
        blob = build_batch(records, compression=codec)
        answer, times = _both(pair, f"Produce {codec} to LogAppendTime", topic, blob)
        assert answer["error"] == 0 and answer["stamped"], answer
        k, m = _stored(pair, topic, offset)
        assert len(k) == len(m) == 1, (k, m)
        for batch, stamped_at in zip((k[0], m[0]), times):
            # the bit set, maxTimestamp the time answered, the producer's base timestamp and
            # compression kept (no recompression), every record read at the append time
            assert batch["attributes"] & TIMESTAMP_TYPE_BIT, batch
            assert batch["max_timestamp"] == stamped_at, (batch, stamped_at)
            assert batch["base_timestamp"] == old, batch
            assert [r[1] for r in batch["records"]] == [stamped_at] * 3, batch
        assert k[0]["attributes"] == m[0]["attributes"], (codec, k[0], m[0])
        assert [(r[0], r[2], r[3]) for r in k[0]["records"]] == [(r[0], r[2], r[3]) for r in m[0]["records"]]
        offset += 3


def test_log_append_time_idempotent_batch(differential_pair, topics):
    pair, topic = differential_pair, topics["lat"]
    pids = []
    for s in pair.sides:
        for _ in range(100):  # Kafka's producer-id manager may still be loading (COORDINATOR_LOAD_IN_PROGRESS)
            r = s.call(req(INIT_PID, 4, transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60),
                           producer_id=-1, producer_epoch=-1))
            if r.error_code != 14:
                break
            time.sleep(0.1)
        assert r.error_code == 0, r
        pids.append((r.producer_id, r.producer_epoch))
    answers = []
    for seq in (0, 2, 2):  # the second send of sequence 2 is a retry: answered with its first offsets
        per_side = []
        for s, (pid, epoch) in zip(pair.sides, pids):
            blob = build_batch([(b"a", b"1"), (b"b", b"2")], compression="gzip", producer_id=pid,
                               producer_epoch=epoch, base_sequence=seq)
            p = s.call(_produce(topic, blob)).responses[0].partition_responses[0]
            per_side.append((p.error_code, _ms(p.log_append_time) != -1))
        answers.append(per_side)
    assert all(k == m == (0, True) for k, m in answers), answers


def test_timestamp_bounds_refuse_records_by_index(differential_pair, topics):
    pair = differential_pair
    now = int(time.time() * 1000)
    blob = build_batch([{"value": b"ok", "timestamp": now}, {"value": b"old", "timestamp": now - 3 * HOUR},
                        {"value": b"new", "timestamp": now + 3 * HOUR}, {"value": b"ok", "timestamp": now + 5}])
    for version in (7, 11):
        answer, times = _both(pair, f"Produce v{version} out-of-bounds timestamps", topics["bounded"], blob, version)
        assert answer["error"] == 32, answer  # INVALID_TIMESTAMP
        assert times == [-1, -1]
        if version >= 8:
            assert [i for i, _ in answer["record_errors"]] == [1, 2], answer
            assert all(m.startswith("Timestamp ") for _, m in answer["record_errors"]), answer
            assert answer["message"] == "One or more records have been rejected due to invalid timestamp", answer
    answer, _ = _both(pair, "Produce within bounds", topics["bounded"],
                      build_batch([{"value": b"fine", "timestamp": now - HOUR // 2}]))
    assert answer["error"] == 0 and not answer["stamped"], answer


def test_producer_log_append_time_refused(differential_pair, topics):
    pair = differential_pair
    blob = build_batch([(b"k", b"v"), (b"k2", b"v2")], timestamp_type=1)
    for what in ("lat", "create", "bounded"):
        answer, _ = _both(pair, f"Produce with the producer's LogAppendTime to {what}", topics[what], blob)
        # a CreateTime topic takes it as CreateTime maxTimestamp, checked against its bounds only
        assert answer["error"] == (32 if what == "lat" else 0), (what, answer)
        if what == "lat":
            assert "Producer should not set timestamp type to LogAppendTime" in answer["record_errors"][0][1]


def test_compacted_topic_refuses_records_without_key(differential_pair, topics):
    pair = differential_pair
    now = int(time.time() * 1000)
    for what in ("compacted", "compacted-lat"):
        for codec in ("none", "gzip"):
            blob = build_batch([(b"k", b"1"), (None, b"2"), (b"k", b"3"), (None, b"4"), (None, b"5"),
                                (None, b"6")], compression=codec)
            for version in (7, 8, 11):
                answer, times = _both(pair, f"Produce v{version} {codec} keyless to {what}", topics[what], blob,
                                      version)
                assert answer["error"] == 87, answer  # INVALID_RECORD
                assert times == [-1, -1], times
                if version >= 8:
                    assert [i for i, _ in answer["record_errors"]] == [1, 3, 4, 5], answer
                    assert answer["record_errors"][0][1].startswith(
                        "Compacted topic cannot accept message without key in topic partition"), answer
    # keys everywhere: accepted; a tombstone (key, no value) is a keyed record
    answer, _ = _both(pair, "Produce keyed to compacted", topics["compacted"],
                      build_batch([(b"a", b"1"), (b"b", None)]))
    assert answer["error"] == 0, answer
    # one keyless record among none: index 0
    single = build_batch([{"key": None, "value": b"x", "timestamp": now}])
    answer, _ = _both(pair, "Produce one keyless record to compacted", topics["compacted"], single)
    assert answer["error"] == 87 and [i for i, _ in answer["record_errors"]] == [0], answer


def test_default_after_max_is_an_hour(differential_pair, topics):
    """Kafka 4.0 made message.timestamp.after.max.ms an hour (KIP-937): a topic without the config
    refuses a record from two hours ahead, and takes one from half an hour ahead."""
    pair = differential_pair
    now = int(time.time() * 1000)
    blob = build_batch([{"value": b"soon", "timestamp": now + HOUR // 2},
                        {"value": b"later", "timestamp": now + 2 * HOUR}])
    answer, _ = _both(pair, "Produce two hours ahead to a default topic", topics["create"], blob)
    assert answer["error"] == 32 and [i for i, _ in answer["record_errors"]] == [1], answer
    answer, _ = _both(pair, "Produce half an hour ahead to a default topic", topics["create"],
                      build_batch([{"value": b"soon", "timestamp": now + HOUR // 2}]))
    assert answer["error"] == 0, answer
