"""Which fencing code each request version gets, checked against Kafka's KafkaApis.

InitProducerId converts PRODUCER_FENCED to INVALID_PRODUCER_EPOCH below v4; AddPartitionsToTxn,
AddOffsetsToTxn and EndTxn below v2; Produce and TxnOffsetCommit never answer PRODUCER_FENCED.
"""

from __future__ import annotations

import pytest

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.errors import ErrorCode, fencing_code, for_version

FENCED = ErrorCode.producer_fenced
EPOCH = ErrorCode.invalid_producer_epoch

# (api, highest version that gets 47, lowest version that gets 90) — None: no version gets 90.
TABLE = [
    (ApiKey.InitProducerId, 3, 4),
    (ApiKey.AddPartitionsToTxn, 1, 2),
    (ApiKey.AddOffsetsToTxn, 1, 2),
    (ApiKey.EndTxn, 1, 2),
    (ApiKey.Produce, 13, None),
    (ApiKey.TxnOffsetCommit, 5, None),
]


@pytest.mark.parametrize(("api", "old", "new"), TABLE, ids=[a.name for a, _, _ in TABLE])
def test_fencing_code_by_version(api, old, new):
    for v in range(old + 1):
        assert fencing_code(api, v) == EPOCH, v
    if new is not None:
        for v in range(new, new + 4):
            assert fencing_code(api, v) == FENCED, v


def test_plain_int_keys_work_like_the_enum():
    assert fencing_code(22, 4) == FENCED
    assert fencing_code(22, 3) == EPOCH


@pytest.mark.parametrize("code", [ErrorCode.none, ErrorCode.invalid_txn_state,
                                  ErrorCode.concurrent_transactions, EPOCH])
def test_for_version_passes_other_codes_through(code):
    for api in (ApiKey.InitProducerId, ApiKey.EndTxn, ApiKey.TxnOffsetCommit):
        for v in range(6):
            assert for_version(code, api, v) == code


def test_for_version_maps_fenced():
    assert for_version(FENCED, ApiKey.EndTxn, 1) == EPOCH
    assert for_version(FENCED, ApiKey.EndTxn, 2) == FENCED
    assert for_version(FENCED, ApiKey.InitProducerId, 3) == EPOCH
    assert for_version(FENCED, ApiKey.InitProducerId, 5) == FENCED


def test_transaction_abortable_only_for_clients_that_know_it():
    # KIP-890 part 1: Produce v11+ and TxnOffsetCommit v4+; everyone else gets INVALID_TXN_STATE.
    abortable = ErrorCode.transaction_abortable
    assert [for_version(abortable, ApiKey.Produce, v) for v in (10, 11, 12)] == [
        ErrorCode.invalid_txn_state, abortable, abortable]
    assert [for_version(abortable, ApiKey.TxnOffsetCommit, v) for v in (3, 4)] == [
        ErrorCode.invalid_txn_state, abortable]
    assert for_version(abortable, ApiKey.EndTxn, 4) == ErrorCode.invalid_txn_state
