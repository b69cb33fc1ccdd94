"""Type names across a .proto file and its dependencies, resolved as protobuf scopes them:
Confluent's protobuf ``diff/Context.java`` (collectTypeInfo, resolveFull), which both ``normalize``
and the compatibility check use.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .protobuf_elements import Enum, Extend, Field, Message, ProtoFile

SCALARS = frozenset("""double float int32 int64 uint32 uint64 sint32 sint64 fixed32 fixed64
sfixed32 sfixed64 bool string bytes""".split())

# Confluent's KNOWN_DEPENDENCIES resolve without a reference: the well-known types (their
# descriptors ship with the protobuf runtime), google/type/* (googleapis-common-protos, when it is
# installed) and Confluent's own confluent/meta.proto and confluent/type/decimal.proto.
_KNOWN_MODULES = {
    "google/protobuf/any.proto": "google.protobuf.any_pb2",
    "google/protobuf/api.proto": "google.protobuf.api_pb2",
    "google/protobuf/descriptor.proto": "google.protobuf.descriptor_pb2",
    "google/protobuf/duration.proto": "google.protobuf.duration_pb2",
    "google/protobuf/empty.proto": "google.protobuf.empty_pb2",
    "google/protobuf/field_mask.proto": "google.protobuf.field_mask_pb2",
    "google/protobuf/source_context.proto": "google.protobuf.source_context_pb2",
    "google/protobuf/struct.proto": "google.protobuf.struct_pb2",
    "google/protobuf/timestamp.proto": "google.protobuf.timestamp_pb2",
    "google/protobuf/type.proto": "google.protobuf.type_pb2",
    "google/protobuf/wrappers.proto": "google.protobuf.wrappers_pb2",
}
# Confluent's own known files, declared here by their wire interface (package, names, numbers):
# the data-contract metadata options and the decimal logical type.
_CONFLUENT_FILES = {
    "confluent/meta.proto": """syntax = "proto3";
package confluent;
import "google/protobuf/descriptor.proto";
message Meta {
  string doc = 1;
  map<string, string> params = 2;
  repeated string tags = 3;
  repeated Rule rules = 4;
}
message Rule { string name = 1; string doc = 2; string expr = 3; string sql = 4; }
extend google.protobuf.FileOptions { Meta file_meta = 1088; }
extend google.protobuf.MessageOptions { Meta message_meta = 1088; }
extend google.protobuf.FieldOptions { Meta field_meta = 1088; }
extend google.protobuf.EnumOptions { Meta enum_meta = 1088; }
extend google.protobuf.EnumValueOptions { Meta enum_value_meta = 1088; }
""",
    "confluent/type/decimal.proto": """syntax = "proto3";
package confluent.type;
message Decimal { bytes value = 1; uint32 precision = 2; int32 scale = 3; }
""",
}
# Packages whose types are taken on trust when their file is imported but not available here.
_OPAQUE_PREFIXES = ("google/type/", "confluent/")
_known_cache: dict[str, ProtoFile | None] = {}


def known_dependency(path: str) -> ProtoFile | None:
    if path in _known_cache:
        return _known_cache[path]
    result: ProtoFile | None = None
    if path in _CONFLUENT_FILES:
        from .protobuf_elements import parse_text

        result = parse_text(_CONFLUENT_FILES[path])
        _known_cache[path] = result
        return result
    module = _KNOWN_MODULES.get(path)
    if module is None and path.startswith("google/type/"):
        module = "google.type." + path.rsplit("/", 1)[1].removesuffix(".proto") + "_pb2"
    if module is not None:
        try:
            import importlib

            from .protobuf_elements import _from_file

            mod = importlib.import_module(module)
            from google.protobuf import descriptor_pb2

            fdp = descriptor_pb2.FileDescriptorProto()
            mod.DESCRIPTOR.CopyToProto(fdp)
            result = _from_file(fdp)
        except (ImportError, AttributeError):
            result = None
    _known_cache[path] = result
    return result


@dataclass
class TypeInfo:
    package: str
    ref: Any  # which file it came from: equal refs are the same version of the same file
    type: Message | Enum | None  # None: a type taken on trust from an unavailable known file
    is_map: bool = False
    key: Field | None = None
    value: Field | None = None


class Types:
    """Every type and extension field visible from one schema, by full name (no leading dot)."""

    def __init__(self, main: ProtoFile, dependencies: Mapping[str, ProtoFile],
                 versions: Mapping[str, str] | None = None) -> None:
        """``versions`` tells the dependencies' versions apart (their texts, by name)."""
        self.types: dict[str, TypeInfo] = {}
        self.extend_fields: dict[str, Field] = {}
        self.opaque_packages: set[str] = set()
        for name, dep in dependencies.items():
            self._collect_file(dep, ("dep", name, (versions or {}).get(name)))
        # Confluent's dependenciesWithLogicalTypes(): the known files are always in scope, imported
        # or not, unless a reference of the same name replaces one.
        for path in list(_KNOWN_MODULES) + list(_CONFLUENT_FILES):
            if path not in dependencies:
                known = known_dependency(path)
                if known is not None:
                    self._collect_file(known, ("known", path))
        for path in _imports(main, dependencies):
            if path not in dependencies and path.startswith(_OPAQUE_PREFIXES):
                known = known_dependency(path)
                if known is not None:
                    self._collect_file(known, ("known", path))
                else:
                    self.opaque_packages.add(path.rsplit("/", 1)[0].replace("/", "."))
        self.package = main.package or ""
        self._collect_file(main, ("main",))

    def _collect_file(self, f: ProtoFile, ref: Any) -> None:
        package = f.package or ""
        self._collect_extends(f.extends, [], package)
        self._collect(f.types, [], package, ref)

    def _collect(self, types: list[Any], path: list[str], package: str, ref: Any) -> None:
        for t in types:
            p = path + [t.name]
            info = TypeInfo(package, ref, t)
            if isinstance(t, Message):
                self._collect_extends(t.extends, p, package)
                if any(o.name == "map_entry" and str(o.value) == "true" for o in t.options):
                    info.is_map = True
                    info.key = next((f for f in t.fields if f.name == "key"), None)
                    info.value = next((f for f in t.fields if f.name == "value"), None)
            full = ".".join(p)
            self.types[f"{package}.{full}" if package else full] = info
            self._collect(t.nested, p, package, ref)

    def _collect_extends(self, extends: list[Extend], path: list[str], package: str) -> None:
        for e in extends:
            for f in e.fields:
                full = ".".join(path + [f.name])
                self.extend_fields[f"{package}.{full}" if package else full] = f

    def resolve(self, name: str, scope: list[str], package: str | None = None) -> str | None:
        """Context.resolveFull: ``.a.B`` is absolute; otherwise the innermost enclosing scope
        (package, then the enclosing messages) that has it."""
        if not self.types:
            return None
        return self._resolve(self._has, name, scope, package)

    def resolve_extension(self, name: str, scope: list[str]) -> str | None:
        return self._resolve(self.extend_fields.__contains__, name, scope, None)

    def _resolve(self, has: Callable[[str], bool], name: str, scope: list[str],
                 package: str | None) -> str | None:
        if name.startswith("."):
            n = name[1:]
            return n if has(n) else None
        pkg = self.package if package is None else package
        prefix = (pkg.split(".") if pkg else []) + list(scope)
        while prefix:
            n = ".".join(prefix) + "." + name
            if has(n):
                return n
            prefix.pop()
        return name if has(name) else None

    def _has(self, full: str) -> bool:
        if full in self.types:
            return True
        return any(full.startswith(p + ".") for p in self.opaque_packages)

    def get(self, full: str) -> TypeInfo | None:
        info = self.types.get(full)
        if info is None and self._has(full):
            package = next(p for p in self.opaque_packages if full.startswith(p + "."))
            return TypeInfo(package, ("opaque", full), None)
        return info

    def lookup(self, name: str, scope: list[str], package: str | None = None) -> TypeInfo | None:
        full = self.resolve(name, scope, package)
        return self.get(full) if full is not None else None


def _imports(f: ProtoFile, dependencies: Mapping[str, ProtoFile]) -> list[str]:
    """The files ``f`` imports, transitively through the dependencies it was given."""
    out: list[str] = []
    todo = list(f.imports) + list(f.public_imports) + list(f.weak_imports)
    while todo:
        path = todo.pop(0)
        if path in out:
            continue
        out.append(path)
        dep = dependencies.get(path)
        if dep is not None:
            todo.extend(dep.imports + dep.public_imports + dep.weak_imports)
    return out
