"""ApiVersions on the server side without kio: the request read, the answer written by hand.

The broker's early listener (minibroker/net/early.py) answers a client's first request before kio's
schemas, or anything else the broker needs, are imported. The bytes must be the ones the full
broker writes through kio (tests/protocol/test_api_versions_wire.py compares them for every
version): the request and response layouts are ApiVersionsRequest.json/ApiVersionsResponse.json
in Kafka's clients/src/main/resources/common/message. The response header is always v0, even
for the flexible versions (v3+), so a client that sent a version the broker does not know can
still read the answer.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from .api_keys import ApiKey
from .header import HeaderError, read_request_header, read_uvarint, skip_tagged_fields, write_uvarint

__all__ = ["ApiVersionsRequest", "HeaderError", "MAX_VERSION", "UNSUPPORTED_VERSION", "encode_response",
           "read_request", "unsupported_version_response", "valid_software"]

MAX_VERSION = 5  # the newest version the broker serves (dispatch.py registers the same)
FLEXIBLE_FROM = 3
# ErrorCode.unsupported_version, without importing kio's error table for it
UNSUPPORTED_VERSION = 35

_H = struct.Struct(">h")
_HHH = struct.Struct(">hhh")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class ApiVersionsRequest:
    """An ApiVersions request as the early listener and the dispatcher read it."""
    version: int
    correlation_id: int
    client_id: str | None
    # v3+ (KIP-511); None below
    software_name: str | None = None
    software_version: str | None = None
    # v5+ (KIP-1242): the cluster and node the client means to reach; None / -1 when unknown
    cluster_id: str | None = None
    node_id: int = -1


def _compact_string(frame, pos: int) -> tuple[str, int]:
    n, pos = read_uvarint(frame, pos)
    if n == 0:
        raise HeaderError("null where a string is required")
    end = pos + n - 1
    if end > len(frame):
        raise HeaderError("string runs past the end of the frame")
    try:
        return bytes(frame[pos:end]).decode("utf-8"), end
    except UnicodeDecodeError as e:
        raise HeaderError("string is not UTF-8") from e


def read_request(frame) -> ApiVersionsRequest:
    """An ApiVersions request of a version the broker serves, from a frame without its size;
    HeaderError for anything else."""
    flexible = len(frame) >= 4 and _H.unpack_from(frame, 2)[0] >= FLEXIBLE_FROM
    header = read_request_header(frame, flexible)
    if header.api_key != ApiKey.ApiVersions or not 0 <= header.api_version <= MAX_VERSION:
        raise HeaderError(f"not an ApiVersions request of v0-v{MAX_VERSION}")
    if header.api_version < FLEXIBLE_FROM:
        return ApiVersionsRequest(header.api_version, header.correlation_id, header.client_id)
    name, pos = _compact_string(frame, header.body_offset)
    version, pos = _compact_string(frame, pos)
    cluster_id, node_id = None, -1
    if header.api_version >= 5:
        if pos < len(frame) and frame[pos] == 0:  # a null compact string
            pos += 1
        else:
            cluster_id, pos = _compact_string(frame, pos)
        if pos + 4 > len(frame):
            raise HeaderError("the request ends inside its node id")
        (node_id,) = _I.unpack_from(frame, pos)
        pos += 4
    pos = skip_tagged_fields(frame, pos)
    if pos != len(frame):
        raise HeaderError(f"{len(frame) - pos} bytes after the request")
    return ApiVersionsRequest(header.api_version, header.correlation_id, header.client_id, name, version,
                              cluster_id, node_id)


def valid_software(s: str | None) -> bool:
    """KIP-511's rule for a client software name or version (Kafka's ApiVersionsRequest:
    ``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?``); Kafka answers others INVALID_REQUEST."""
    if not s:
        return False
    ok = all(c.isascii() and (c.isalnum() or c in "-.") for c in s)
    return ok and s[0].isalnum() and s[-1].isalnum()


def _compact_bytes(s: str) -> bytes:
    b = s.encode()
    return write_uvarint(len(b) + 1) + b


def _tagged(tag: int, data: bytes) -> bytes:
    return write_uvarint(tag) + write_uvarint(len(data)) + data


def encode_response(correlation_id: int, version: int, error_code: int,
                    api_keys: Sequence[tuple[int, int, int]], throttle_ms: int = 0,
                    supported_features: Sequence[tuple[str, int, int]] = (),
                    finalized_epoch: int = -1,
                    finalized_features: Sequence[tuple[str, int]] = ()) -> bytes:
    """The whole frame (size first) of an ApiVersions answer of ``version``.

    ``api_keys``: (key, min, max); ``supported_features``: (name, min, max);
    ``finalized_features``: (name, level), written with the level as both its max and min
    level, as KRaft brokers do. The feature fields exist from v3 and are left out below it.
    """
    out = [_I.pack(correlation_id), _H.pack(error_code)]
    if version < FLEXIBLE_FROM:
        out.append(_I.pack(len(api_keys)))
        out.extend(_HHH.pack(*k) for k in api_keys)
        if version >= 1:
            out.append(_I.pack(throttle_ms))
    else:
        out.append(write_uvarint(len(api_keys) + 1))
        out.extend(_HHH.pack(*k) + b"\x00" for k in api_keys)
        out.append(_I.pack(throttle_ms))
        tags = []
        if supported_features:
            tags.append(_tagged(0, write_uvarint(len(supported_features) + 1) + b"".join(
                _compact_bytes(name) + _H.pack(lo) + _H.pack(hi) + b"\x00"
                for name, lo, hi in supported_features)))
        if finalized_epoch != -1:
            tags.append(_tagged(1, _Q.pack(finalized_epoch)))
        if finalized_features:
            tags.append(_tagged(2, write_uvarint(len(finalized_features) + 1) + b"".join(
                _compact_bytes(name) + _H.pack(level) + _H.pack(level) + b"\x00"
                for name, level in finalized_features)))
        out.append(write_uvarint(len(tags)))
        out.extend(tags)
    body = b"".join(out)
    return _I.pack(len(body)) + body


def unsupported_version_response(correlation_id: int) -> bytes:
    """Kafka's answer to an ApiVersions request newer than it serves: v0's layout,
    UNSUPPORTED_VERSION and only ApiVersions' own range, so the client can retry lower."""
    return encode_response(correlation_id, 0, UNSUPPORTED_VERSION,
                           ((int(ApiKey.ApiVersions), 0, MAX_VERSION),))
