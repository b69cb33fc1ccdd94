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
