"""Request and response headers.

Request header v1 (non-flexible APIs) is api_key, api_version, correlation_id,
client_id (int16-prefixed nullable string); v2 (flexible APIs) appends tagged
fields. Response header v0 is the correlation id; v1 appends tagged fields.
ApiVersions answers always use response header v0 so a client can parse the
answer before it knows which versions the broker speaks (KIP-511).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_PREFIX = struct.Struct(">hhih")
_CORR = struct.Struct(">i")


class HeaderError(Exception):
    """The request header cannot be parsed: Kafka closes the connection."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """A request's header fields (Kafka's RequestHeader v0-v2)."""
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the request body starts in the frame


def read_uvarint(buf, pos: int, end: int | None = None) -> tuple[int, int]:
    """Unsigned varint at ``pos``, read no further than ``end`` (default: the buffer's end)."""
    if end is None:
        end = len(buf)
    if pos < end:
        b = buf[pos]
        if b < 0x80:  # one byte: nearly every length and count of a request
            return b, pos + 1
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise HeaderError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise HeaderError("varint too long")


_SMALL_UVARINTS = [bytes((n,)) for n in range(0x80)]  # counts and name lengths: made once


def write_uvarint(value: int) -> bytes:
    if value < 0x80:
        return _SMALL_UVARINTS[value]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def skip_tagged_fields(buf, pos: int) -> int:
    if pos < len(buf) and buf[pos] == 0:
        return pos + 1  # no tagged fields, the usual case
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise HeaderError("tagged field runs past the end of the frame")
    return pos


def peek_header(frame) -> tuple[int, int, int]:
    """api_key, api_version, correlation_id: enough to route or to refuse."""
    if len(frame) < 8:
        raise HeaderError(f"frame of {len(frame)} bytes is too short for a request header")
    api_key, api_version, corr = struct.unpack_from(">hhi", frame, 0)
    return api_key, api_version, corr


def read_request_header(frame, flexible: bool) -> RequestHeader:
    if len(frame) < _PREFIX.size:
        raise HeaderError(f"frame of {len(frame)} bytes is too short for a request header")
    api_key, api_version, corr, client_len = _PREFIX.unpack_from(frame, 0)
    pos = _PREFIX.size
    client_id = None
    if client_len >= 0:
        end = pos + client_len
        if end > len(frame):
            raise HeaderError("client_id runs past the end of the frame")
        try:
            client_id = bytes(frame[pos:end]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise HeaderError("client_id is not UTF-8") from e
        pos = end
    elif client_len != -1:
        raise HeaderError(f"invalid client_id length {client_len}")
    if flexible:
        pos = skip_tagged_fields(frame, pos)
    return RequestHeader(api_key, api_version, corr, client_id, pos)


def response_header(correlation_id: int, flexible: bool) -> bytes:
    if flexible:
        return _CORR.pack(correlation_id) + b"\x00"
    return _CORR.pack(correlation_id)
