"""Every byte on disk: Kafka's partition layout, offsets, retention, recovery.

Usable without the server (the dump-log tool reads segments with it). No
asyncio, sockets or threads here: time is passed in or read from a clock, and
the waiting part of a flush is a ``SyncJob`` the owner runs where it likes.
"""

from typing import TYPE_CHECKING, Any

# Each name's module, imported on first use (PEP 562): importing one small module of the
# package (lazylog, at a CLI's start) must not import the whole storage layer and kio with it.
_WHERE = {
    "AbortedTxn": "txn_index",
    "AppendInfo": "log",
    "BatchMetadata": "producer_state",
    "Catalog": "catalog",
    "CompletedTxn": "producer_state",
    "DataDirLocked": "errors",
    "FlushPolicy": "config",
    "InvalidConfig": "errors",
    "InvalidPartitions": "errors",
    "InvalidProducerEpoch": "errors",
    "InvalidRecord": "errors",
    "InvalidTopic": "errors",
    "InvalidTxnState": "errors",
    "LogClosed": "errors",
    "LogConfig": "config",
    "LogManager": "manager",
    "OffsetOutOfRange": "errors",
    "OutOfOrderSequence": "errors",
    "PartitionLog": "log",
    "ProducerStateEntry": "producer_state",
    "ProducerStateError": "errors",
    "ProducerStateManager": "producer_state",
    "RecordBatchTooLarge": "errors",
    "Segment": "segment",
    "StorageError": "errors",
    "SyncJob": "sync_job",
    "TopicExists": "errors",
    "TopicInfo": "catalog",
    "TransactionCoordinatorFenced": "errors",
    "TxnIndex": "txn_index",
    "UnknownProducerId": "errors",
    "UnknownTopic": "errors",
    "iter_file_batches": "segment",
    "validate_topic_name": "catalog",
}

if TYPE_CHECKING:
    from .catalog import Catalog, TopicInfo, validate_topic_name
    from .config import FlushPolicy, LogConfig
    from .errors import (
        DataDirLocked,
        InvalidConfig,
        InvalidPartitions,
        InvalidProducerEpoch,
        InvalidRecord,
        InvalidTopic,
        InvalidTxnState,
        LogClosed,
        OffsetOutOfRange,
        OutOfOrderSequence,
        ProducerStateError,
        RecordBatchTooLarge,
        StorageError,
        TopicExists,
        TransactionCoordinatorFenced,
        UnknownProducerId,
        UnknownTopic,
    )
    from .log import AppendInfo, PartitionLog
    from .manager import LogManager
    from .producer_state import BatchMetadata, CompletedTxn, ProducerStateEntry, ProducerStateManager
    from .segment import Segment, iter_file_batches
    from .sync_job import SyncJob
    from .txn_index import AbortedTxn, TxnIndex


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value

__all__ = [
    "AbortedTxn",
    "AppendInfo",
    "BatchMetadata",
    "Catalog",
    "CompletedTxn",
    "DataDirLocked",
    "FlushPolicy",
    "InvalidConfig",
    "InvalidPartitions",
    "InvalidProducerEpoch",
    "InvalidRecord",
    "InvalidTopic",
    "InvalidTxnState",
    "LogClosed",
    "LogConfig",
    "LogManager",
    "OffsetOutOfRange",
    "OutOfOrderSequence",
    "PartitionLog",
    "ProducerStateEntry",
    "ProducerStateError",
    "ProducerStateManager",
    "RecordBatchTooLarge",
    "Segment",
    "StorageError",
    "SyncJob",
    "TopicExists",
    "TopicInfo",
    "TransactionCoordinatorFenced",
    "TxnIndex",
    "UnknownProducerId",
    "UnknownTopic",
    "iter_file_batches",
    "validate_topic_name",
]
