"""The AVRO schema format, as Confluent Schema Registry serves it on Apache Avro 1.12 (Java).

Confluent's ``AvroSchema`` parses with ``Schema.Parser`` (strict names, defaults validated for a
new registration), answers ``Schema.toString(referencedSchemas)`` as the schema's identity, builds
``normalize()`` in ``AvroSchemaUtils.toNormalizedString`` and asks compatibility through
``SchemaCompatibility.checkReaderWriterCompatibility``. This module reimplements those Java
pieces rather than wrapping a Python Avro library: the identity string must be byte-for-byte what
Java writes (attribute order, which attributes survive, Jackson's number and string rendering),
and the compatibility answer must carry Java's incompatibility types, locations and messages,
which neither ``avro`` nor ``fastavro`` reproduce. ``tests/differential/test_avro_java.py``
compares every piece with Apache Avro's Java implementation over generated schema pairs.

Sources (Apache Avro release-1.12.2): ``Schema.java`` (parse*, toJson, isValidDefault),
``ParseContext.java`` (names, forward references), ``SchemaCompatibility.java``; Confluent
schema-registry: ``AvroSchema.java``, ``AvroSchemaUtils.toNormalizedString``, ``Difference.java``.
"""
from __future__ import annotations

import itertools
import json
import math
import re
import struct
import unicodedata
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from .base import InvalidSchema

PRIMITIVES = ("string", "bytes", "int", "long", "float", "double", "boolean", "null")
# Schema.Type's names: a name equal to one of these is written qualified (Name.shouldWriteFull).
TYPE_NAMES = frozenset(PRIMITIVES) | {"record", "enum", "array", "map", "union", "fixed"}
SCHEMA_RESERVED = frozenset(
    ("doc", "fields", "items", "name", "namespace", "size", "symbols", "values", "type", "aliases"))
ENUM_RESERVED = SCHEMA_RESERVED | {"default"}
FIELD_RESERVED = frozenset(("default", "doc", "name", "order", "type", "aliases"))
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class _Error(Exception):
    """Any Java exception the parse raises; its ``str`` is Java's ``getMessage()``."""


# --- JSON as Jackson reads and writes it --------------------------------------------------------


def _no_constant(name: str) -> Any:
    # Jackson refuses NaN/Infinity tokens (ALLOW_NON_NUMERIC_NUMBERS is off).
    raise ValueError(f"Non-standard token '{name}'")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def _java_double(x: float) -> str:
    """``Double.toString`` as Jackson's DoubleNode writes it (NaN and infinities quoted)."""
    if math.isnan(x):
        return '"NaN"'
    if math.isinf(x):
        return '"Infinity"' if x > 0 else '"-Infinity"'
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    return _java_decimal(repr(abs(x)), x < 0, 1e-3 <= abs(x) < 1e7, abs(x))


def _java_float(x: float) -> str:
    """``Float.toString`` of ``(float) x`` (a float field's default in ``normalize``)."""
    f = struct.unpack("f", struct.pack("f", x))[0]
    if math.isnan(f) or math.isinf(f) or f == 0:
        return _java_double(f)
    for digits in range(1, 10):
        text = f"{abs(f):.{digits}g}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == abs(f):
            break
    return _java_decimal(text, f < 0, 1e-3 <= abs(f) < 1e7)


def _java_decimal(shortest: str, negative: bool, plain: bool, exact: float | None = None) -> str:
    """Java's rendering of a shortest decimal: at least two significant digits, and when the
    shortest has one, the two-digit decimal nearest the exact binary value (JDK 19+'s
    Double.toString: 1e-322 is 9.9E-323; JDK 17's older algorithm differs on such values)."""
    _, digit_tuple, exponent = Decimal(shortest).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    assert isinstance(exponent, int)
    if len(digits) == 1 and exact is not None:
        value = Decimal(exact)
        two = value.scaleb(-value.adjusted() + 1).quantize(Decimal(1), rounding=ROUND_HALF_EVEN)
        if int(two) % 10 and float(two.scaleb(value.adjusted() - 1)) == exact:
            digits, exponent = str(int(two)), value.adjusted() - 1
    if plain:
        point = len(digits) + exponent  # digits before the decimal point
        if point <= 0:
            text = "0." + "0" * -point + digits
        elif point >= len(digits):
            text = digits + "0" * (point - len(digits)) + ".0"
        else:
            text = digits[:point] + "." + digits[point:]
    else:
        text = f"{digits[0]}.{digits[1:] or '0'}E{len(digits) - 1 + exponent}"
    return "-" + text if negative else text


def _jstr(s: str) -> str:
    # Jackson escapes '"', '\\' and control characters (\b \t \n \f \r short, others \u00XX)
    # and writes everything else as is, which is json.dumps without ensure_ascii. A lone
    # surrogate (a "\ud800" escape in the input) stays escaped so the text can be UTF-8.
    out = json.dumps(s, ensure_ascii=False)
    if any("\ud800" <= c <= "\udfff" for c in out):
        out = "".join(f"\\u{ord(c):04x}" if "\ud800" <= c <= "\udfff" else c for c in out)
    return out


def _jval(v: Any) -> str:
    """A JSON value as Jackson's compact writer renders the tree."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _java_double(v)
    if isinstance(v, str):
        return _jstr(v)
    if isinstance(v, list):
        return "[" + ",".join(_jval(e) for e in v) + "]"
    return "{" + ",".join(_jstr(k) + ":" + _jval(e) for k, e in v.items()) + "}"


def _jequal(a: Any, b: Any) -> bool:
    """JsonNode.equals: an int node never equals a double node."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_jequal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_jequal(a[k], b[k]) for k in a)
    return bool(a == b)


def _text(node: Any, key: str) -> str | None:
    """Jackson's ``node.get(key).textValue()``: None unless the node is an object whose value
    at ``key`` is a string."""
    if isinstance(node, dict):
        value = node.get(key)
        if isinstance(value, str):
            return value
    return None


def _required(node: Any, key: str, error: str) -> str:
    out = _text(node, key)
    if out is None:
        raise _Error(f"{error}: {_jval(node)}")
    return out


def _strict_name_error(name: str | None) -> str | None:
    """NameValidator.STRICT_VALIDATOR (Confluent parses new schemas with it)."""
    if name is None:
        return "Null name"
    if not name:
        return "Empty name"
    if not (name[0] == "_" or ("a" <= name[0] <= "z") or ("A" <= name[0] <= "Z")):
        return f"Illegal initial character: {name}"
    for c in name[1:]:
        if not (c == "_" or "a" <= c <= "z" or "A" <= c <= "Z" or "0" <= c <= "9"):
            return f"Illegal character in: {name}"
    return None


# Which NameValidator the parse in progress uses, as Java's Schema.VALIDATE_NAMES thread-local:
# STRICT for a new registration, none for a schema already registered (Confluent's getParser).
_STRICT_NAMES: ContextVar[bool] = ContextVar("avro_strict_names", default=True)


def _validate_name(name: str | None) -> str:
    if not _STRICT_NAMES.get():
        return name  # type: ignore[return-value]  # NO_VALIDATION lets even a missing name by
    error = _strict_name_error(name)
    if error is not None:
        raise _Error(error)
    assert name is not None
    return name


# --- the schema model ------------------------------------------------------------------------------


class Name:
    """Schema.Name: a simple name and its namespace (None when empty)."""

    __slots__ = ("name", "space", "full")

    def __init__(self, name: str, space: str | None) -> None:
        dot = name.rfind(".")
        if dot < 0:
            self.name = _validate_name(name)
        else:
            space = name[:dot]
            self.name = _validate_name(name[dot + 1:])
        self.space = space or None
        self.full = self.name if self.space is None else f"{self.space}.{self.name}"

    def qualified(self, default_space: str | None) -> str:
        if self.space is not None and self.space == default_space:
            return self.full if self.name in TYPE_NAMES else self.name
        return self.full


class Schema:
    type: str = ""
    props: dict[str, Any]

    @property
    def full_name(self) -> str:
        return self.type


class Primitive(Schema):
    def __init__(self, type_: str) -> None:
        self.type = type_
        self.props = {}


class Named(Schema):
    def __init__(self, type_: str, name: Name, doc: str | None) -> None:
        if name.full in PRIMITIVES:
            raise _Error(f"Schemas may not be named after primitives: {name.full}")
        self.type = type_
        self.name = name
        self.doc = doc
        self.props = {}
        self.aliases: dict[str, Name] = {}  # by full name: Java keeps a LinkedHashSet<Name>

    @property
    def full_name(self) -> str:
        return self.name.full

    def alias_names(self) -> list[str]:
        """Schema.getAliases(): an alias without namespace inside a namespaced schema is '.x'."""
        return [f".{a.name}" if a.space is None and self.name.space is not None else a.full
                for a in self.aliases.values()]


class Field:
    def __init__(self, name: str, schema: Schema, doc: str | None, default: Any, has_default: bool,
                 order: str, position: int) -> None:
        self.name = name
        self.schema = schema
        self.doc = doc
        self.default = default
        self.has_default = has_default
        self.order = order
        self.position = position
        self.props: dict[str, Any] = {}
        self.aliases: list[str] = []


class Record(Named):
    def __init__(self, name: Name, doc: str | None, is_error: bool) -> None:
        super().__init__("record", name, doc)
        self.is_error = is_error
        self.fields: list[Field] = []
        self.field_map: dict[str, Field] = {}


class Enum(Named):
    def __init__(self, name: Name, doc: str | None, symbols: list[str], default: str | None) -> None:
        super().__init__("enum", name, doc)
        seen: set[str] = set()
        for symbol in symbols:
            _validate_name(symbol)
            if symbol in seen:
                raise _Error(f"Duplicate enum symbol: {symbol}")
            seen.add(symbol)
        if default is not None and default not in seen:
            raise _Error(f"The Enum Default: {default} is not in the enum symbol set: "
                         f"[{', '.join(symbols)}]")
        self.symbols = symbols
        self.default = default


class Fixed(Named):
    def __init__(self, name: Name, doc: str | None, size: int) -> None:
        super().__init__("fixed", name, doc)
        if size < 0:
            raise _Error(f"Malformed data. Length is negative: {size}")
        self.size = size


class Array(Schema):
    def __init__(self, items: Schema) -> None:
        self.type = "array"
        self.items = items
        self.props = {}


class Map(Schema):
    def __init__(self, values: Schema) -> None:
        self.type = "map"
        self.values = values
        self.props = {}


class Union(Schema):
    def __init__(self, types: list[Schema]) -> None:
        self.type = "union"
        self.types = types
        self.props = {}


class Unresolved(Schema):
    """A name used before its definition (ParseContext.find answers a placeholder that
    ``resolve`` replaces once the whole text is read: Avro 1.12 allows forward references)."""

    def __init__(self, full: str) -> None:
        self.type = "record"  # SchemaResolver.unresolvedSchema is a record
        self.full = full
        self.props = {}
        self.number = next(_UNRESOLVED_COUNTER)


# SchemaResolver numbers its placeholders JVM-wide; only error messages ever show the number.
_UNRESOLVED_COUNTER = itertools.count()


# --- parsing (Schema.parse*, ParseContext) -------------------------------------------------------


class _Context:
    def __init__(self) -> None:
        self.old: dict[str, Named] = {}
        self.new: dict[str, Named] = {}
        self.validate_defaults = True

    def find(self, name: str, space: str | None) -> Schema:
        if name in PRIMITIVES:
            return Primitive(name)
        full = f"{space}.{name}" if space is not None and "." not in name else name
        found = self.old.get(full) or self.new.get(full) or self.old.get(name) or self.new.get(name)
        return found if found is not None else Unresolved(full)

    def put(self, schema: Named) -> None:
        full = schema.name.full
        parts = full.split(".")
        for part in parts[:-1]:
            error = _strict_name_error(part) if _STRICT_NAMES.get() else None
            if error is not None:
                raise _Error(f'Namespace part "{part}" is invalid: {error}')
        known = self.old.get(full)
        if known is None:
            known = self.new.setdefault(full, schema)
        if known is not schema and not _equals(known, schema, set()):
            raise _Error(f"Can't redefine: {full}")

    def commit(self) -> None:
        for full, schema in self.new.items():
            self.old.setdefault(full, schema)
        self.new.clear()


def _props(node: dict[str, Any], target: dict[str, Any], reserved: frozenset[str],
           schema: bool = True) -> None:
    for key, value in node.items():
        if key not in reserved:
            if schema:
                _check_schema_prop(key, value)
            target[key] = value


def _big(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and not LONG_MIN <= value <= LONG_MAX


def _nested_big(value: Any) -> bool:
    if isinstance(value, list):
        return any(_big(v) or _nested_big(v) for v in value)
    if isinstance(value, dict):
        return any(_big(v) or _nested_big(v) for v in value.values())
    return False


def _check_schema_prop(key: str, value: Any) -> None:
    # A schema's (not a field's) props go through JacksonUtils.toObject and back, which has no
    # case for an integer beyond 64 bits: null at the top, a NullPointerException when nested.
    if _big(value):
        raise _Error(f"Can't set a property to null: {key}")
    if _nested_big(value):
        raise _Error('Cannot invoke "Object.getClass()" because "datum" is null')


def _parse(node: Any, ctx: _Context, space: str | None) -> Schema:
    if isinstance(node, str):
        return ctx.find(node, space)
    if isinstance(node, dict):
        type_ = _required(node, "type", "No type")
        if type_ in PRIMITIVES:
            p = Primitive(type_)
            _props(node, p.props, SCHEMA_RESERVED)
            return p
        if type_ in ("record", "error"):
            return _parse_record(node, ctx, space, type_ == "error")
        if type_ == "enum":
            name = _parse_name(node, space)
            symbols_node = node.get("symbols")
            if not isinstance(symbols_node, list):
                raise _Error(f"Enum has no symbols: {_jval(node)}")
            symbols = [s if isinstance(s, str) else None for s in symbols_node]
            default = node.get("default")
            e = Enum(name, _text(node, "doc"), symbols,  # type: ignore[arg-type]
                     default if isinstance(default, str) else None)
            _props(node, e.props, ENUM_RESERVED)
            _parse_aliases(node, e)
            ctx.put(e)
            return e
        if type_ == "array":
            if "items" not in node:
                raise _Error(f"Array has no items type: {_jval(node)}")
            a = Array(_parse(node["items"], ctx, space))
            _props(node, a.props, SCHEMA_RESERVED)
            return a
        if type_ == "map":
            if "values" not in node:
                raise _Error(f"Map has no values type: {_jval(node)}")
            m = Map(_parse(node["values"], ctx, space))
            _props(node, m.props, SCHEMA_RESERVED)
            return m
        if type_ == "fixed":
            name = _parse_name(node, space)
            size = node.get("size")
            # Jackson's isInt(): an integer that fits in 32 bits.
            if not (isinstance(size, int) and not isinstance(size, bool) and INT_MIN <= size <= INT_MAX):
                raise _Error(f"Invalid or no size: {_jval(node)}")
            f = Fixed(name, _text(node, "doc"), size)
            _props(node, f.props, SCHEMA_RESERVED)
            _parse_aliases(node, f)
            ctx.put(f)
            return f
        raise _Error('A schema "type" MUST be a primitive type or one of "enum", "fixed", "record", '
                     '"error", "array" or "map".')
    if isinstance(node, list):
        u = Union([_parse(branch, ctx, space) for branch in node])
        _check_union(u)
        return u
    raise _Error(f"Schema not yet supported: {_jval(node)}")


def _check_union(u: Union, resolved: Mapping[str, Named] | None = None) -> None:
    """UnionSchema's constructor. A forward reference is a placeholder with a name of its own
    while parsing; the resolver's copy of the union (``resolved``) checks the real names."""
    names: set[str] = set()
    for branch in u.types:
        if isinstance(branch, Union):
            raise _Error(f"Nested union: {_to_string(u)}")
        if isinstance(branch, Unresolved):
            if resolved is None:
                continue
            branch = resolved[branch.full]
        full = branch.full_name
        if full in names:
            raise _Error(f"Duplicate in union:{full}")
        names.add(full)


def _parse_name(node: dict[str, Any], space: str | None) -> Name:
    own = _text(node, "namespace")
    return Name(_required(node, "name", "No name in schema"), space if own is None else own)


def _parse_alias_list(node: dict[str, Any]) -> list[str] | None:
    if "aliases" not in node:
        return None
    aliases = node["aliases"]
    if not isinstance(aliases, list):
        raise _Error(f"aliases not an array: {_jval(node)}")
    out: list[str] = []
    for alias in aliases:
        if not isinstance(alias, str):
            raise _Error(f"alias not a string: {_jval(alias)}")
        if alias not in out:
            out.append(alias)
    return out


def _parse_aliases(node: dict[str, Any], schema: Named) -> None:
    for alias in _parse_alias_list(node) or ():
        name = Name(alias, schema.name.space)
        schema.aliases.setdefault(name.full, name)


def _parse_record(node: dict[str, Any], ctx: _Context, space: str | None, is_error: bool) -> Record:
    name = _parse_name(node, space)
    record = Record(name, _text(node, "doc"), is_error)
    fields_node = node.get("fields")
    if not isinstance(fields_node, list):
        raise _Error(f"Record has no fields: {_jval(node)}")
    fields: list[Field] = []
    for field_node in fields_node:
        fields.append(_parse_field(field_node, ctx, name.space, len(fields)))
    for f in fields:
        existing = record.field_map.get(f.name)
        if existing is not None:
            raise _Error(f"Duplicate field {f.name} in record {name.full}: {_field_str(f)} and "
                         f"{_field_str(existing)}.")
        record.field_map[f.name] = f
    record.fields = fields
    _props(node, record.props, SCHEMA_RESERVED)
    _parse_aliases(node, record)
    ctx.put(record)
    return record


def _field_str(f: Field) -> str:
    return f"{f.name} type:{f.schema.type.upper()} pos:{f.position}"


def _parse_field(node: Any, ctx: _Context, space: str | None, position: int) -> Field:
    name = _required(node, "name", "No field name")
    doc = _text(node, "doc")
    if "type" not in node:
        raise _Error(f"No field type: {_jval(node)}")
    schema = _parse(node["type"], ctx, space)
    order = "ascending"
    if "order" in node:
        text = node["order"]
        if not isinstance(text, str):
            raise _Error("Cannot invoke \"String.toUpperCase(java.util.Locale)\" because the return "
                         "value of \"com.fasterxml.jackson.databind.JsonNode.textValue()\" is null")
        if text.upper() not in ("ASCENDING", "DESCENDING", "IGNORE"):
            raise _Error(f"No enum constant org.apache.avro.Schema.Field.Order.{text.upper()}")
        order = text.lower()
    has_default = "default" in node
    default = node.get("default")
    if has_default and isinstance(default, str) and schema.type in ("float", "double"):
        default = _parse_java_double(default)
    field = Field(_validate_name(name), schema, doc, default, has_default, order, position)
    # Schema.Field's constructor validates the default against the type as parsed so far: a
    # type named before its definition is still a placeholder record (only an object passes);
    # SchemaResolver validates again once the names are resolved (_check_defaults).
    if ctx.validate_defaults:
        _check_default(field)
    _props(node, field.props, FIELD_RESERVED, schema=False)
    field.aliases = _parse_alias_list(node) or []
    return field


_JAVA_DECIMAL = re.compile(r"[+-]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?)")
_JAVA_HEX = re.compile(r"([+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+)[fFdD]?")


def _parse_java_double(text: str) -> float:
    """Double.parseDouble (a float field's default given as a string, e.g. "NaN"): Java's
    grammar, leading and trailing control characters and spaces ignored."""
    t = text.strip("".join(map(chr, range(33))))
    if _JAVA_DECIMAL.fullmatch(t):
        return float(t.rstrip("fFdD") if not t.endswith("Infinity") else t)
    hex_float = _JAVA_HEX.fullmatch(t)
    if hex_float:
        return float.fromhex(hex_float.group(1))
    raise _Error(f'For input string: "{text}"' if t else "empty String")


def _resolve(schema: Schema, ctx: _Context, done: set[int]) -> Schema:
    """Replace forward-reference placeholders by the schemas they name (ParseContext.resolve)."""
    if isinstance(schema, Unresolved):
        target = ctx.old.get(schema.full)
        if target is None:
            raise _Error(f"Undefined schema: {schema.full}")
        return target
    if id(schema) in done:
        return schema
    done.add(id(schema))
    if isinstance(schema, Record):
        for f in schema.fields:
            f.schema = _resolve(f.schema, ctx, done)
    elif isinstance(schema, Array):
        schema.items = _resolve(schema.items, ctx, done)
    elif isinstance(schema, Map):
        schema.values = _resolve(schema.values, ctx, done)
    elif isinstance(schema, Union):
        schema.types = [_resolve(t, ctx, done) for t in schema.types]
    return schema


def _walk(schema: Schema, seen: set[int] | None = None) -> Iterator[Schema]:
    seen = set() if seen is None else seen
    if id(schema) in seen:
        return
    seen.add(id(schema))
    yield schema
    if isinstance(schema, Record):
        for f in schema.fields:
            yield from _walk(f.schema, seen)
    elif isinstance(schema, Array):
        yield from _walk(schema.items, seen)
    elif isinstance(schema, Map):
        yield from _walk(schema.values, seen)
    elif isinstance(schema, Union):
        for t in schema.types:
            yield from _walk(t, seen)


def _check_defaults(roots: list[Schema], ctx: _Context) -> None:
    """SchemaResolver's second validation of defaults, in its order.

    ParseContext resolves by copying every schema with Schemas.visit, a depth-first walk that
    visits a record's fields in order but a union's branches last to first; a record's copy
    gets its fields (each ``new Field(field, copy)`` validating the default) after all its
    children are visited, and
    a forward reference starts a visit of the schema it names unless that one is already being
    copied. A default that looks into a record whose copy has no fields yet fails with
    "Schema fields not set yet", so which defaults pass depends on this order exactly.
    """
    filled: dict[int, bool] = {}  # id(record) -> its copy has its fields

    def visit(start: Schema) -> None:
        visited: set[int] = set()
        stack: list[Any] = [start]
        while stack:
            item = stack.pop()
            if isinstance(item, tuple):
                after(item[1])
                continue
            if id(item) in visited or not isinstance(item, (Record, Unresolved, Array, Map, Union)):
                continue
            visited.add(id(item))
            before(item)
            stack.append(("after", item))
            if isinstance(item, Record):  # pushed last to first: visited in order
                stack.extend(f.schema for f in reversed(item.fields))
            elif isinstance(item, Array):
                stack.append(item.items)
            elif isinstance(item, Map):
                stack.append(item.values)
            elif isinstance(item, Union):
                stack.extend(item.types)

    def before(s: Schema) -> None:
        if isinstance(s, Unresolved):
            target = ctx.old.get(s.full)
            if target is None:
                raise _Error(f"Undefined schema: {s.full}")
            if id(target) not in filled:
                visit(target)
        elif isinstance(s, Record):
            filled.setdefault(id(s), False)

    def after(s: Schema) -> None:
        if isinstance(s, Union) and any(isinstance(t, Unresolved) for t in s.types):
            _check_union(s, ctx.old)
        if isinstance(s, Record) and not filled[id(s)]:
            unfinished = {k for k, done in filled.items() if not done}
            for f in s.fields:
                if ctx.validate_defaults:
                    _check_default(f, unfinished, ctx.old)
            filled[id(s)] = True

    for root in roots:
        visit(root)


def _check_default(f: Field, unfinished: set[int] | None = None,
                   names: Mapping[str, Named] | None = None) -> None:
    if f.has_default and not _valid_default(f.schema, f.default, unfinished or set(), names):
        raise _Error(f"Invalid default for field {f.name}: {_jval(f.default)} not a "
                     f"{_to_string(f.schema, names=names)}")


def _valid_default(schema: Schema, value: Any, unfinished: set[int],
                   names: Mapping[str, Named] | None = None) -> bool:
    """Schema.isValidDefault; ``names`` resolves forward references (without it a reference is
    still the placeholder, an empty record, as when the field was built)."""
    if isinstance(schema, Unresolved) and names is not None and schema.full in names:
        schema = names[schema.full]
    t = schema.type
    if t in ("string", "bytes", "enum", "fixed"):
        return isinstance(value, str)
    if t in ("int", "long"):
        low, high = (INT_MIN, INT_MAX) if t == "int" else (LONG_MIN, LONG_MAX)
        return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    if t in ("float", "double"):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == "boolean":
        return isinstance(value, bool)
    if t == "null":
        return value is None
    if isinstance(schema, Array):
        return isinstance(value, list) and all(
            _valid_default(schema.items, v, unfinished, names) for v in value)
    if isinstance(schema, Map):
        return isinstance(value, dict) and all(
            _valid_default(schema.values, v, unfinished, names) for v in value.values())
    if isinstance(schema, Union):
        return any(_valid_default(branch, value, unfinished, names) for branch in schema.types)
    if isinstance(schema, Record):
        if not isinstance(value, dict):
            return False
        if id(schema) in unfinished:
            raise _Error("Schema fields not set yet")
        for f in schema.fields:
            if f.name in value:
                ok = _valid_value(f.schema, value[f.name], True, unfinished, names)
            else:
                ok = _valid_value(f.schema, f.default, f.has_default, unfinished, names)
            if not ok:
                return False
        return True
    return isinstance(value, dict)  # an unresolved placeholder is an empty record


def _valid_value(schema: Schema, value: Any, present: bool, unfinished: set[int],
                 names: Mapping[str, Named] | None) -> bool:
    if not present:
        return False
    if isinstance(schema, Union):
        return any(_valid_default(branch, value, unfinished, names) for branch in schema.types)
    return _valid_default(schema, value, unfinished, names)


def _equals(a: Schema, b: Schema, seen: set[tuple[int, int]]) -> bool:
    """Schema.equals (names, types, props, fields; docs and aliases do not count)."""
    if a is b:
        return True
    if a.type != b.type or type(a) is not type(b):
        return False
    if not (a.props.keys() == b.props.keys() and all(_jequal(a.props[k], b.props[k]) for k in a.props)):
        return False
    if isinstance(a, Named) and isinstance(b, Named) and a.name.full != b.name.full:
        return False
    if isinstance(a, Record) and isinstance(b, Record):
        if (id(a), id(b)) in seen:
            return True
        seen.add((id(a), id(b)))
        return len(a.fields) == len(b.fields) and all(
            fa.name == fb.name and fa.order == fb.order and _equals(fa.schema, fb.schema, seen)
            and fa.has_default == fb.has_default and _jequal(fa.default, fb.default)
            and fa.props.keys() == fb.props.keys()
            and all(_jequal(fa.props[k], fb.props[k]) for k in fa.props)
            for fa, fb in zip(a.fields, b.fields, strict=True))
    if isinstance(a, Enum) and isinstance(b, Enum):
        return a.symbols == b.symbols
    if isinstance(a, Fixed) and isinstance(b, Fixed):
        return a.size == b.size
    if isinstance(a, Array) and isinstance(b, Array):
        return _equals(a.items, b.items, seen)
    if isinstance(a, Map) and isinstance(b, Map):
        return _equals(a.values, b.values, seen)
    if isinstance(a, Union) and isinstance(b, Union):
        return len(a.types) == len(b.types) and all(
            _equals(x, y, seen) for x, y in zip(a.types, b.types, strict=True))
    if isinstance(a, Unresolved) and isinstance(b, Unresolved):
        return a.full == b.full
    return True


def _read_json(text: str) -> Any:
    start = len(text) - len(text.lstrip(" \t\r\n"))
    if start == len(text):
        raise _Error("Cannot parse <null> schema")
    try:
        node, end = _DECODER.raw_decode(text, start)
    except ValueError as e:
        raise _Error(f"Invalid JSON: {e}") from None
    dangling = text[end:].strip()
    if dangling:
        raise _Error(f"dangling content after end of schema: {dangling}")
    return node


def _parse_text(text: str, ctx: _Context) -> Schema:
    """One ``Schema.Parser.parse(String)``: parse, commit the new names, resolve."""
    try:
        schema = _parse(_read_json(text), ctx, None)
    except _Error:
        ctx.new.clear()
        raise
    ctx.commit()
    if isinstance(schema, Unresolved) and schema.full not in ctx.old:
        # The text is only a name nothing defines: ParseContext.resolve looks the placeholder's
        # own name up and fails (a NullPointerException with this message).
        raise _Error(f"Unknown schema: org.apache.avro.compiler.UnresolvedSchema_{schema.number}")
    _check_defaults([*ctx.old.values(), schema], ctx)
    for named in list(ctx.old.values()):
        _resolve(named, ctx, set())
    return _resolve(schema, ctx, set())


# --- Schema.toString -----------------------------------------------------------------------------


def _to_string(schema: Schema, known: set[str] | None = None,
               names: Mapping[str, Named] | None = None) -> str:
    """Schema.toString; with ``names``, forward references print as what they name (the
    resolver's copy), without, as Java's placeholder records."""
    out: list[str] = []
    _to_json(schema, set() if known is None else set(known), None, out, names)
    return "".join(out)


def _write_props(props: dict[str, Any], out: list[str]) -> None:
    for key, value in props.items():
        out.append(f",{_jstr(key)}:{_jval(value)}")


def _write_name(name: Name, space: str | None, out: list[str]) -> None:
    out.append(f',"name":{_jstr(name.name)}')
    if name.space is not None:
        if name.space != space:
            out.append(f',"namespace":{_jstr(name.space)}')
    elif space is not None:
        out.append(',"namespace":""')


def _write_aliases(schema: Named, out: list[str]) -> None:
    if schema.aliases:
        out.append(',"aliases":[' + ",".join(
            _jstr(a.qualified(schema.name.space)) for a in schema.aliases.values()) + "]")


def _to_json(s: Schema, known: set[str], space: str | None, out: list[str],
             names: Mapping[str, Named] | None = None) -> None:
    if isinstance(s, Unresolved) and names is not None and s.full in names:
        s = names[s.full]
    if isinstance(s, Named):
        if s.name.full in known:
            out.append(_jstr(s.name.qualified(space)))
            return
        known.add(s.name.full)
    if isinstance(s, Record):
        out.append('{"type":"error"' if s.is_error else '{"type":"record"')
        _write_name(s.name, space, out)
        if s.doc is not None:
            out.append(f',"doc":{_jstr(s.doc)}')
        out.append(',"fields":[')
        for i, f in enumerate(s.fields):
            out.append(("," if i else "") + '{"name":' + _jstr(f.name) + ',"type":')
            _to_json(f.schema, known, s.name.space, out, names)
            if f.doc is not None:
                out.append(f',"doc":{_jstr(f.doc)}')
            if f.has_default:
                out.append(f',"default":{_jval(f.default)}')
            if f.order != "ascending":
                out.append(f',"order":"{f.order}"')
            if f.aliases:
                out.append(',"aliases":[' + ",".join(_jstr(a) for a in f.aliases) + "]")
            _write_props(f.props, out)
            out.append("}")
        out.append("]")
        _write_props(s.props, out)
        _write_aliases(s, out)
        out.append("}")
    elif isinstance(s, Enum):
        out.append('{"type":"enum"')
        _write_name(s.name, space, out)
        if s.doc is not None:
            out.append(f',"doc":{_jstr(s.doc)}')
        out.append(',"symbols":[' + ",".join(_jstr(x) for x in s.symbols) + "]")
        if s.default is not None:
            out.append(f',"default":{_jstr(s.default)}')
        _write_props(s.props, out)
        _write_aliases(s, out)
        out.append("}")
    elif isinstance(s, Fixed):
        out.append('{"type":"fixed"')
        _write_name(s.name, space, out)
        if s.doc is not None:
            out.append(f',"doc":{_jstr(s.doc)}')
        out.append(f',"size":{s.size}')
        _write_props(s.props, out)
        _write_aliases(s, out)
        out.append("}")
    elif isinstance(s, Array):
        out.append('{"type":"array","items":')
        _to_json(s.items, known, space, out, names)
        _write_props(s.props, out)
        out.append("}")
    elif isinstance(s, Map):
        out.append('{"type":"map","values":')
        _to_json(s.values, known, space, out, names)
        _write_props(s.props, out)
        out.append("}")
    elif isinstance(s, Union):
        out.append("[")
        for i, t in enumerate(s.types):
            if i:
                out.append(",")
            _to_json(t, known, space, out, names)
        out.append("]")
    elif isinstance(s, Unresolved):
        out.append(f'{{"type":"record","name":"UnresolvedSchema_{s.number}","namespace":'
                   f'"org.apache.avro.compiler","doc":"unresolved schema","fields":[],'
                   f'"org.apache.avro.idl.unresolved.name":{_jstr(s.full)}}}')
    elif s.props:
        out.append(f'{{"type":"{s.type}"')
        _write_props(s.props, out)
        out.append("}")
    else:
        out.append(f'"{s.type}"')


# --- SchemaCompatibility.checkReaderWriterCompatibility ------------------------------------------


class Incompatibility:
    """SchemaCompatibility.Incompatibility: its type, message and JSON-pointer location."""

    __slots__ = ("kind", "message", "location")

    def __init__(self, kind: str, message: str, location: list[str]) -> None:
        self.kind = kind
        self.message = message
        self.location = location

    def pointer(self) -> str:
        """Incompatibility.getLocation(): the root token dropped, '~' and '/' escaped."""
        return "/" + "/".join(c.replace("~", "~0").replace("/", "~1") for c in self.location[1:])

    def confluent(self) -> str:
        """Confluent's Difference.error(): the description keeps its two ``%s`` (which schema is
        the reader and which the writer), filled by the caller, as SchemaValidatorBuilder does."""
        path = self.pointer()
        description = {
            "FIXED_SIZE_MISMATCH": f"The size of FIXED type field at path '{path}' in the %s "
                                   "schema does not match with the %s schema",
            "TYPE_MISMATCH": f"The type (path '{path}') of a field in the %s schema does not match "
                             "with the %s schema",
            "NAME_MISMATCH": f"The name of the schema has changed (path '{path}')",
            "MISSING_ENUM_SYMBOLS": f"The %s schema is missing enum symbols '{self.message}' at "
                                    f"path '{path}' in the %s schema",
            "MISSING_UNION_BRANCH": "The %s schema is missing a type inside a union field at path "
                                    f"'{path}' in the %s schema",
            "READER_FIELD_MISSING_DEFAULT_VALUE": f"The field '{self.message}' at path '{path}' in "
                                                  "the %s schema has no default value and is "
                                                  "missing in the %s schema",
        }.get(self.kind, "")
        return (f"{{errorType:'{self.kind}', description:'{description}', "
                f"additionalInfo:'{self.message}'}}")


_COMPATIBLE: tuple[Incompatibility, ...] = ()
_IN_PROGRESS = object()
_PROMOTIONS = {"long": ("int",), "float": ("int", "long"), "double": ("int", "long", "float"),
               "bytes": ("string",), "string": ("bytes",)}


class _Checker:
    """ReaderWriterCompatibilityChecker, memo and all: a (reader, writer) pair seen again answers
    its first result, locations included, exactly as Java does, so Confluent's messages match."""

    def __init__(self) -> None:
        self.memo: dict[tuple[int, int], Any] = {}
        self.keep: list[Schema] = []  # keeps ids stable while the memo holds them

    def check(self, reader: Schema, writer: Schema) -> tuple[bool, list[Incompatibility]]:
        result = self._get("", reader, writer, [])
        return not result, list(result)

    def _get(self, token: str, reader: Schema, writer: Schema,
             location: list[str]) -> tuple[Incompatibility, ...]:
        """The incompatibilities of the pair (a pair still under evaluation, a recursion, answers
        compatible)."""
        location.append(token)
        key = (id(reader), id(writer))
        if key in self.memo:
            result = self.memo[key]
            if result is _IN_PROGRESS:
                result = _COMPATIBLE
        else:
            self.keep.extend((reader, writer))
            self.memo[key] = _IN_PROGRESS
            result = self._calculate(reader, writer, location)
            self.memo[key] = result
        location.pop()
        return tuple(result)

    def _compatible(self, reader: Schema, writer: Schema) -> bool:
        return not self._get("", reader, writer, [])

    def _incompatible(self, kind: str, message: str, location: list[str]) -> tuple[Incompatibility, ...]:
        return (Incompatibility(kind, message, list(location)),)

    def _mismatch(self, reader: Schema, writer: Schema, location: list[str]) -> tuple[Incompatibility, ...]:
        return self._incompatible(
            "TYPE_MISMATCH", f"reader type: {reader.type.upper()} not compatible with writer type: "
            f"{writer.type.upper()}", location)

    def _calculate(self, reader: Schema, writer: Schema, location: list[str]) -> tuple[Incompatibility, ...]:
        if reader.type == writer.type:
            if isinstance(reader, Array) and isinstance(writer, Array):
                return self._get("items", reader.items, writer.items, location)
            if isinstance(reader, Map) and isinstance(writer, Map):
                return self._get("values", reader.values, writer.values, location)
            if isinstance(reader, Fixed) and isinstance(writer, Fixed):
                result = self._names(reader, writer, location)
                location.append("size")
                if reader.size != writer.size:
                    result += self._incompatible(
                        "FIXED_SIZE_MISMATCH", f"expected: {writer.size}, found: {reader.size}", location)
                location.pop()
                return result
            if isinstance(reader, Enum) and isinstance(writer, Enum):
                result = self._names(reader, writer, location)
                location.append("symbols")
                missing = sorted(set(writer.symbols) - set(reader.symbols))
                # An enum default on the reader makes unknown writer symbols readable.
                if missing and reader.default is None:
                    result += self._incompatible("MISSING_ENUM_SYMBOLS", f"[{', '.join(missing)}]", location)
                location.pop()
                return result
            if isinstance(reader, Record) and isinstance(writer, Record):
                return self._names(reader, writer, location) + self._fields(reader, writer, location)
            if isinstance(reader, Union) and isinstance(writer, Union):
                result = _COMPATIBLE
                for i, branch in enumerate(writer.types):
                    location.append(str(i))
                    if not self._compatible(reader, branch):
                        message = f"reader union lacking writer type: {branch.type.upper()}"
                        result += self._incompatible("MISSING_UNION_BRANCH", message, location)
                    location.pop()
                return result
            return _COMPATIBLE
        if isinstance(writer, Union):
            result = _COMPATIBLE
            for i, branch in enumerate(writer.types):
                result += self._get(str(i), reader, branch, location)
            return result
        if isinstance(reader, Union):
            if any(self._compatible(branch, writer) for branch in reader.types):
                return _COMPATIBLE
            return self._incompatible(
                "MISSING_UNION_BRANCH", f"reader union lacking writer type: {writer.type.upper()}", location)
        if writer.type in _PROMOTIONS.get(reader.type, ()):
            return _COMPATIBLE
        return self._mismatch(reader, writer, location)

    def _names(self, reader: Named, writer: Named, location: list[str]) -> tuple[Incompatibility, ...]:
        location.append("name")
        result = _COMPATIBLE
        # schemaNameEquals: the simple names, or the writer's full name among the reader's aliases.
        if reader.name.name != writer.name.name and writer.name.full not in reader.alias_names():
            result = self._incompatible("NAME_MISMATCH", f"expected: {writer.name.full}", location)
        location.pop()
        return result

    def _fields(self, reader: Record, writer: Record, location: list[str]) -> tuple[Incompatibility, ...]:
        result: tuple[Incompatibility, ...] = _COMPATIBLE
        location.append("fields")
        for rf in reader.fields:
            location.append(str(rf.position))
            matches = [writer.field_map[n] for n in [rf.name, *rf.aliases] if n in writer.field_map]
            if len(matches) > 1:
                raise _Error(f"Reader record field {_field_str(rf)} matches multiple fields in writer "
                             f"record schema {_to_string(writer)}")
            if matches:
                result += self._get("type", rf.schema, matches[0].schema, location)
            elif not rf.has_default:
                if isinstance(rf.schema, Enum) and rf.schema.default is not None:
                    result += self._get("type", rf.schema, writer, location)
                else:
                    result += self._incompatible("READER_FIELD_MISSING_DEFAULT_VALUE", rf.name, location)
            location.pop()
        location.pop()
        return result


def check_reader_writer(reader: Schema, writer: Schema) -> tuple[bool, list[Incompatibility]]:
    """SchemaCompatibility.checkReaderWriterCompatibility: (compatible, incompatibilities)."""
    return _Checker().check(reader, writer)


# --- Confluent's normalize() (AvroSchemaUtils.toNormalizedString) --------------------------------

_LOGICAL_BASES = {
    "date": ("int",), "time-millis": ("int",), "time-micros": ("long",),
    "timestamp-millis": ("long",), "timestamp-micros": ("long",), "timestamp-nanos": ("long",),
    "local-timestamp-millis": ("long",), "local-timestamp-micros": ("long",),
    "local-timestamp-nanos": ("long",), "big-decimal": ("bytes",),
}


def _is_java_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and INT_MIN <= v <= INT_MAX


def _logical(s: Schema) -> str | None:
    """LogicalTypes.fromSchemaIgnoreInvalid, as the text normalize writes for it (or None)."""
    name = s.props.get("logicalType")
    if not isinstance(name, str):
        return None
    if name in _LOGICAL_BASES:
        return f',"logicalType":"{name}"' if s.type in _LOGICAL_BASES[name] else None
    if name == "uuid":
        ok = s.type == "string" or (isinstance(s, Fixed) and s.size == 16)
        return ',"logicalType":"uuid"' if ok else None
    if name == "duration":
        return ',"logicalType":"duration"' if isinstance(s, Fixed) and s.size == 12 else None
    if name != "decimal" or "precision" not in s.props:
        return None
    precision, scale = s.props["precision"], s.props.get("scale", 0)
    if not (_is_java_int(precision) and _is_java_int(scale)):
        return None
    if isinstance(s, Fixed):
        max_precision = round(math.floor(math.log10(2) * (8 * s.size - 1)))
    elif s.type == "bytes":
        max_precision = INT_MAX
    else:
        return None
    if precision <= 0 or precision > max_precision or scale < 0 or scale > precision:
        return None
    return f',"logicalType":"decimal","precision":{precision}' + (f',"scale":{scale}' if scale else "")


def _sorted_props(props: dict[str, Any]) -> str:
    return "".join(f",{_jstr(k)}:{_jval(props[k])}" for k in sorted(props))


def _default_value(value: Any, schema: Schema | None) -> Any:
    """JacksonUtils.toObject(default, schema) and back to JSON, as Field.defaultVal() feeds
    normalize: an int default of a double field becomes 1.0, of a float field a float."""
    if value is None:
        return None
    if isinstance(schema, Union):
        for branch in schema.types:
            if branch.type != "null":
                out = _default_value(value, branch)
                if out is not _MISSING:
                    return out
        return _MISSING
    t = schema.type if schema is not None else None
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if t in (None, "int", "long"):
            return value
        if t == "float":
            return _Raw(_java_float(float(value)))
        if t == "double":
            return float(value)
        return _MISSING
    if isinstance(value, float):
        if t in (None, "double"):
            return value
        if t == "float":
            return _Raw(_java_float(value))
        return _MISSING
    if isinstance(value, str):
        return value if t in (None, "string", "enum", "bytes", "fixed") else _MISSING
    if isinstance(value, list):
        items = schema.items if isinstance(schema, Array) else None
        return [_default_value(v, items) for v in value]
    mapped: dict[str, Any] = {}
    for key, v in value.items():
        sub: Schema | None = None
        if isinstance(schema, Map):
            sub = schema.values
        elif isinstance(schema, Record) and key in schema.field_map:
            sub = schema.field_map[key].schema
        mapped[key] = _default_value(v, sub)
    return mapped


class _Raw(str):
    """Already rendered JSON (a float default)."""


_MISSING: Any = object()


def _jval_default(v: Any) -> str:
    if isinstance(v, _Raw):
        return str(v)
    if v is _MISSING:
        return "null"
    if isinstance(v, list):
        return "[" + ",".join(_jval_default(e) for e in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(_jstr(k) + ":" + _jval_default(e) for k, e in v.items()) + "}"
    return _jval(v)


def _normalized_text(s: Schema, env: dict[str, str], out: list[str]) -> None:
    lt = _logical(s)
    if isinstance(s, Union):
        out.append("[")
        for i, branch in enumerate(s.types):
            if i:
                out.append(",")
            _normalized_text(branch, env, out)
        out.append("]")
    elif isinstance(s, (Array, Map)):
        out.append(f'{{"type":"{s.type}"')
        if isinstance(s, Array):
            out.append(',"items":')
            _normalized_text(s.items, env, out)
        else:
            out.append(',"values":')
            _normalized_text(s.values, env, out)
        out.append((lt or "") + _sorted_props(s.props) + "}")
    elif isinstance(s, Named):
        full = s.name.full
        if full in env:
            out.append(env[full])
            return
        env[full] = _jstr(full)
        out.append(f'{{"name":{_jstr(full)},"type":"{s.type}"')
        if isinstance(s, Enum):
            out.append(',"symbols":[' + ",".join(f'"{x}"' for x in s.symbols) + "]")
        elif isinstance(s, Fixed):
            out.append(f',"size":{s.size}')
        elif isinstance(s, Record):
            out.append(',"fields":[')
            for i, f in enumerate(s.fields):
                out.append(("," if i else "") + '{"name":' + _jstr(f.name) + ',"type":')
                _normalized_text(f.schema, env, out)
                out.append(f',"order":"{f.order.upper()}"')
                if f.doc is not None:
                    out.append(f',"doc":{_jstr(f.doc)}')
                if f.aliases:
                    out.append(',"aliases":[' + ",".join(_jstr(a) for a in sorted(set(f.aliases))) + "]")
                if f.has_default:
                    value = _default_value(f.default, f.schema)
                    if value is not _MISSING:
                        out.append(f',"default":{_jval_default(value)}')
                out.append(_sorted_props(f.props) + "}")
            out.append("]")
        out.append(lt or "")
        if s.doc:
            out.append(f',"doc":{_jstr(s.doc)}')
        aliases = s.alias_names()
        if aliases:
            out.append(',"aliases":[' + ",".join(_jstr(a) for a in sorted(set(aliases))) + "]")
        if isinstance(s, Enum) and s.default is not None:
            out.append(f',"default":{_jstr(s.default)}')
        out.append(_sorted_props(s.props) + "}")
    elif lt is not None or s.props:
        out.append(f'{{"type":"{s.type}"' + (lt or "") + _sorted_props(s.props) + "}")
    else:
        out.append(f'"{s.type}"')


# --- SchemaNormalization.toParsingForm (Avro's Parsing Canonical Form) ---------------------------


def _parsing_form(s: Schema, env: set[str], out: list[str]) -> None:
    if isinstance(s, Union):
        out.append("[")
        for i, branch in enumerate(s.types):
            if i:
                out.append(",")
            _parsing_form(branch, env, out)
        out.append("]")
    elif isinstance(s, Array):
        out.append('{"type":"array","items":')
        _parsing_form(s.items, env, out)
        out.append("}")
    elif isinstance(s, Map):
        out.append('{"type":"map","values":')
        _parsing_form(s.values, env, out)
        out.append("}")
    elif isinstance(s, Named):
        full = s.name.full
        if full in env:
            out.append(f'"{full}"')
            return
        env.add(full)
        out.append(f'{{"name":"{full}","type":"{s.type}"')
        if isinstance(s, Enum):
            out.append(',"symbols":[' + ",".join(f'"{x}"' for x in s.symbols) + "]")
        elif isinstance(s, Fixed):
            out.append(f',"size":{s.size}')
        elif isinstance(s, Record):
            out.append(',"fields":[')
            for i, f in enumerate(s.fields):
                out.append(("," if i else "") + f'{{"name":"{f.name}","type":')
                _parsing_form(f.schema, env, out)
                out.append("}")
            out.append("]")
        out.append("}")
    else:
        out.append(f'"{s.type}"')


# --- the format ------------------------------------------------------------------------------------


class AvroSchema:
    """A parsed AVRO schema (Confluent's AvroSchema for a new registration)."""

    schema_type = "AVRO"

    def __init__(self, schema: Schema, references: Mapping[str, str], reference_names: list[str],
                 new: bool = True) -> None:
        self.schema = schema
        self.new = new
        self.references = dict(references)
        self.reference_names = reference_names
        self._canonical: str | None = None

    def canonical(self) -> str:
        # Schema.toString(referencedSchemas): a referenced schema's top-level type is written by
        # name, anything else inline (AvroSchema.canonicalString).
        if self._canonical is None:
            self._canonical = _to_string(self.schema, set(self.reference_names))
        return self._canonical

    def normalized(self) -> AvroSchema:
        """Confluent's normalize(): its normalized text reparsed with the same references. As
        Confluent writes every named type as its full name without a namespace, a type in the
        null namespace nested in a namespaced one comes back in the enclosing namespace."""
        out: list[str] = []
        _normalized_text(self.schema, {n: _jstr(n) for n in self.reference_names}, out)
        return FORMAT.parse("".join(out), self.references, new=self.new)

    def parsing_form(self) -> str:
        """SchemaNormalization.toParsingForm: what Avro's schema fingerprints are taken of."""
        out: list[str] = []
        _parsing_form(self.schema, set(), out)
        return "".join(out)

    def compatibility_errors(self, previous: Any) -> list[str]:
        """Confluent's AvroSchema.isBackwardCompatible: this schema reads, ``previous`` wrote.
        Each message keeps Difference's two ``%s`` for the caller to fill with which side is
        new and which old (SchemaValidatorBuilder.formatErrorMessages)."""
        if getattr(previous, "schema_type", None) != "AVRO":
            return ["Incompatible because of different schema type"]
        try:
            _, found = check_reader_writer(self.schema, previous.schema)
        except _Error as e:
            return [f"Unexpected exception during compatibility check: {e}"]
        return [i.confluent() for i in found]

    def __repr__(self) -> str:
        return f"AvroSchema({self.canonical()})"


def _utf_name_error(name: str | None) -> str | None:
    """NameValidator.UTF_VALIDATOR: Character.isLetter / isLetterOrDigit rather than ASCII."""
    if name is None:
        return "Null name"
    if not name:
        return "Empty name"
    if not (name[0] == "_" or unicodedata.category(name[0]).startswith("L")):
        return f"Illegal initial character: {name}"
    for c in name[1:]:
        if not (c == "_" or unicodedata.category(c).startswith("L") or unicodedata.category(c) == "Nd"):
            return f"Illegal character in: {name}"
    return None


def _validate_utf_names(schema: Schema) -> None:
    """Confluent's AvroSchemaUtils.validateNames, run on a schema parsed without validation:
    the names of types, fields and enum symbols (not namespaces, not aliases), UTF rules."""
    for s in _walk(schema):
        checked: list[str | None] = []
        if isinstance(s, Named):
            checked.append(s.name.name)
        if isinstance(s, Record):
            for f in s.fields:
                checked.append(f.name)
        elif isinstance(s, Enum):
            checked.extend(s.symbols)
        for name in checked:
            error = _utf_name_error(name)
            if error is not None:
                raise _Error(error)


class AvroFormat:
    name = "AVRO"

    def parse(self, text: str, references: Mapping[str, str], *, new: bool = True) -> AvroSchema:
        """Parse as Confluent's AvroSchema does. ``new`` (a registration) validates names
        strictly and defaults; ``new=False`` (a lookup, or a schema read back from
        ``_schemas``, perhaps registered by an older registry) parses without either, then
        checks the schema's own names with the UTF rules."""
        ctx = _Context()
        ctx.validate_defaults = new
        names: list[str] = []
        token = _STRICT_NAMES.set(new)
        try:
            # AvroSchema's constructor: each referenced text through the same parser first, in
            # the order given (dependency order), then the schema itself.
            for ref_text in references.values():
                ref = _parse_text(ref_text, ctx)
                names.append(ref.full_name)
            schema = _parse_text(text, ctx)
            if not new:
                _validate_utf_names(schema)
        except _Error as e:
            raise InvalidSchema(str(e)) from None
        except RecursionError:
            raise InvalidSchema("schema nested too deeply") from None
        finally:
            _STRICT_NAMES.reset(token)
        return AvroSchema(schema, references, names, new)


FORMAT = AvroFormat()
