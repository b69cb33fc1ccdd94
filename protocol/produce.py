"""Hand-written Produce request decoder (the hot path).

kio would copy every partition's records into a new ``bytes``; this decoder
hands them out as memoryviews of the request frame, so a batch is copied once,
into the segment. Layout from Kafka's ProduceRequest.json, v3-v13 (v9+
flexible; v13 names each topic by its id instead of its name, KIP-516).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from .header import HeaderError, read_uvarint, skip_tagged_fields
from .header import write_uvarint as _uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")

MIN_VERSION = 3
MAX_VERSION = 13
FLEXIBLE_FROM = 9
TOPIC_IDS_FROM = 13


class ProduceDecodeError(Exception):
    pass


@dataclass(slots=True)
class ProducePartition:
    """A partition of a Produce request: its index and its records, undecoded."""
    index: int
    records: memoryview | None


@dataclass(slots=True)
class ProduceTopic:
    """A topic of a Produce request as the hand-written reader decodes it."""
    name: str  # "" from v13 until the broker resolves topic_id
    partitions: list[ProducePartition]
    topic_id: uuid.UUID | None = None


@dataclass(slots=True)
class ProduceRequest:
    """A Produce request as the hand-written reader decodes it."""
    version: int
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topics: list[ProduceTopic]


def decode_produce(body: memoryview, version: int) -> ProduceRequest:
    try:
        if version >= FLEXIBLE_FROM:
            return _decode_flexible(body, version)
        return _decode_legacy(body, version)
    except (struct.error, IndexError, UnicodeDecodeError, ValueError, HeaderError) as e:
        raise ProduceDecodeError(f"malformed Produce v{version}: {e}") from e


def _check(body, end: int) -> None:
    if end > len(body):
        raise ProduceDecodeError("field runs past the end of the request")


def _decode_legacy(body, version: int) -> ProduceRequest:
    (tlen,) = _I16.unpack_from(body, 0)
    pos = 2
    txn_id = None
    if tlen >= 0:
        _check(body, pos + tlen)
        txn_id = bytes(body[pos : pos + tlen]).decode()
        pos += tlen
    acks, timeout = _ACKS_TIMEOUT.unpack_from(body, pos)
    pos += 6
    (ntopics,) = _I32.unpack_from(body, pos)
    pos += 4
    if ntopics < 0 or ntopics > len(body):
        raise ProduceDecodeError(f"invalid topic count {ntopics}")
    topics = []
    for _ in range(ntopics):
        (nlen,) = _I16.unpack_from(body, pos)
        pos += 2
        if nlen < 0:
            raise ProduceDecodeError("null topic name")
        _check(body, pos + nlen)
        name = bytes(body[pos : pos + nlen]).decode()
        pos += nlen
        (nparts,) = _I32.unpack_from(body, pos)
        pos += 4
        if nparts < 0 or nparts > len(body):
            raise ProduceDecodeError(f"invalid partition count {nparts}")
        parts = []
        for _ in range(nparts):
            index, rlen = struct.unpack_from(">ii", body, pos)
            pos += 8
            records = None
            if rlen >= 0:
                _check(body, pos + rlen)
                records = body[pos : pos + rlen]
                pos += rlen
            parts.append(ProducePartition(index, records))
        topics.append(ProduceTopic(name, parts))
    if pos != len(body):
        raise ProduceDecodeError(f"{len(body) - pos} trailing bytes")
    return ProduceRequest(version, txn_id, acks, timeout, topics)


def _decode_flexible(body, version: int) -> ProduceRequest:
    tlen, pos = read_uvarint(body, 0)
    txn_id = None
    if tlen:
        end = pos + tlen - 1
        _check(body, end)
        txn_id = bytes(body[pos:end]).decode()
        pos = end
    acks, timeout = _ACKS_TIMEOUT.unpack_from(body, pos)
    pos += 6
    ntopics, pos = read_uvarint(body, pos)
    ntopics -= 1
    if ntopics < 0 or ntopics > len(body):
        raise ProduceDecodeError("invalid topic count")
    topics = []
    by_id = version >= TOPIC_IDS_FROM
    for _ in range(ntopics):
        topic_id = None
        if by_id:
            _check(body, pos + 16)
            topic_id = uuid.UUID(bytes=bytes(body[pos:pos + 16]))
            name = ""
            pos += 16
        else:
            nlen, pos = read_uvarint(body, pos)
            if nlen == 0:
                raise ProduceDecodeError("null topic name")
            end = pos + nlen - 1
            _check(body, end)
            name = bytes(body[pos:end]).decode()
            pos = end
        nparts, pos = read_uvarint(body, pos)
        nparts -= 1
        if nparts < 0 or nparts > len(body):
            raise ProduceDecodeError("invalid partition count")
        parts = []
        for _ in range(nparts):
            (index,) = _I32.unpack_from(body, pos)
            pos += 4
            rlen, pos = read_uvarint(body, pos)
            records = None
            if rlen:
                end = pos + rlen - 1
                _check(body, end)
                records = body[pos:end]
                pos = end
            pos = skip_tagged_fields(body, pos)
            parts.append(ProducePartition(index, records))
        pos = skip_tagged_fields(body, pos)
        topics.append(ProduceTopic(name, parts, topic_id))
    pos = skip_tagged_fields(body, pos)
    if pos != len(body):
        raise ProduceDecodeError(f"{len(body) - pos} trailing bytes")
    return ProduceRequest(version, txn_id, acks, timeout, topics)


# --- the answer ------------------------------------------------------------------------------
# Hand-written for the same reason as the decoder: kio's generic writer walks every field of
# every entity through isinstance checks and a BytesIO, about 40 % of a Produce request's CPU
# when a request carries one small batch. Same bytes as kio's ProduceResponse v3-v13 for the
# fields the broker sets (tests/protocol/test_produce_encode.py compares them); the tagged
# fields (CurrentLeader, NodeEndpoints, v10+) keep their defaults and so are not written.

_I16_BE = struct.Struct(">h")
_PARTITION_HEAD = struct.Struct(">ihqq")  # index, error code, base offset, log append time
_PARTITION_V5 = struct.Struct(">ihqqq")  # and the log start offset, from v5
# the usual partition answer with its tail in the same struct call: an empty record-error array
# (compact: 1; from v8: int32 0) and a null message (compact: 0; int16 -1), then no tagged fields
_PLAIN_FLEX = struct.Struct(">ihqqqBxx")
_PLAIN_V8 = struct.Struct(">ihqqq4xh")
_I64 = struct.Struct(">q")
# the pieces of an answer with record errors or a message (v8+)
_EMPTY_ARRAY_FLEX = b"\x01"
_NULL_FLEX = b"\x00"
_NULL_LEGACY = b"\xff\xff"

# (index, error code, base offset, log append time ms (-1 for CreateTime), log start offset,
#  record errors as (batch index, message), error message)
PartitionAnswer = tuple[int, int, int, int, int, tuple[tuple[int, str | None], ...], str | None]


_NAMES: dict[tuple[str, bool], bytes] = {}  # topic names as encoded, asked again on every answer
_NAMES_MAX = 4096  # dropped whole when full: a bound, not an LRU


def _string(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return _NULL_FLEX if flexible else _NULL_LEGACY
    raw = s.encode()
    return (_uvarint(len(raw) + 1) if flexible else _I16_BE.pack(len(raw))) + raw


def _count(n: int, flexible: bool) -> bytes:
    return _uvarint(n + 1) if flexible else _I32.pack(n)


def encode_produce_response(correlation_id: int, version: int,
                            topics: list[tuple[str, uuid.UUID | None, list[PartitionAnswer]]],
                            throttle_ms: int = 0) -> bytes:
    """Response header and ProduceResponse body, without the size prefix."""
    flexible = version >= FLEXIBLE_FROM
    out = [_I32.pack(correlation_id)]
    if flexible:
        out.append(b"\x00")
    out.append(_count(len(topics), flexible))
    for name, topic_id, parts in topics:
        if version >= TOPIC_IDS_FROM:
            out.append(topic_id.bytes if topic_id is not None else bytes(16))
        else:
            encoded = _NAMES.get((name, flexible))
            if encoded is None:
                if len(_NAMES) >= _NAMES_MAX:
                    _NAMES.clear()
                encoded = _NAMES[(name, flexible)] = _string(name, flexible)
            out.append(encoded)
        out.append(_count(len(parts), flexible))
        for index, error, base_offset, append_time, log_start, record_errors, message in parts:
            if version >= 5 and not record_errors and message is None:
                # the usual answer, whole: no record errors, no message, no tagged fields
                if flexible:
                    out.append(_PLAIN_FLEX.pack(index, error, base_offset, append_time, log_start, 1))
                elif version >= 8:
                    out.append(_PLAIN_V8.pack(index, error, base_offset, append_time, log_start, -1))
                else:
                    out.append(_PARTITION_V5.pack(index, error, base_offset, append_time, log_start))
                continue
            out.append(_PARTITION_HEAD.pack(index, error, base_offset, append_time))
            if version >= 5:
                out.append(_I64.pack(log_start))
            if version >= 8:
                if not record_errors:
                    out.append(_EMPTY_ARRAY_FLEX if flexible else b"\x00\x00\x00\x00")
                else:
                    out.append(_count(len(record_errors), flexible))
                    for batch_index, batch_message in record_errors:
                        out.append(_I32.pack(batch_index))
                        out.append(_string(batch_message, flexible))
                        if flexible:
                            out.append(b"\x00")
                out.append(_string(message, flexible))
            if flexible:
                out.append(b"\x00")
        if flexible:
            out.append(b"\x00")
    out.append(_I32.pack(throttle_ms))
    if flexible:
        out.append(b"\x00")
    return b"".join(out)


def with_throttle(data: bytes, version: int, throttle_ms: int) -> bytes:
    """An encoded answer (``encode_produce_response``'s) with its ThrottleTimeMs set: the
    body's last field, before the top-level tagged fields from v9 (none are written)."""
    end = len(data) - 1 if version >= FLEXIBLE_FROM else len(data)
    return data[:end - 4] + _I32.pack(throttle_ms) + data[end:]
