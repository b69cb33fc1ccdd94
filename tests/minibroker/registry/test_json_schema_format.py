"""The JSON schema format: parse, Confluent's canonical string, normalize, compatibility.

Canonical strings follow Confluent's JsonSchema.canonicalString() (Jackson's compact writer over
an exact-decimal tree); the compatibility cases follow json-schema-provider's diff rules
(SchemaDiff.COMPATIBLE_CHANGES_STRICT), each pair asked both ways.
"""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker.registry.formats.base import InvalidSchema
from minibroker.registry.formats.json_schema import FORMAT


def parse(text, refs=None):
    return FORMAT.parse(text if isinstance(text, str) else json.dumps(text), refs or {})


def errors(reader, writer, refs=None):
    return parse(reader, refs).compatibility_errors(parse(writer, refs))


def kinds(messages):
    return sorted(m.split('"')[1] for m in messages)


# --- canonical and normalize -------------------------------------------------------------------


def test_canonical_is_compact_jackson_output_in_key_order():
    text = '{\n  "type" : "object",\n  "properties" : {\n    "b" : {"type": "string"},\n' \
           '    "a" : {"type": "integer", "maximum": 100}\n  }\n}'
    assert parse(text).canonical() == (
        '{"type":"object","properties":{"b":{"type":"string"},'
        '"a":{"type":"integer","maximum":100}}}')


def test_canonical_numbers_are_exact_decimals_as_java_bigdecimal_prints_them():
    s = parse('{"type":"number","minimum":1.50,"maximum":1e2,"multipleOf":0.0000001,"x":-0.0}')
    assert s.canonical() == '{"type":"number","minimum":1.50,"maximum":1E+2,"multipleOf":1E-7,"x":0.0}'


def test_canonical_escapes_as_jackson():
    s = parse('{"description":"tab\\there \\u001f \\"q\\" / é \\u2028"}')
    assert s.canonical() == '{"description":"tab\\there \\u001F \\"q\\" / é \u2028"}'


def test_repeated_key_keeps_last_value_in_first_place():
    assert parse('{"type":"string","title":"a","type":"integer"}').canonical() == \
        '{"type":"integer","title":"a"}'


def test_normalize_sorts_keys_at_every_level():
    s = parse('{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"integer"}},'
              '"$schema":"http://json-schema.org/draft-07/schema#"}')
    assert s.normalized().canonical() == (
        '{"$schema":"http://json-schema.org/draft-07/schema#","properties":'
        '{"a":{"type":"integer"},"z":{"type":"string"}},"type":"object"}')
    # The unnormalized identity is unchanged.
    assert s.canonical().startswith('{"type":"object"')


def test_boolean_schemas_parse():
    assert parse("true").canonical() == "true"
    assert parse("false").canonical() == "false"


@pytest.mark.parametrize("text, words", [
    ("{", "Invalid JSON"),
    ('{"type": 5}', "#/type"),
    ('{"type": "object", "properties": {"a": {"minimum": "x"}}}', "#/properties/a/minimum"),
    ('[1, 2]', "expected an object or a boolean"),
    ('{"$schema": "https://json-schema.org/draft/2020-12/schema", "prefixItems": 3}',
     "#/prefixItems"),
])
def test_invalid_schemas_are_refused_with_one_line(text, words):
    with pytest.raises(InvalidSchema) as e:
        parse(text)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_invalid_reference_text_is_refused():
    with pytest.raises(InvalidSchema):
        FORMAT.parse('{"$ref": "other.json"}', {"other.json": "{nope"})


# --- compatibility -----------------------------------------------------------------------------

OPEN = {"type": "object", "properties": {"a": {"type": "string"}}}
OPEN_WITH_B = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}
CLOSED = dict(OPEN, additionalProperties=False)
CLOSED_WITH_B = dict(OPEN_WITH_B, additionalProperties=False)


def test_identical_schemas_are_compatible():
    assert errors(OPEN_WITH_B, OPEN_WITH_B) == []


def test_property_added_to_open_content_model_is_incompatible_for_the_new_reader():
    # An old writer could put any "b" in an open object; the new reader wants an integer.
    assert kinds(errors(OPEN_WITH_B, OPEN)) == ["OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]
    # The other way round the property is removed from an open model: compatible.
    assert errors(OPEN, OPEN_WITH_B) == []


def test_property_added_to_closed_content_model_is_compatible_removed_is_not():
    assert errors(CLOSED_WITH_B, CLOSED) == []
    assert kinds(errors(CLOSED, CLOSED_WITH_B)) == ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"]


def test_required_property_added():
    with_required = dict(CLOSED_WITH_B, required=["b"])
    assert kinds(errors(with_required, CLOSED)) == ["REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"]
    with_default = json.loads(json.dumps(with_required))
    with_default["properties"]["b"]["default"] = 0
    assert errors(with_default, CLOSED) == []
    # Dropping it again removes a property from a closed model, required or not.
    assert kinds(errors(CLOSED, with_required)) == ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"]


def test_required_attribute_added_and_removed():
    optional = OPEN_WITH_B
    required = dict(OPEN_WITH_B, required=["b"])
    assert kinds(errors(required, optional)) == ["REQUIRED_ATTRIBUTE_ADDED"]
    assert errors(optional, required) == []


def test_type_changed_and_integer_number():
    assert kinds(errors({"type": "string"}, {"type": "integer"})) == ["TYPE_CHANGED"]
    assert errors({"type": "number"}, {"type": "integer"}) == []  # TYPE_EXTENDED
    assert kinds(errors({"type": "integer"}, {"type": "number"})) == ["TYPE_NARROWED"]


def test_union_extended_is_compatible_narrowed_is_not():
    assert errors({"type": ["string", "null"]}, {"type": "string"}) == []
    assert kinds(errors({"type": "string"}, {"type": ["string", "null"]})) == ["TYPE_CHANGED"]
    one = {"oneOf": [{"type": "string"}, {"type": "integer"}]}
    two = {"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "boolean"}]}
    assert errors(two, one) == []
    assert kinds(errors(one, two)) == ["SUM_TYPE_NARROWED"]
    pair = [{"type": "string"}, {"maxLength": 3}]
    assert kinds(errors({"allOf": pair}, {"anyOf": pair})) == ["COMBINED_TYPE_CHANGED"]
    assert errors({"anyOf": pair}, {"allOf": pair}) == []  # COMBINED_TYPE_EXTENDED


@pytest.mark.parametrize("keyword, looser, stricter, kind", [
    ("maxLength", 10, 5, "MAX_LENGTH_DECREASED"),
    ("minLength", 1, 3, "MIN_LENGTH_INCREASED"),
    ("maximum", 100, 10, "MAXIMUM_DECREASED"),
    ("minimum", 0, 5, "MINIMUM_INCREASED"),
    ("exclusiveMaximum", 100, 10, "EXCLUSIVE_MAXIMUM_DECREASED"),
    ("multipleOf", 2, 4, "MULTIPLE_OF_EXPANDED"),
])
def test_limits(keyword, looser, stricter, kind):
    t = "string" if "Length" in keyword else "number"
    loose, strict = {"type": t, keyword: looser}, {"type": t, keyword: stricter}
    assert errors(loose, strict) == []
    assert kinds(errors(strict, loose)) == [kind]
    # Adding the keyword restricts a reader; removing it does not.
    assert errors({"type": t}, strict) == []
    assert kinds(errors(strict, {"type": t})) == [kind.rsplit("_", 1)[0] + "_ADDED"]


def test_pattern_and_enum():
    assert kinds(errors({"type": "string", "pattern": "^a"}, {"type": "string"})) == ["PATTERN_ADDED"]
    assert kinds(errors({"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"})) \
        == ["PATTERN_CHANGED"]
    small, big = {"enum": ["A", "B"]}, {"enum": ["A", "B", "C"]}
    assert errors(big, small) == []
    assert kinds(errors(small, big)) == ["ENUM_ARRAY_NARROWED"]
    assert kinds(errors({"enum": ["A", "X"]}, small)) == ["ENUM_ARRAY_CHANGED"]


def test_additional_properties():
    assert errors(OPEN, CLOSED) == []  # ADDITIONAL_PROPERTIES_ADDED
    assert kinds(errors(CLOSED, OPEN)) == ["ADDITIONAL_PROPERTIES_REMOVED"]
    typed = dict(OPEN, additionalProperties={"type": "string"})
    assert kinds(errors(typed, OPEN)) == ["ADDITIONAL_PROPERTIES_NARROWED"]
    assert errors(OPEN, typed) == []


def test_property_covered_by_partially_open_content_model():
    partial = {"type": "object", "properties": {"a": {"type": "string"}},
               "additionalProperties": {"type": "string"}}
    added = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
             "additionalProperties": {"type": "string"}}
    assert errors(added, partial) == []
    bad = json.loads(json.dumps(added))
    bad["properties"]["b"] = {"type": "integer"}
    assert kinds(errors(bad, partial)) == [
        "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "TYPE_CHANGED"]


def test_arrays():
    assert kinds(errors({"type": "array", "items": {"type": "integer"}},
                        {"type": "array", "items": {"type": "string"}})) == ["TYPE_CHANGED"]
    assert kinds(errors({"type": "array", "uniqueItems": True}, {"type": "array"})) \
        == ["UNIQUE_ITEMS_ADDED"]
    assert kinds(errors({"type": "array", "maxItems": 2}, {"type": "array", "maxItems": 3})) \
        == ["MAX_ITEMS_DECREASED"]
    tuple1 = {"type": "array", "items": [{"type": "string"}], "additionalItems": False}
    tuple2 = {"type": "array", "items": [{"type": "string"}, {"type": "integer"}],
              "additionalItems": False}
    assert errors(tuple2, tuple1) == []  # ITEM_ADDED_TO_CLOSED_CONTENT_MODEL
    assert kinds(errors(tuple1, tuple2)) == ["ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"]


def test_refs_are_followed_locally_and_across_references():
    local_old = {"type": "object", "properties": {"p": {"$ref": "#/definitions/P"}},
                 "definitions": {"P": {"type": "string"}}}
    local_new = {"type": "object", "properties": {"p": {"$ref": "#/definitions/P"}},
                 "definitions": {"P": {"type": "integer"}}}
    messages = errors(local_new, local_old)
    assert kinds(messages) == ["TYPE_CHANGED"]
    assert "#/properties/p" in messages[0]
    old = FORMAT.parse('{"type":"object","properties":{"c":{"$ref":"customer.json"}}}',
                       {"customer.json": '{"type":"object","properties":{"id":{"type":"string"}},'
                                         '"additionalProperties":false}'})
    new = FORMAT.parse('{"type":"object","properties":{"c":{"$ref":"customer.json"}}}',
                       {"customer.json": '{"type":"object","properties":{},'
                                         '"additionalProperties":false}'})
    assert kinds(new.compatibility_errors(old)) == ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"]
    assert old.compatibility_errors(new) == []


def test_recursive_schema_terminates():
    tree = {"type": "object", "properties": {"children": {"type": "array",
                                                          "items": {"$ref": "#"}}}}
    assert errors(tree, tree) == []


def test_message_wording_is_confluents():
    [message] = errors(CLOSED, CLOSED_WITH_B)
    assert message == (
        '{errorType:"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", description:"The %s has a closed '
        "content model and is missing a property or item present at path '#/properties/b' in "
        "the %s schema'}")
    # The registry fills reader and writer in, as Confluent's SchemaValidatorBuilder does.
    assert "The new has a closed" in message.replace("%s", "new", 1)


def test_different_schema_type():
    class Other:
        schema_type = "AVRO"

    assert parse(OPEN).compatibility_errors(Other()) == [  # type: ignore[arg-type]
        "Incompatible because of different schema type"]


# --- what confluent-kafka's JSONSerializer registers --------------------------------------------


def test_the_json_serializer_registration_parses_and_keeps_its_identity():
    pytest.importorskip("jsonschema")
    from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
        MockSchemaRegistryClient,
    )
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    schema_str = json.dumps({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "User", "type": "object",
        "properties": {"name": {"type": "string"}, "favorite_number": {"type": "integer"}},
        "required": ["name"],
    }, indent=2)
    client = MockSchemaRegistryClient({"url": "mock://srformats"})
    ser = JSONSerializer(schema_str, client, conf={"auto.register.schemas": True})
    ser({"name": "ada", "favorite_number": 7}, SerializationContext("users", MessageField.VALUE))
    registered = client.get_latest_version("users-value").schema
    assert registered.schema_type == "JSON"
    parsed = FORMAT.parse(registered.schema_str, {})
    assert parsed.canonical() == json.dumps(json.loads(schema_str), separators=(",", ":"))
    assert parsed.normalized().canonical() == parsed.normalized().normalized().canonical()


@pytest.mark.parametrize("schema, refs", [
    ({"properties": {"a": {"$ref": "#/definitions/missing"}}}, {}),
    ({"properties": {"a": {"$ref": "other.json"}}}, {}),
    ({"properties": {"a": {"$ref": "#nowhere"}}}, {}),
])
def test_unresolvable_refs_are_refused(schema, refs):
    with pytest.raises(InvalidSchema, match="unresolved \\$ref"):
        parse(schema, refs)


def test_resolvable_refs_are_accepted():
    parse({"properties": {"a": {"$ref": "#/definitions/x"}}, "definitions": {"x": {}}})
    parse({"properties": {"a": {"$ref": "other.json"}}}, {"other.json": '{"type":"string"}'})
    parse({"properties": {"a": {"$ref": "other.json#/definitions/x"}}},
          {"other.json": '{"definitions":{"x":{"type":"string"}}}'})
    parse({"$schema": "https://json-schema.org/draft/2020-12/schema",
           "properties": {"a": {"$ref": "#thing"}}, "$defs": {"t": {"$anchor": "thing"}}})
    parse({"enum": [{"$ref": "not a reference, a value"}]})
    parse({"$ref": "http://json-schema.org/draft-07/schema#"})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(
    st.text(max_size=200),
    st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5),
                           st.sampled_from(["object", "string", "#/x", "integer"])),
                 lambda inner: st.one_of(
                     st.lists(inner, max_size=4),
                     st.dictionaries(st.sampled_from(
                         ["type", "properties", "items", "$ref", "enum", "anyOf", "required",
                          "additionalProperties", "minimum", "not", "a"]), inner, max_size=4)),
                 max_leaves=20).map(json.dumps),
))
def test_any_text_parses_or_is_refused_cleanly(text):
    try:
        schema = FORMAT.parse(text, {})
    except InvalidSchema as e:
        assert "\n" not in str(e)
        return
    assert isinstance(schema.canonical(), str)
    assert schema.compatibility_errors(schema) == [] or all(
        m.startswith("Unresolved") for m in schema.compatibility_errors(schema))


def test_deep_nesting_is_refused_cleanly():
    with pytest.raises(InvalidSchema):
        FORMAT.parse('{"not":' * 5000 + "{}" + "}" * 5000, {})


# Cases restated from Confluent's json-schema-provider diff-schema-examples.json (writer, reader,
# every difference as "TYPE path", compatible): the exact list, not only the verdict.
CONFLUENT_CASES = [
    ({"type": "object"}, {"type": "array"}, ["TYPE_CHANGED #/"], False),
    ({"type": "string", "minLength": 10}, {"type": "string", "minLength": 11},
     ["MIN_LENGTH_INCREASED #/minLength"], False),
    ({"type": "number", "multipleOf": 10}, {"type": "number", "multipleOf": 2},
     ["MULTIPLE_OF_REDUCED #/multipleOf"], True),
    ({"not": {"type": "integer"}}, {"not": {"type": "number"}}, ["NOT_TYPE_EXTENDED #/not"], False),
    ({"type": "string", "enum": ["red"]}, {"type": "string"}, ["PRODUCT_TYPE_NARROWED #/"], True),
    ({"allOf": [{"type": "string"}, {"enum": ["red"]}]},
     {"allOf": [{"enum": ["red", "blue"]}, {"type": "string"}]},
     ["ENUM_ARRAY_EXTENDED #/allOf/1/enum"], True),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"allOf": [{"type": "string"}]},
     ["COMBINED_TYPE_CHANGED #/"], False),
    ({"dependencies": {"foo": {"type": "string"}}}, {"dependencies": {"bar": {"type": "string"}}},
     ["DEPENDENCY_SCHEMA_ADDED #/dependencies/bar", "DEPENDENCY_SCHEMA_REMOVED #/dependencies/foo"],
     False),
    ({"properties": {"foo": {"type": "string"}}, "required": ["foo"]},
     {"properties": {"foo": {"type": "string"}}, "required": ["bar"]},
     ["REQUIRED_ATTRIBUTE_REMOVED #/required/foo"], True),
    ({"type": "array"}, {"type": "array", "items": {"type": "string"}}, ["SCHEMA_ADDED #/items"], False),
    ({"type": "array", "items": [{"type": "string"}, {"type": "number"}]}, {"type": "array"},
     ["ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL #/items/0", "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL #/items/1"],
     True),
    ({"additionalProperties": True}, {"additionalProperties": {"type": "number"}},
     ["ADDITIONAL_PROPERTIES_NARROWED #/additionalProperties"], False),
    ({"additionalProperties": False}, {"additionalProperties": False, "properties": {"foo": False}},
     ["OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL #/properties/foo"], True),
    ({"type": "string", "maxLength": 3}, {"oneOf": [{"type": "number"}, {"type": "string"}]},
     ["MAX_LENGTH_REMOVED #/maxLength", "SUM_TYPE_EXTENDED #/"], True),
]


@pytest.mark.parametrize("writer, reader, changes, compatible", CONFLUENT_CASES)
def test_confluents_documented_differences(writer, reader, changes, compatible):
    from minibroker.registry.formats import json_schema_diff as diff

    w, r = parse(writer), parse(reader)
    lw, lr = diff.Loader(w.node, {}), diff.Loader(r.node, {})
    ctx = diff.Context(lw, lr, [], set())
    diff.compare(ctx, lw.load(w.node, w.node), lr.load(r.node, r.node))
    assert sorted(f"{kind} {path}" for kind, path in ctx.diffs) == sorted(changes)
    assert (r.compatibility_errors(w) == []) is compatible
