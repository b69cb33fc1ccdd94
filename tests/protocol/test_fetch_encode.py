"""The hand-written Fetch response encoder (v4-v18), checked with kio's reader."""

from __future__ import annotations

import datetime
import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_response_schema
from kio.serial import entity_reader

from minibroker_protocol import codec
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.fetch import (
    MAX_VERSION,
    MIN_VERSION,
    FetchPartition,
    FetchTopic,
    encode_fetch_response,
)
from minibroker_protocol.records import build_batch

VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)
TS = 1_700_000_000_000

BATCH_A = build_batch([{"key": b"k", "value": b"v", "timestamp": TS}], base_offset=10)
BATCH_B = build_batch([{"value": b"x" * 500, "timestamp": TS + i} for i in range(3)], base_offset=11)
SEGMENT = bytearray(BATCH_A + BATCH_B)  # as if mmapped: records are views into it

ID_1 = uuid.UUID("8f7b5b0c-1d2e-4f60-9a3b-7c1d2e3f4a5b")
ID_2 = uuid.UUID(int=1)


def split_header(data: bytes, version: int, corr: int) -> bytes:
    assert struct.unpack_from(">i", data, 0) == (corr,)
    if version >= 12:
        assert data[4] == 0  # response header v1: no tagged fields
        return data[5:]
    return data[4:]


def encode_and_read(corr, version, topics, **kw):
    chunks, total = encode_fetch_response(corr, version, topics, **kw)
    assert all(isinstance(c, bytes | memoryview | bytearray) for c in chunks)
    data = b"".join(bytes(c) for c in chunks)
    assert total == len(data)
    body = split_header(data, version, corr)
    cls = load_response_schema(1, version)
    entity, size = entity_reader(cls)(body, 0)
    assert size == len(body)
    return chunks, body, entity


def check(entity, version, topics, throttle_ms=0, error_code=0, session_id=0):
    assert entity.throttle_time == datetime.timedelta(milliseconds=throttle_ms)
    if version >= 7:
        assert entity.error_code == error_code
        assert entity.session_id == session_id
    if version >= 16:
        assert entity.node_endpoints == ()
    assert len(entity.responses) == len(topics)
    for got, topic in zip(entity.responses, topics):
        if version >= 13:
            # kio reads the all-zero UUID back as None
            assert got.topic_id == (topic.topic_id if topic.topic_id != uuid.UUID(int=0) else None)
            assert not hasattr(got, "topic")
        else:
            assert got.topic == topic.name
            assert not hasattr(got, "topic_id")
        assert len(got.partitions) == len(topic.partitions)
        for gp, p in zip(got.partitions, topic.partitions):
            assert gp.partition_index == p.index
            assert gp.error_code == p.error_code
            assert gp.high_watermark == p.high_watermark
            assert gp.last_stable_offset == p.last_stable_offset
            if version >= 5:
                assert gp.log_start_offset == p.log_start_offset
            else:
                assert not hasattr(gp, "log_start_offset")
            if p.aborted is None:
                assert gp.aborted_transactions is None
            else:
                assert [(a.producer_id, a.first_offset) for a in gp.aborted_transactions] == list(
                    p.aborted
                )
            if version >= 11:
                assert gp.preferred_read_replica == -1
            if version >= 12:
                # tagged fields not sent: kio's defaults
                assert gp.diverging_epoch == type(gp.diverging_epoch)()
                assert gp.current_leader == type(gp.current_leader)()
                assert gp.snapshot_id == type(gp.snapshot_id)()
            if p.records is None:
                assert gp.records is None
            else:
                assert gp.records == bytes(p.records)


def kio_entity(version, topics, throttle_ms=0, error_code=0, session_id=0):
    """The same answer built with kio, to compare bytes."""
    cls = load_response_schema(1, version)
    Topic = nested(cls, "FetchableTopicResponse")
    Partition = nested(cls, "PartitionData")
    Aborted = nested(cls, "AbortedTransaction")
    return build(
        cls,
        throttle_time=datetime.timedelta(milliseconds=throttle_ms),
        error_code=ErrorCode(error_code),
        session_id=session_id,
        responses=tuple(
            build(
                Topic,
                topic=t.name,
                topic_id=t.topic_id if t.topic_id != uuid.UUID(int=0) else None,
                partitions=tuple(
                    build(
                        Partition,
                        partition_index=p.index,
                        error_code=ErrorCode(p.error_code),
                        high_watermark=p.high_watermark,
                        last_stable_offset=p.last_stable_offset,
                        log_start_offset=p.log_start_offset,
                        aborted_transactions=None if p.aborted is None else tuple(
                            Aborted(producer_id=a, first_offset=b) for a, b in p.aborted
                        ),
                        preferred_read_replica=-1,
                        records=None if p.records is None else bytes(p.records),
                    )
                    for p in t.partitions
                ),
            )
            for t in topics
        ),
    )


def mixed_topics():
    seg = memoryview(SEGMENT)
    return [
        FetchTopic("orders", ID_1, [
            FetchPartition(0, high_watermark=12, last_stable_offset=12, log_start_offset=0,
                           aborted=None, records=seg[: len(BATCH_A)]),
            FetchPartition(1, high_watermark=14, last_stable_offset=11, log_start_offset=3,
                           aborted=[(42, 11), (43, 13)], records=seg),
            FetchPartition(2, high_watermark=0, last_stable_offset=0, log_start_offset=0,
                           aborted=[], records=b""),
            FetchPartition(3, error_code=ErrorCode.offset_out_of_range.value,
                           high_watermark=-1, records=None),
            FetchPartition(4, error_code=ErrorCode.not_leader_or_follower.value),
        ]),
        FetchTopic("payments.v2", ID_2, [
            FetchPartition(7, high_watermark=2**63 - 1, last_stable_offset=-(2**63),
                           log_start_offset=5, aborted=[(2**63 - 1, -(2**63))],
                           records=bytes(BATCH_B)),
        ]),
        FetchTopic("no-partitions", None, []),
        FetchTopic("unknown", None, [
            FetchPartition(0, error_code=ErrorCode.unknown_topic_or_partition.value),
        ]),
    ]


# -- examples ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_mixed_response(version):
    topics = mixed_topics()
    chunks, body, entity = encode_and_read(123, version, topics,
                                           throttle_ms=5, error_code=0, session_id=0)
    check(entity, version, topics, throttle_ms=5)
    # identical to what kio itself writes for the same answer
    assert body == codec.encode_body(kio_entity(version, topics, throttle_ms=5))


@pytest.mark.parametrize("version", VERSIONS)
def test_records_are_not_copied(version):
    topics = mixed_topics()
    chunks, _total = encode_fetch_response(1, version, topics)
    record_views = [p.records for t in topics for p in t.partitions if p.records]
    for r in record_views:
        assert any(c is r for c in chunks)


@pytest.mark.parametrize("version", VERSIONS)
def test_empty_response(version):
    _chunks, body, entity = encode_and_read(-1, version, [])
    check(entity, version, [])
    assert body == codec.encode_body(kio_entity(version, []))


@pytest.mark.parametrize("version", VERSIONS)
def test_top_level_error_and_session(version):
    kw = dict(throttle_ms=2**31 - 1, error_code=ErrorCode.fetch_session_id_not_found.value,
              session_id=77)
    _chunks, body, entity = encode_and_read(2**31 - 1, version, [], **kw)
    if version < 7:  # no top-level error code or session id before v7
        kw = dict(throttle_ms=kw["throttle_ms"])
    check(entity, version, [], **kw)
    assert body == codec.encode_body(kio_entity(version, [], **kw))


@pytest.mark.parametrize("version", VERSIONS)
def test_large_records_need_multi_byte_lengths(version):
    big = memoryview(build_batch([{"value": b"v" * 100_000, "timestamp": TS}]))
    topics = [FetchTopic("t", ID_1, [FetchPartition(0, high_watermark=1, records=big),
                                     FetchPartition(1, records=memoryview(BATCH_A))])]
    _chunks, _body, entity = encode_and_read(9, version, topics)
    check(entity, version, topics)


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 13])
def test_missing_topic_id_is_the_zero_uuid(version):
    topics = [FetchTopic("some-topic-name", None, [FetchPartition(0)])]
    chunks, _total = encode_fetch_response(1, version, topics)
    data = b"".join(bytes(c) for c in chunks)
    assert uuid.UUID(int=0).bytes in data
    assert b"some-topic-name" not in data  # v13+ carries no topic name


@pytest.mark.parametrize("version", [v for v in VERSIONS if v < 13])
def test_topic_id_not_sent_before_v13(version):
    topics = [FetchTopic("t", ID_1, [FetchPartition(0)])]
    chunks, _total = encode_fetch_response(1, version, topics)
    data = b"".join(bytes(c) for c in chunks)
    assert ID_1.bytes not in data


# -- hypothesis -------------------------------------------------------------------------------

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
ERRORS = st.sampled_from([e.value for e in ErrorCode])


@st.composite
def records(draw):
    kind = draw(st.sampled_from(["none", "empty", "view", "bytes", "random"]))
    if kind == "none":
        return None
    if kind == "empty":
        return draw(st.sampled_from([b"", memoryview(b"")]))
    if kind == "view":
        seg = memoryview(SEGMENT)
        a = draw(st.integers(0, len(SEGMENT)))
        b = draw(st.integers(a, len(SEGMENT)))
        return seg[a:b]
    if kind == "bytes":
        return bytes(BATCH_A)
    return memoryview(draw(st.binary(max_size=200)))


PARTITIONS = st.builds(
    FetchPartition,
    index=I32,
    error_code=ERRORS,
    high_watermark=I64,
    last_stable_offset=I64,
    log_start_offset=I64,
    aborted=st.none() | st.lists(st.tuples(I64, I64), max_size=3),
    records=records(),
)
TOPICS = st.lists(
    st.builds(FetchTopic, name=st.text(max_size=20), topic_id=st.none() | st.uuids(),
              partitions=st.lists(PARTITIONS, max_size=4)),
    max_size=4,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    version=st.sampled_from(VERSIONS),
    corr=I32,
    topics=TOPICS,
    throttle_ms=st.integers(0, 2**31 - 1),
    error_code=ERRORS,
    session_id=I32,
)
def test_round_trip(version, corr, topics, throttle_ms, error_code, session_id):
    kw = dict(throttle_ms=throttle_ms, error_code=error_code, session_id=session_id)
    _chunks, body, entity = encode_and_read(corr, version, topics, **kw)
    check(entity, version, topics, **kw)
    assert body == codec.encode_body(kio_entity(version, topics, **kw))


def test_version_constants():
    assert (MIN_VERSION, MAX_VERSION) == (4, 18)
    for v in VERSIONS:
        assert load_response_schema(1, v).__flexible__ == (v >= 12)
