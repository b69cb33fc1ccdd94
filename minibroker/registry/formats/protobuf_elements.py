"""A .proto file as Confluent's registry holds it: the element tree of Square Wire's ProtoParser
(wire-schema's ``internal/parser``: ProtoFileElement, MessageElement, FieldElement, OptionElement
...), read from .proto text the way ProtoParser/SyntaxReader/OptionReader read it, or built from a
base64 ``FileDescriptorProto`` the way Confluent's ``ProtobufSchema.toProtoFile(FileDescriptorProto)``
builds it (protobuf-provider's ProtobufSchema.java).
"""
from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

MAX_TAG_VALUE = (1 << 29) - 1

# OptionElement.Kind
STRING, BOOLEAN, NUMBER, ENUM, MAP, LIST, OPTION = (
    "STRING", "BOOLEAN", "NUMBER", "ENUM", "MAP", "LIST", "OPTION")


class ProtoError(ValueError):
    """The text is not a .proto file Wire accepts."""


@dataclass
class Option:
    name: str
    kind: str
    value: Any  # str / bool-as-str / dict / list / Option
    parenthesized: bool = False


@dataclass
class Primitive:
    """OptionElement.OptionPrimitive: a number, boolean or enum inside a map or list value."""
    kind: str
    value: Any


@dataclass
class IntRange:
    start: int
    end: int  # inclusive


@dataclass
class Reserved:
    values: list[str | int | IntRange]


@dataclass
class Extensions:
    values: list[int | IntRange]
    options: list[Option] = field(default_factory=list)


@dataclass
class Field:
    label: str | None  # "optional", "required", "repeated" or None
    type: str
    name: str
    tag: int
    default: str | None = None
    json_name: str | None = None
    options: list[Option] = field(default_factory=list)


@dataclass
class OneOf:
    name: str
    fields: list[Field] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)


@dataclass
class Group:
    label: str | None
    name: str
    tag: int
    fields: list[Field] = field(default_factory=list)


@dataclass
class Extend:
    name: str
    fields: list[Field] = field(default_factory=list)


@dataclass
class EnumConstant:
    name: str
    tag: int
    options: list[Option] = field(default_factory=list)


@dataclass
class Enum:
    name: str
    options: list[Option] = field(default_factory=list)
    constants: list[EnumConstant] = field(default_factory=list)
    reserveds: list[Reserved] = field(default_factory=list)
    nested: list[Any] = field(default_factory=list)  # always empty (TypeElement.nestedTypes)


@dataclass
class Message:
    name: str
    nested: list[Message | Enum] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)
    reserveds: list[Reserved] = field(default_factory=list)
    fields: list[Field] = field(default_factory=list)
    oneofs: list[OneOf] = field(default_factory=list)
    extensions: list[Extensions] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    extends: list[Extend] = field(default_factory=list)


@dataclass
class Rpc:
    name: str
    request: str
    response: str
    request_streaming: bool = False
    response_streaming: bool = False
    options: list[Option] = field(default_factory=list)


@dataclass
class Service:
    name: str
    rpcs: list[Rpc] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)


@dataclass
class ProtoFile:
    syntax: str | None = None  # "proto2" / "proto3"
    package: str | None = None
    imports: list[str] = field(default_factory=list)
    public_imports: list[str] = field(default_factory=list)
    weak_imports: list[str] = field(default_factory=list)
    types: list[Message | Enum] = field(default_factory=list)
    services: list[Service] = field(default_factory=list)
    extends: list[Extend] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# .proto text (Wire's SyntaxReader, OptionReader and ProtoParser).

_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


class _Reader:
    def __init__(self, text: str) -> None:
        self.data = text
        self.pos = 0

    def line(self) -> int:
        return self.data.count("\n", 0, self.pos) + 1

    def fail(self, message: str) -> ProtoError:
        return ProtoError(f"Syntax error in {line_col(self.data, self.pos)}: {message}")

    def expect(self, condition: bool, message: str) -> None:
        if not condition:
            raise self.fail(message)

    def skip(self) -> None:
        data, n = self.data, len(self.data)
        while self.pos < n:
            c = data[self.pos]
            if c in " \t\r\n\f\v":
                self.pos += 1
            elif c == "/" and self.pos + 1 < n and data[self.pos + 1] == "/":
                end = data.find("\n", self.pos)
                self.pos = n if end < 0 else end + 1
            elif c == "/" and self.pos + 1 < n and data[self.pos + 1] == "*":
                end = data.find("*/", self.pos + 2)
                if end < 0:
                    raise self.fail("unterminated comment")
                self.pos = end + 2
            elif c == "/":
                raise self.fail("unexpected '/'")
            else:
                return

    def exhausted(self) -> bool:
        self.skip()
        return self.pos >= len(self.data)

    def peek(self) -> str:
        self.skip()
        self.expect(self.pos < len(self.data), "unexpected end of file")
        return self.data[self.pos]

    def peek_is(self, c: str) -> bool:
        """Wire's peekChar(c): consumes ``c`` when it is next."""
        if self.peek() == c:
            self.pos += 1
            return True
        return False

    def read_char(self) -> str:
        c = self.peek()
        self.pos += 1
        return c

    def require(self, c: str) -> None:
        got = self.read_char()
        self.expect(got == c, f"expected '{c}' but was '{got}'")

    def word(self, allow_dots: bool = True) -> str:
        self.skip()
        start = self.pos
        data, n = self.data, len(self.data)
        while self.pos < n and (data[self.pos] in _WORD or (allow_dots and data[self.pos] == ".")):
            self.pos += 1
        self.expect(start < self.pos, "expected a word")
        return data[start:self.pos]

    def name(self, retain_wrap: bool = False, allow_dots: bool = True) -> str:
        c = self.peek()
        if c in "([":
            close = ")" if c == "(" else "]"
            self.pos += 1
            w = self.word()
            self.expect(self.read_char() == close, f"expected '{close}'")
            return f"{c}{w}{close}" if retain_wrap else w
        return self.word(allow_dots=allow_dots)

    def data_type(self, name: str | None = None) -> str:
        if name is None:
            name = self.word()
        if name == "map":
            self.expect(self.read_char() == "<", "expected '<'")
            key = self.data_type()
            self.expect(self.read_char() == ",", "expected ','")
            value = self.data_type()
            self.expect(self.read_char() == ">", "expected '>'")
            return f"map<{key}, {value}>"
        parts = [name]
        while self.peek() == ".":
            self.pos += 1
            parts.append("." + self.word())
        return "".join(parts)

    def read_int(self) -> int:
        tag = self.word()
        try:
            if tag.startswith(("0x", "0X")):
                return int(tag[2:], 16)
            if tag.startswith("-0x") or tag.startswith("-0X"):
                return -int(tag[3:], 16)
            return int(tag, 10)
        except ValueError:
            raise self.fail(f"expected an integer but was {tag}") from None

    def quoted(self) -> str:
        quote = self.read_char()
        self.expect(quote in "\"'", "expected quoted string")
        out: list[str] = []
        data, n = self.data, len(self.data)
        while self.pos < n:
            c = data[self.pos]
            self.pos += 1
            if c == quote:
                if self.pos < n:
                    save = self.pos
                    self.skip()
                    if self.pos < n and data[self.pos] in "\"'":
                        quote = data[self.pos]
                        self.pos += 1
                        continue
                    self.pos = save
                return "".join(out)
            if c == "\\":
                self.expect(self.pos < n, "unexpected end of file")
                c = data[self.pos]
                self.pos += 1
                if c in _ESCAPES:
                    c = _ESCAPES[c]
                elif c in "xX":
                    c = self._numeric(16, 2)
                elif c in "01234567":
                    self.pos -= 1
                    c = self._numeric(8, 3)
            out.append(c)
        raise self.fail("unterminated string")

    def _numeric(self, radix: int, length: int) -> str:
        value = -1
        end = min(self.pos + length, len(self.data))
        while self.pos < end:
            try:
                digit = int(self.data[self.pos], 16)
            except ValueError:
                break
            if digit >= radix:
                break
            value = digit if value < 0 else value * radix + digit
            self.pos += 1
        self.expect(value >= 0, "expected a digit after \\x or \\X")
        return chr(value)

    def string(self) -> str:
        return self.quoted() if self.peek() in "\"'" else self.word()


def line_col(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"line {line}, column {col}"


class _OptionReader:
    def __init__(self, r: _Reader) -> None:
        self.r = r

    def options(self) -> list[Option]:
        if not self.r.peek_is("["):
            return []
        out = []
        while True:
            out.append(self.option("="))
            if self.r.peek_is("]"):
                break
            self.r.expect(self.r.peek_is(","), "Expected ',' or ']")
        return out

    def option(self, separator: str) -> Option:
        r = self.r
        c0 = r.peek()
        is_extension, parenthesized = c0 == "[", c0 == "("
        name = r.name()
        if is_extension:
            name = f"[{name}]"
        sub_names = []
        while True:
            c = r.read_char()
            if c != ".":
                break
            sub_names.append(r.name(retain_wrap=True, allow_dots=False))
        if separator == ":" and c == "{":
            r.pos -= 1
        else:
            r.expect(c == separator, f"expected '{separator}' in option")
        kind, value = self.kind_and_value()
        for sub in reversed(sub_names):
            paren = sub.startswith("(")
            value = Option(sub[1:-1] if paren else sub, kind, value, paren)
            kind = OPTION
        return Option(name, kind, value, parenthesized)

    def kind_and_value(self) -> tuple[str, Any]:
        r = self.r
        c = r.peek()
        if c == "{":
            return MAP, self.map_value()
        if c == "[":
            return LIST, self.list_value()
        if c in "\"'":
            return STRING, r.quoted()
        if c.isdigit() or c == "-":
            return NUMBER, r.word()
        word = r.word()
        if word in ("true", "false"):
            return BOOLEAN, word
        return ENUM, word

    def map_value(self) -> dict[str, Any]:
        r = self.r
        r.require("{")
        result: dict[str, Any] = {}
        while True:
            if r.peek_is("}"):
                return result
            option = self.option(":")
            value: Any = (Primitive(option.kind, option.value)
                          if option.kind in (BOOLEAN, ENUM, NUMBER) else option.value)
            if isinstance(value, Option):
                nested = result.get(option.name)
                if not isinstance(nested, dict):
                    nested = {}
                    result[option.name] = nested
                nested[value.name] = value.value
            else:
                previous = result.get(option.name)
                if previous is None:
                    result[option.name] = value
                elif isinstance(previous, list):
                    previous.extend(value if isinstance(value, list) else [value])
                else:
                    result[option.name] = [previous] + (value if isinstance(value, list) else [value])
            if not r.peek_is(","):
                r.peek_is(";")

    def list_value(self) -> list[Any]:
        r = self.r
        r.require("[")
        out: list[Any] = []
        while True:
            if r.peek_is("]"):
                return out
            kind, value = self.kind_and_value()
            out.append(Primitive(kind, value) if kind in (BOOLEAN, ENUM, NUMBER) else value)
            if r.peek_is(","):
                continue
            r.expect(r.peek() == "]", "expected ',' or ']'")


_FILE, _MESSAGE, _ENUM, _RPC, _EXTEND, _SERVICE = range(6)


class _Parser:
    def __init__(self, text: str) -> None:
        self.r = _Reader(text)
        self.file = ProtoFile()
        self.count = 0

    def parse(self) -> ProtoFile:
        f = self.file
        while not self.r.exhausted():
            d = self.declaration(_FILE)
            if isinstance(d, (Message, Enum)):
                if any(t.name == d.name for t in f.types):
                    raise ProtoError(f"{d.name} is already defined")
                f.types.append(d)
            elif isinstance(d, Service):
                if any(s.name == d.name for s in f.services):
                    raise ProtoError(f"{d.name} is already defined")
                f.services.append(d)
            elif isinstance(d, Option):
                f.options.append(d)
            elif isinstance(d, Extend):
                f.extends.append(d)
        return f

    def declaration(self, ctx: int) -> Any:
        r = self.r
        index = self.count
        self.count += 1
        if r.peek_is(";"):
            return None
        start = r.pos
        label = r.word()
        if label == "package" and ctx == _FILE:
            self.file.package = r.name()
            r.require(";")
            return None
        if label == "import" and ctx == _FILE:
            if r.peek() in "\"'":
                self.file.imports.append(r.quoted())
            else:
                kind = r.string()
                if kind == "weak":
                    self.file.weak_imports.append(r.quoted())
                elif kind == "public":
                    self.file.public_imports.append(r.quoted())
                else:
                    raise r.fail("expected quoted string")
            r.require(";")
            return None
        if label == "syntax" and ctx == _FILE:
            r.expect(self.file.syntax is None, "too many syntax definitions")
            r.require("=")
            r.expect(index == 0, "'syntax' element must be the first declaration in a file")
            syntax = r.quoted()
            if syntax not in ("proto2", "proto3"):
                r.pos = start
                raise r.fail(f"unexpected syntax: {syntax}")
            self.file.syntax = syntax
            r.require(";")
            return None
        if label == "option":
            option = _OptionReader(r).option("=")
            r.require(";")
            return option
        if label == "reserved":
            return self.reserved()
        if label == "message" and ctx in (_FILE, _MESSAGE):
            return self.message()
        if label == "enum" and ctx in (_FILE, _MESSAGE):
            return self.enum()
        if label == "service" and ctx == _FILE:
            return self.service()
        if label == "extend" and ctx in (_FILE, _MESSAGE):
            return self.extend()
        if label == "rpc" and ctx == _SERVICE:
            return self.rpc()
        if label == "oneof" and ctx == _MESSAGE:
            return self.oneof()
        if label == "extensions" and ctx == _MESSAGE:
            return self.extensions()
        if ctx in (_MESSAGE, _EXTEND):
            return self.field_declaration(label)
        if ctx == _ENUM:
            return self.enum_constant(label)
        if label == "edition" and ctx == _FILE:
            raise r.fail("edition is not currently supported")
        r.pos = start
        raise r.fail(f"unexpected label: {label}")

    def block(self, ctx: int) -> list[Any]:
        self.r.require("{")
        out = []
        while not self.r.peek_is("}"):
            d = self.declaration(ctx)
            if d is not None:
                out.append(d)
        return out

    def message(self) -> Message:
        m = Message(self.r.name())
        for d in self.block(_MESSAGE):
            if isinstance(d, Field):
                m.fields.append(d)
            elif isinstance(d, OneOf):
                m.oneofs.append(d)
            elif isinstance(d, Group):
                m.groups.append(d)
            elif isinstance(d, (Message, Enum)):
                m.nested.append(d)
            elif isinstance(d, Extensions):
                m.extensions.append(d)
            elif isinstance(d, Option):
                m.options.append(d)
            elif isinstance(d, Extend):
                m.extends.append(d)
            elif isinstance(d, Reserved):
                m.reserveds.append(d)
        return m

    def extend(self) -> Extend:
        e = Extend(self.r.name())
        e.fields = [d for d in self.block(_EXTEND) if isinstance(d, Field)]
        return e

    def service(self) -> Service:
        s = Service(self.r.name())
        for d in self.block(_SERVICE):
            if isinstance(d, Rpc):
                s.rpcs.append(d)
            elif isinstance(d, Option):
                s.options.append(d)
        return s

    def enum(self) -> Enum:
        e = Enum(self.r.name())
        for d in self.block(_ENUM):
            if isinstance(d, EnumConstant):
                e.constants.append(d)
            elif isinstance(d, Option):
                e.options.append(d)
            elif isinstance(d, Reserved):
                e.reserveds.append(d)
        return e

    def field_declaration(self, word: str) -> Field | Group:
        r = self.r
        label: str | None
        if word == "required":
            r.expect(self.file.syntax != "proto3",
                     "'required' label forbidden in proto3 field declarations")
            label, type_ = "required", r.data_type()
        elif word in ("optional", "repeated"):
            label, type_ = word, r.data_type()
        else:
            r.expect(self.file.syntax == "proto3" or (word == "map" and r.peek() == "<"),
                     f"unexpected label: {word}")
            label, type_ = None, r.data_type(word)
        r.expect(not type_.startswith("map<") or label is None, "'map' type cannot have label")
        if type_ == "group":
            return self.group(label)
        return self.field(label, type_)

    def field(self, label: str | None, type_: str) -> Field:
        r = self.r
        name = r.name()
        r.expect(not name[:1].isdigit(), "field and constant names cannot start with a digit")
        r.require("=")
        tag = r.read_int()
        options = _OptionReader(r).options()
        default = _strip(options, "default")
        json_name = _strip(options, "json_name")
        r.require(";")
        return Field(label, type_, name, tag, default, json_name, options)

    def oneof(self) -> OneOf:
        r = self.r
        o = OneOf(r.name())
        r.require("{")
        while not r.peek_is("}"):
            type_ = r.data_type()
            if type_ == "group":
                o.groups.append(self.group(None))
            elif type_ == "option":
                o.options.append(_OptionReader(r).option("="))
                r.require(";")
            else:
                o.fields.append(self.field(None, type_))
        return o

    def group(self, label: str | None) -> Group:
        r = self.r
        name = r.word()
        r.require("=")
        g = Group(label, name, r.read_int())
        r.require("{")
        while not r.peek_is("}"):
            d = self.field_declaration(r.word())
            if not isinstance(d, Field):
                raise r.fail("expected field declaration")
            g.fields.append(d)
        return g

    def _range_end(self) -> int:
        s = self.r.word()
        if s == "max":
            return MAX_TAG_VALUE
        try:
            return int(s, 0) if s.lower().startswith(("0x", "-0x")) else int(s)
        except ValueError:
            raise self.r.fail(f"expected an integer but was {s}") from None

    def reserved(self) -> Reserved:
        r = self.r
        values: list[str | int | IntRange] = []
        while True:
            if r.peek() in "\"'":
                values.append(r.quoted())
            else:
                start = r.read_int()
                if r.peek() in ",;":
                    values.append(start)
                else:
                    r.expect(r.word() == "to", "expected ',', ';', or 'to'")
                    values.append(IntRange(start, self._range_end()))
            c = r.read_char()
            if c == ";":
                break
            r.expect(c == ",", "expected ',' or ';'")
        r.expect(bool(values), "'reserved' must have at least one field name or tag")
        return Reserved(values)

    def extensions(self) -> Extensions:
        r = self.r
        e = Extensions([])
        while True:
            start = r.read_int()
            if r.peek() in ",;[":
                e.values.append(start)
            else:
                r.expect(r.word() == "to", "expected ',', ';', '[' or 'to'")
                e.values.append(IntRange(start, self._range_end()))
            if r.peek() == "[":
                e.options.extend(_OptionReader(r).options())
                r.require(";")
                break
            c = r.read_char()
            if c == ";":
                break
            r.expect(c == ",", "expected ',' or ';'")
        return e

    def enum_constant(self, label: str) -> EnumConstant:
        r = self.r
        r.require("=")
        tag = r.read_int()
        options = _OptionReader(r).options()
        r.require(";")
        return EnumConstant(label, tag, options)

    def rpc(self) -> Rpc:
        r = self.r
        rpc = Rpc(r.name(), "", "")
        r.require("(")
        word = r.word()
        if word == "stream":
            rpc.request_streaming, rpc.request = True, r.data_type()
        else:
            rpc.request = r.data_type(word)
        r.require(")")
        r.expect(r.word() == "returns", "expected 'returns'")
        r.require("(")
        word = r.word()
        if word == "stream":
            rpc.response_streaming, rpc.response = True, r.data_type()
        else:
            rpc.response = r.data_type(word)
        r.require(")")
        if r.peek_is("{"):
            while not r.peek_is("}"):
                d = self.declaration(_RPC)
                if isinstance(d, Option):
                    rpc.options.append(d)
        else:
            r.require(";")
        return rpc


def _strip(options: list[Option], name: str) -> str | None:
    result = None
    for o in list(options):
        if o.name == name:
            options.remove(o)
            result = str(o.value)
    return result


def parse_text(text: str) -> ProtoFile:
    return _Parser(text).parse()


# ---------------------------------------------------------------------------------------------
# A base64 FileDescriptorProto (what confluent-kafka's Python ProtobufSerializer registers).

_LABELS = {1: "optional", 2: "required", 3: "repeated"}


def parse_descriptor(text: str) -> ProtoFile:
    """Confluent's fallback when ProtoParser refuses the text: base64 of a serialized
    FileDescriptorProto. Raises ValueError when it is not one either."""
    from google.protobuf import descriptor_pb2  # imported on the first base64 schema only
    from google.protobuf.message import DecodeError

    try:
        raw = base64.b64decode(text.strip(), validate=True)
        fd = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, DecodeError, ValueError) as e:
        raise ValueError(f"not a base64 FileDescriptorProto: {e}") from None
    if not raw:
        raise ValueError("empty descriptor")
    return _from_file(fd)


def _bool_option(name: str, value: bool) -> Option:
    return Option(name, BOOLEAN, "true" if value else "false")


def _enum_name(options: Any, field_name: str) -> str:
    fd = options.DESCRIPTOR.fields_by_name[field_name]
    return str(fd.enum_type.values_by_number[getattr(options, field_name)].name)


def _from_file(fd: Any) -> ProtoFile:
    proto3 = fd.syntax == "proto3"
    f = ProtoFile(
        syntax="proto3" if proto3 else ("proto2" if fd.syntax == "proto2" else None),
        package=fd.package or None)
    public, weak = set(fd.public_dependency), set(fd.weak_dependency)
    for i, dep in enumerate(fd.dependency):
        (f.public_imports if i in public else f.weak_imports if i in weak else f.imports).append(dep)
    o = fd.options
    for name in ("java_package", "java_outer_classname"):
        if o.HasField(name):
            f.options.append(Option(name, STRING, getattr(o, name)))
    for name in ("java_multiple_files", "java_generate_equals_and_hash", "java_string_check_utf8"):
        if o.HasField(name):
            f.options.append(_bool_option(name, getattr(o, name)))
    if o.HasField("optimize_for"):
        f.options.append(Option("optimize_for", ENUM, _enum_name(o, "optimize_for")))
    if o.HasField("go_package"):
        f.options.append(Option("go_package", STRING, o.go_package))
    for name in ("cc_generic_services", "java_generic_services", "py_generic_services",
                 "deprecated", "cc_enable_arenas"):
        if o.HasField(name):
            f.options.append(_bool_option(name, getattr(o, name)))
    for name in ("objc_class_prefix", "csharp_namespace", "swift_prefix", "php_class_prefix",
                 "php_namespace", "php_metadata_namespace", "ruby_package"):
        if o.HasField(name):
            f.options.append(Option(name, STRING, getattr(o, name)))
    f.types.extend(_from_message(m, proto3) for m in fd.message_type)
    f.types.extend(_from_enum(e) for e in fd.enum_type)
    f.services.extend(_from_service(s) for s in fd.service)
    f.extends.extend(_from_extends(fd.extension, proto3))
    return f


def _from_extends(fields: Any, proto3: bool) -> list[Extend]:
    by_extendee: dict[str, Extend] = {}
    for fdp in fields:
        by_extendee.setdefault(fdp.extendee, Extend(fdp.extendee)).fields.append(
            _from_field(fdp, proto3, False))
    return list(by_extendee.values())


def _from_message(d: Any, proto3: bool) -> Message:
    m = Message(d.name)
    oneofs = [OneOf(od.name) for od in d.oneof_decl]
    for fdp in d.field:
        if fdp.HasField("oneof_index") and not fdp.proto3_optional:
            oneofs[fdp.oneof_index].fields.append(_from_field(fdp, proto3, True))
        else:
            m.fields.append(_from_field(fdp, proto3, False))
    m.nested.extend(_from_message(n, proto3) for n in d.nested_type)
    m.nested.extend(_from_enum(e) for e in d.enum_type)
    for rr in d.reserved_range:  # end exclusive
        m.reserveds.append(Reserved([rr.start if rr.start == rr.end - 1
                                     else IntRange(rr.start, rr.end - 1)]))
    for name in d.reserved_name:
        m.reserveds.append(Reserved([name]))
    for er in d.extension_range:
        m.extensions.append(Extensions([er.start if er.start == er.end - 1
                                        else IntRange(er.start, er.end - 1)]))
    o = d.options
    for name in ("no_standard_descriptor_accessor", "deprecated", "map_entry"):
        if o.HasField(name):
            m.options.append(_bool_option(name, getattr(o, name)))
    m.extends.extend(_from_extends(d.extension, proto3))
    m.oneofs = [one for one in oneofs if one.fields]
    return m


def _from_enum(d: Any) -> Enum:
    e = Enum(d.name)
    for v in d.value:
        c = EnumConstant(v.name, v.number)
        for name in ("deprecated", "debug_redact"):
            if v.options.HasField(name):
                c.options.append(_bool_option(name, getattr(v.options, name)))
        e.constants.append(c)
    for rr in d.reserved_range:  # end inclusive
        e.reserveds.append(Reserved([rr.start if rr.start == rr.end else IntRange(rr.start, rr.end)]))
    for name in d.reserved_name:
        e.reserveds.append(Reserved([name]))
    for name in ("allow_alias", "deprecated"):
        if d.options.HasField(name):
            e.options.append(_bool_option(name, getattr(d.options, name)))
    return e


def _from_service(d: Any) -> Service:
    s = Service(d.name)
    for md in d.method:
        rpc = Rpc(md.name, md.input_type, md.output_type, md.client_streaming, md.server_streaming)
        if md.options.HasField("deprecated"):
            rpc.options.append(_bool_option("deprecated", md.options.deprecated))
        if md.options.HasField("idempotency_level"):
            rpc.options.append(Option("idempotency_level", ENUM,
                                      _enum_name(md.options, "idempotency_level")))
        s.rpcs.append(rpc)
    if d.options.HasField("deprecated"):
        s.options.append(_bool_option("deprecated", d.options.deprecated))
    return s


_TYPE_NAMES = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64",
               7: "fixed32", 8: "bool", 9: "string", 10: "group", 11: "message", 12: "bytes",
               13: "uint32", 14: "enum", 15: "sfixed32", 16: "sfixed64", 17: "sint32", 18: "sint64"}


def _from_field(fdp: Any, proto3: bool, in_oneof: bool) -> Field:
    options: list[Option] = []
    o = fdp.options
    if o.HasField("ctype"):
        options.append(Option("ctype", ENUM, _enum_name(o, "ctype")))
    if o.HasField("packed"):
        options.append(_bool_option("packed", o.packed))
    if o.HasField("jstype"):
        options.append(Option("jstype", ENUM, _enum_name(o, "jstype")))
    for name in ("deprecated", "debug_redact"):
        if o.HasField(name):
            options.append(_bool_option(name, getattr(o, name)))
    if o.HasField("retention"):
        options.append(Option("retention", ENUM, _enum_name(o, "retention")))
    label: str | None
    if in_oneof:
        label = None
    elif fdp.proto3_optional:
        label = "optional"
    elif fdp.label == 3:
        label = "repeated"
    else:
        label = None if proto3 else _LABELS.get(fdp.label)
    type_ = fdp.type_name if fdp.type_name else _TYPE_NAMES.get(fdp.type, "")
    default = fdp.default_value if (not proto3 and fdp.HasField("default_value")) else None
    json_name = fdp.json_name if fdp.HasField("json_name") else None
    return Field(label, type_, fdp.name, fdp.number, default, json_name, options)
