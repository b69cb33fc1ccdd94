"""Protobuf compatibility as Confluent decides it (protobuf-provider's
``io.confluent.kafka.schemaregistry.protobuf.diff``: SchemaDiff, MessageSchemaDiff,
FieldSchemaDiff, EnumSchemaDiff, Context).

Messages and enums are matched by name (nested ones in their message), fields by tag. Every
``Difference.Type`` is listed at its path (``#/Message/tag``, ``#/Message/oneof/tag``); those
outside ``SchemaDiff.COMPATIBLE_CHANGES`` make the schemas incompatible. Scalar kinds change
compatibly only within Confluent's wire-compatible groups (int32/int64/uint32/uint64/bool and
enums; sint32/sint64; string/bytes; fixed32/sfixed32; fixed64/sfixed64). The messages keep
Confluent's two ``%s`` (reader, writer) for the registry to fill in.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .protobuf_elements import Enum, Field, Message, OneOf, ProtoFile
from .protobuf_types import SCALARS, TypeInfo, Types

COMPATIBLE = frozenset("""MESSAGE_ADDED MESSAGE_MOVED ENUM_ADDED ENUM_REMOVED ENUM_CONST_ADDED
ENUM_CONST_CHANGED ENUM_CONST_REMOVED FIELD_ADDED FIELD_REMOVED FIELD_NAME_CHANGED
FIELD_STRING_OR_BYTES_LABEL_CHANGED ONEOF_ADDED ONEOF_REMOVED ONEOF_FIELD_ADDED
ONEOF_FIELD_MOVED_TO_TOP_LEVEL""".split())

_DESCRIPTIONS = {
    "PACKAGE_CHANGED": "The package at '{}' in the %s schema does not match the package in the "
                       "%s schema",
    "MESSAGE_REMOVED": "The %s schema is missing a MESSAGE type at path '{}' in the %s schema",
    "FIELD_KIND_CHANGED": "The type of a field at path '{}' in the %s schema does not match the "
                          "%s schema",
    "FIELD_SCALAR_KIND_CHANGED": "The kind of a SCALAR field at path '{}' in the %s schema does "
                                 "not match its kind in the %s schema",
    "FIELD_NAMED_TYPE_CHANGED": "The type of a MESSAGE field at path '{}' in the %s schema does "
                                "not match its type in the %s schema",
    "FIELD_NUMERIC_LABEL_CHANGED": "The label for a NUMERIC field at path '{}' in the %s schema "
                                   "does not match its label in the %s schema",
    # Confluent's wording, double space included.
    "REQUIRED_FIELD_ADDED": "A required field  at path '{}' in the %s schema is missing in the "
                            "%s schema",
    "REQUIRED_FIELD_REMOVED": "The %s schema is missing a required field at path: '{}' in the "
                              "%s schema",
    "ONEOF_FIELD_REMOVED": "The %s schema is missing a oneof field at path '{}' in the %s schema",
    "ONEOF_FIELD_MOVED_TO_TOP_LEVEL": "The oneof field at path '{}' in the %s schema was moved "
                                      "out of its oneof to a top-level field in the %s schema",
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": "Multiple fields in the oneof at path '{}' in the %s schema "
                                      "are outside a oneof in the %s schema",
    "FIELD_MOVED_TO_EXISTING_ONEOF": "A field in the oneof at path '{}' in the %s schema is "
                                     "outside an existing oneof in the %s schema",
}


def describe(kind: str, path: str) -> str:
    """Difference.toString()."""
    template = _DESCRIPTIONS.get(kind, "")
    return '{errorType:"' + kind + '", description:"' + template.replace("{}", path) + '"}'


_SCALAR_KINDS = {
    "int32": "GENERAL_NUMBER", "int64": "GENERAL_NUMBER", "uint32": "GENERAL_NUMBER",
    "uint64": "GENERAL_NUMBER", "bool": "GENERAL_NUMBER",
    "sint32": "SIGNED_NUMBER", "sint64": "SIGNED_NUMBER",
    "string": "STRING_OR_BYTES", "bytes": "STRING_OR_BYTES",
    "fixed32": "FIXED32", "sfixed32": "FIXED32", "fixed64": "FIXED64", "sfixed64": "FIXED64",
    "float": "FLOAT", "double": "DOUBLE",
}
_NUMERIC = frozenset(["GENERAL_NUMBER", "SIGNED_NUMBER", "FIXED32", "FIXED64", "FLOAT", "DOUBLE"])


class Context:
    def __init__(self, original: Types, update: Types) -> None:
        self.types = {True: original, False: update}
        self.packages = {True: original.package, False: update.package}
        self.path: list[str] = []
        self.names: list[str] = []
        self.schemas: set[int] = set()
        self.diffs: list[tuple[str, str]] = []

    def sub(self) -> Context:
        c = Context(self.types[True], self.types[False])
        c.packages = dict(self.packages)
        c.path = list(self.path)
        c.names = list(self.names)
        c.schemas = set(self.schemas)
        return c

    @contextmanager
    def enter(self, segment: str, named: bool = False) -> Iterator[None]:
        self.path.append(segment)
        if named:
            self.names.append(segment)
        try:
            yield
        finally:
            self.path.pop()
            if named:
                self.names.pop()

    def add(self, kind: str) -> None:
        self.diffs.append((kind, "#/" + "/".join(self.path)))

    def compatible(self) -> bool:
        return all(kind in COMPATIBLE for kind, _ in self.diffs)

    def resolve(self, name: str, original: bool) -> str | None:
        return self.types[original].resolve(name, self.names, self.packages[original])

    def get(self, name: str, original: bool) -> TypeInfo | None:
        full = self.resolve(name, original)
        return self.types[original].get(full) if full is not None else None


def compare_files(ctx: Context, original: Any, update: Any) -> None:
    if original.package != update.package:
        ctx.add("PACKAGE_CHANGED")
    compare_types(ctx, original.types, update.types)


def _index(types: list[Any]) -> tuple[dict[str, Message], dict[str, int], dict[str, Enum]]:
    messages: dict[str, Message] = {}
    indexes: dict[str, int] = {}
    enums: dict[str, Enum] = {}
    i = 0
    for t in types:
        if isinstance(t, Message):
            messages[t.name] = t
            indexes[t.name] = i
            i += 1
        elif isinstance(t, Enum):
            enums[t.name] = t
    return messages, indexes, enums


def compare_types(ctx: Context, original: list[Any], update: list[Any]) -> None:
    om, oi, oe = _index(original)
    um, ui, ue = _index(update)
    for name in list(om) + [n for n in um if n not in om]:
        with ctx.enter(name, named=True):
            o, u = om.get(name), um.get(name)
            if u is None:
                info = ctx.get(name, True)
                if info is not None and not info.is_map:
                    ctx.add("MESSAGE_REMOVED")
            elif o is None:
                info = ctx.get(name, False)
                if info is not None and not info.is_map:
                    ctx.add("MESSAGE_ADDED")
            else:
                compare_messages(ctx, o, u)
                if oi.get(name) != ui.get(name):
                    ctx.add("MESSAGE_MOVED")
    for name in list(oe) + [n for n in ue if n not in oe]:
        with ctx.enter(name, named=True):
            oen, uen = oe.get(name), ue.get(name)
            if uen is None:
                ctx.add("ENUM_REMOVED")
            elif oen is None:
                ctx.add("ENUM_ADDED")
            else:
                compare_enums(ctx, oen, uen)


def compare_enums(ctx: Context, original: Enum, update: Enum) -> None:
    ob = {c.tag: c for c in original.constants}
    ub = {c.tag: c for c in update.constants}
    for tag in sorted(set(ob) | set(ub)):
        with ctx.enter(str(tag)):
            if tag not in ub:
                ctx.add("ENUM_CONST_REMOVED")
            elif tag not in ob:
                ctx.add("ENUM_CONST_ADDED")
            elif ob[tag].name != ub[tag].name:
                ctx.add("ENUM_CONST_CHANGED")


def _collect(m: Message) -> tuple[dict[int, Field], dict[int, str], dict[str, OneOf]]:
    by_tag: dict[int, Field] = {f.tag: f for f in m.fields}
    tag_to_oneof: dict[int, str] = {}
    oneofs: dict[str, OneOf] = {}
    for one in m.oneofs:
        oneofs[one.name] = one
        for f in one.fields:
            by_tag[f.tag] = f
            tag_to_oneof[f.tag] = one.name
    return by_tag, tag_to_oneof, oneofs


def compare_messages(ctx: Context, original: Message, update: Message) -> None:
    key = id(original)
    if key not in ctx.schemas:
        ctx.schemas.add(key)
        try:
            _compare_message_fields(ctx, original, update)
        finally:
            ctx.schemas.discard(key)
    compare_types(ctx, original.nested, update.nested)


def _compare_message_fields(ctx: Context, original: Message, update: Message) -> None:
    o_by_tag, o_oneof_of, o_oneofs = _collect(original)
    u_by_tag, u_oneof_of, u_oneofs = _collect(update)
    deleted = {name for name, one in o_oneofs.items() if name not in u_oneofs
               and not any(f.tag in u_by_tag for f in one.fields)}
    for one in update.oneofs:
        with ctx.enter(one.name):
            origins: set[str] = set()
            top_level_moved_in = 0
            for f in one.fields:
                if f.tag in o_oneof_of:
                    origins.add("oneof:" + o_oneof_of[f.tag])
                elif f.tag in o_by_tag:
                    origins.add(f"field:{f.tag}")
                    top_level_moved_in += 1
            if len(origins) > 1:
                ctx.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF" if top_level_moved_in > 1
                        else "FIELD_MOVED_TO_EXISTING_ONEOF")
    for name in sorted(set(o_oneofs) | set(u_oneofs)):
        with ctx.enter(name):
            if name not in u_oneofs:
                ctx.add("ONEOF_REMOVED")
            elif name not in o_oneofs:
                ctx.add("ONEOF_ADDED")
    for tag in sorted(set(o_by_tag) | set(u_by_tag)):
        of, uf = o_by_tag.get(tag), u_by_tag.get(tag)
        o_one, u_one = o_oneof_of.get(tag), u_oneof_of.get(tag)
        if uf is None:
            assert of is not None
            if o_one is not None:
                if o_one not in deleted:
                    with ctx.enter(o_one), ctx.enter(str(tag)):
                        ctx.add("ONEOF_FIELD_REMOVED")
            else:
                with ctx.enter(str(tag)):
                    ctx.add("REQUIRED_FIELD_REMOVED" if of.label == "required" else "FIELD_REMOVED")
        elif of is None:
            if u_one is not None:
                with ctx.enter(u_one), ctx.enter(str(tag)):
                    ctx.add("ONEOF_FIELD_ADDED")
            else:
                with ctx.enter(str(tag)):
                    ctx.add("REQUIRED_FIELD_ADDED" if uf.label == "required" else "FIELD_ADDED")
        else:
            if o_one is not None and u_one is None:
                with ctx.enter(str(tag)):
                    ctx.add("ONEOF_FIELD_MOVED_TO_TOP_LEVEL")
            if u_one is not None:
                with ctx.enter(u_one), ctx.enter(str(tag)):
                    compare_fields(ctx, of, uf)
            else:
                with ctx.enter(str(tag)):
                    compare_fields(ctx, of, uf)


def compare_fields(ctx: Context, original: Field, update: Field) -> None:
    if original.name != update.name:
        ctx.add("FIELD_NAME_CHANGED")
    _labels_and_types(ctx, original.label, update.label, original.type, update.type)


def _map_type(ctx: Context, type_: str, original: bool) -> str:
    info = ctx.get(type_, original) if not _is_builtin(type_) else None
    if info is not None and info.is_map and info.key is not None and info.value is not None:
        return f"map<{info.key.type}, {info.value.type}>"
    return type_


def _is_builtin(type_: str) -> bool:
    return type_ in SCALARS or type_.startswith("map<")


def _kind(ctx: Context, type_: str, original: bool) -> str:
    if type_ in SCALARS:
        return "SCALAR"
    if type_.startswith("map<"):
        return "MAP"
    info = ctx.get(type_, original)
    if info is not None and isinstance(info.type, Enum):
        return "SCALAR"
    return "MESSAGE"


def _scalar_kind(ctx: Context, type_: str, original: bool) -> str:
    info = ctx.get(type_, original) if type_ not in SCALARS else None
    if info is not None and isinstance(info.type, Enum):
        return "GENERAL_NUMBER"
    return _SCALAR_KINDS.get(type_, "ANY")


def _split_map(type_: str) -> tuple[str, str]:
    key, _, value = type_[4:-1].partition(",")
    return key.strip(), value.strip()


def _labels_and_types(ctx: Context, o_label: str | None, u_label: str | None, o_type: str,
                      u_type: str) -> None:
    o_type = _map_type(ctx, o_type, True)
    u_type = _map_type(ctx, u_type, False)
    ok, uk = _kind(ctx, o_type, True), _kind(ctx, u_type, False)
    if ok != uk:
        ctx.add("FIELD_KIND_CHANGED")
        return
    if ok == "SCALAR":
        osk, usk = _scalar_kind(ctx, o_type, True), _scalar_kind(ctx, u_type, False)
        if osk != usk:
            ctx.add("FIELD_SCALAR_KIND_CHANGED")
        elif o_label is not None and u_label is not None and o_label != u_label:
            if osk in _NUMERIC:
                ctx.add("FIELD_NUMERIC_LABEL_CHANGED")
            elif osk == "STRING_OR_BYTES":
                ctx.add("FIELD_STRING_OR_BYTES_LABEL_CHANGED")
    elif ok == "MESSAGE":
        _message_types(ctx, o_type, u_type)
    elif ok == "MAP":
        (o_key, o_value), (u_key, u_value) = _split_map(o_type), _split_map(u_type)
        _labels_and_types(ctx, None, None, o_key, u_key)
        _labels_and_types(ctx, None, None, o_value, u_value)


def _message_types(ctx: Context, o_type: str, u_type: str) -> None:
    o_full, u_full = ctx.resolve(o_type, True), ctx.resolve(u_type, False)
    if o_full is None or u_full is None:
        if o_type != u_type:
            ctx.add("FIELD_NAMED_TYPE_CHANGED")
        return
    o_info, u_info = ctx.get(o_full, True), ctx.get(u_full, False)
    assert o_info is not None and u_info is not None
    o_local = o_full[len(o_info.package) + 1:] if o_info.package and o_full.startswith(
        o_info.package + ".") else o_full
    u_local = u_full[len(u_info.package) + 1:] if u_info.package and u_full.startswith(
        u_info.package + ".") else u_full
    if o_local != u_local:
        ctx.add("FIELD_NAMED_TYPE_CHANGED")
        return
    # Types of the same version of the same file are not compared again: Confluent compares
    # the references' subject and version (the main file's dummy reference is equal on both
    # sides); here a reference is the same when its name and text are.
    if o_info.ref == u_info.ref:
        return
    if not isinstance(o_info.type, Message) or not isinstance(u_info.type, Message):
        return
    sub = ctx.sub()
    sub.packages = {True: o_info.package, False: u_info.package}
    sub.path = o_local.split(".")
    sub.names = o_local.split(".")
    compare_messages(sub, o_info.type, u_info.type)
    ctx.diffs.extend(sub.diffs)
    if not sub.compatible():
        ctx.add("FIELD_NAMED_TYPE_CHANGED")


def incompatibilities(writer: ProtoFile, writer_types: Types, reader: ProtoFile,
                      reader_types: Types) -> list[str]:
    """Confluent's ``ProtobufSchema.isBackwardCompatible``: the incompatible differences from the
    writer's schema to the reader's."""
    ctx = Context(writer_types, reader_types)
    compare_files(ctx, writer, reader)
    return [describe(kind, path) for kind, path in ctx.diffs if kind not in COMPATIBLE]
