"""RecordBatch v2 header view: the only part of a batch the broker reads.

Layout (Kafka's DefaultRecordBatch): the 61-byte header below, then the records.
The CRC-32C covers bytes 21..end (attributes onwards), so the broker may rewrite
baseOffset (bytes 0..7) and partitionLeaderEpoch (bytes 12..15) without
recomputing it.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from . import checksum
from .errors import ErrorCode

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part not counted in batchLength
CRC_START = 21
MAGIC_OFFSET = 16
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # a batch with zero records

_I64 = struct.Struct(">q")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
# KIP-534: set by the log cleaner on a batch holding tombstones or a transaction marker;
# its baseTimestamp is then the time after which the cleaner may remove them.
DELETE_HORIZON_BIT = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1


class InvalidBatch(Exception):
    """A produced batch that must be rejected; carries Kafka's error code."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


class BatchHeader(NamedTuple):
    """A named tuple, not a frozen dataclass: it is made once per batch on the produce and
    read paths, and a frozen dataclass's __init__ sets its 14 fields one object.__setattr__
    at a time (~1.5 us against ~0.4 us for the tuple, Python 3.11)."""

    position: int  # where the batch starts in the buffer it was read from
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def end(self) -> int:
        return self.position + self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_BIT else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def delete_horizon_ms(self) -> int | None:
        """When the cleaner may drop this batch's tombstones or marker (KIP-534), if set."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_BIT else None

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        # Sequences wrap at Int32.MAX (Kafka DefaultRecordBatch.incrementSequence).
        return (self.base_sequence + self.last_offset_delta) % (2**31)


_new_header = tuple.__new__  # NamedTuple's own __new__ adds a Python call per header


def read_header(buf, position: int = 0) -> BatchHeader:
    """Parse the header at ``position``; the caller guarantees 61 bytes exist."""
    return _new_header(BatchHeader, (position, *HEADER.unpack_from(buf, position)))


def crc_ok(buf, header: BatchHeader) -> bool:
    start = header.position + CRC_START
    return checksum.crc32c(memoryview(buf)[start : header.end]) == header.crc


def validate_produce_records(buf) -> BatchHeader:
    """Check a Produce partition's records the way Kafka does for Produce v3+.

    Exactly one magic-2 batch with a sane length and a matching CRC
    (ProduceRequest.validateRecords, LogValidator). Raises InvalidBatch.
    """
    size = len(buf)
    if size < HEADER_SIZE:
        raise InvalidBatch(
            ErrorCode.corrupt_message,
            f"records of {size} bytes are shorter than a batch header",
        )
    magic = buf[MAGIC_OFFSET]
    if magic != 2:
        raise InvalidBatch(
            ErrorCode.invalid_record,
            f"only magic 2 record batches are accepted, got magic {magic}",
        )
    header = read_header(buf, 0)
    batch_size = header.batch_length + LOG_OVERHEAD
    if header.batch_length < MIN_BATCH_LENGTH or batch_size > size:
        raise InvalidBatch(
            ErrorCode.corrupt_message,
            f"batch length {header.batch_length} does not fit the {size} bytes sent",
        )
    if batch_size != size:
        raise InvalidBatch(
            ErrorCode.invalid_record,
            "produce requests may carry exactly one record batch per partition",
        )
    if header.record_count <= 0 or header.last_offset_delta + 1 != header.record_count:
        # LogValidator: "Inconsistent batch offset range"; offsets are assigned
        # from lastOffsetDelta, so a mismatch would corrupt the offset space.
        raise InvalidBatch(
            ErrorCode.invalid_record,
            f"batch claims {header.record_count} records but a last offset delta of "
            f"{header.last_offset_delta}",
        )
    # crc_ok's check, the batch being the whole buffer
    if checksum.crc32c(memoryview(buf)[CRC_START:size]) != header.crc:
        raise InvalidBatch(ErrorCode.corrupt_message, "record batch CRC-32C mismatch")
    return header


def check_batch(
    buf,
    position: int = 0,
    end: int | None = None,
    *,
    check_crc: bool = False,
    sequential: bool = False,
    expect_base: int | None = None,
    end_offset: int = -1,
    origin: int = 0,
) -> BatchHeader | str:
    """The batch at ``position`` of ``buf[:end]`` if it is a whole, well-formed batch, else
    why not (a short sentence). The one judgement every walker of stored batches makes;
    what to do with a bad batch (stop, cut, skip ahead) is the caller's.

    ``sequential``: the batch must hold a forward offset range (lastOffsetDelta >= 0);
    ``expect_base``: and start at that offset (a batch copied in but not yet given its
    offset when the broker died still carries the producer's) - or, in a sealed segment
    whose end (the next segment's base, ``end_offset``) is known, anywhere from there to
    that end: compaction leaves gaps, and only sealed segments are compacted. ``origin``
    is added to the header's ``position``: where ``buf`` starts in the file it was read from. Without
    ``check_crc`` only the header need be in ``buf``; ``end`` may then lie beyond it.
    """
    if end is None:
        end = len(buf)
    if position + HEADER_SIZE > end:
        return f"{end - position} bytes left, fewer than a batch header"
    fields = HEADER.unpack_from(buf, position)
    length = fields[1]
    stop = position + length + LOG_OVERHEAD
    if length < MIN_BATCH_LENGTH:
        return f"batch length {length}"
    if fields[3] != 2:
        return f"magic {fields[3]}"
    if stop > end:
        return f"batch of {length + LOG_OVERHEAD} bytes runs past the end of the file ({end})"
    if sequential:
        if fields[6] < 0:
            return f"last offset delta {fields[6]}"
        if expect_base is not None and fields[0] != expect_base:
            if end_offset < 0:
                return f"base offset {fields[0]}, expected {expect_base}"
            if not expect_base < fields[0] <= fields[0] + fields[6] < end_offset:
                return f"base offset {fields[0]}, expected {expect_base} up to {end_offset}"
    if check_crc:
        if stop > len(buf):
            return "short read"  # ``end`` promised bytes ``buf`` does not hold
        actual = checksum.crc32c(memoryview(buf)[position + CRC_START : stop])
        if actual != fields[4]:
            return f"crc mismatch: stored {fields[4]:#010x}, computed {actual:#010x}"
    return _new_header(BatchHeader, (origin + position, *fields))


def iter_headers(
    buf,
    start: int = 0,
    end: int | None = None,
    check_crc: bool = False,
    *,
    sequential: bool = False,
    expect_base: int | None = None,
    end_offset: int = -1,
    origin: int = 0,
):
    """Yield the headers of consecutive complete batches in ``buf[start:end]``.

    Stops quietly at the first batch ``check_batch`` refuses: incomplete, zeroed
    (preallocated space) or, with ``check_crc``, corrupt; with ``sequential``, also at
    one whose offsets do not follow the batch before it (``expect_base`` for the
    first; ``end_offset`` as for ``check_batch``). The caller learns where by comparing
    the last header's ``end`` with ``end`` (``origin``, as for ``check_batch``, is added
    to every position).
    """
    if end is None:
        end = len(buf)
    pos = start
    while pos + HEADER_SIZE <= end:
        header = check_batch(buf, pos, end, check_crc=check_crc, sequential=sequential,
                             expect_base=expect_base, end_offset=end_offset, origin=origin)
        if isinstance(header, str):
            return
        yield header
        pos = header.end - origin
        if sequential:
            expect_base = header.last_offset + 1


def set_base_offset(buf, position: int, base_offset: int) -> None:
    _I64.pack_into(buf, position, base_offset)


def first_batch_transactional(buf) -> bool:
    """Whether a Produce partition's first batch is transactional (Kafka's
    RequestUtils.hasTransactionalRecords looks at the first batch of each partition only);
    read from the attributes of a v2 batch without validating it."""
    if buf is None or len(buf) < _ATTRIBUTES_END or buf[_MAGIC_AT] != 2:
        return False
    return bool(int.from_bytes(buf[_ATTRIBUTES_END - 2:_ATTRIBUTES_END], "big") & TRANSACTIONAL_BIT)


# base offset (8), length (4), partition leader epoch (4), then magic (1), crc (4), attributes (2)
_MAGIC_AT = 16
_ATTRIBUTES_END = 23
