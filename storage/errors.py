"""Storage errors, each carrying the Kafka error code a handler should answer with."""

from __future__ import annotations

from protocol.errors import ErrorCode


class StorageError(Exception):
    error_code: ErrorCode = ErrorCode.kafka_storage_error


class OffsetOutOfRange(StorageError):
    error_code = ErrorCode.offset_out_of_range

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} is outside the log's range "
            f"[{log_start_offset}, {log_end_offset}]"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordBatchTooLarge(StorageError):
    # Kafka's RecordBatchTooLargeException when a batch cannot fit any segment.
    error_code = ErrorCode.record_list_too_large


class LogClosed(StorageError):
    pass


class InvalidConfig(StorageError):
    error_code = ErrorCode.invalid_config


class InvalidTopic(StorageError):
    error_code = ErrorCode.invalid_topic_exception


class TopicExists(StorageError):
    error_code = ErrorCode.topic_already_exists


class UnknownTopic(StorageError):
    error_code = ErrorCode.unknown_topic_or_partition


class InvalidPartitions(StorageError):
    error_code = ErrorCode.invalid_partitions


class DataDirLocked(StorageError):
    pass
