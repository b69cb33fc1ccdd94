"""The hand-written EndTxn and AddPartitionsToTxn answers are byte for byte kio's, in every
version a client can ask for."""

from __future__ import annotations

import datetime

import pytest

from minibroker_protocol import codec
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.txn_wire import encode_add_partitions_response, encode_end_txn_response

ZERO = datetime.timedelta(0)


@pytest.mark.parametrize("version", range(0, 6))
@pytest.mark.parametrize("code,pid,epoch", [
    (ErrorCode.none, 4001, 7), (ErrorCode.producer_fenced, -1, -1),
    (ErrorCode.concurrent_transactions, 2**62, 32767), (ErrorCode.invalid_txn_state, 0, 0)])
def test_end_txn_answer_is_kios(version, code, pid, epoch):
    R = codec.response_type(26, version)
    want = codec.encode_response(123456, build(R, throttle_time=ZERO, error_code=code,
                                               producer_id=pid, producer_epoch=epoch))
    assert encode_end_txn_response(123456, version, 0, code, pid, epoch) == want


@pytest.mark.parametrize("version", range(0, 4))
@pytest.mark.parametrize("results", [
    {"t": [(0, ErrorCode.none)]},
    {"orders": [(0, ErrorCode.none), (7, ErrorCode.none)], "é-topic": [(3, ErrorCode.none)]},
    {"x" * 300: [(i, ErrorCode.operation_not_attempted) for i in range(130)],
     "refused": [(1, ErrorCode.topic_authorization_failed)]},
    {},
])
def test_add_partitions_answer_is_kios(version, results):
    R = codec.response_type(24, version)
    T = nested(R, "AddPartitionsToTxnTopicResult")
    P = nested(R, "AddPartitionsToTxnPartitionResult")
    entity = build(R, throttle_time=ZERO, results_by_topic_v3_and_below=tuple(
        build(T, name=t, results_by_partition=tuple(
            build(P, partition_index=p, partition_error_code=c) for p, c in parts))
        for t, parts in results.items()))
    assert encode_add_partitions_response(-5, version, 0, results.items()) == codec.encode_response(-5, entity)


def test_the_brokers_batched_form_is_not_encoded_here():
    with pytest.raises(ValueError, match="batched"):
        encode_add_partitions_response(1, 4, 0, [])


# -- requests: the same entities as kio's decoder, the same refusals -----------------------
def _body(entity) -> bytes:
    from minibroker_protocol.header import read_request_header
    frame = codec.encode_request(entity, 9, "c")
    header = read_request_header(frame, bool(entity.__flexible__))
    return frame[header.body_offset:]


@pytest.mark.parametrize("version", range(0, 6))
@pytest.mark.parametrize("tid,pid,epoch,committed", [
    ("t", 1, 0, True), ("é" * 200, 2**62, 32767, False), ("", -1, -1, True)])
def test_end_txn_request_is_kios(version, tid, pid, epoch, committed):
    from minibroker_protocol.txn_wire import decode_end_txn
    cls = codec.request_type(26, version)
    body = _body(cls(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=committed))
    got = decode_end_txn(memoryview(body), version)
    assert got == codec.decode_request(26, version, memoryview(body))
    assert type(got) is cls


@pytest.mark.parametrize("version", range(0, 4))
@pytest.mark.parametrize("topics", [[("t", (0,))], [("a", (1, 2, 3)), ("é" * 70, tuple(range(140)))], []])
def test_add_partitions_request_is_kios(version, topics):
    from minibroker_protocol.txn_wire import decode_add_partitions
    cls = codec.request_type(24, version)
    T = nested(cls, "AddPartitionsToTxnTopic")
    body = _body(cls(v3_and_below_transactional_id="tx", v3_and_below_producer_id=77,
                     v3_and_below_producer_epoch=3,
                     v3_and_below_topics=tuple(T(name=n, partitions=p) for n, p in topics)))
    got = decode_add_partitions(memoryview(body), version)
    assert got == codec.decode_request(24, version, memoryview(body))
    assert type(got) is cls


@pytest.mark.parametrize("api,version", [(26, v) for v in range(6)] + [(24, v) for v in range(4)])
def test_every_truncation_and_a_forged_length_are_refused(api, version):
    from minibroker_protocol.txn_wire import TxnDecodeError, decode_add_partitions, decode_end_txn
    decode = decode_end_txn if api == 26 else decode_add_partitions
    cls = codec.request_type(api, version)
    if api == 26:
        entity = cls(transactional_id="tid", producer_id=5, producer_epoch=1, committed=True)
    else:
        T = nested(cls, "AddPartitionsToTxnTopic")
        entity = cls(v3_and_below_transactional_id="tid", v3_and_below_producer_id=5,
                     v3_and_below_producer_epoch=1, v3_and_below_topics=(T(name="t", partitions=(0, 1)),))
    body = _body(entity)
    for cut in range(len(body)):
        with pytest.raises(TxnDecodeError):
            decode(memoryview(body[:cut]), version)
    if api == 24:
        # the topic count forged to 2**31 - 1 (classic) / a huge varint (flexible)
        count_at = 2 + 3 + 8 + 2 if version < 3 else 1 + 3 + 8 + 2
        forged = (body[:count_at] + (b"\x7f\xff\xff\xff" + body[count_at + 4:] if version < 3
                                     else b"\xff\xff\xff\xff\x07" + body[count_at + 1:]))
        with pytest.raises(TxnDecodeError, match="past the end"):
            decode(memoryview(forged), version)


def test_the_brokers_batched_request_goes_through_kio():
    from minibroker_protocol.txn_wire import decode_add_partitions
    cls = codec.request_type(24, 4)
    T = nested(cls, "AddPartitionsToTxnTransaction")
    body = _body(cls(transactions=(T(transactional_id="x", producer_id=1, producer_epoch=0,
                                     verify_only=True, topics=()),)))
    assert decode_add_partitions(memoryview(body), 4) == codec.decode_request(24, 4, memoryview(body))


@pytest.mark.parametrize("version", range(0, 4))
def test_a_null_topic_array_is_refused(version):
    """kio reads it as None and the handler would fail on it; Kafka's generated reader refuses a
    non-nullable array serialized as null, and so does this one (the connection closes)."""
    import struct

    from minibroker_protocol.txn_wire import TxnDecodeError, decode_add_partitions
    if version >= 3:
        body = b"\x02t" + struct.pack(">qh", 1, 0) + b"\x00" + b"\x00"
    else:
        body = struct.pack(">h", 1) + b"t" + struct.pack(">qhi", 1, 0, -1)
    with pytest.raises(TxnDecodeError, match="null"):
        decode_add_partitions(memoryview(body), version)
