"""The per-record checks Kafka's LogValidator makes on a produced batch, and LogAppendTime.

The hot path reads batch headers only (DESIGN.md); a topic whose configs need the records
themselves looked at - a compacted topic (every record needs a key), bounds on CreateTime
(message.timestamp.before/after.max.ms), or a batch claiming LogAppendTime - decodes them
here. What Kafka answers is shaped by LogValidator.validateRecord / processRecordErrors
(storage/.../internals/log/LogValidator.java): every record is checked, the errors are
listed per record index, and the partition's error is INVALID_TIMESTAMP if any record's
timestamp was refused, else INVALID_RECORD.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from . import checksum
from .batch import CRC_START, TIMESTAMP_TYPE_BIT, BatchHeader
from .errors import ErrorCode
from .records import decode_batch

CREATE_TIME, LOG_APPEND_TIME = "CreateTime", "LogAppendTime"
LONG_MAX = 2**63 - 1
NO_TIMESTAMP = -1

# DefaultRecordBatch offsets of the fields LogAppendTime rewrites
_ATTRIBUTES_AT, _MAX_TIMESTAMP_AT, _CRC_AT = 21, 35, 17
_I16, _I64, _U32 = struct.Struct(">h"), struct.Struct(">q"), struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class RecordRules:
    """What a topic's configs ask of each record (LogConfig as LogValidator reads it)."""

    timestamp_type: str = CREATE_TIME
    before_max_ms: int = LONG_MAX
    after_max_ms: int = LONG_MAX
    compacted: bool = False

    @property
    def log_append_time(self) -> bool:
        return self.timestamp_type == LOG_APPEND_TIME

    def needs_records(self, header: BatchHeader, now_ms: int, latest_ms: int | None = None) -> bool:
        """Whether any check can refuse a record of this batch: only then are records decoded.

        message.timestamp.after.max.ms is finite by default (an hour since Kafka 4.0), so it is
        judged from the header first: a batch whose maxTimestamp is within the bound is taken as
        the producer wrote it. Kafka checks every record; a batch whose header understates its
        records' timestamps is the one case told apart (no client writes one). ``latest_ms``
        (default ``now_ms``) is what "ahead" is measured from (see check_records)."""
        if self.compacted or header.timestamp_type == 1:
            return True
        if self.log_append_time:
            return False
        latest = now_ms if latest_ms is None else latest_ms
        return self.before_max_ms < LONG_MAX or header.max_timestamp - latest > self.after_max_ms


@dataclass(frozen=True, slots=True)
class RecordErrors:
    """A refused batch: the partition's error, its message and (index, message) per bad record."""

    error_code: ErrorCode
    message: str
    records: tuple[tuple[int, str], ...]


def _java_long(v: int) -> int:
    # the bounds in Kafka's message are Java long sums, which wrap
    return (v + 2**63) % 2**64 - 2**63


def check_records(buf, header: BatchHeader, rules: RecordRules, now_ms: int,
                  topic_partition: str, latest_ms: int | None = None) -> RecordErrors | None:
    """LogValidator's record checks on the one batch in ``buf``; None when every record passes.
    Raises protocol.batch.InvalidBatch (CORRUPT_MESSAGE) when the records do not decode.

    ``latest_ms`` (default ``now_ms``) is the time a record may not be more than
    message.timestamp.after.max.ms ahead of: a broker whose clock is held back (minibroker's
    --clock virtual) passes the system time too, so clients stamping real time are not
    refused as from the future once an hour of real time has gone by."""
    latest = now_ms if latest_ms is None else latest_ms
    errors: list[tuple[ErrorCode, str]] = []
    indexed: list[tuple[int, str]] = []
    lat_batch = header.timestamp_type == 1
    for index, record in enumerate(decode_batch(buf, 0)):
        error: tuple[ErrorCode, str] | None = None
        if rules.compacted and record.key is None:
            error = (ErrorCode.invalid_record, "Compacted topic cannot accept message without key in "
                     f"topic partition {topic_partition}")
        elif not rules.log_append_time and record.timestamp != NO_TIMESTAMP:
            ts = record.timestamp
            if now_ms - ts > rules.before_max_ms or ts - latest > rules.after_max_ms:
                low, high = _java_long(now_ms - rules.before_max_ms), _java_long(latest + rules.after_max_ms)
                error = (ErrorCode.invalid_timestamp,
                         f"Timestamp {record.timestamp} of message with offset {record.offset} is out of "
                         f"range. The timestamp should be within [{low}, {high}]")
        elif lat_batch:
            # DefaultRecord.toString: only a broker may set LogAppendTime
            key = 0 if record.key is None else len(record.key)
            value = 0 if record.value is None else len(record.value)
            error = (ErrorCode.invalid_timestamp,
                     f"Invalid timestamp type in message DefaultRecord(offset={record.offset}, "
                     f"timestamp={record.timestamp}, key={key} bytes, value={value} bytes). "
                     "Producer should not set timestamp type to LogAppendTime.")
        if error is not None:
            errors.append(error)
            indexed.append((index, error[1]))
    if not errors:
        return None
    if any(code == ErrorCode.invalid_timestamp for code, _ in errors):
        return RecordErrors(ErrorCode.invalid_timestamp,
                            "One or more records have been rejected due to invalid timestamp", tuple(indexed))
    # ProduceResponse.RecordError.toString, in a java.util.List's toString
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in indexed[:3])
    return RecordErrors(ErrorCode.invalid_record,
                        f"One or more records have been rejected due to {len(indexed)} record errors in "
                        f"total, and only showing the first three errors at most: [{shown}]", tuple(indexed))


def stamp_log_append_time(buf, now_ms: int) -> bytearray:
    """A copy of the batch in ``buf`` with LogAppendTime: the timestamp-type bit set and
    maxTimestamp ``now_ms``, the CRC recomputed (DefaultRecordBatch.setMaxTimestamp). The
    records are neither rewritten nor recompressed: readers take every record's timestamp from
    maxTimestamp when the bit is set, which is why Kafka leaves a compressed payload as it is."""
    out = bytearray(buf)
    attributes = _I16.unpack_from(out, _ATTRIBUTES_AT)[0] | TIMESTAMP_TYPE_BIT
    _I16.pack_into(out, _ATTRIBUTES_AT, attributes)
    _I64.pack_into(out, _MAX_TIMESTAMP_AT, now_ms)
    _U32.pack_into(out, _CRC_AT, checksum.crc32c(memoryview(out)[CRC_START:]))
    return out
