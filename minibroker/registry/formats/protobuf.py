"""The PROTOBUF schema type.

``parse`` accepts what the serializers register: .proto text (the Java and KafkaJS serializers)
or a base64 ``FileDescriptorProto`` (confluent-kafka's Python ProtobufSerializer), as Confluent's
``ProtobufSchema.toProtoFile(String)`` does, and checks that every type a field, rpc or extend
names resolves (Confluent's ``validate()`` normalizes, which resolves them). ``canonical()`` is
Confluent's ``ProtobufSchemaUtils.toString(ProtoFileElement)`` and ``normalized()`` its
``toNormalizedString`` (protobuf-provider's ProtobufSchemaUtils.java): the .proto text written back
in a fixed layout, without comments, messages before enums, ``default``/``json_name`` last among a
field's options. Compatibility is in :mod:`.protobuf_diff`.
"""
from __future__ import annotations

from collections.abc import Mapping
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

from .base import InvalidSchema, ParsedSchema
from .protobuf_elements import (
    BOOLEAN,
    ENUM,
    LIST,
    MAP,
    MAX_TAG_VALUE,
    NUMBER,
    OPTION,
    STRING,
    Enum,
    EnumConstant,
    Extend,
    Extensions,
    Field,
    Group,
    IntRange,
    Message,
    OneOf,
    Option,
    Primitive,
    ProtoError,
    ProtoFile,
    Reserved,
    Rpc,
    Service,
    parse_descriptor,
    parse_text,
)
from .protobuf_types import SCALARS, Types


class _Unresolved(ValueError):
    pass


class Formatter:
    """ProtobufSchemaUtils.toString with a FormatContext (normalize or not)."""

    def __init__(self, normalize: bool = False, types: Types | None = None) -> None:
        self.normalize = normalize
        self.types = types
        self.scope: list[str] = []

    # -- names ----------------------------------------------------------------------------------

    def resolve(self, name: str) -> str:
        assert self.types is not None
        full = self.types.resolve(name, self.scope)
        if full is None:
            raise _Unresolved(f"Could not resolve type: {name}")
        return "." + full

    def _is_map_message(self, name: str) -> bool:
        assert self.types is not None
        info = self.types.lookup(name, self.scope)
        return info is not None and info.is_map

    def filter_types(self, types: list[Any]) -> list[Any]:
        if not self.normalize:
            return types
        return [t for t in types if not (isinstance(t, Message) and self._is_map_message(t.name))]

    # -- options --------------------------------------------------------------------------------

    def filter_options(self, options: list[Option]) -> list[Option]:
        """FormatContext.filterOptions: when normalizing, custom options get their full name and
        their path form as a map, are sorted by name, and the settings of one non-repeated
        custom option are merged into one."""
        if not self.normalize or not options or self.types is None:
            return options
        named = []
        for o in options:
            if o.parenthesized:
                full = self.types.resolve_extension(o.name, self.scope)
                if full is not None:
                    o = transform(Option(full, o.kind, o.value, True))
            named.append(o)
        named.sort(key=lambda o: o.name)
        groups: dict[str, list[Option]] = {}
        for o in named:
            groups.setdefault(o.name, []).append(o)
        out: list[Option] = []
        for name, group in groups.items():
            ext = self.types.extend_fields.get(name)
            if ext is not None and ext.label != "repeated":
                merged = group[0]
                for o in group[1:]:
                    merged = self._merge_option(ext, merged, o)
                out.append(merged)
            else:
                out.extend(group)
        return out

    def _merge_option(self, ext: Field, existing: Option, replacement: Option) -> Option:
        replacement = transform(replacement)
        if existing.kind == MAP and replacement.kind == MAP:
            merged = self._merge_maps(ext, existing.value, replacement.value)
            return Option(replacement.name, MAP, merged, replacement.parenthesized)
        return replacement

    def _message_of(self, f: Field | None) -> Message | None:
        if f is None or self.types is None:
            return None
        info = self.types.lookup(f.type, self.scope)
        return info.type if info is not None and isinstance(info.type, Message) else None

    def _merge_maps(self, container: Field, existing: dict[str, Any],
                    replacement: dict[str, Any]) -> dict[str, Any]:
        message = self._message_of(container)
        merged = dict(existing)
        for key, value in replacement.items():
            nested = _find_field(message, key) if message is not None else None
            merged[key] = self._merge_values(nested, merged[key], value) if key in merged else value
        return merged

    def _merge_values(self, f: Field | None, v1: Any, v2: Any) -> Any:
        singular = f is not None and f.label != "repeated"
        if singular and isinstance(v1, dict) and isinstance(v2, dict) and self._message_of(f):
            assert f is not None
            return self._merge_maps(f, v1, v2)
        if singular:
            return v2
        out: list[Any] = []
        for v in (v1 if isinstance(v1, list) else [v1]) + (v2 if isinstance(v2, list) else [v2]):
            if v not in out:
                out.append(v)
        return out

    def option(self, o: Option) -> str:
        name = f"({o.name})" if o.parenthesized else o.name
        if o.kind == STRING:
            return f'{name} = "{escape(str(o.value))}"'
        if o.kind in (BOOLEAN, ENUM):
            return f"{name} = {o.value}"
        if o.kind == NUMBER:
            return f"{name} = {self.number(o.value)}"
        if o.kind == OPTION:
            return f"{name}.{self.option(o.value)}"
        if o.kind == MAP:
            lines: list[str] = [f"{name} = {{\n"]
            self.option_map(lines, o.value)
            lines.append("}")
            return "".join(lines)
        if o.kind == LIST:
            return f"{name} = {self.options_list(o.value)}"
        return name

    def option_map(self, out: list[str], value: dict[str, Any]) -> None:
        items = list(value.items())
        if self.normalize:
            items = [(self._extension_key(k), v) for k, v in items
                     if not (isinstance(v, list) and not v)]
            items.sort(key=lambda kv: kv[0])
            dedup: dict[str, Any] = {}
            for k, v in items:
                dedup.setdefault(k, v)
            items = list(dedup.items())
        for i, (k, v) in enumerate(items):
            end = "," if i != len(items) - 1 else ""
            indent(out, f"{k}: {self.value(v)}{end}")

    def _extension_key(self, key: str) -> str:
        """``[name]`` (an extension field set inside an option's message) with its full name."""
        if key.startswith("[") and key.endswith("]") and self.types is not None:
            full = self.types.resolve_extension(key[1:-1], self.scope)
            if full is not None:
                return f"[{full}]"
        return key

    def value(self, v: Any) -> str:
        if isinstance(v, str):
            return f'"{escape(v)}"'
        if isinstance(v, dict):
            lines = ["{\n"]
            self.option_map(lines, v)
            lines.append("}")
            return "".join(lines)
        if isinstance(v, list):
            if self.normalize and len(v) == 1:
                return self.value(v[0])
            lines = ["[\n"]
            for i, item in enumerate(v):
                indent(lines, self.value(item) + ("," if i != len(v) - 1 else ""))
            lines.append("]")
            return "".join(lines)
        if isinstance(v, Primitive):
            if v.kind in (BOOLEAN, ENUM):
                return str(v.value)
            if v.kind == NUMBER:
                return self.number(v.value)
            return self.value(v.value)
        if isinstance(v, Option):
            return self.option(v)
        return str(v)

    def options_list(self, options: list[Any]) -> str:
        if len(options) == 1:
            return f"[{self.value(options[0])}]"
        lines = ["[\n"]
        for i, o in enumerate(options):
            indent(lines, self.value(o) + ("," if i < len(options) - 1 else ""))
        lines.append("]")
        return "".join(lines)

    def number(self, value: Any) -> str:
        text = str(value)
        if not self.normalize:
            return text
        return java_decimal_format(text)

    def option_statement(self, o: Option) -> str:
        return f"option {self.option(o)};\n"

    # -- elements -------------------------------------------------------------------------------

    def file(self, f: ProtoFile) -> str:
        out: list[str] = []
        if f.syntax is not None and (not self.normalize or f.syntax == "proto3"):
            out.append(f'syntax = "{f.syntax}";\n')
        if f.package is not None:
            out.append(f"package {f.package};\n")
        if f.imports or f.public_imports:
            out.append("\n")
            imports = sorted(set(f.imports)) if self.normalize else f.imports
            out.extend(f'import "{i}";\n' for i in imports)
            public = sorted(set(f.public_imports)) if self.normalize else f.public_imports
            out.extend(f'import public "{i}";\n' for i in public)
        options = self.filter_options(f.options)
        if options:
            out.append("\n")
            out.extend(self.option_statement(o) for o in options)
        types = self.filter_types(f.types)
        if types:
            out.append("\n")
            self._types(out, types, top=True)
        if f.extends:
            out.append("\n")
            for e in self._extends(f.extends):
                out.append(self.extend(e))
        if f.services:
            out.append("\n")
            out.extend(self.service(s) for s in f.services)
        return "".join(out)

    def _types(self, out: list[str], types: list[Any], top: bool) -> None:
        # Messages first, then enums: the order of messages is kept, since the serializers
        # number messages by their index in the unnormalized schema.
        for kind in (Message, Enum):
            for t in types:
                if isinstance(t, kind):
                    self.scope.append(t.name)
                    try:
                        text = self.message(t) if isinstance(t, Message) else self.enum(t)
                    finally:
                        self.scope.pop()
                    if top:
                        out.append(text)
                    else:
                        indent(out, text)

    def _extends(self, extends: list[Extend]) -> list[Extend]:
        if not self.normalize:
            return extends
        grouped: dict[str, Extend] = {}
        for e in extends:
            name = self.resolve(e.name)
            grouped.setdefault(name, Extend(name)).fields.extend(e.fields)
        return list(grouped.values())

    def service(self, s: Service) -> str:
        out = [f"service {s.name} {{"]
        options = self.filter_options(s.options)
        if options:
            out.append("\n")
            for o in options:
                indent(out, self.option_statement(o))
        if s.rpcs:
            out.append("\n")
            for rpc in s.rpcs:
                indent(out, self.rpc(rpc))
        out.append("}\n")
        return "".join(out)

    def rpc(self, rpc: Rpc) -> str:
        request = self.resolve(rpc.request) if self.normalize else rpc.request
        response = self.resolve(rpc.response) if self.normalize else rpc.response
        out = [f"rpc {rpc.name} ({'stream ' if rpc.request_streaming else ''}{request}) returns "
               f"({'stream ' if rpc.response_streaming else ''}{response})"]
        options = self.filter_options(rpc.options)
        if options:
            out.append(" {\n")
            for o in options:
                indent(out, self.option_statement(o))
            out.append("}")
        out.append(";\n")
        return "".join(out)

    def _reserveds(self, reserveds: list[Reserved]) -> list[Reserved]:
        if not self.normalize:
            return reserveds
        single = [Reserved([v]) for r in reserveds for v in r.values]

        def key(r: Reserved) -> tuple[int, str]:
            v = r.values[0]
            start = v.start if isinstance(v, IntRange) else v if isinstance(v, int) else 2**31 - 1
            return start, _java_to_string(v)

        return sorted(single, key=key)

    def enum(self, e: Enum) -> str:
        out = [f"enum {e.name} {{"]
        if e.reserveds:
            out.append("\n")
            for r in self._reserveds(e.reserveds):
                indent(out, self.reserved(r))
        if not e.reserveds and (e.options or e.constants):
            out.append("\n")
        for o in self.filter_options(e.options):
            indent(out, self.option_statement(o))
        constants = e.constants
        if self.normalize:
            constants = sorted(constants, key=lambda c: (c.tag, c.name))
        for c in constants:
            indent(out, self.constant(c))
        out.append("}\n")
        return "".join(out)

    def constant(self, c: EnumConstant) -> str:
        text = f"{c.name} = {c.tag}"
        options = self.filter_options(c.options)
        if options:
            text += " " + self.options_list(options)
        return text + ";\n"

    def message(self, m: Message) -> str:
        out = [f"message {m.name} {{"]
        if m.reserveds:
            out.append("\n")
            for r in self._reserveds(m.reserveds):
                indent(out, self.reserved(r))
        options = self.filter_options(m.options)
        if options:
            out.append("\n")
            for o in options:
                indent(out, self.option_statement(o))
        if m.fields:
            out.append("\n")
            fields = sorted(m.fields, key=lambda f: f.tag) if self.normalize else m.fields
            for f in fields:
                indent(out, self.field(f))
        if m.oneofs:
            out.append("\n")
            oneofs = m.oneofs
            if self.normalize:
                oneofs = [OneOf(o.name, sorted(o.fields, key=lambda f: f.tag), o.groups, o.options)
                          for o in oneofs if o.fields]
                oneofs.sort(key=lambda o: o.fields[0].tag)
            for one in oneofs:
                indent(out, self.oneof(one))
        if m.groups:
            out.append("\n")
            groups = sorted(m.groups, key=lambda g: g.tag) if self.normalize else m.groups
            for g in groups:
                indent(out, self.group(g))
        if m.extensions:
            out.append("\n")
            extensions = m.extensions
            if self.normalize:
                extensions = sorted((Extensions([v], x.options) for x in extensions for v in x.values),
                                    key=lambda x: _start(x.values[0]))
            for x in extensions:
                indent(out, self.extensions(x))
        if m.extends:
            out.append("\n")
            for e in self._extends(m.extends):
                indent(out, self.extend(e))
        nested = self.filter_types(m.nested)
        if nested:
            out.append("\n")
            self._types(out, nested, top=False)
        out.append("}\n")
        return "".join(out)

    def _range(self, v: int | IntRange) -> str:
        if isinstance(v, int):
            return str(v)
        if self.normalize and v.start == v.end:
            return str(v.start)
        return f"{v.start} to {v.end if v.end < MAX_TAG_VALUE else 'max'}"

    def reserved(self, r: Reserved) -> str:
        parts = [f'"{v}"' if isinstance(v, str) else self._range(v) for v in r.values]
        return "reserved " + ", ".join(parts) + ";\n"

    def extensions(self, x: Extensions) -> str:
        text = "extensions " + ", ".join(self._range(v) for v in x.values)
        options = self.filter_options(x.options)
        if options:
            text += " " + self.options_list(options)
        return text + ";\n"

    def oneof(self, o: OneOf) -> str:
        out = [f"oneof {o.name} {{"]
        options = self.filter_options(o.options)
        if options:
            out.append("\n")
            for opt in options:
                indent(out, self.option_statement(opt))
        if o.fields:
            out.append("\n")
            for f in o.fields:
                indent(out, self.field(f))
        if o.groups:
            out.append("\n")
            groups = sorted(o.groups, key=lambda g: g.tag) if self.normalize else o.groups
            for g in groups:
                indent(out, self.group(g))
        out.append("}\n")
        return "".join(out)

    def group(self, g: Group) -> str:
        out = [f"{g.label + ' ' if g.label else ''}group {g.name} = {g.tag} {{"]
        if g.fields:
            out.append("\n")
            fields = sorted(g.fields, key=lambda f: f.tag) if self.normalize else g.fields
            for f in fields:
                indent(out, self.field(f))
        out.append("}\n")
        return "".join(out)

    def extend(self, e: Extend) -> str:
        out = [f"extend {e.name} {{"]
        if e.fields:
            out.append("\n")
            fields = sorted(e.fields, key=lambda f: f.tag) if self.normalize else e.fields
            for f in fields:
                indent(out, self.field(f))
        out.append("}\n")
        return "".join(out)

    def field(self, f: Field) -> str:
        label, type_ = f.label, f.type
        if self.normalize:
            assert self.types is not None
            if not is_scalar(type_) and not type_.startswith("map<"):
                type_ = self.resolve(type_)
                info = self.types.get(type_[1:])
                if info is not None and info.is_map and info.key and info.value:
                    type_ = f"map<{info.key.type}, {info.value.type}>"
            if type_.startswith("map<"):
                key, value = split_map(type_)
                full = self.types.resolve(value, self.scope)
                if full is not None:
                    type_ = f"map<{key}, .{full}>"
                label = None
        text = f"{label + ' ' if label else ''}{type_} {f.name} = {f.tag}"
        options = list(f.options)
        if f.default is not None:
            options.append(Option("default", _default_kind(f.type), f.default))
        if f.json_name is not None:
            options.append(Option("json_name", STRING, f.json_name))
        options = self.filter_options(options)
        if options:
            text += " " + self.options_list(options)
        return text + ";\n"


def transform(o: Option) -> Option:
    """ProtobufSchema.transform: ``(a).b.c = v`` becomes ``(a) = {b: {c: v}}``."""
    if o.kind != OPTION:
        return o
    return Option(o.name, MAP, _transform_map(o), o.parenthesized)


def _transform_map(o: Option) -> dict[str, Any]:
    inner: Option = o.value
    value: Any = inner.value
    if inner.kind in (BOOLEAN, ENUM, NUMBER):
        value = Primitive(inner.kind, value)
    elif inner.kind == OPTION:
        value = _transform_map(inner)
    return {inner.name: value}


def _find_field(m: Message, name: str) -> Field | None:
    for f in m.fields:
        if f.name == name:
            return f
    for one in m.oneofs:
        for f in one.fields:
            if f.name == name:
                return f
    return None


def _start(v: int | IntRange) -> int:
    return v.start if isinstance(v, IntRange) else v


def _java_to_string(v: Any) -> str:
    if isinstance(v, IntRange):
        return f"{v.start}..{v.end}"  # Kotlin's IntRange.toString()
    return str(v)


def _default_kind(type_: str) -> str:
    simple = type_.rsplit(".", 1)[-1]
    if simple == "bool":
        return BOOLEAN
    if simple == "string":
        return STRING
    if simple in SCALARS:
        return NUMBER
    return ENUM


def is_scalar(type_: str) -> bool:
    return type_ in SCALARS


def split_map(type_: str) -> tuple[str, str]:
    inner = type_[4:-1]
    key, _, value = inner.partition(",")
    return key.strip(), value.strip()


def indent(out: list[str], text: str) -> None:
    """appendIndented: two spaces before each line of ``text``."""
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    for line in lines:
        out.append("  " + line + "\n")


_PROTO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                  "\v": "\\v", "\\": "\\\\", "'": "\\'", '"': '\\"'}


def escape(s: str) -> str:
    """ProtobufSchemaUtils.escapeChars."""
    return "".join(_PROTO_ESCAPES.get(c, c) for c in s)


def java_decimal_format(text: str) -> str:
    """``new DecimalFormat()`` without grouping over NumberUtils.createNumber(text): at most three
    fraction digits, half-even, no exponent; words such as inf or nan stay as written."""
    t = text.strip()
    try:
        negative = t.startswith("-")
        body = t[1:] if negative else t
        if body.lower().startswith("0x"):
            d = Decimal(int(body[2:], 16))
        elif len(body) > 1 and body.startswith("0") and body.isdigit():
            d = Decimal(int(body, 8))
        else:
            d = Decimal(body.rstrip("lLfFdD") if body[-1:] in "lLfFdD" else body)
        if not d.is_finite():
            return text
        if negative:
            d = -d
    except (InvalidOperation, ValueError, IndexError):
        return text
    d = d.quantize(Decimal("0.001"), rounding=ROUND_HALF_EVEN)
    s = format(d, "f")
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return s


class ProtobufSchema:
    schema_type = "PROTOBUF"

    def __init__(self, element: ProtoFile, dependencies: Mapping[str, ProtoFile],
                 canonical: str | None = None, versions: Mapping[str, str] | None = None) -> None:
        self.element = element
        self.dependencies = dependencies
        # The referenced texts by name: two schemas that import the same text see the same types.
        self.versions = versions or {}
        self._canonical = canonical
        self._types: Types | None = None

    def types(self) -> Types:
        if self._types is None:
            self._types = Types(self.element, self.dependencies, self.versions)
        return self._types

    def canonical(self) -> str:
        if self._canonical is None:
            self._canonical = Formatter().file(self.element)
        return self._canonical

    def normalized_text(self) -> str:
        return Formatter(normalize=True, types=self.types()).file(self.element)

    def normalized(self) -> ProtobufSchema:
        text = self.normalized_text()
        return ProtobufSchema(parse_text(text), self.dependencies, text, self.versions)

    def compatibility_errors(self, previous: ParsedSchema) -> list[str]:
        if not isinstance(previous, ProtobufSchema):
            return ["Incompatible because of different schema type"]
        from .protobuf_diff import incompatibilities

        return incompatibilities(previous.element, previous.types(), self.element, self.types())

    def __repr__(self) -> str:
        return f"ProtobufSchema({self.canonical()!r})"


def _element(text: str, what: str) -> ProtoFile:
    try:
        return parse_text(text)
    except ProtoError as text_error:
        try:
            return parse_descriptor(text)
        except ValueError:
            detail = str(text_error).replace("\n", "\\n")  # one line, whatever the text holds
            raise InvalidSchema(f"Could not parse Protobuf {what} - {detail}") from None
    except RecursionError:
        raise InvalidSchema(f"Could not parse Protobuf {what} - nested too deeply") from None


class ProtobufFormat:
    name = "PROTOBUF"

    def parse(self, text: str, references: Mapping[str, str]) -> ProtobufSchema:
        deps = {name: _element(ref_text, f"reference '{name}'")
                for name, ref_text in references.items()}
        schema = ProtobufSchema(_element(text, "schema"), deps, versions=dict(references))
        try:
            schema.normalized_text()  # Confluent's validate(): every named type must resolve
        except _Unresolved as e:
            raise InvalidSchema(f"Invalid Protobuf schema - {e}") from None
        except RecursionError:
            raise InvalidSchema("Invalid Protobuf schema - nested too deeply") from None
        return schema


FORMAT = ProtobufFormat()
