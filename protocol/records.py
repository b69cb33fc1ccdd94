"""Records inside a RecordBatch v2 (Kafka's DefaultRecordBatch / DefaultRecord).

The broker itself never looks past the 61-byte header (see ``batch.py``); this
module is for tools (dump-log), tests and the transaction coordinator's
end-transaction markers. It decodes whole batches, decompressing them, and
builds batches with any of Kafka's codecs.

Record layout (all varints zigzag, as in protobuf ``sint``)::

    length: varint            bytes after this field
    attributes: int8          unused, 0
    timestampDelta: varlong   relative to the batch's baseTimestamp
    offsetDelta: varint       relative to the batch's baseOffset
    keyLength: varint         -1 for a null key
    key: bytes
    valueLength: varint       -1 for a null value
    value: bytes
    headerCount: varint
    headers: [keyLength varint, key utf-8, valueLength varint (-1 null), value]

With compression (attributes & 7) only the records section, after the
header, is compressed; ``recordCount`` stays in the plain header.
"""

from __future__ import annotations

import gzip
import struct
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from . import checksum
from .batch import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC_START,
    DELETE_HORIZON_BIT,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    InvalidBatch,
    read_header,
)
from .errors import ErrorCode

__all__ = [
    "COMPRESSION_NONE",
    "COMPRESSION_GZIP",
    "COMPRESSION_SNAPPY",
    "COMPRESSION_LZ4",
    "COMPRESSION_ZSTD",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "Record",
    "build_batch",
    "build_control_batch",
    "build_keyed_batch",
    "empty_batch",
    "rebuild_batch",
    "compress",
    "decode_batch",
    "decode_varint",
    "decode_varlong",
    "decompress",
    "encode_varint",
    "encode_varlong",
    "parse_control_record",
    "parse_end_txn_marker",
]

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4
_CODEC_NAMES = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")  # version, type (ControlRecordType)
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch (EndTransactionMarker)

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


# --------------------------------------------------------------------------
# Zigzag varints (ByteUtils.writeVarint / writeVarlong)
# --------------------------------------------------------------------------

# The common case, small lengths and deltas, is a single table lookup.
_SMALL = {n: bytes((((n << 1) ^ (n >> 63)),)) for n in range(-64, 64)}


def _encode_zigzag(n: int) -> bytes:
    small = _SMALL.get(n)
    if small is not None:
        return small
    z = (n << 1) ^ (n >> 63)  # exact for any int64 thanks to Python's big ints
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def encode_varint(n: int) -> bytes:
    """Zigzag-encode a signed 32-bit integer (1 to 5 bytes)."""
    if not _INT32_MIN <= n <= _INT32_MAX:
        raise ValueError(f"{n} does not fit a varint (int32)")
    return _encode_zigzag(n)


def encode_varlong(n: int) -> bytes:
    """Zigzag-encode a signed 64-bit integer (1 to 10 bytes)."""
    if not _INT64_MIN <= n <= _INT64_MAX:
        raise ValueError(f"{n} does not fit a varlong (int64)")
    return _encode_zigzag(n)


def _decode_zigzag(buf, pos: int, max_bytes: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    z = b & 0x7F
    shift = 7
    for i in range(pos + 1, pos + max_bytes):
        b = buf[i]
        z |= (b & 0x7F) << shift
        if b < 0x80:
            if z >> (32 if max_bytes == 5 else 64):
                raise ValueError(f"varint at {pos} overflows {max_bytes} bytes' type")
            return (z >> 1) ^ -(z & 1), i + 1
        shift += 7
    raise ValueError(f"varint at {pos} is longer than {max_bytes} bytes")


def decode_varint(buf, pos: int = 0) -> tuple[int, int]:
    """Decode a zigzag int32 at ``pos``; returns (value, position after it)."""
    return _decode_zigzag(buf, pos, 5)


def decode_varlong(buf, pos: int = 0) -> tuple[int, int]:
    """Decode a zigzag int64 at ``pos``; returns (value, position after it)."""
    return _decode_zigzag(buf, pos, 10)


# --------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------


@dataclass(slots=True)
class Record:
    """One decoded record of a batch."""
    offset: int
    timestamp: int  # epoch milliseconds
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    attributes: int = 0  # the per-record int8; Kafka always writes 0


# --------------------------------------------------------------------------
# Compression
# --------------------------------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16  # magic, int32 version 1, int32 minimum compatible version 1
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size, used by Kafka
_I32 = struct.Struct(">i")


def _cramjam():
    # snappy, LZ4 and zstd: imported with the first batch that uses one, not at start-up
    import cramjam

    return cramjam


def _snappy_decompress(data) -> bytes:
    data = memoryview(data)
    if bytes(data[:8]) != _XERIAL_MAGIC:
        return bytes(_cramjam().snappy.decompress_raw(data))
    out = bytearray()
    pos, end = _XERIAL_HEADER, len(data)
    while pos < end:
        if pos + 4 > end:
            raise ValueError("truncated xerial snappy block length")
        (size,) = _I32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise ValueError(f"xerial snappy block of {size} bytes overruns the data")
        out += _cramjam().snappy.decompress_raw(data[pos : pos + size])
        pos += size
    return bytes(out)


def _snappy_compress(data: bytes) -> bytes:
    out = bytearray(_XERIAL_MAGIC)
    out += struct.pack(">ii", 1, 1)
    view = memoryview(data)
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(_cramjam().snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        out += _I32.pack(len(block))
        out += block
    return bytes(out)


def decompress(codec: int, data) -> bytes:
    """Decompress a batch's records section (``codec`` = attributes & 7)."""
    if codec == COMPRESSION_NONE:
        return bytes(data)
    if codec == COMPRESSION_GZIP:
        return gzip.decompress(data)
    if codec == COMPRESSION_SNAPPY:
        return _snappy_decompress(data)
    if codec == COMPRESSION_LZ4:
        return bytes(_cramjam().lz4.decompress(data))  # LZ4 frame format
    if codec == COMPRESSION_ZSTD:
        return bytes(_cramjam().zstd.decompress(data))
    raise ValueError(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes) -> bytes:
    """Compress a records section as Kafka's Java producer would."""
    if codec == COMPRESSION_NONE:
        return bytes(data)
    if codec == COMPRESSION_GZIP:
        return gzip.compress(data, mtime=0)
    if codec == COMPRESSION_SNAPPY:
        return _snappy_compress(data)
    if codec == COMPRESSION_LZ4:
        return bytes(_cramjam().lz4.compress(data))
    if codec == COMPRESSION_ZSTD:
        return bytes(_cramjam().zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec}")


# --------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------


def _corrupt(message: str) -> InvalidBatch:
    return InvalidBatch(ErrorCode.corrupt_message, message)


def _decode_records(data, count: int, base_offset: int, base_ts: int, log_append_ts):
    dv = _decode_zigzag
    records = []
    pos, end = 0, len(data)
    for _ in range(count):
        length, pos = dv(data, pos, 5)
        body_end = pos + length
        if length < 0 or body_end > end:
            raise ValueError(f"record length {length} overruns the batch")
        attributes = data[pos]
        ts_delta, pos = dv(data, pos + 1, 10)
        off_delta, pos = dv(data, pos, 5)
        n, pos = dv(data, pos, 5)
        if n < 0:
            key = None
        else:
            key = bytes(data[pos : pos + n])
            pos += n
        n, pos = dv(data, pos, 5)
        if n < 0:
            value = None
        else:
            value = bytes(data[pos : pos + n])
            pos += n
        nheaders, pos = dv(data, pos, 5)
        if nheaders < 0:
            raise ValueError(f"negative header count {nheaders}")
        headers = []
        for _ in range(nheaders):
            n, pos = dv(data, pos, 5)
            if n < 0:
                raise ValueError("null header key")
            hkey = bytes(data[pos : pos + n]).decode("utf-8", "replace")
            pos += n
            n, pos = dv(data, pos, 5)
            if n < 0:
                hvalue = None
            else:
                hvalue = bytes(data[pos : pos + n])
                pos += n
            headers.append((hkey, hvalue))
        if pos != body_end:
            raise ValueError(
                f"record declares {length} bytes but its fields take "
                f"{length + pos - body_end}"
            )
        records.append(
            Record(
                base_offset + off_delta,
                base_ts + ts_delta if log_append_ts is None else log_append_ts,
                key,
                value,
                headers,
                attributes if attributes < 128 else attributes - 256,
            )
        )
    if pos != end:
        raise ValueError(f"{end - pos} bytes left after the batch's {count} records")
    return records


def decode_batch(view, position: int = 0) -> list[Record]:
    """Decode the whole batch starting at ``position`` (header and records).

    Decompresses according to the attributes. The CRC is not checked (use
    ``batch.crc_ok``). Raises ``InvalidBatch`` (CORRUPT_MESSAGE) when the
    batch is truncated or its records do not parse.
    """
    view = memoryview(view).cast("B")
    if len(view) - position < HEADER_SIZE:
        raise _corrupt(f"{len(view) - position} bytes are shorter than a batch header")
    header = read_header(view, position)
    if header.magic != 2:
        raise _corrupt(f"only magic 2 batches decode, got magic {header.magic}")
    if header.batch_length < MIN_BATCH_LENGTH or header.end > len(view):
        raise _corrupt(f"batch length {header.batch_length} overruns the buffer")
    if header.record_count < 0:
        raise _corrupt(f"negative record count {header.record_count}")
    section = view[position + HEADER_SIZE : header.end]
    try:
        data = decompress(header.attributes & COMPRESSION_MASK, section)
    except Exception as exc:
        raise _corrupt(f"cannot decompress the records: {exc}") from exc
    log_append_ts = (
        header.max_timestamp if header.attributes & TIMESTAMP_TYPE_BIT else None
    )
    try:
        return _decode_records(
            data,
            header.record_count,
            header.base_offset,
            header.base_timestamp,
            log_append_ts,
        )
    except (ValueError, IndexError) as exc:
        raise _corrupt(f"malformed records: {exc}") from exc


def parse_control_record(key: bytes | None) -> tuple[int, int]:
    """(version, type) of a control record's key; type 0 ABORT, 1 COMMIT."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise ValueError(f"control record key must have at least 4 bytes: {key!r}")
    version, type_ = _CONTROL_KEY.unpack_from(key, 0)
    if version < 0:
        raise ValueError(f"invalid control record version {version}")
    return version, type_


def parse_end_txn_marker(value: bytes | None) -> tuple[int, int]:
    """(version, coordinatorEpoch) of an end-transaction marker's value."""
    if value is None or len(value) < _END_TXN_VALUE.size:
        raise ValueError(f"end transaction marker value too short: {value!r}")
    version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value, 0)
    if version < 0:
        raise ValueError(f"invalid end transaction marker version {version}")
    return version, coordinator_epoch


# --------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------


def _as_bytes(data) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode()
    return bytes(data)


def _sized(data: bytes | None) -> bytes:
    if data is None:
        return b"\x01"  # zigzag(-1)
    return encode_varint(len(data)) + data


_RECORD_FIELDS = {"key", "value", "headers", "timestamp", "attributes"}


def _normalize(item, now: int) -> tuple[int, bytes | None, bytes | None, list, int]:
    """(timestamp, key, value, headers, attributes) from any accepted shape."""
    if isinstance(item, Record):
        return item.timestamp, item.key, item.value, item.headers, item.attributes
    if isinstance(item, Mapping):
        unknown = item.keys() - _RECORD_FIELDS
        if unknown:
            raise TypeError(f"unknown record fields {sorted(unknown)}")
        ts = item.get("timestamp")
        return (
            now if ts is None else ts,
            item.get("key"),
            item.get("value"),
            item.get("headers") or [],
            item.get("attributes", 0),
        )
    if isinstance(item, tuple) and len(item) in (2, 3):
        return now, item[0], item[1], item[2] if len(item) == 3 else [], 0
    raise TypeError(f"cannot make a record from {item!r}")


def _encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key,
    value,
    headers: Iterable[tuple],
    attributes: int,
) -> bytes:
    parts = [
        struct.pack(">b", attributes),
        encode_varlong(timestamp_delta),
        encode_varint(offset_delta),
        _sized(_as_bytes(key)),
        _sized(_as_bytes(value)),
    ]
    headers = list(headers)
    parts.append(encode_varint(len(headers)))
    for hkey, hvalue in headers:
        if hkey is None:
            raise ValueError("record header keys cannot be null")
        parts.append(_sized(_as_bytes(hkey)))
        parts.append(_sized(_as_bytes(hvalue)))
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def _assemble(
    *,
    records_section: bytes,
    record_count: int,
    base_offset: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
) -> bytes:
    out = bytearray(HEADER_SIZE + len(records_section))
    HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - LOG_OVERHEAD,
        partition_leader_epoch,
        2,
        0,  # crc, filled in below
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
    )
    out[HEADER_SIZE:] = records_section
    struct.pack_into(">I", out, CRC_START - 4, checksum.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def build_batch(
    records,
    *,
    base_offset: int = 0,
    compression: int | str = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    partition_leader_epoch: int = 0,
    timestamp_type: int = 0,
) -> bytes:
    """Build one RecordBatch v2 holding ``records`` at consecutive offsets.

    Each record is a ``Record`` (its ``offset`` is ignored: record i gets
    ``base_offset + i``), a ``(key, value)`` or ``(key, value, headers)``
    tuple, or a dict with any of key/value/headers/timestamp/attributes.
    Missing timestamps are now, in ms. Keys, values and header keys/values
    may also be ``str`` (UTF-8). ``compression`` is a codec id (0-4) or name.
    ``timestamp_type=1`` marks LogAppendTime: readers then take every
    record's timestamp from maxTimestamp.
    """
    if isinstance(compression, str):
        compression = _CODEC_NAMES[compression.lower()]
    if not 0 <= compression <= 4:
        raise ValueError(f"unknown compression codec {compression}")
    now = _now_ms()
    items = [_normalize(item, now) for item in records]
    if not items:
        raise ValueError("a record batch needs at least one record")
    base_ts = items[0][0]
    encoded = [
        _encode_record(i, ts - base_ts, key, value, headers, attrs)
        for i, (ts, key, value, headers, attrs) in enumerate(items)
    ]
    attributes = compression
    if timestamp_type:
        attributes |= TIMESTAMP_TYPE_BIT
    if transactional:
        attributes |= TRANSACTIONAL_BIT
    return _assemble(
        records_section=compress(compression, b"".join(encoded)),
        record_count=len(items),
        base_offset=base_offset,
        attributes=attributes,
        last_offset_delta=len(items) - 1,
        base_timestamp=base_ts,
        max_timestamp=max(item[0] for item in items),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
    )


def build_control_batch(
    *,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    base_offset: int = 0,
    timestamp_ms: int | None = None,
    partition_leader_epoch: int = 0,
) -> bytes:
    """An end-transaction marker batch (MemoryRecords.withEndTransactionMarker)."""
    ts = _now_ms() if timestamp_ms is None else timestamp_ms
    key = _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _END_TXN_VALUE.pack(0, coordinator_epoch)
    return _assemble(
        records_section=_encode_record(0, 0, key, value, (), 0),
        record_count=1,
        base_offset=base_offset,
        attributes=TRANSACTIONAL_BIT | CONTROL_BIT,
        last_offset_delta=0,
        base_timestamp=ts,
        max_timestamp=ts,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        partition_leader_epoch=partition_leader_epoch,
    )


def build_keyed_batch(key: bytes, value: bytes | None, timestamp_ms: int | None = None) -> bytes:
    """What ``build_batch([{"key": key, "value": value}])`` builds — one record, no producer,
    no headers — in a third of the time: a coordinator writes one of these per state change
    (``__transaction_state``), three per transaction."""
    ts = _now_ms() if timestamp_ms is None else timestamp_ms
    body = (b"\x00\x00\x00" + _encode_zigzag(len(key)) + key
            + (b"\x01" if value is None else _encode_zigzag(len(value)) + value) + b"\x00")
    return _assemble(
        records_section=_encode_zigzag(len(body)) + body,
        record_count=1,
        base_offset=0,
        attributes=0,
        last_offset_delta=0,
        base_timestamp=ts,
        max_timestamp=ts,
        producer_id=NO_PRODUCER_ID,
        producer_epoch=-1,
        base_sequence=NO_SEQUENCE,
        partition_leader_epoch=0,
    )


def rebuild_batch(header, records: list[Record], delete_horizon_ms: int | None = None) -> bytes:
    """The batch ``header`` describes, holding only ``records`` (some of its own), as the
    log cleaner writes it (Kafka's MemoryRecords.buildRetainedRecordsInto).

    Offsets keep their places: the base offset and the last offset delta are the original
    batch's, so the producer's last sequence survives. With a delete horizon (KIP-534) the
    base timestamp is that horizon and the attribute bit says so; the records' timestamp
    deltas are taken from it. The codec is the original one.
    """
    if not records:
        raise ValueError("a rebuilt batch keeps at least one record; use empty_batch")
    base_ts = records[0].timestamp if delete_horizon_ms is None else delete_horizon_ms
    base = header.base_offset
    encoded = [
        _encode_record(r.offset - base, r.timestamp - base_ts, r.key, r.value, r.headers,
                       r.attributes)
        for r in records
    ]
    attributes = header.attributes & ~DELETE_HORIZON_BIT
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_BIT
    log_append = header.attributes & TIMESTAMP_TYPE_BIT
    return _assemble(
        records_section=compress(header.attributes & COMPRESSION_MASK, b"".join(encoded)),
        record_count=len(records),
        base_offset=base,
        attributes=attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=base_ts,
        max_timestamp=header.max_timestamp if log_append else max(r.timestamp for r in records),
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
    )


def empty_batch(header) -> bytes:
    """The batch ``header`` describes with no records: what the cleaner keeps of a producer's
    last batch so its sequence and epoch survive (Kafka's DefaultRecordBatch.writeEmptyHeader:
    uncompressed, both timestamps the original maximum, no delete horizon)."""
    keep = header.attributes & (TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT)
    return _assemble(
        records_section=b"",
        record_count=0,
        base_offset=header.base_offset,
        attributes=keep,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=header.max_timestamp,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
    )
