"""The hand-written Produce request decoder (v3-v12) against kio's encoder."""

from __future__ import annotations

import datetime
import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema

from minibroker_protocol import codec
from minibroker_protocol.batch import validate_produce_records
from minibroker_protocol.build import nested
from minibroker_protocol.header import write_uvarint
from minibroker_protocol.produce import (
    FLEXIBLE_FROM,
    MAX_VERSION,
    MIN_VERSION,
    ProduceDecodeError,
    ProducePartition,
    ProduceRequest,
    ProduceTopic,
    decode_produce,
)
from minibroker_protocol.records import Record, build_batch

VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)
TS = 1_700_000_000_000

BATCHES = [
    build_batch([{"key": b"k", "value": b"v", "timestamp": TS}]),
    build_batch(
        [{"key": None, "value": b"x" * 300, "timestamp": TS + i, "headers": [("h", b"1")]}
         for i in range(5)],
        producer_id=42, producer_epoch=1, base_sequence=7,
    ),
    build_batch([Record(0, TS, b"a", None), Record(0, TS, None, b"b")], transactional=True,
                producer_id=9, producer_epoch=0, base_sequence=0),
    build_batch([{"value": b"z" * 2000, "timestamp": TS}], compression="gzip"),
]


def test_batches_are_valid_produce_records():
    for b in BATCHES:
        validate_produce_records(memoryview(b))


# -- building requests with kio -------------------------------------------------------


def kio_request(version, transactional_id, acks, timeout_ms, topics):
    """``topics``: [(name, [(index, records bytes | None)])]"""
    cls = load_request_schema(0, version)
    Topic = nested(cls, "TopicProduceData")
    Partition = nested(cls, "PartitionProduceData")
    return cls(
        transactional_id=transactional_id,
        acks=acks,
        timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=tuple(
            Topic(**_topic_key(version, name), partition_data=tuple(
                Partition(index=index, records=records) for index, records in parts
            ))
            for name, parts in topics
        ),
    )


def _topic_key(version: int, name: str) -> dict:
    # v13 names a topic by its id (KIP-516): a test id made from the name
    return {"topic_id": uuid.uuid5(uuid.NAMESPACE_DNS, name)} if version >= 13 else {"name": name}


def check_decoded(req: ProduceRequest, body: memoryview, version, transactional_id, acks,
                  timeout_ms, topics):
    assert isinstance(req, ProduceRequest)
    assert req.version == version
    assert req.transactional_id == transactional_id
    assert req.acks == acks
    assert req.timeout_ms == timeout_ms
    assert len(req.topics) == len(topics)
    for got, (name, parts) in zip(req.topics, topics):
        assert isinstance(got, ProduceTopic)
        if version >= 13:
            assert (got.name, got.topic_id) == ("", uuid.uuid5(uuid.NAMESPACE_DNS, name))
        else:
            assert (got.name, got.topic_id) == (name, None)
        assert len(got.partitions) == len(parts)
        for gp, (index, records) in zip(got.partitions, parts):
            assert isinstance(gp, ProducePartition)
            assert gp.index == index
            if records is None:
                assert gp.records is None
            else:
                assert isinstance(gp.records, memoryview)
                assert gp.records.tobytes() == records
                assert gp.records.obj is body.obj  # a view of the request, not a copy


def roundtrip(version, transactional_id, acks, timeout_ms, topics):
    entity = kio_request(version, transactional_id, acks, timeout_ms, topics)
    body = memoryview(codec.encode_body(entity))
    req = decode_produce(body, version)
    check_decoded(req, body, version, transactional_id, acks, timeout_ms, topics)
    return body


# -- examples ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_typical_request(version):
    roundtrip(version, None, -1, 30_000, [
        ("orders", [(0, BATCHES[0]), (1, BATCHES[1])]),
        ("payments.v2", [(7, BATCHES[3])]),
    ])


@pytest.mark.parametrize("version", VERSIONS)
def test_transactional_request(version):
    roundtrip(version, "txn-äöü-1", 1, 1, [("t", [(0, BATCHES[2])])])


@pytest.mark.parametrize("version", VERSIONS)
def test_null_and_empty_records(version):
    roundtrip(version, "", 0, 0, [("t", [(0, None), (1, b""), (2, BATCHES[0])]), ("u", [(3, None)])])


@pytest.mark.parametrize("version", VERSIONS)
def test_no_topics_and_no_partitions(version):
    roundtrip(version, None, 1, 100, [])
    roundtrip(version, None, 1, 100, [("empty", [])])


@pytest.mark.parametrize("version", VERSIONS)
def test_extreme_integers(version):
    roundtrip(version, None, -(2**15), 2**31 - 1, [("t", [(2**31 - 1, None), (-(2**31), b"")])])
    roundtrip(version, None, 2**15 - 1, -(2**31), [("", [(0, BATCHES[0])])])


@pytest.mark.parametrize("version", VERSIONS)
def test_large_records(version):
    # records longer than 127/16383 bytes need multi-byte varint lengths (v9+)
    big = build_batch([{"value": b"v" * 70_000, "timestamp": TS}])
    roundtrip(version, None, -1, 1000, [("t", [(0, big), (1, BATCHES[1])])])


@pytest.mark.parametrize("version", VERSIONS)
def test_bytes_body_is_accepted(version):
    entity = kio_request(version, None, 1, 5, [("t", [(0, BATCHES[0])])])
    req = decode_produce(codec.encode_body(entity), version)
    assert bytes(req.topics[0].partitions[0].records) == BATCHES[0]


# -- hypothesis ---------------------------------------------------------------------------

RECORDS = st.one_of(st.none(), st.sampled_from(BATCHES), st.binary(max_size=300))
TOPICS = st.lists(
    st.tuples(
        st.text(max_size=20),
        st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), RECORDS), max_size=4),
    ),
    max_size=4,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    version=st.sampled_from(VERSIONS),
    transactional_id=st.none() | st.text(max_size=20),
    acks=st.integers(-(2**15), 2**15 - 1),
    timeout_ms=st.integers(-(2**31), 2**31 - 1),
    topics=TOPICS,
)
def test_round_trip(version, transactional_id, acks, timeout_ms, topics):
    roundtrip(version, transactional_id, acks, timeout_ms, topics)


# -- malformed requests ----------------------------------------------------------------------


def _decode_or_error(body, version):
    try:
        decode_produce(body, version)
    except ProduceDecodeError:
        pass


@pytest.mark.parametrize("version", VERSIONS)
def test_truncated_at_every_cut_point(version):
    entity = kio_request(version, "tx", -1, 100, [
        ("a", [(0, BATCHES[0]), (1, None)]), ("b", [(2, b"")]), ("c", []),
    ])
    body = codec.encode_body(entity)
    for cut in range(len(body)):
        with pytest.raises(ProduceDecodeError):
            decode_produce(memoryview(body)[:cut], version)


@settings(max_examples=60, deadline=None)
@given(
    version=st.sampled_from(VERSIONS),
    transactional_id=st.none() | st.text(max_size=5),
    topics=st.lists(
        st.tuples(st.text(max_size=5),
                  st.lists(st.tuples(st.integers(-5, 5), RECORDS), max_size=2)),
        max_size=2,
    ),
    data=st.data(),
)
def test_truncated_hypothesis(version, transactional_id, topics, data):
    body = codec.encode_body(kio_request(version, transactional_id, 1, 1, topics))
    cut = data.draw(st.integers(0, len(body) - 1))
    with pytest.raises(ProduceDecodeError):
        decode_produce(memoryview(body)[:cut], version)


@pytest.mark.parametrize("version", VERSIONS)
def test_trailing_bytes(version):
    body = codec.encode_body(kio_request(version, None, 1, 1, [("t", [(0, BATCHES[0])])]))
    for extra in (b"\x00", b"\xff" * 9):
        with pytest.raises(ProduceDecodeError):
            decode_produce(memoryview(body + extra), version)


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(VERSIONS), garbage=st.binary(max_size=100))
def test_garbage_raises_only_produce_decode_error(version, garbage):
    _decode_or_error(memoryview(garbage), version)


@settings(max_examples=200, deadline=None)
@given(version=st.sampled_from(VERSIONS), data=st.data())
def test_corrupted_byte_raises_only_produce_decode_error(version, data):
    body = bytearray(codec.encode_body(
        kio_request(version, "tx", 1, 1, [("a", [(0, BATCHES[0]), (1, None)])])
    ))
    pos = data.draw(st.integers(0, len(body) - 1))
    body[pos] = data.draw(st.integers(0, 255))
    _decode_or_error(memoryview(bytes(body)), version)


# Hand-made bodies for the error branches --------------------------------------------

LEGACY = [v for v in VERSIONS if v < FLEXIBLE_FROM]
FLEXIBLE = [v for v in VERSIONS if v >= FLEXIBLE_FROM]


def legacy_body(tid=b"\xff\xff", acks_timeout=struct.pack(">hi", 1, 1), rest=b""):
    return tid + acks_timeout + rest


@pytest.mark.parametrize("version", LEGACY)
@pytest.mark.parametrize(
    "rest",
    [
        struct.pack(">i", -1),  # null topic array
        struct.pack(">i", 2**31 - 1),  # absurd topic count
        struct.pack(">i", 1) + struct.pack(">h", -1),  # null topic name
        struct.pack(">i", 1) + struct.pack(">h", 2) + b"\xff\xfe" + struct.pack(">i", 0),  # bad utf-8
        struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1),  # null partitions
        struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 10**6),
        struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 1)
        + struct.pack(">ii", 0, 100) + b"short",  # records past the end
    ],
    ids=["null-topics", "huge-topic-count", "null-topic-name", "bad-utf8-name",
         "null-partitions", "huge-partition-count", "records-past-end"],
)
def test_legacy_malformed(version, rest):
    with pytest.raises(ProduceDecodeError):
        decode_produce(memoryview(legacy_body(rest=rest)), version)


@pytest.mark.parametrize("version", LEGACY)
def test_legacy_bad_transactional_id(version):
    with pytest.raises(ProduceDecodeError):
        decode_produce(memoryview(legacy_body(tid=b"\x00\x02\xc3\x28", rest=b"\0\0\0\0")), version)
    with pytest.raises(ProduceDecodeError):
        decode_produce(memoryview(legacy_body(tid=b"\x00\x50ab", rest=b"\0\0\0\0")), version)


# A reference encoder for v9+ that can add tagged fields at every level, to check
# the decoder skips tags it does not know (Produce has none defined up to v12).


def _compact_str(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode()
    return write_uvarint(len(b) + 1) + b


def _tags(fields) -> bytes:
    out = write_uvarint(len(fields))
    for tag, data in fields:
        out += write_uvarint(tag) + write_uvarint(len(data)) + data
    return out


def flexible_body(tid, acks, timeout_ms, topics, tags=(), version=12) -> bytes:
    tags = list(tags)
    out = _compact_str(tid) + struct.pack(">hi", acks, timeout_ms)
    out += write_uvarint(len(topics) + 1)
    for name, parts in topics:
        key = (uuid.uuid5(uuid.NAMESPACE_DNS, name).bytes if version >= 13 else _compact_str(name))
        out += key + write_uvarint(len(parts) + 1)
        for index, records in parts:
            out += struct.pack(">i", index)
            out += b"\x00" if records is None else write_uvarint(len(records) + 1) + records
            out += _tags(tags)
        out += _tags(tags)
    return out + _tags(tags)


TOPICS_FOR_TAGS = [("a", [(0, BATCHES[0]), (5, None)]), ("b", [(1, BATCHES[1])])]


@pytest.mark.parametrize("version", FLEXIBLE)
def test_reference_encoder_matches_kio(version):
    ref = flexible_body("tx", -1, 1500, TOPICS_FOR_TAGS, version=version)
    assert ref == codec.encode_body(kio_request(version, "tx", -1, 1500, TOPICS_FOR_TAGS))


@pytest.mark.parametrize("version", FLEXIBLE)
@pytest.mark.parametrize(
    "tags",
    [[(0, b"")], [(1, b"abc"), (200, b"\x00" * 130)], [(2**20, b"\xff\xff")]],
)
def test_unknown_tagged_fields_are_skipped(version, tags):
    body = memoryview(flexible_body("tx", -1, 1500, TOPICS_FOR_TAGS, tags, version=version))
    req = decode_produce(body, version)
    check_decoded(req, body, version, "tx", -1, 1500, TOPICS_FOR_TAGS)


@pytest.mark.parametrize("version", FLEXIBLE)
@pytest.mark.parametrize(
    "body",
    [
        b"\x00" + struct.pack(">hi", 1, 1) + b"\x00" + b"\x00",  # null topic array
        b"\x00" + struct.pack(">hi", 1, 1) + b"\x02" + b"\x00",  # null topic name
        b"\x00" + struct.pack(">hi", 1, 1) + b"\x02" + b"\x03\xff\xfe" + b"\x01\x00\x00",  # bad utf-8
        b"\x00" + struct.pack(">hi", 1, 1) + b"\x02\x02t" + b"\x00",  # null partitions
        b"\x00" + struct.pack(">hi", 1, 1) + b"\xff\xff\xff\xff\x0f",  # huge topic count
        b"\x00" + struct.pack(">hi", 1, 1) + b"\x02\x02t\x02" + b"\0\0\0\0" + b"\xff\x01abc",
        b"\x00" + struct.pack(">hi", 1, 1) + b"\x01" + b"\x01\x05\x50ab",  # tag past the end
        b"\x00" + struct.pack(">hi", 1, 1) + b"\x01" + b"\xff\xff\xff\xff\xff\x01",  # long varint
        b"\x10ab",  # transactional id past the end
        b"\x03\xc3\x28" + struct.pack(">hi", 1, 1) + b"\x01\x00",  # bad utf-8 transactional id
    ],
    ids=["null-topics", "null-topic-name", "bad-utf8-name", "null-partitions",
         "huge-topic-count", "records-past-end", "tag-past-end", "overlong-varint",
         "txn-id-past-end", "bad-utf8-txn-id"],
)
def test_flexible_malformed(version, body):
    with pytest.raises(ProduceDecodeError):
        decode_produce(memoryview(body), version)


def test_version_constants():
    assert (MIN_VERSION, MAX_VERSION, FLEXIBLE_FROM) == (3, 13, 9)
    for v in VERSIONS:
        assert load_request_schema(0, v).__flexible__ == (v >= FLEXIBLE_FROM)
