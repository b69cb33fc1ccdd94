"""JSON Schema compatibility as Confluent decides it (json-schema-provider's
``io.confluent.kafka.schemaregistry.json.diff``: SchemaDiff, ObjectSchemaDiff, ArraySchemaDiff,
StringSchemaDiff, NumberSchemaDiff, EnumSchemaDiff, CombinedSchemaDiff, NotSchemaDiff).

Confluent walks the schemas as everit loads them (a schema is one kind: object, array, string,
number, boolean, null, enum, const, combined, not, empty, false; ``$ref`` is followed), lists every
difference between the writer's schema (``original``) and the reader's (``update``) as a
``Difference.Type`` at a JSON path, and calls incompatible those whose type is not in
``COMPATIBLE_CHANGES_STRICT``. The messages keep Confluent's two ``%s`` (reader, writer), which the
registry fills in as Confluent's SchemaValidatorBuilder does (``String.format(e, reader, writer)``).
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import unquote

from .json_schema_text import write

# SchemaDiff.COMPATIBLE_CHANGES_STRICT.
COMPATIBLE = frozenset("""
ID_CHANGED DESCRIPTION_CHANGED TITLE_CHANGED DEFAULT_CHANGED SCHEMA_REMOVED TYPE_EXTENDED
MAX_LENGTH_INCREASED MAX_LENGTH_REMOVED MIN_LENGTH_DECREASED MIN_LENGTH_REMOVED PATTERN_REMOVED
MAXIMUM_INCREASED MAXIMUM_REMOVED MINIMUM_DECREASED MINIMUM_REMOVED EXCLUSIVE_MAXIMUM_INCREASED
EXCLUSIVE_MAXIMUM_REMOVED EXCLUSIVE_MINIMUM_DECREASED EXCLUSIVE_MINIMUM_REMOVED
MULTIPLE_OF_REDUCED MULTIPLE_OF_REMOVED
REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED REQUIRED_ATTRIBUTE_REMOVED DEPENDENCY_ARRAY_NARROWED
DEPENDENCY_ARRAY_REMOVED DEPENDENCY_SCHEMA_REMOVED MAX_PROPERTIES_INCREASED
MAX_PROPERTIES_REMOVED MIN_PROPERTIES_DECREASED MIN_PROPERTIES_REMOVED
ADDITIONAL_PROPERTIES_ADDED ADDITIONAL_PROPERTIES_EXTENDED UNEVALUATED_PROPERTIES_ADDED
UNEVALUATED_PROPERTIES_EXTENDED PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL
REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL
OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL
PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL
PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
MAX_ITEMS_INCREASED MAX_ITEMS_REMOVED MIN_ITEMS_DECREASED MIN_ITEMS_REMOVED
MAX_CONTAINS_INCREASED MAX_CONTAINS_REMOVED MIN_CONTAINS_DECREASED MIN_CONTAINS_REMOVED
UNIQUE_ITEMS_REMOVED ADDITIONAL_ITEMS_ADDED ADDITIONAL_ITEMS_EXTENDED UNEVALUATED_ITEMS_ADDED
UNEVALUATED_ITEMS_EXTENDED ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL
ITEM_ADDED_TO_CLOSED_CONTENT_MODEL ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL
ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
ENUM_ARRAY_EXTENDED COMBINED_TYPE_EXTENDED PRODUCT_TYPE_NARROWED SUM_TYPE_EXTENDED
NOT_TYPE_NARROWED
""".split())

# Difference.error(): the message families.
_KEYWORD_ADDED_OR_REMOVED = frozenset("""
MAXIMUM_ADDED MINIMUM_ADDED EXCLUSIVE_MAXIMUM_ADDED EXCLUSIVE_MINIMUM_ADDED MULTIPLE_OF_ADDED
MAX_LENGTH_ADDED MIN_LENGTH_ADDED PATTERN_ADDED REQUIRED_ATTRIBUTE_ADDED MAX_PROPERTIES_ADDED
MIN_PROPERTIES_ADDED DEPENDENCY_ARRAY_ADDED DEPENDENCY_SCHEMA_ADDED MAX_ITEMS_ADDED
MIN_ITEMS_ADDED MAX_CONTAINS_ADDED MIN_CONTAINS_ADDED UNIQUE_ITEMS_ADDED ADDITIONAL_ITEMS_REMOVED
ADDITIONAL_PROPERTIES_REMOVED UNEVALUATED_PROPERTIES_REMOVED UNEVALUATED_ITEMS_REMOVED
""".split())
_VALUE_INCREASED = frozenset("""MIN_LENGTH_INCREASED MINIMUM_INCREASED EXCLUSIVE_MINIMUM_INCREASED
MIN_PROPERTIES_INCREASED MULTIPLE_OF_EXPANDED MIN_ITEMS_INCREASED MIN_CONTAINS_INCREASED""".split())
_VALUE_DECREASED = frozenset("""MAX_LENGTH_DECREASED MAXIMUM_DECREASED MAX_ITEMS_DECREASED
MAX_CONTAINS_DECREASED EXCLUSIVE_MAXIMUM_DECREASED MAX_PROPERTIES_DECREASED""".split())
_TYPE_NARROWED = frozenset("""ADDITIONAL_ITEMS_NARROWED ENUM_ARRAY_NARROWED SUM_TYPE_NARROWED
ADDITIONAL_PROPERTIES_NARROWED UNEVALUATED_PROPERTIES_NARROWED UNEVALUATED_ITEMS_NARROWED""".split())
_VALUE_CHANGED = frozenset("PATTERN_CHANGED MULTIPLE_OF_CHANGED DEPENDENCY_ARRAY_CHANGED".split())
_TYPE_CHANGED = frozenset("""TYPE_CHANGED TYPE_NARROWED COMBINED_TYPE_CHANGED
COMBINED_TYPE_SUBSCHEMAS_CHANGED ENUM_ARRAY_CHANGED""".split())
_TYPE_EXTENDED = frozenset("""DEPENDENCY_ARRAY_EXTENDED PRODUCT_TYPE_EXTENDED SUM_TYPE_EXTENDED
NOT_TYPE_EXTENDED""".split())
_ADDED_TO_OPEN = frozenset("""REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL
REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL
ITEM_ADDED_TO_OPEN_CONTENT_MODEL""".split())


def describe(kind: str, path: str) -> str:
    """Difference.toString(): ``{errorType:"T", description:"..."}`` with the reader and
    writer left as ``%s`` (and Confluent's stray closing quote kept)."""
    if kind in _KEYWORD_ADDED_OR_REMOVED:
        msg = f"The keyword at path '{path}' in the %s schema is not present in the %s schema"
    elif kind in _VALUE_INCREASED:
        msg = f"The value at path '{path}' in the %s schema is more than its value in the %s schema"
    elif kind in _VALUE_DECREASED:
        msg = f"The value at path '{path}' in the %s schema is less than its value in the %s schema"
    elif kind in _VALUE_CHANGED:
        msg = f"The value at path '{path}' is different between the %s and %s schema"
    elif kind in _TYPE_NARROWED:
        msg = (f"An array or combined type at path '{path}' has fewer elements in the %s schema "
               "than the %s schema")
    elif kind in _TYPE_EXTENDED:
        msg = (f"An array or combined type at path '{path}' has more elements in the %s schema "
               "than the %s schema")
    elif kind in _TYPE_CHANGED:
        msg = f"A type at path '{path}' is different between the %s schema and the %s schema"
    elif kind in _ADDED_TO_OPEN:
        msg = (f"The %s schema has an open content model and has a property or item at path "
               f"'{path}' which is missing in the %s schema")
    elif kind == "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL":
        msg = (f"The %s schema has an unopen content model and has a required property at path "
               f"'{path}' which is missing in the %s schema")
    elif kind in ("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"):
        msg = (f"The %s has a closed content model and is missing a property or item present at "
               f"path '{path}' in the %s schema")
    elif kind in ("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                  "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"):
        msg = (f"A property or item is missing in the %s schema but present at path '{path}' in "
               "the %s schema and is not covered by its partially open content model")
    elif kind in ("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                  "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"):
        msg = (f"The %s schema has a property or item at path '{path}' which is missing in the %s "
               "schema and is not covered by its partially open content model")
    else:
        msg = ""
    return '{errorType:"' + kind + '", description:"' + msg + "'}"


# ---------------------------------------------------------------------------------------------
# The schema model: everit's classes, as far as the diff tells them apart.

_TYPE_KEYWORDS = {
    "object": ("properties", "required", "additionalProperties", "patternProperties",
               "minProperties", "maxProperties", "dependencies", "propertyNames",
               "dependentRequired", "dependentSchemas", "unevaluatedProperties"),
    "array": ("items", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains",
              "prefixItems", "unevaluatedItems", "minContains", "maxContains"),
    "string": ("minLength", "maxLength", "pattern", "format"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
}
_COMBINERS = ("allOf", "anyOf", "oneOf")


class Node:
    """One schema as everit would load it: ``kind`` is the class the diff switches on."""

    __slots__ = ("kind", "raw", "doc", "members", "criterion")

    def __init__(self, kind: str, raw: Any, doc: Any, members: list[Node] | None = None,
                 criterion: str | None = None) -> None:
        self.kind = kind  # object array string number boolean null enum const combined not empty false
        self.raw = raw if isinstance(raw, dict) else {}
        self.doc = doc  # the document $refs inside raw resolve against
        self.members = members or []
        self.criterion = criterion


class Loader:
    def __init__(self, root: Any, references: dict[str, Any]) -> None:
        self.root = root
        self.references = references
        self._cache: dict[tuple[int, int], Node] = {}

    def load(self, raw: Any, doc: Any, depth: int = 0) -> Node:
        key = (id(raw), id(doc))
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        node = self._load(raw, doc, depth)
        self._cache[key] = node
        return node

    def _load(self, raw: Any, doc: Any, depth: int) -> Node:
        if depth > 64:
            raise ValueError("$ref chain too deep")
        if raw is True or raw == {}:
            return Node("empty", raw, doc)
        if raw is False:
            return Node("false", raw, doc)
        if not isinstance(raw, dict):
            return Node("empty", {}, doc)
        ref = raw.get("$ref")
        if isinstance(ref, str):
            target, target_doc = self.resolve(ref, doc)
            return self.load(target, target_doc, depth + 1)
        parts: list[Node] = []
        types = raw.get("type")
        if isinstance(types, list):
            if len(types) == 1:
                parts.append(Node(_kind_of(types[0]), raw, doc))
            elif types:
                parts.append(Node("combined", raw, doc,
                                  [Node(_kind_of(t), raw, doc) for t in types], "anyOf"))
        elif isinstance(types, str):
            parts.append(Node(_kind_of(types), raw, doc))
        else:
            inferred = [k for k, words in _TYPE_KEYWORDS.items() if any(w in raw for w in words)]
            if len(inferred) == 1:
                parts.append(Node(inferred[0], raw, doc))
            elif inferred:
                parts.append(Node("combined", raw, doc,
                                  [Node(k, raw, doc) for k in inferred], "anyOf"))
        if "enum" in raw:
            parts.append(Node("enum", raw, doc))
        if "const" in raw:
            parts.append(Node("const", raw, doc))
        if "not" in raw:
            parts.append(Node("not", raw, doc))
        for criterion in _COMBINERS:
            subs = raw.get(criterion)
            if isinstance(subs, list):
                parts.append(Node("combined", raw, doc,
                                  [self.load(s, doc, depth + 1) for s in subs], criterion))
        if not parts:
            return Node("empty", raw, doc)
        if len(parts) == 1:
            return parts[0]
        # everit loads a schema that is several things at once as their allOf.
        return Node("combined", raw, doc, parts, "allOf")

    def resolve(self, ref: str, doc: Any) -> tuple[Any, Any]:
        location, _, fragment = ref.partition("#")
        if location:
            target_doc = self.references.get(location)
            if target_doc is None:
                for name, d in self.references.items():
                    if name.endswith("/" + location) or location.endswith("/" + name) \
                            or name.lstrip("./") == location.lstrip("./"):
                        target_doc = d
                        break
            if target_doc is None:
                raise ValueError(f"Unresolved $ref '{ref}'")
        else:
            target_doc = doc
        target = target_doc
        for token in [t for t in fragment.split("/") if t]:
            token = unquote(token).replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and token in target:
                target = target[token]
            elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
                target = target[int(token)]
            else:
                raise ValueError(f"Unresolved $ref '{ref}'")
        return target, target_doc


def _kind_of(t: Any) -> str:
    if t == "integer":
        return "number"
    if t in ("object", "array", "string", "number", "boolean", "null"):
        return str(t)
    return "empty"


# ---------------------------------------------------------------------------------------------
# The diff.


class Context:
    def __init__(self, loader_orig: Loader, loader_upd: Loader, path: list[str],
                 stack: set[tuple[int, int]]) -> None:
        self.lo = loader_orig
        self.lu = loader_upd
        self.path = path
        self.stack = stack
        self.diffs: list[tuple[str, str]] = []

    def sub(self) -> Context:
        return Context(self.lo, self.lu, list(self.path), self.stack)

    @contextmanager
    def enter(self, segment: str) -> Iterator[None]:
        self.path.append(segment)
        try:
            yield
        finally:
            self.path.pop()

    def add(self, kind: str, attribute: str | None = None) -> None:
        segments = self.path + ([attribute] if attribute is not None else [])
        self.diffs.append((kind, "#/" + "/".join(segments)))

    def extend(self, other: Context) -> None:
        self.diffs.extend(other.diffs)

    def compatible(self) -> bool:
        return all(kind in COMPATIBLE for kind, _ in self.diffs)


def compare(ctx: Context, original: Node | None, update: Node | None) -> None:
    if original is None and update is None:
        return
    if original is None:
        ctx.add("SCHEMA_ADDED")
        return
    if update is None:
        ctx.add("SCHEMA_REMOVED")
        return
    key = (id(original), id(update))
    if key in ctx.stack:
        return  # a recursive schema met again: Confluent's memo treats the open pair as compatible
    ctx.stack.add(key)
    try:
        _compare_types(ctx, original, update)
    finally:
        ctx.stack.discard(key)


def _compare_types(ctx: Context, original: Node, update: Node) -> None:
    if original.kind != "combined" and update.kind == "combined":
        if len(update.members) == 1:
            sub = ctx.sub()
            compare(sub, original, update.members[0])
            if sub.compatible():
                ctx.extend(sub)
                return
        elif update.criterion in ("anyOf", "oneOf"):
            for member in update.members:
                sub = ctx.sub()
                compare(sub, original, member)
                if sub.compatible():
                    ctx.extend(sub)
                    ctx.add("SUM_TYPE_EXTENDED")
                    return
    elif original.kind == "combined" and update.kind != "combined":
        if len(original.members) == 1:
            sub = ctx.sub()
            compare(sub, original.members[0], update)
            if sub.compatible():
                ctx.extend(sub)
                return
        elif original.criterion == "allOf":
            for member in original.members:
                sub = ctx.sub()
                compare(sub, member, update)
                if sub.compatible():
                    ctx.extend(sub)
                    ctx.add("PRODUCT_TYPE_NARROWED")
                    return

    if original.kind != update.kind:
        # everit's TrueSchema is an EmptySchema; any reader accepts what a false writer wrote.
        if original.kind == "false" or update.kind == "empty":
            return
        if original.raw.get("connect.type") == "bytes" and update.raw.get("connect.type") == "bytes":
            return
        ctx.add("TYPE_CHANGED")
        return

    o, u = original.raw, update.raw
    if _id(o) != _id(u):
        ctx.add("ID_CHANGED")
    if o.get("title") != u.get("title"):
        ctx.add("TITLE_CHANGED")
    if o.get("description") != u.get("description"):
        ctx.add("DESCRIPTION_CHANGED")
    if o.get("default") != u.get("default"):
        ctx.add("DEFAULT_CHANGED")

    kind = original.kind
    if kind == "string":
        _limit(ctx, "maxLength", o, u, "MAX_LENGTH")
        _limit(ctx, "minLength", o, u, "MIN_LENGTH")
        po, pu = o.get("pattern"), u.get("pattern")
        if po is None and pu is not None:
            ctx.add("PATTERN_ADDED", "pattern")
        elif po is not None and pu is None:
            ctx.add("PATTERN_REMOVED", "pattern")
        elif po is not None and po != pu:
            ctx.add("PATTERN_CHANGED", "pattern")
    elif kind == "number":
        _number(ctx, o, u)
    elif kind == "enum":
        eo, eu = _values(o.get("enum")), _values(u.get("enum"))
        if eo != eu:
            if all(v in eu for v in eo):
                ctx.add("ENUM_ARRAY_EXTENDED", "enum")
            elif all(v in eo for v in eu):
                ctx.add("ENUM_ARRAY_NARROWED", "enum")
            else:
                ctx.add("ENUM_ARRAY_CHANGED", "enum")
    elif kind == "const":
        if _canon(o.get("const")) != _canon(u.get("const")):
            ctx.add("ENUM_ARRAY_CHANGED", "const")
    elif kind == "combined":
        _combined(ctx, original, update)
    elif kind == "not":
        with ctx.enter("not"):
            sub = ctx.sub()
            # the wrapped schemas swap places: a narrower "not" accepts more
            compare(sub, ctx.lu.load(u["not"], update.doc), ctx.lo.load(o["not"], original.doc))
            ctx.add("NOT_TYPE_NARROWED" if sub.compatible() else "NOT_TYPE_EXTENDED")
    elif kind == "object":
        _object(ctx, original, update)
    elif kind == "array":
        _array(ctx, original, update)


def _id(raw: dict[str, Any]) -> Any:
    return raw.get("$id", raw.get("id"))


def _canon(value: Any) -> str:
    return write(value, sort_keys=True)


def _values(values: Any) -> list[str]:
    return [_canon(v) for v in values] if isinstance(values, list) else []


def _num(value: Any) -> Decimal | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None


def _limit(ctx: Context, keyword: str, o: dict[str, Any], u: dict[str, Any], name: str) -> None:
    vo, vu = _num(o.get(keyword)), _num(u.get(keyword))
    if vo == vu:
        return
    if vo is None:
        ctx.add(f"{name}_ADDED", keyword)
    elif vu is None:
        ctx.add(f"{name}_REMOVED", keyword)
    elif vo < vu:
        ctx.add(f"{name}_INCREASED", keyword)
    else:
        ctx.add(f"{name}_DECREASED", keyword)


def _number(ctx: Context, o: dict[str, Any], u: dict[str, Any]) -> None:
    _limit(ctx, "maximum", o, u, "MAXIMUM")
    _limit(ctx, "minimum", o, u, "MINIMUM")
    # Draft 4's boolean exclusiveMaximum/exclusiveMinimum is a flag on maximum/minimum, not a
    # limit of its own (everit's getExclusiveMaximumLimit() is null then).
    for keyword, name in (("exclusiveMaximum", "EXCLUSIVE_MAXIMUM"),
                          ("exclusiveMinimum", "EXCLUSIVE_MINIMUM")):
        _limit(ctx, keyword, o, u, name)
    mo, mu = _num(o.get("multipleOf")), _num(u.get("multipleOf"))
    if mo != mu:
        if mo is None:
            ctx.add("MULTIPLE_OF_ADDED", "multipleOf")
        elif mu is None:
            ctx.add("MULTIPLE_OF_REMOVED", "multipleOf")
        elif mo != 0 and mu % mo == 0:
            ctx.add("MULTIPLE_OF_EXPANDED", "multipleOf")
        elif mu != 0 and mo % mu == 0:
            ctx.add("MULTIPLE_OF_REDUCED", "multipleOf")
        else:
            ctx.add("MULTIPLE_OF_CHANGED", "multipleOf")
    io, iu = _requires_integer(o), _requires_integer(u)
    if io != iu:
        ctx.add("TYPE_EXTENDED" if io else "TYPE_NARROWED")


def _requires_integer(raw: dict[str, Any]) -> bool:
    t = raw.get("type")
    return t == "integer" or (isinstance(t, list) and "integer" in t and "number" not in t)


def _combined(ctx: Context, original: Node, update: Node) -> None:
    oc, uc = original.criterion, update.criterion
    kind: str | None = None
    if oc != uc:
        o1, u1 = len(original.members) == 1, len(update.members) == 1
        if uc == "anyOf" or (o1 and u1) or (o1 and uc == "oneOf") or (u1 and oc == "allOf"):
            kind = "COMBINED_TYPE_EXTENDED"
        else:
            kind = "COMBINED_TYPE_CHANGED"
        ctx.add(kind)
    if kind == "COMBINED_TYPE_CHANGED":
        return
    originals = _distinct(original.members)
    updates = _distinct(update.members)
    if len(originals) < len(updates):
        ctx.add("PRODUCT_TYPE_EXTENDED" if uc == "allOf" else "SUM_TYPE_EXTENDED")
    elif len(originals) > len(updates):
        ctx.add("SUM_TYPE_NARROWED" if oc in ("anyOf", "oneOf") else "PRODUCT_TYPE_NARROWED")
    edges: dict[int, dict[int, list[tuple[str, str]]]] = {}
    for i, om in enumerate(originals):
        with ctx.enter(f"{oc}/{i}"):
            for j, um in enumerate(updates):
                sub = ctx.sub()
                compare(sub, om, um)
                if sub.compatible():
                    edges.setdefault(i, {})[j] = sub.diffs
    matching = _max_matching(edges)
    for i, j in matching.items():
        ctx.diffs.extend(edges[i][j])
    if len(matching) < min(len(originals), len(updates)):
        ctx.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")


def _distinct(members: list[Node]) -> list[Node]:
    seen: set[str] = set()
    out = []
    for m in members:
        key = _canon(m.raw) + m.kind
        if key not in seen:
            seen.add(key)
            out.append(m)
    return out


def _max_matching(edges: dict[int, dict[int, Any]]) -> dict[int, int]:
    """A maximum bipartite matching (Kuhn's augmenting paths), original index → update index."""
    owner: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges.get(i, {}):
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or augment(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in edges:
        augment(i, set())
    return {i: j for j, i in owner.items()}


def _props(node: Node, loader: Loader) -> dict[str, Node]:
    props = node.raw.get("properties")
    if not isinstance(props, dict):
        return {}
    return {k: loader.load(v, node.doc) for k, v in props.items()}


def _required(raw: dict[str, Any]) -> set[str]:
    req = raw.get("required")
    return set(req) if isinstance(req, list) else set()


def _has_default(node: Node) -> bool:
    return "default" in node.raw


def _additional(node: Node, loader: Loader) -> tuple[bool, Node | None]:
    """(permitsAdditionalProperties, schemaOfAdditionalProperties) as everit reads them."""
    ap = node.raw.get("additionalProperties", True)
    if ap is False:
        return False, None
    if ap is True or ap == {}:
        return True, None
    return True, loader.load(ap, node.doc)


def _unevaluated(node: Node, loader: Loader, keyword: str) -> Node | None:
    if keyword not in node.raw:
        return None
    return loader.load(node.raw[keyword], node.doc)


def _is_open(node: Node, loader: Loader, keyword: str = "unevaluatedProperties") -> bool:
    permits, schema = _additional(node, loader)
    if not permits or schema is not None or node.raw.get("patternProperties"):
        return False
    uneval = _unevaluated(node, loader, keyword)
    return uneval is None or uneval.kind == "empty"


def _partial(node: Node, loader: Loader, key: str) -> Node | None:
    patterns = node.raw.get("patternProperties")
    if isinstance(patterns, dict):
        for pattern, schema in patterns.items():
            try:
                if re.search(pattern, key):
                    return loader.load(schema, node.doc)
            except re.error:
                continue
    permits, schema = _additional(node, loader)
    if schema is not None:
        return schema
    if permits:
        uneval = _unevaluated(node, loader, "unevaluatedProperties")
        if uneval is not None and uneval.kind not in ("false", "empty"):
            return uneval
    return None


def _object(ctx: Context, original: Node, update: Node) -> None:
    o, u = original.raw, update.raw
    po, pu = _props(original, ctx.lo), _props(update, ctx.lu)
    ro, ru = _required(o), _required(u)
    with ctx.enter("required"):
        for key in po:
            if key in pu:
                with ctx.enter(key):
                    if key in ro and key not in ru:
                        ctx.add("REQUIRED_ATTRIBUTE_REMOVED")
                    elif key not in ro and key in ru:
                        ctx.add("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if _has_default(pu[key])
                                else "REQUIRED_ATTRIBUTE_ADDED")
    with ctx.enter("properties"):
        for key in list(po) + [k for k in pu if k not in po]:
            with ctx.enter(key):
                os_, us = po.get(key), pu.get(key)
                if us is None:
                    assert os_ is not None
                    if _is_open(update, ctx.lu):
                        ctx.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL")
                        continue
                    partial = _partial(update, ctx.lu, key)
                    if partial is not None:
                        sub = ctx.sub()
                        compare(sub, os_, partial)
                        ctx.extend(sub)
                        ctx.add("PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                                if sub.compatible()
                                else "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
                    elif os_.kind == "false":
                        ctx.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
                    else:
                        ctx.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")
                elif os_ is None:
                    if _is_open(original, ctx.lo):
                        if us.kind == "empty":
                            ctx.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")
                        elif key in ru:
                            ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL"
                                    if _has_default(us)
                                    else "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
                        else:
                            ctx.add("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
                        continue
                    partial = _partial(original, ctx.lo, key)
                    if partial is not None:
                        sub = ctx.sub()
                        compare(sub, partial, us)
                        ctx.extend(sub)
                        ctx.add("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                                if sub.compatible()
                                else "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
                    if key in ru:
                        ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL"
                                if _has_default(us)
                                else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
                    else:
                        ctx.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
                else:
                    compare(ctx, os_, us)
    with ctx.enter("dependencies"):
        do, du = _dependencies(o), _dependencies(u)
        for key in list(do) + [k for k in du if k not in do]:
            vo, vu = do.get(key), du.get(key)
            if isinstance(vo, set) or isinstance(vu, set):
                with ctx.enter(key):
                    if not isinstance(vu, set):
                        ctx.add("DEPENDENCY_ARRAY_REMOVED")
                    elif not isinstance(vo, set):
                        ctx.add("DEPENDENCY_ARRAY_ADDED")
                    elif vo != vu:
                        ctx.add("DEPENDENCY_ARRAY_EXTENDED" if vu >= vo
                                else "DEPENDENCY_ARRAY_NARROWED" if vo >= vu
                                else "DEPENDENCY_ARRAY_CHANGED")
        for key in list(do) + [k for k in du if k not in do]:
            vo, vu = do.get(key), du.get(key)
            if isinstance(vo, set) or isinstance(vu, set):
                continue
            with ctx.enter(key):
                if vu is None:
                    ctx.add("DEPENDENCY_SCHEMA_REMOVED")
                elif vo is None:
                    ctx.add("DEPENDENCY_SCHEMA_ADDED")
                else:
                    compare(ctx, ctx.lo.load(vo, original.doc), ctx.lu.load(vu, update.doc))
    with ctx.enter("additionalProperties"):
        permits_o, schema_o = _additional(original, ctx.lo)
        permits_u, schema_u = _additional(update, ctx.lu)
        if permits_o != permits_u:
            ctx.add("ADDITIONAL_PROPERTIES_ADDED" if permits_u else "ADDITIONAL_PROPERTIES_REMOVED")
        elif schema_o is None and schema_u is not None:
            ctx.add("ADDITIONAL_PROPERTIES_NARROWED")
        elif schema_u is None and schema_o is not None:
            ctx.add("ADDITIONAL_PROPERTIES_EXTENDED")
        else:
            compare(ctx, schema_o, schema_u)
    _compare_unevaluated(ctx, original, update, "unevaluatedProperties", "UNEVALUATED_PROPERTIES")
    _limit(ctx, "maxProperties", o, u, "MAX_PROPERTIES")
    _limit(ctx, "minProperties", o, u, "MIN_PROPERTIES")


def _dependencies(raw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for keyword in ("dependencies", "dependentRequired", "dependentSchemas"):
        deps = raw.get(keyword)
        if isinstance(deps, dict):
            for key, value in deps.items():
                out[key] = set(value) if isinstance(value, list) else value
    return out


def _compare_unevaluated(ctx: Context, original: Node, update: Node, keyword: str,
                         name: str) -> None:
    uo, uu = _unevaluated(original, ctx.lo, keyword), _unevaluated(update, ctx.lu, keyword)
    if uo is None and uu is None:
        return
    with ctx.enter(keyword):
        if uo is None:
            assert uu is not None
            ctx.add(f"{name}_REMOVED" if uu.kind == "false" else f"{name}_NARROWED")
        elif uu is None:
            ctx.add(f"{name}_ADDED" if uo.kind == "false" else f"{name}_EXTENDED")
        elif uo.kind == "false" and uu.kind != "false":
            ctx.add(f"{name}_ADDED")
        elif uo.kind != "false" and uu.kind == "false":
            ctx.add(f"{name}_REMOVED")
        elif uo.kind == "empty" and uu.kind != "empty":
            ctx.add(f"{name}_NARROWED")
        elif uo.kind != "empty" and uu.kind == "empty":
            ctx.add(f"{name}_EXTENDED")
        else:
            compare(ctx, uo, uu)


def _items(node: Node, loader: Loader) -> tuple[Node | None, list[Node]]:
    """(allItemSchema, itemSchemas): ``items`` as one schema, or the tuple form (draft 2020-12's
    ``prefixItems``, earlier drafts' ``items`` array)."""
    items = node.raw.get("items")
    prefix = node.raw.get("prefixItems")
    if isinstance(items, list):
        return None, [loader.load(i, node.doc) for i in items]
    if items is False:  # json-sKema reads "items": false as no additional items
        items = None
    tuple_items = [loader.load(i, node.doc) for i in prefix] if isinstance(prefix, list) else []
    if items is None:
        return None, tuple_items
    return loader.load(items, node.doc), tuple_items


def _additional_items(node: Node, loader: Loader) -> tuple[bool, Node | None]:
    raw = node.raw
    if raw.get("items") is False or (isinstance(raw.get("prefixItems"), list) and "items" in raw):
        ai = raw["items"]  # 2020-12: items after prefixItems plays additionalItems' part
    else:
        ai = raw.get("additionalItems", True)
    if ai is False:
        return False, None
    if ai is True or ai == {}:
        return True, None
    return True, loader.load(ai, node.doc)


def _array(ctx: Context, original: Node, update: Node) -> None:
    o, u = original.raw, update.raw
    all_o, tuple_o = _items(original, ctx.lo)
    all_u, tuple_u = _items(update, ctx.lu)
    if not (isinstance(o.get("prefixItems"), list) or isinstance(u.get("prefixItems"), list)):
        with ctx.enter("items"):
            compare(ctx, all_o, all_u)

    def open_(node: Node, loader: Loader) -> bool:
        permits, schema = _additional_items(node, loader)
        if not permits or schema is not None:
            return False
        uneval = _unevaluated(node, loader, "unevaluatedItems")
        return uneval is None or uneval.kind == "empty"

    def partial(node: Node, loader: Loader) -> Node | None:
        permits, schema = _additional_items(node, loader)
        if schema is not None:
            return schema
        if permits:
            uneval = _unevaluated(node, loader, "unevaluatedItems")
            if uneval is not None and uneval.kind not in ("false", "empty"):
                return uneval
        return None

    common = min(len(tuple_o), len(tuple_u))
    for index in range(common):
        with ctx.enter(f"items/{index}"):
            compare(ctx, tuple_o[index], tuple_u[index])
    for index in range(common, len(tuple_o)):
        with ctx.enter(f"items/{index}"):
            if open_(update, ctx.lu):
                ctx.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL")
                continue
            p = partial(update, ctx.lu)
            if p is not None:
                sub = ctx.sub()
                compare(sub, tuple_o[index], p)
                ctx.extend(sub)
                ctx.add("ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
                        else "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
            elif tuple_o[index].kind == "false":
                ctx.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
            else:
                ctx.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    for index in range(common, len(tuple_u)):
        with ctx.enter(f"items/{index}"):
            if open_(original, ctx.lo):
                ctx.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
                        if tuple_u[index].kind == "empty" else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL")
                continue
            p = partial(original, ctx.lo)
            if p is not None:
                sub = ctx.sub()
                compare(sub, p, tuple_u[index])
                ctx.extend(sub)
                ctx.add("ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
                        else "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
            else:
                ctx.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")
    with ctx.enter("additionalItems"):
        permits_o, schema_o = _additional_items(original, ctx.lo)
        permits_u, schema_u = _additional_items(update, ctx.lu)
        if permits_o != permits_u:
            ctx.add("ADDITIONAL_ITEMS_REMOVED" if permits_o else "ADDITIONAL_ITEMS_ADDED")
        elif schema_o is None and schema_u is not None:
            ctx.add("ADDITIONAL_ITEMS_NARROWED")
        elif schema_u is None and schema_o is not None:
            ctx.add("ADDITIONAL_ITEMS_EXTENDED")
        else:
            compare(ctx, schema_o, schema_u)
    _compare_unevaluated(ctx, original, update, "unevaluatedItems", "UNEVALUATED_ITEMS")
    _limit(ctx, "maxItems", o, u, "MAX_ITEMS")
    _limit(ctx, "minItems", o, u, "MIN_ITEMS")
    if bool(o.get("uniqueItems")) != bool(u.get("uniqueItems")):
        ctx.add("UNIQUE_ITEMS_REMOVED" if o.get("uniqueItems") else "UNIQUE_ITEMS_ADDED", "uniqueItems")
    if "contains" in o or "contains" in u:
        _limit(ctx, "maxContains", o, u, "MAX_CONTAINS")
        _limit(ctx, "minContains", o, u, "MIN_CONTAINS")


def incompatibilities(writer: Any, writer_refs: Mapping[str, Any], reader: Any,
                      reader_refs: Mapping[str, Any]) -> list[str]:
    """Confluent's ``JsonSchema.isBackwardCompatible``: the incompatible differences from the
    writer's schema to the reader's (parsed documents, with their references parsed by name)."""
    lo = Loader(writer, dict(writer_refs))
    lu = Loader(reader, dict(reader_refs))
    ctx = Context(lo, lu, [], set())
    try:
        compare(ctx, lo.load(writer, writer), lu.load(reader, reader))
    except (ValueError, RecursionError) as e:
        return [str(e)]
    return [describe(kind, path) for kind, path in ctx.diffs if kind not in COMPATIBLE]

