"""The hand-written Produce response encoder (v3-v13): the same bytes as kio's writer, which
the broker used before, for every shape of answer the Produce handler gives."""

from __future__ import annotations

import datetime
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from minibroker_protocol import codec
from minibroker_protocol.build import build, nested
from minibroker_protocol.header import read_uvarint
from minibroker_protocol.produce import (
    MAX_VERSION,
    MIN_VERSION,
    encode_produce_response,
    with_throttle,
)

VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def kio_bytes(corr: int, version: int, topics, throttle_ms: int = 0) -> bytes:
    """What the handler built with kio before the hand-written encoder."""
    R = load_response_schema(0, version)
    T, P = nested(R, "TopicProduceResponse"), nested(R, "PartitionProduceResponse")
    E = nested(R, "BatchIndexAndErrorMessage") if version >= 8 else None
    out = []
    for name, topic_id, parts in topics:
        entries = []
        for index, error, base, append_time, log_start, record_errors, message in parts:
            errs = tuple(build(E, batch_index=i, batch_index_error_message=m)
                         for i, m in record_errors) if E is not None else ()
            entries.append(build(
                P, index=index, error_code=ErrorCode(error), base_offset=base,
                log_append_time=None if append_time == -1 else _EPOCH + datetime.timedelta(
                    milliseconds=append_time),
                log_start_offset=log_start, record_errors=errs, error_message=message))
        out.append(build(T, name=name, topic_id=topic_id, partition_responses=tuple(entries)))
    entity = build(R, responses=tuple(out), throttle_time=datetime.timedelta(milliseconds=throttle_ms))
    return codec.encode_response(corr, entity)


text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
partitions = st.lists(st.tuples(
    st.integers(0, 2**31 - 1), st.sampled_from([0, 2, 10, 18, 87, 19, 6]),
    st.integers(-1, 2**62), st.one_of(st.just(-1), st.integers(0, 4_000_000_000_000)),
    st.integers(-1, 2**62),
    st.lists(st.tuples(st.integers(0, 2**31 - 1), st.one_of(st.none(), text)), max_size=3).map(tuple),
    st.one_of(st.none(), text)), max_size=4)
topics = st.lists(st.tuples(text, st.uuids(), partitions), max_size=3)


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(VERSIONS), corr=st.integers(-2**31, 2**31 - 1), topics=topics,
       throttle=st.integers(0, 2**31 - 1))
def test_same_bytes_as_kio(version, corr, topics, throttle):
    assert encode_produce_response(corr, version, topics, throttle) == kio_bytes(corr, version, topics,
                                                                                throttle)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_typical_answer_reads_back(version):
    tid = uuid.uuid4()
    topics = [("orders", tid, [(0, 0, 41, -1, 0, (), None), (2, 87, -1, -1, 5, ((3, "bad key"),), "refused")])]
    data = encode_produce_response(7, version, topics)
    assert data == kio_bytes(7, version, topics)
    pos = 4
    if version >= 9:
        _n, pos = read_uvarint(data, pos)
    resp, _ = entity_reader(load_response_schema(0, version))(memoryview(data)[pos:], 0)
    first = resp.responses[0]
    assert (first.topic_id == tid) if version >= 13 else (first.name == "orders")
    assert [int(p.base_offset) for p in first.partition_responses] == [41, -1]


@pytest.mark.parametrize("version", VERSIONS)
def test_with_throttle_is_the_answer_encoded_throttled(version):
    topics = [("t", uuid.uuid4(), [(1, 0, 9, 1_700_000_000_000, 0, (), None)])]
    plain = encode_produce_response(3, version, topics)
    assert with_throttle(plain, version, 1234) == encode_produce_response(3, version, topics, 1234)
    assert with_throttle(plain, version, 1234) == kio_bytes(3, version, topics, 1234)
