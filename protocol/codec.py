"""Typed request/response bodies through kio (Kafka's own JSON schemas).

Readers and writers are built lazily and cached: building all of them up front
costs seconds of start-up time.
"""

from __future__ import annotations

import io
from functools import cache

from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from . import guard, schemas
from .api_keys import ApiKey
from .header import response_header


class DecodeError(Exception):
    """The body does not match the schema of its api key and version."""


@cache
def request_type(api_key: int, version: int):
    """The kio request class (kio's, else one of :mod:`.schemas` for what kio 0.6.5 lacks), or
    None when there is no such key/version."""
    try:
        return load_request_schema(api_key, version)
    except (UnknownAPIKey, UnknownEntity):
        return schemas.load(api_key, version, request=True)


@cache
def response_type(api_key: int, version: int):
    try:
        return load_response_schema(api_key, version)
    except (UnknownAPIKey, UnknownEntity):
        cls = schemas.load(api_key, version, request=False)
        if cls is None:
            raise
        return cls


@cache
def _reader(api_key: int, version: int):
    return entity_reader(request_type(api_key, version))


@cache
def _writer(cls):
    return entity_writer(cls)


# Per API key: (lowest, highest) version served (minibroker/config/served_apis.py) and the first
# flexible version (KIP-482: compact strings, tagged fields, request header v2) as flexibleVersions
# in Kafka's message schemas (clients/src/main/resources/common/message/*Request.json) gives it;
# None: never flexible (SaslHandshake, OffsetDelete). is_flexible_request reads it rather than
# import kio's schema package of the key and version (its request and response modules, ~1-2 ms on
# a start's first request of each API, issue 33), which the APIs decoded by hand (Produce, Fetch,
# EndTxn, AddPartitionsToTxn) never use otherwise. Other keys and versions are kio's to answer.
# tests/protocol/test_codec_flexible.py holds every entry to kio's schemas.
FLEXIBLE_REQUESTS: dict[int, tuple[int, int, int | None]] = {
    0: (3, 13, 9), 1: (4, 18, 12), 2: (1, 11, 6), 3: (0, 13, 9), 8: (2, 10, 8), 9: (1, 10, 6),
    10: (0, 6, 3), 11: (0, 9, 6), 12: (0, 4, 4), 13: (0, 5, 4), 14: (0, 5, 4), 15: (0, 6, 5),
    16: (0, 5, 3), 17: (0, 1, None), 18: (0, 5, 3), 19: (2, 7, 5), 20: (1, 6, 4), 21: (0, 2, 2),
    22: (0, 5, 2), 23: (2, 4, 4), 24: (0, 5, 3), 25: (0, 4, 3), 26: (0, 5, 3), 27: (1, 2, 1),
    28: (0, 6, 3), 29: (1, 3, 2), 30: (1, 3, 2), 31: (1, 3, 2), 32: (1, 4, 4), 33: (0, 2, 2),
    34: (1, 2, 2), 35: (1, 5, 2), 36: (0, 2, 2), 37: (0, 3, 2), 38: (1, 3, 2), 39: (1, 2, 2),
    40: (1, 2, 2), 41: (1, 3, 2), 42: (0, 3, 2), 43: (0, 2, 2), 44: (0, 1, 1), 45: (0, 1, 0),
    46: (0, 0, 0), 47: (0, 0, None), 48: (0, 1, 1), 49: (0, 1, 1), 50: (0, 0, 0), 51: (0, 0, 0),
    55: (0, 2, 0), 57: (0, 2, 0), 60: (0, 2, 0), 61: (0, 0, 0), 64: (0, 0, 0), 65: (0, 0, 0),
    66: (0, 2, 0), 68: (0, 1, 0), 69: (0, 1, 0), 71: (0, 0, 0), 72: (0, 0, 0), 74: (0, 1, 0),
    75: (0, 0, 0), 76: (1, 1, 1), 77: (1, 1, 1), 78: (1, 2, 1), 79: (1, 2, 1), 88: (0, 1, 0),
    89: (0, 1, 0), 90: (0, 1, 0), 91: (0, 0, 0), 92: (0, 0, 0), 93: (0, 0, 0),
}


def is_flexible_request(api_key: int, version: int) -> bool:
    known = FLEXIBLE_REQUESTS.get(api_key)
    if known is not None and known[0] <= version <= known[1]:
        return known[2] is not None and version >= known[2]
    cls = request_type(api_key, version)
    return bool(cls is not None and cls.__flexible__)


def is_flexible_response(api_key: int, version: int) -> bool:
    if api_key == ApiKey.ApiVersions:
        return False
    return bool(response_type(api_key, version).__flexible__)


def decode_request(api_key: int, version: int, body):
    cls = request_type(api_key, version)
    if cls is None:
        raise DecodeError(f"no schema for api {api_key} v{version}")
    try:
        guard.check(cls, body)
    except guard.GuardError as e:
        raise DecodeError(f"api {api_key} v{version}: {e}") from None
    try:
        entity, size = _reader(api_key, version)(body, 0)
    except Exception as e:  # kio raises KeyError, ValueError and its own DecodeErrors
        raise DecodeError(f"cannot decode api {api_key} v{version}: {e!r}") from e
    # Bytes after the body are ignored, as Kafka's generated readers do:
    # librdkafka 2.16 leaves three after a Metadata v12 all-topics request.
    return entity


def encode_body(entity) -> bytes:
    buf = io.BytesIO()
    cls: type = type(entity)
    _writer(cls)(buf, entity)
    return buf.getvalue()


def encode_response(correlation_id: int, entity) -> bytes:
    """Response header + body, without the size prefix."""
    flexible = is_flexible_response(entity.__api_key__, entity.__version__)
    return response_header(correlation_id, flexible) + encode_body(entity)


def encode_request(entity, correlation_id: int, client_id: str | None = "minibroker") -> bytes:
    """Header + body of a request, for tests and tools that craft raw traffic."""
    import struct

    flexible = bool(entity.__flexible__)
    cid = b"" if client_id is None else client_id.encode()
    head = struct.pack(
        ">hhih", entity.__api_key__, entity.__version__, correlation_id,
        -1 if client_id is None else len(cid),
    ) + cid
    if flexible:
        head += b"\x00"
    return head + encode_body(entity)
