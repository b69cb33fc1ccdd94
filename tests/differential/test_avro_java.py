"""The AVRO schema format against Apache Avro's Java implementation (issue 34's proof).

One AvroCheck JVM (tests/differential/avro_java) answers, for each (reader, writer) pair, what
Confluent's registry gets from Avro: whether each schema parses (and Avro's message when not),
``Schema.toString(references)`` (the registry's identity string), the Parsing Canonical Form, and
``SchemaCompatibility.checkReaderWriterCompatibility``'s verdict with each incompatibility's
type, location and message. minibroker.registry.formats.avro must answer the same; a difference
is a bug unless tests/differential/divergences.py's AVRO_DIVERGENCES explains it.

Pairs come from a hypothesis strategy: a writer schema (records with nested records, enums,
fixed, arrays, maps, unions, defaults, logical types, custom props, aliases, namespaces,
recursion) and a reader made from it by a few mutations (type changes and promotions, fields
added, removed or renamed with or without aliases and defaults, types renamed, enum symbols and
defaults, fixed sizes, unions widened or narrowed, namespaces moved), in either direction. No
Kafka is needed. MINIBROKER_TEST_AVRO_JAVA names the java to run it with (default: the one on
PATH); a JDK >= 19 also checks numbers byte for byte (JDK 17 writes some doubles longer).
"""
from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker.registry.formats.avro import FORMAT, check_reader_writer
from minibroker.registry.formats.base import InvalidSchema
from tests.differential.avro_java import AvroJava

PRIMS = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
NAMESPACES = [None, None, "", "com.acme", "org.x.y"]
FIELD_NAMES = ["a", "b", "c", "d", "id", "value"]
SYMBOLS = ["A", "B", "C", "D", "E"]
LOGICAL = {"int": ["date", "time-millis"], "long": ["timestamp-millis", "time-micros", "local-timestamp-nanos"],
           "string": ["uuid"], "bytes": ["decimal", "big-decimal"]}


@pytest.fixture(scope="module")
def java() -> Iterator[AvroJava]:
    jvm = AvroJava()
    try:
        yield jvm
    finally:
        jvm.close()


def unnumbered(message: str) -> str:
    """AVRO_DIVERGENCES["placeholder numbers"]: a forward reference's placeholder is numbered
    JVM-wide, and shows in a message about the union holding it."""
    return re.sub(r"UnresolvedSchema_\d+", "UnresolvedSchema_N", message)


def ours(text: str, refs: list[str], lenient: bool = False) -> dict[str, Any]:
    try:
        parsed = FORMAT.parse(text, {str(i): r for i, r in enumerate(refs)}, new=not lenient)
    except InvalidSchema as e:
        return {"ok": False, "message": str(e)}
    return {"ok": True, "canonical": parsed.canonical(), "parsing_form": parsed.parsing_form(),
            "parsed": parsed}


def compare(java: AvroJava, reader: str, writer: str, refs: list[str] | None = None,
            lenient: bool = False) -> None:
    """``lenient``: parse as Confluent parses a schema that is not new (no name or default
    validation, then its names checked with the UTF rules)."""
    refs = refs or []
    theirs = java.ask({"id": 0, "reader": reader, "writer": writer, "refs": refs, "lenient": lenient})
    mine = {"reader": ours(reader, refs, lenient), "writer": ours(writer, refs, lenient)}
    for side in ("reader", "writer"):
        t, m = theirs[side], mine[side]
        assert m["ok"] == t["ok"], f"{side} parse: Java {t} vs ours {m}\n{side}: {locals()[side]}"
        if t["ok"]:
            if theirs["jdk"] < 19 and m["canonical"] != t["canonical"]:
                # AVRO_DIVERGENCES["JDK 17 numbers"]: the same doubles, written longer.
                assert json.loads(m["canonical"]) == json.loads(t["canonical"]), f"{side}: {locals()[side]}"
            else:
                assert m["canonical"] == t["canonical"], f"{side}: {locals()[side]}"
            assert m["parsing_form"] == t["parsing_form"], f"{side}: {locals()[side]}"
        else:
            assert unnumbered(m["message"]) == unnumbered(t["message"]), f"{side}: {locals()[side]}"
    if "compat" in theirs:
        got: dict[str, Any]
        try:
            ok, found = check_reader_writer(mine["reader"]["parsed"].schema, mine["writer"]["parsed"].schema)
        except Exception as e:  # Java's checker throws too (a field matching two by alias)
            got = {"result": "ERROR", "message": f"AvroRuntimeException: {e}"}
        else:
            got = {"result": "COMPATIBLE" if ok else "INCOMPATIBLE",
                   "incompatibilities": [{"type": i.kind, "location": i.pointer(), "message": i.message}
                                         for i in found]}
        assert got == theirs["compat"], f"reader: {reader}\nwriter: {writer}"


# --- the strategy ------------------------------------------------------------------------------


class Ctx:
    def __init__(self) -> None:
        self.count = 0
        self.named: dict[str, dict[str, Any]] = {}  # full name -> its definition
        self.open: set[str] = set()  # records being defined (a reference to one recurses)

    def fresh(self, base: str) -> str:
        self.count += 1
        return f"{base}{self.count}"


def full_name(node: dict[str, Any], space: str | None) -> tuple[str, str | None]:
    name = node["name"]
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    own = node.get("namespace", space)
    own = own or None
    return (f"{own}.{name}" if own else name), own


def schema(draw: Any, ctx: Ctx, depth: int, space: str | None, kinds: list[str] | None = None) -> Any:
    if kinds is None:
        kinds = ["prim", "prim", "prim_obj"]
        if depth < 3:
            kinds += ["record", "record", "enum", "fixed", "array", "map", "union", "union"]
        if ctx.named:
            kinds += ["ref"]
    kind = draw(st.sampled_from(kinds))
    if kind == "prim":
        return draw(st.sampled_from(PRIMS))
    if kind == "prim_obj":
        prim = draw(st.sampled_from(PRIMS))
        node: dict[str, Any] = {"type": prim}
        if prim in LOGICAL and draw(st.booleans()):
            node["logicalType"] = draw(st.sampled_from(LOGICAL[prim]))
            if node["logicalType"] == "decimal":
                node["precision"] = draw(st.integers(1, 20))
                node["scale"] = draw(st.integers(0, 4))
        if draw(st.booleans()):
            node["custom.prop"] = draw(st.sampled_from(["x", 1, 2.5, 1e-5, True, None, [1, "a"], {"k": 0.1}]))
        return node
    if kind == "ref":
        name = draw(st.sampled_from(sorted(ctx.named)))
        # a reference by the short name where the namespace is the current one
        if space and name.startswith(space + ".") and draw(st.booleans()):
            return name[len(space) + 1:]
        return name
    if kind in ("record", "enum", "fixed"):
        node = {"type": kind, "name": ctx.fresh({"record": "R", "enum": "E", "fixed": "F"}[kind])}
        ns = draw(st.sampled_from(NAMESPACES))
        if ns is not None:
            node["namespace"] = ns
        if draw(st.integers(0, 4)) == 0:
            node["doc"] = draw(st.sampled_from(["a doc", "", "é \"quoted\"\n"]))
        if draw(st.integers(0, 4)) == 0:
            node["aliases"] = draw(st.lists(st.sampled_from(["Old", "x.Old", "Older"]), max_size=2, unique=True))
        full, own = full_name(node, space)
        if kind == "enum":
            node["symbols"] = draw(st.lists(st.sampled_from(SYMBOLS), min_size=1, max_size=4, unique=True))
            if draw(st.booleans()):
                node["default"] = draw(st.sampled_from(node["symbols"]))
            ctx.named[full] = node
        elif kind == "fixed":
            node["size"] = draw(st.integers(0, 20))
            if draw(st.integers(0, 5)) == 0:
                node["logicalType"] = draw(st.sampled_from(["decimal", "duration", "uuid"]))
                node["precision"] = draw(st.integers(1, 10))
            ctx.named[full] = node
        else:
            ctx.open.add(full)
            ctx.named[full] = node
            names = draw(st.lists(st.sampled_from(FIELD_NAMES), max_size=4, unique=True))
            node["fields"] = [field(draw, ctx, depth + 1, own, n) for n in names]
            ctx.open.discard(full)
        if draw(st.integers(0, 5)) == 0:
            node["x-prop"] = draw(st.sampled_from([1, "v", [0.5]]))
        return node
    if kind == "array":
        return {"type": "array", "items": schema(draw, ctx, depth + 1, space)}
    if kind == "map":
        return {"type": "map", "values": schema(draw, ctx, depth + 1, space)}
    branches: list[Any] = []
    keys: set[str] = set()
    for _ in range(draw(st.integers(1, 3))):
        branch = schema(draw, ctx, depth + 1, space)
        while isinstance(branch, list) and branch:
            branch = branch[0]
        key = branch if isinstance(branch, str) else str(branch.get("name", branch.get("type")))
        # Mostly distinct branches (a duplicate is refused, which one case in ten checks).
        if key not in keys or draw(st.integers(0, 9)) == 0:
            branches.append(branch)
            keys.add(key)
    return branches


def field(draw: Any, ctx: Ctx, depth: int, space: str | None, name: str) -> dict[str, Any]:
    node: dict[str, Any] = {"name": name, "type": schema(draw, ctx, depth, space)}
    if draw(st.booleans()):
        value = default_for(draw, ctx, node["type"], space, 0)
        if value is not NO_DEFAULT:
            node["default"] = value
    if draw(st.integers(0, 5)) == 0:
        node["order"] = draw(st.sampled_from(["descending", "ignore", "ascending"]))
    if draw(st.integers(0, 5)) == 0:
        node["aliases"] = [draw(st.sampled_from(["old_" + name, "z"]))]
    if draw(st.integers(0, 6)) == 0:
        node["doc"] = "field doc"
    if draw(st.integers(0, 6)) == 0:
        node["field-prop"] = {"nested": [1, 2.0]}
    return node


NO_DEFAULT = object()


def resolve(ctx: Ctx, node: Any, space: str | None) -> Any:
    if isinstance(node, str) and node not in PRIMS:
        full = node if "." in node or not space else f"{space}.{node}"
        return ctx.named.get(full, ctx.named.get(node))
    return node


def default_for(draw: Any, ctx: Ctx, node: Any, space: str | None, depth: int) -> Any:
    """A default valid for ``node`` (sometimes an invalid one: Avro must refuse it too)."""
    if draw(st.integers(0, 12)) == 0:
        return draw(st.sampled_from(["text", 1, 1.5, None, [], {}, 2**40]))
    node = resolve(ctx, node, space)
    if node is None or depth > 3:
        return NO_DEFAULT
    if isinstance(node, list):
        return default_for(draw, ctx, node[0], space, depth + 1) if node else NO_DEFAULT
    prim = node if isinstance(node, str) else node["type"]
    values = {"null": [None], "boolean": [True, False], "int": [0, -7, 2**31 - 1],
              "long": [0, 2**40], "float": [0.5, 1, "NaN", 3.4e38], "double": [1e-7, 2, 12345678.5, 0.1],
              "bytes": ["\u00ff\u0000"], "string": ["", "s\u00e9"]}
    if prim in values:
        return draw(st.sampled_from(values[prim]))
    if prim == "enum":
        return draw(st.sampled_from(node["symbols"]))
    if prim == "fixed":
        return "x" * node["size"]
    if prim == "array":
        item = default_for(draw, ctx, node["items"], space, depth + 1)
        return [] if item is NO_DEFAULT else [item]
    if prim == "map":
        value = default_for(draw, ctx, node["values"], space, depth + 1)
        return {} if value is NO_DEFAULT else {"k": value}
    if prim in ("record", "error"):
        if "fields" not in node:
            return NO_DEFAULT
        _, own = full_name(node, space)
        out = {}
        for f in node["fields"]:
            value = default_for(draw, ctx, f["type"], own, depth + 1)
            if value is NO_DEFAULT:
                return NO_DEFAULT
            out[f["name"]] = value
        return out
    return NO_DEFAULT


def slots(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in the JSON tree that holds a schema."""
    yield path
    if isinstance(node, list):
        for i, branch in enumerate(node):
            yield from slots(branch, path + (i,))
    elif isinstance(node, dict):
        if node.get("type") in ("record", "error") and isinstance(node.get("fields"), list):
            for i, f in enumerate(node["fields"]):
                yield from slots(f["type"], path + ("fields", i, "type"))
        elif node.get("type") == "array":
            yield from slots(node["items"], path + ("items",))
        elif node.get("type") == "map":
            yield from slots(node["values"], path + ("values",))


def get(root: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        root = root[step]
    return root


def put(root: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    get(root, path[:-1])[path[-1]] = value
    return root


PROMOTE = {"int": ["long", "float", "double", "string"], "long": ["int", "float", "double"],
           "float": ["double", "int"], "double": ["float"], "string": ["bytes", "int"],
           "bytes": ["string"], "boolean": ["int"], "null": ["string"]}


def mutate(draw: Any, root: Any) -> Any:
    path = draw(st.sampled_from(list(slots(root))))
    node = get(root, path)
    ops = ["wrap_union"]
    if isinstance(node, str) and node in PROMOTE:
        ops += ["retype", "retype"]
    if isinstance(node, list):
        ops += ["add_branch", "drop_branch"]
    if isinstance(node, dict) and node.get("type") in ("record", "error"):
        ops += ["add_field", "add_field_default", "drop_field", "rename_field", "rename_field_alias",
                "rename_type", "rename_type_alias", "namespace"]
    if isinstance(node, dict) and node.get("type") == "enum":
        ops += ["add_symbol", "drop_symbol", "enum_default", "rename_type"]
    if isinstance(node, dict) and node.get("type") == "fixed":
        ops += ["resize", "rename_type_alias"]
    op = draw(st.sampled_from(ops))
    if op == "retype":
        return put(root, path, draw(st.sampled_from(PROMOTE[node])))
    if op == "wrap_union":
        if isinstance(node, list):  # a union in a union is refused: widen it instead, mostly
            if draw(st.integers(0, 9)) or "null" in node:
                return put(root, path, node + ["null"] if "null" not in node else node[1:] + node[:1])
        return put(root, path, draw(st.sampled_from([["null", node], [node, "string"]])))
    if op == "add_branch":
        extra = draw(st.sampled_from(PRIMS))
        return put(root, path, node + [extra] if extra not in node else node)
    if op == "drop_branch" and node:
        node.pop(draw(st.integers(0, len(node) - 1)))
        return root
    if op in ("add_field", "add_field_default"):
        new: dict[str, Any] = {"name": draw(st.sampled_from(["n1", "n2", "a"])), "type": draw(st.sampled_from(PRIMS))}
        if op == "add_field_default":
            new["default"] = {"null": None, "boolean": False, "int": 1, "long": 2, "float": 0.5, "double": 0.25,
                              "bytes": "", "string": "d"}[new["type"]]
        node["fields"].append(new)
        return root
    if op == "drop_field" and node["fields"]:
        node["fields"].pop(draw(st.integers(0, len(node["fields"]) - 1)))
        return root
    if op in ("rename_field", "rename_field_alias") and node["fields"]:
        f = node["fields"][draw(st.integers(0, len(node["fields"]) - 1))]
        old = f["name"]
        f["name"] = old + "_renamed"
        if op == "rename_field_alias":
            f["aliases"] = [old]
        return root
    if op in ("rename_type", "rename_type_alias"):
        old = node["name"]
        node["name"] = old + "X"
        if op == "rename_type_alias":
            node["aliases"] = [old] if draw(st.booleans()) else [full_name({"name": old, **{
                k: v for k, v in node.items() if k == "namespace"}}, None)[0]]
        return root
    if op == "namespace":
        node["namespace"] = draw(st.sampled_from(["moved", "", "com.acme"]))
        return root
    if op == "add_symbol":
        node["symbols"] = node["symbols"] + [s for s in SYMBOLS if s not in node["symbols"]][:1]
        return root
    if op == "drop_symbol" and len(node["symbols"]) > 1:
        dropped = node["symbols"].pop()
        if node.get("default") == dropped:
            del node["default"]
        return root
    if op == "enum_default":
        if "default" in node:
            del node["default"]
        else:
            node["default"] = node["symbols"][0]
        return root
    if op == "resize":
        node["size"] = node["size"] + draw(st.sampled_from([1, -1, 8]))
        return root
    return root


@st.composite
def schema_pairs(draw: Any) -> tuple[str, str]:
    return draw(schema_pairs_with_references(with_references=False))[:2]


@st.composite
def schema_pairs_with_references(draw: Any, with_references: bool = True) -> tuple[str, str, list[str]]:
    """(reader, writer, referenced schemas): the references are named types the two schemas
    may use by name, parsed first as the registry hands them over."""
    ctx = Ctx()
    refs: list[str] = []
    if with_references:
        for _ in range(draw(st.integers(0, 2))):
            refs.append(json.dumps(schema(draw, ctx, 1, None, ["record", "enum", "fixed"])))
    writer = schema(draw, ctx, 0, None)
    reader = copy.deepcopy(writer)
    for _ in range(draw(st.integers(0, 3))):
        reader = mutate(draw, reader)
    if draw(st.booleans()):
        reader, writer = writer, reader
    indent = draw(st.sampled_from([None, 2]))
    return json.dumps(reader, indent=indent), json.dumps(writer, indent=indent), refs


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(pair=schema_pairs())
def test_generated_pairs_match_avro_java(java: AvroJava, pair: tuple[str, str]) -> None:
    compare(java, *pair)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=schema_pairs_with_references())
def test_generated_pairs_with_references_match_avro_java(java: AvroJava,
                                                         case: tuple[str, str, list[str]]) -> None:
    compare(java, *case)


# --- hand-picked cases: what the generator reaches rarely ---------------------------------------

R = '{"type":"record","name":"%s","fields":[%s]}'
CASES = [
    ('"int"', '"long"'),
    ('["null","R"]', '{"type":"record","name":"R","fields":[]}'),
    (R % ("A", '{"name":"b","type":"B"},{"name":"c","type":{"type":"fixed","name":"B","size":2}}'), '"null"'),
    (R % ("L", '{"name":"n","type":["null","L"]},{"name":"v","type":"int"}'),
     R % ("L", '{"name":"n","type":["null","L"]},{"name":"v","type":"string"}')),
    (R % ("R", '{"name":"a","type":"int","aliases":["x"]},{"name":"b","type":"int","aliases":["a"]}'),
     R % ("R", '{"name":"a","type":"int"},{"name":"x","type":"int"}')),
    (R % ("R", '{"name":"e","type":{"type":"enum","name":"E","symbols":["A"],"default":"A"}}'),
     R % ("R", '{"name":"f","type":"int"}')),
    ('{"type":"enum","name":"a.E","aliases":["b.F","G"],"symbols":["A"]}', '{"type":"enum","name":"b.F","symbols":["A","B"]}'),
    ('{"type":"record","name":"record","namespace":"n","fields":[{"name":"r","type":"record"},'
     '{"name":"s","type":{"type":"record","name":"S","namespace":"","fields":[{"name":"t","type":"n.record"}]}}]}',
     '{"type":"record","name":"n.record","fields":[]}'),
    ('{"type":"error","name":"Err","fields":[{"name":"m","type":"string","default":"x"}]}',
     '{"type":"record","name":"Err","fields":[]}'),
    (R % ("R", '{"name":"a","type":"double","default":"NaN"},{"name":"b","type":"float","default":"-Infinity"},'
          '{"name":"c","type":"double","default":1e300},{"name":"d","type":"float","default":1.0E-300}'), '"int"'),
    (R % ("R", '{"name":"a","type":"int","default":2147483648}'), '"int"'),
    (R % ("R", '{"name":"a","type":{"type":"map","values":"long"},"default":{"x":1.0}}'), '"int"'),
    (R % ("R", '{"name":"a","type":["int","null"],"default":null}'), '"int"'),
    ('{"type":"fixed","name":"F","size":-1}', '"int"'),
    ('{"type":"enum","name":"E","symbols":["A","b-c"]}', '"int"'),
    ('{"type":"enum","name":"E","symbols":["A"],"default":7}', '"int"'),
    ('{"type":"record","name":"R","fields":[],"aliases":["1x"]}', '"int"'),
    ('{"type":"record","name":"R","fields":[{"name":"é","type":"int"}]}', '"int"'),
    ('{"type":"record","name":"R","fields":[{"name":"a","type":"int","order":"DESCENDING"}]}', '"int"'),
    ('{"type":"array","items":"int","items2":{"a":[1e1,-0.0,100000000000000000000]}}', '"int"'),
    ('{"type":"string","doc":"dropped","aliases":["dropped"],"k":"\\u0001\\u2028é"}', '"string"'),
    ('["int","string",{"type":"map","values":"int"},{"type":"array","items":"int"}]',
     '["long",{"type":"map","values":"long"},{"type":"array","items":"string"},"bytes","null"]'),
    ('{"type":"record","name":"R","namespace":"a","fields":[{"name":"f","type":{"type":"fixed","name":"F",'
     '"size":3,"aliases":["b.G",".H","I"]}}]}', '{"type":"record","name":"R","namespace":"a","fields":[{"name":"f",'
     '"type":{"type":"fixed","name":"b.G","size":4}}]}'),
    # Defaults checked twice: when the field is built (a forward reference is an empty record
    # then) and as SchemaResolver copies the records (one still being copied has no fields).
    (R % ("R", '{"name":"self","type":["null","R"],"default":null},{"name":"s2","type":"R","default":{}}'), '"int"'),
    (R % ("R1", '{"name":"a","type":[{"type":"record","name":"R2","fields":[{"name":"d","type":"R1"}]},"null"],'
          '"default":{}}'), '"int"'),
    (R % ("R1", '{"name":"a","type":["null",{"type":"record","name":"R2","fields":[{"name":"d","type":"R1"}]}],'
          '"default":{}}'), '"int"'),
    (R % ("R", '{"name":"e","type":"E","default":"A"},{"name":"f","type":{"type":"enum","name":"E","symbols":["A"]}}'),
     '"int"'),
    (R % ("R", '{"name":"e","type":"S","default":{}},{"name":"f","type":{"type":"record","name":"S","fields":'
          '[{"name":"x","type":"int"}]}}'), '"int"'),
    (R % ("R", '{"name":"a","type":["Undef1","Undef2"]},{"name":"b","type":"Undef3"}'), '"int"'),
    # A type defined twice: the same definition (docs and aliases do not count) or another one.
    (R % ("R", '{"name":"a","type":{"type":"enum","name":"E","symbols":["A"],"doc":"x"}},'
          '{"name":"b","type":{"type":"enum","name":"E","symbols":["A"],"aliases":["Q"]}}'), '"E"'),
    (R % ("R", '{"name":"a","type":{"type":"fixed","name":"F","size":1}},'
          '{"name":"b","type":{"type":"fixed","name":"F","size":1,"p":1}}'), '"int"'),
    # Names Confluent lets by when the schema is not new (the strict validator refuses them).
    ('{"type":"record","name":"Réc","namespace":"1a.-b","aliases":["9"],"fields":[{"name":"ü","type":'
     '{"type":"enum","name":"E","symbols":["Ä","b"]}}]}', '{"type":"enum","name":"E","symbols":["-"]}'),
    # Numbers as Jackson reads and writes them.
    ('{"type":"string","n":[1E2,-0,-0.0,0.001,0.0001,1e7,9999999.0,1e-400,1e400,-1e400,5e-324,'
     '1.7976931348623157e308,123456789012345678,0.1,100.5e-2,2.5E+3,3.0000000000000004,1e21,1e22,1e23]}', '"int"'),
    (R % ("R", '{"name":"a","type":"float","default":1e400},{"name":"b","type":"double","default":"1e-5"},'
          '{"name":"c","type":"double","default":" 2 "},{"name":"d","type":"float","default":"0x1p3"}'), '"int"'),
]


@pytest.mark.parametrize(("reader", "writer"), CASES)
def test_hand_picked_pairs_match_avro_java(java: AvroJava, reader: str, writer: str) -> None:
    compare(java, reader, writer)
    compare(java, writer, reader)
    compare(java, reader, writer, lenient=True)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(pair=schema_pairs())
def test_generated_pairs_parsed_as_not_new_match_avro_java(java: AvroJava, pair: tuple[str, str]) -> None:
    compare(java, *pair, lenient=True)


def test_references_match_avro_java(java: AvroJava) -> None:
    refs = ['{"type":"enum","name":"com.x.Kind","symbols":["H","W"]}',
            '{"type":"record","name":"Addr","namespace":"com.x","fields":[{"name":"k","type":"Kind"},'
            '{"name":"z","type":{"type":"fixed","name":"Zip","size":5}}]}']
    reader = ('{"type":"record","name":"P","namespace":"com.x","fields":[{"name":"a","type":"Addr"},'
              '{"name":"k","type":"com.x.Kind"},{"name":"z","type":"Zip"}]}')
    writer = reader.replace('"name":"P"', '"name":"P","aliases":[]')
    compare(java, reader, writer, refs)
    compare(java, reader, writer, refs[:1])  # Addr undefined: both refuse
