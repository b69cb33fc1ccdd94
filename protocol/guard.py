"""Bounds check of a request body before kio's native decoder sees it.

kio 0.6.5 reserves memory for a whole array from the length on the wire
before it reads an element; a forged length (2**31 - 1) makes it ask for
gigabytes and the Rust allocator aborts the process, which no ``except`` can
catch. This walk follows the same schema and refuses any length that cannot
fit in the bytes that remain (every array element takes at least one byte),
so one malformed request costs its sender the connection, not the broker its
life.
"""

from __future__ import annotations

import dataclasses
import struct
from functools import cache

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from .header import HeaderError, read_uvarint

_FIXED = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "timedelta_i64": 8, "datetime_i64": 8, "float64": 8,
    "uuid": 16,
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class GuardError(ValueError):
    pass


def _uvarint(buf, pos: int, end: int) -> tuple[int, int]:
    try:
        return read_uvarint(buf, pos, end)
    except HeaderError as e:
        raise GuardError(str(e)) from None


def _need(pos: int, n: int, end: int) -> int:
    if n < 0 or pos + n > end:
        raise GuardError(f"a length of {n} at byte {pos} runs past the end ({end})")
    return pos + n


def _length(buf, pos: int, end: int, flexible: bool, wide: bool) -> tuple[int, int]:
    """(length or -1 for null, next position) of a string, bytes or array prefix."""
    if flexible:
        n, pos = _uvarint(buf, pos, end)
        return n - 1, pos
    if wide:
        _need(pos, 4, end)
        return _I32.unpack_from(buf, pos)[0], pos + 4
    _need(pos, 2, end)
    return _I16.unpack_from(buf, pos)[0], pos + 2


def _primitive_skipper(kafka_type: str, flexible: bool):
    size = _FIXED.get(kafka_type)
    if size is not None:
        return lambda buf, pos, end: _need(pos, size, end)
    wide = kafka_type in ("bytes", "records")
    if kafka_type not in ("string", "bytes", "records"):
        raise GuardError(f"unknown kafka type {kafka_type}")

    def skip(buf, pos, end):
        n, pos = _length(buf, pos, end, flexible, wide)
        if n < -1:
            raise GuardError(f"negative length {n}")
        return pos if n == -1 else _need(pos, n, end)

    return skip


def _array_skipper(item_skip, item_size: int | None, flexible: bool):
    def skip(buf, pos, end):
        n, pos = _length(buf, pos, end, flexible, True)
        if n == -1:
            return pos
        if n < -1 or n > end - pos:
            raise GuardError(f"array of {n} elements cannot fit in {end - pos} bytes")
        if item_size is not None:
            return _need(pos, n * item_size, end)
        for _ in range(n):
            pos = item_skip(buf, pos, end)
        return pos

    return skip


def _field_skipper(field, flexible: bool):
    fc = classify_field(field)
    if isinstance(fc, (PrimitiveField, PrimitiveTupleField)):
        kafka_type = get_schema_field_type(field)
        inner = _primitive_skipper(kafka_type, flexible)
        if isinstance(fc, PrimitiveTupleField):
            return _array_skipper(inner, _FIXED.get(kafka_type), flexible)
        return inner
    inner = entity_skipper(fc.type_)
    if isinstance(fc, EntityTupleField):
        return _array_skipper(inner, None, flexible)
    if is_optional(field) and get_field_tag(field) is None:
        # KIP-893 nullable struct: an int8 marker, -1 for null.
        def nullable(buf, pos, end):
            _need(pos, 1, end)
            return pos + 1 if buf[pos] == 0xFF else inner(buf, pos + 1, end)
        return nullable
    assert isinstance(fc, EntityField)
    return inner


@cache
def entity_skipper(cls):
    flexible = bool(cls.__flexible__)
    plain = []
    tagged = {}
    for f in dataclasses.fields(cls):
        tag = get_field_tag(f)
        skipper = _field_skipper(f, flexible)
        if tag is None:
            plain.append(skipper)
        else:
            tagged[int(tag)] = skipper

    def skip(buf, pos, end):
        for s in plain:
            pos = s(buf, pos, end)
        if flexible:
            count, pos = _uvarint(buf, pos, end)
            if count > end - pos:
                raise GuardError(f"{count} tagged fields cannot fit in {end - pos} bytes")
            for _ in range(count):
                tag, pos = _uvarint(buf, pos, end)
                size, pos = _uvarint(buf, pos, end)
                stop = _need(pos, size, end)
                known = tagged.get(tag)
                if known is not None:
                    known(buf, pos, stop)
                pos = stop
        return pos

    return skip


def check(cls, body) -> None:
    """Raise GuardError when ``body`` holds a length kio must not be trusted with."""
    end = len(body)
    try:
        entity_skipper(cls)(body, 0, end)
    except (struct.error, IndexError) as e:
        raise GuardError(str(e)) from None
