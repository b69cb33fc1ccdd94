"""Every byte on disk: Kafka's partition layout, offsets, retention, recovery.

Usable without the server (the dump-log tool reads segments with it). No
asyncio, sockets or threads here: time is passed in or read from a clock, and
the waiting part of a flush is a ``SyncJob`` the owner runs where it likes.
"""

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
