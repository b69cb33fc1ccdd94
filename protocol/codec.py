"""Typed request/response bodies through kio (Kafka's own JSON schemas).

Readers and writers are built lazily and cached: building all of them up front
costs seconds of start-up time.
"""

from __future__ import annotations

import io
from functools import cache

from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from . import guard, schemas_44
from .api_keys import ApiKey
from .header import response_header


class DecodeError(Exception):
    """The body does not match the schema of its api key and version."""


@cache
def request_type(api_key: int, version: int):
    """The kio request class (or schemas_44's, for a 4.4 version kio lacks), or None when
    neither has the key/version."""
    extra = schemas_44.REQUESTS.get((api_key, version))
    if extra is not None:
        return extra
    try:
        return load_request_schema(api_key, version)
    except (UnknownAPIKey, UnknownEntity):
        return None


@cache
def response_type(api_key: int, version: int):
    extra = schemas_44.RESPONSES.get((api_key, version))
    if extra is not None:
        return extra
    return load_response_schema(api_key, version)


@cache
def _reader(api_key: int, version: int):
    return entity_reader(request_type(api_key, version))


@cache
def _writer(cls):
    return entity_writer(cls)


def is_flexible_request(api_key: int, version: int) -> bool:
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
