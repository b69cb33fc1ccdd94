"""Kafka error codes (kio's generated enum, from Kafka's Errors.java), and the one rule for
which fencing code a request version understands."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from kio.schema.errors import ErrorCode

from .api_keys import ApiKey

__all__ = ["ErrorCode", "PRODUCER_FENCED_SINCE", "TRANSACTION_ABORTABLE_SINCE", "fencing_code", "for_version"]

# The first version of each API whose clients know PRODUCER_FENCED (90, KIP-588); older ones
# get INVALID_PRODUCER_EPOCH (47) instead. Kafka converts in KafkaApis'
# handleInitProducerIdRequest (version < 4), handleAddPartitionsToTxnRequest,
# handleAddOffsetsToTxnRequest and handleEndTxnRequest (version < 2). APIs not listed never
# answer 90: Produce's fenced batches come back as 47 (AddPartitionsToTxnManager: "Producers
# expect to handle INVALID_PRODUCER_EPOCH"), and so does a stale epoch on TxnOffsetCommit.
PRODUCER_FENCED_SINCE: Mapping[int, int] = MappingProxyType({
    ApiKey.InitProducerId: 4,
    ApiKey.AddPartitionsToTxn: 2,
    ApiKey.AddOffsetsToTxn: 2,
    ApiKey.EndTxn: 2,
})


# KIP-890 part 1: the first version of each API whose clients know TRANSACTION_ABORTABLE (120);
# older ones get INVALID_TXN_STATE (48) for the same refusal, a transactional write to a partition
# outside the open transaction. Kafka's AddPartitionsToTxnManager converts it for clients that
# only support the default error (KafkaApis: Produce > v10 supports the generic error, and
# TxnOffsetCommit >= v4); checked against Kafka 4.4 by the differential case
# "outside-the-transaction-by-version".
TRANSACTION_ABORTABLE_SINCE: Mapping[int, int] = MappingProxyType({
    ApiKey.Produce: 11,
    ApiKey.TxnOffsetCommit: 4,
})


def fencing_code(api_key: int, version: int) -> ErrorCode:
    """The code that tells a client of ``api_key`` v``version`` its producer epoch is fenced."""
    since = PRODUCER_FENCED_SINCE.get(api_key)
    if since is not None and version >= since:
        return ErrorCode.producer_fenced
    return ErrorCode.invalid_producer_epoch


def for_version(code: ErrorCode, api_key: int, version: int) -> ErrorCode:
    """``code`` as the client of ``api_key`` v``version`` understands it: PRODUCER_FENCED
    becomes that request version's fencing code, TRANSACTION_ABORTABLE becomes INVALID_TXN_STATE
    for clients that predate it, any other code passes through."""
    if code == ErrorCode.producer_fenced:
        return fencing_code(api_key, version)
    if code == ErrorCode.transaction_abortable:
        since = TRANSACTION_ABORTABLE_SINCE.get(api_key)
        return code if since is not None and version >= since else ErrorCode.invalid_txn_state
    return code
