"""Storage errors, each carrying the Kafka error code a handler should answer with."""

from __future__ import annotations

from minibroker_protocol.errors import ErrorCode


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


class InvalidRecord(StorageError):
    # Kafka's InvalidRecordException, e.g. a control batch whose record is not
    # an end-transaction marker.
    error_code = ErrorCode.invalid_record


class ProducerStateError(StorageError):
    """A batch refused by the producer-state rules (Kafka's ProducerAppendInfo).

    Carries what the caller needs for the Produce response and its log line;
    ``partition`` and ``log_start_offset`` are filled in by the partition log
    (UNKNOWN_PRODUCER_ID must be answered with the real log start offset, or
    the Java producer retries forever).
    """

    def __init__(
        self,
        message: str,
        *,
        producer_id: int,
        epoch: int,
        current_epoch: int = -1,
        expected_sequence: int = -1,
        received_sequence: int = -1,
        partition: str = "",
        log_start_offset: int = -1,
    ) -> None:
        super().__init__(message)
        self.producer_id = producer_id
        self.epoch = epoch
        self.current_epoch = current_epoch
        self.expected_sequence = expected_sequence
        self.received_sequence = received_sequence
        self.partition = partition
        self.log_start_offset = log_start_offset

    def log_fields(self) -> dict[str, object]:
        """The facts for one structured log line."""
        return {
            "error": self.error_code.name,
            "partition": self.partition,
            "producer_id": self.producer_id,
            "epoch": self.epoch,
            "current_epoch": self.current_epoch,
            "expected_sequence": self.expected_sequence,
            "received_sequence": self.received_sequence,
            "log_start_offset": self.log_start_offset,
            "detail": str(self),
        }


class InvalidProducerEpoch(ProducerStateError):
    error_code = ErrorCode.invalid_producer_epoch  # 47


class OutOfOrderSequence(ProducerStateError):
    error_code = ErrorCode.out_of_order_sequence_number  # 45


class UnknownProducerId(ProducerStateError):
    error_code = ErrorCode.unknown_producer_id  # 59


class InvalidTxnState(ProducerStateError):
    error_code = ErrorCode.invalid_txn_state  # 48


class TransactionCoordinatorFenced(ProducerStateError):
    error_code = ErrorCode.transaction_coordinator_fenced  # 52

    def __init__(self, message: str, *, coordinator_epoch: int, current_coordinator_epoch: int, **kw) -> None:
        super().__init__(message, **kw)
        self.coordinator_epoch = coordinator_epoch
        self.current_coordinator_epoch = current_coordinator_epoch

    def log_fields(self) -> dict[str, object]:
        fields = super().log_fields()
        fields["coordinator_epoch"] = self.coordinator_epoch
        fields["current_coordinator_epoch"] = self.current_coordinator_epoch
        return fields
