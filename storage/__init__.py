"""Every byte on disk: Kafka's partition layout, offsets, retention, recovery.

Usable without the server (the dump-log tool reads segments with it). No
asyncio, sockets or threads here: time is passed in or read from a clock.
"""

from .catalog import Catalog, TopicInfo, validate_topic_name
from .config import FlushPolicy, LogConfig
from .errors import (
    DataDirLocked,
    InvalidConfig,
    InvalidPartitions,
    InvalidTopic,
    LogClosed,
    OffsetOutOfRange,
    RecordBatchTooLarge,
    StorageError,
    TopicExists,
    UnknownTopic,
)
from .log import AppendInfo, PartitionLog
from .manager import LogManager
from .segment import Segment, iter_file_batches

__all__ = [
    "AppendInfo",
    "Catalog",
    "DataDirLocked",
    "FlushPolicy",
    "InvalidConfig",
    "InvalidPartitions",
    "InvalidTopic",
    "LogClosed",
    "LogConfig",
    "LogManager",
    "OffsetOutOfRange",
    "PartitionLog",
    "RecordBatchTooLarge",
    "Segment",
    "StorageError",
    "TopicExists",
    "TopicInfo",
    "UnknownTopic",
    "iter_file_batches",
    "validate_topic_name",
]
