"""The AVRO format: parse, Schema.toString, normalize and reader/writer compatibility.

The expected strings are what Apache Avro 1.12 (Java) and Confluent answer; the differential
test (tests/differential/test_avro_java.py) checks the same things against Java over generated
schemas, these pin the cases worth reading."""
from __future__ import annotations

import pytest

from minibroker.registry.formats.avro import FORMAT, check_reader_writer
from minibroker.registry.formats.base import InvalidSchema


def canon(text: str, refs: dict[str, str] | None = None) -> str:
    return FORMAT.parse(text, refs or {}).canonical()


@pytest.mark.parametrize(("text", "expected"), [
    (' "int" ', '"int"'),
    ('{"type": "int"}', '"int"'),
    ('{"type":"long","logicalType":"timestamp-millis","name":"dropped"}',
     '{"type":"long","logicalType":"timestamp-millis"}'),
    ('["null", {"type": "array", "items": "string", "x": 1.50}]',
     '["null",{"type":"array","items":"string","x":1.5}]'),
    # Attribute order is Java's, whatever the input's; props keep theirs, after the fields.
    ('{"fields":[{"default":0,"type":"int","name":"a","order":"DESCENDING","aliases":["b"],"p":true,'
     '"doc":"d"}],"aliases":["Old"],"x":{"k":[1e3,0.0001,12345678.0]},"name":"R","type":"record","doc":"r"}',
     '{"type":"record","name":"R","doc":"r","fields":[{"name":"a","type":"int","doc":"d","default":0,'
     '"order":"descending","aliases":["b"],"p":true}],"x":{"k":[1000.0,1.0E-4,1.2345678E7]},'
     '"aliases":["Old"]}'),
])
def test_canonical_is_avro_java_to_string(text: str, expected: str) -> None:
    assert canon(text) == expected


def test_namespaces_and_name_references() -> None:
    text = ('{"type":"record","name":"a.b.Outer","fields":['
            '{"name":"in","type":{"type":"record","name":"Inner","fields":[{"name":"x","type":"int"}]}},'
            '{"name":"again","type":"Inner"},'
            '{"name":"other","type":{"type":"enum","name":"E","namespace":"c","symbols":["X"]}},'
            '{"name":"e2","type":"c.E"},'
            '{"name":"top","type":{"type":"fixed","name":"F","namespace":"","size":2}},'
            '{"name":"f2","type":"F"},'
            '{"name":"r","type":{"type":"record","name":"record","fields":[]}},{"name":"r2","type":"record"}]}')
    assert canon(text) == (
        '{"type":"record","name":"Outer","namespace":"a.b","fields":['
        '{"name":"in","type":{"type":"record","name":"Inner","fields":[{"name":"x","type":"int"}]}},'
        '{"name":"again","type":"Inner"},'
        '{"name":"other","type":{"type":"enum","name":"E","namespace":"c","symbols":["X"]}},'
        '{"name":"e2","type":"c.E"},'
        '{"name":"top","type":{"type":"fixed","name":"F","namespace":"","size":2}},'
        '{"name":"f2","type":"F"},'
        # a type named like a primitive is written qualified even in its own namespace
        '{"name":"r","type":{"type":"record","name":"record","fields":[]}},{"name":"r2","type":"a.b.record"}]}')


def test_forward_reference_is_inlined_where_first_written() -> None:
    text = ('{"type":"record","name":"A","fields":[{"name":"b","type":"B"},'
            '{"name":"c","type":{"type":"fixed","name":"B","size":2}}]}')
    assert canon(text) == ('{"type":"record","name":"A","fields":[{"name":"b","type":{"type":"fixed",'
                           '"name":"B","size":2}},{"name":"c","type":"B"}]}')


def test_references_are_written_by_name() -> None:
    refs = {"com.x.Addr": '{"type":"record","name":"Addr","namespace":"com.x","fields":['
                          '{"name":"k","type":{"type":"enum","name":"Kind","symbols":["H","W"]}}]}'}
    text = ('{"type":"record","name":"P","namespace":"com.x","fields":[{"name":"a","type":"Addr"},'
            '{"name":"k","type":"Kind"}]}')
    # Only the referenced schema's own name is known: a type nested in it is inlined.
    assert canon(text, refs) == (
        '{"type":"record","name":"P","namespace":"com.x","fields":[{"name":"a","type":"Addr"},'
        '{"name":"k","type":{"type":"enum","name":"Kind","symbols":["H","W"]}}]}')
    with pytest.raises(InvalidSchema, match="Undefined schema: com.x.Addr"):
        FORMAT.parse(text, {})


@pytest.mark.parametrize(("text", "message"), [
    ("", "Cannot parse <null> schema"),
    ('{"type":"int"} {}', "dangling content after end of schema: {}"),
    ('{"type":"record","name":"R"}', 'Record has no fields: {"type":"record","name":"R"}'),
    ('{"type":"record","name":"R-1","fields":[]}', "Illegal character in: R-1"),
    ('{"type":"record","name":"R","namespace":"a.1b","fields":[]}', 'Namespace part "1b" is invalid: '
     "Illegal initial character: 1b"),
    ('{"type":"enum","name":"E","symbols":["A","A"]}', "Duplicate enum symbol: A"),
    ('{"type":"enum","name":"E","symbols":["A"],"default":"B"}',
     "The Enum Default: B is not in the enum symbol set: [A]"),
    ('{"type":"fixed","name":"F","size":"4"}', 'Invalid or no size: {"type":"fixed","name":"F","size":"4"}'),
    ('{"type":"decimal"}', 'A schema "type" MUST be a primitive type'),
    ('["int",["long"]]', "Nested union"),
    ('["string","string"]', "Duplicate in union:string"),
    ('{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":1.5}]}',
     'Invalid default for field a: 1.5 not a "int"'),
    ('{"type":"record","name":"R","fields":[{"name":"a","type":["null","int"],"default":"x"}]}',
     'Invalid default for field a: "x" not a ["null","int"]'),
    ('{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"a","type":"long"}]}',
     "Duplicate field a in record R: a type:LONG pos:1 and a type:INT pos:0."),
    ('{"type":"record","name":"R","fields":[{"name":"a","type":"R2"}]}', "Undefined schema: R2"),
    ('{"type":"record","name":"int","fields":[]}', "Schemas may not be named after primitives: int"),
    ('{"type":"record","name":"R","fields":[{"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}},'
     '{"name":"f","type":{"type":"enum","name":"E","symbols":["B"]}}]}', "Can't redefine: E"),
    ("[1, 2", "Invalid JSON"),
])
def test_invalid_schemas_say_what_avro_says(text: str, message: str) -> None:
    with pytest.raises(InvalidSchema) as e:
        FORMAT.parse(text, {})
    assert message in str(e.value)


def test_valid_defaults_and_float_strings() -> None:
    text = ('{"type":"record","name":"R","fields":[{"name":"u","type":["null","int"],"default":3},'
            '{"name":"d","type":"double","default":"NaN"},{"name":"f","type":"float","default":"1.5"},'
            '{"name":"l","type":"long","default":9007199254740993},'
            '{"name":"m","type":{"type":"map","values":"int"},"default":{"a":1}},'
            '{"name":"s","type":{"type":"record","name":"S","fields":[{"name":"x","type":"int","default":1},'
            '{"name":"y","type":"string"}]},"default":{"y":"z"}}]}')
    assert canon(text) == (
        '{"type":"record","name":"R","fields":[{"name":"u","type":["null","int"],"default":3},'
        '{"name":"d","type":"double","default":"NaN"},{"name":"f","type":"float","default":1.5},'
        '{"name":"l","type":"long","default":9007199254740993},'
        '{"name":"m","type":{"type":"map","values":"int"},"default":{"a":1}},'
        '{"name":"s","type":{"type":"record","name":"S","fields":[{"name":"x","type":"int","default":1},'
        '{"name":"y","type":"string"}]},"default":{"y":"z"}}]}')


def test_normalize_sorts_what_confluent_sorts() -> None:
    text = ('{"type":"record","namespace":"n","name":"R","doc":"","aliases":["Z","A"],"zz":1,"aa":2,'
            '"fields":[{"name":"d","type":"double","default":1,"aliases":["y","x"]},'
            '{"name":"t","type":{"type":"int","logicalType":"date","q":1}},'
            '{"name":"dec","type":{"type":"bytes","scale":0,"precision":4,"logicalType":"decimal"}}]}')
    assert FORMAT.parse(text, {}).normalized().canonical() == (
        '{"type":"record","name":"R","namespace":"n","fields":['
        '{"name":"d","type":"double","default":1.0,"aliases":["x","y"]},'
        '{"name":"t","type":{"type":"int","logicalType":"date","q":1}},'
        '{"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":4,"scale":0}}],'
        '"aa":2,"zz":1,"aliases":["A","Z"]}')


def _pair(reader: str, writer: str) -> list[tuple[str, str, str]]:
    ok, found = check_reader_writer(FORMAT.parse(reader, {}).schema, FORMAT.parse(writer, {}).schema)
    assert ok == (not found)
    return [(i.kind, i.pointer(), i.message) for i in found]


def test_promotions_and_mismatches() -> None:
    for reader, writer in [("long", "int"), ("float", "long"), ("double", "float"), ("string", "bytes"),
                           ("bytes", "string")]:
        assert _pair(f'"{reader}"', f'"{writer}"') == []
    assert _pair('"int"', '"long"') == [("TYPE_MISMATCH", "/", "reader type: INT not compatible with "
                                         "writer type: LONG")]


def test_record_rules() -> None:
    writer = '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'
    reader = ('{"type":"record","name":"Other","aliases":["R"],"fields":[{"name":"b","type":"long",'
              '"aliases":["a"]},{"name":"c","type":"string"},{"name":"d","type":"string","default":""},'
              '{"name":"e","type":{"type":"enum","name":"E","symbols":["X"],"default":"X"}}]}')
    assert _pair(reader, writer) == [
        ("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/1", "c"),
        ("TYPE_MISMATCH", "/fields/3/type", "reader type: ENUM not compatible with writer type: RECORD"),
    ]
    renamed = reader.replace('"aliases":["R"],', "")
    assert ("NAME_MISMATCH", "/name", "expected: R") in _pair(renamed, writer)


def test_enum_union_fixed_rules() -> None:
    e1 = '{"type":"enum","name":"E","symbols":["A","B","C"]}'
    e2 = '{"type":"enum","name":"E","symbols":["A"]}'
    assert _pair(e2, e1) == [("MISSING_ENUM_SYMBOLS", "/symbols", "[B, C]")]
    assert _pair(e2.replace("]}", '],"default":"A"}'), e1) == []
    assert _pair('["null","string"]', '["null","int","string"]') == [
        ("MISSING_UNION_BRANCH", "/1", "reader union lacking writer type: INT")]
    assert _pair('["null","long"]', '"int"') == []
    assert _pair('"long"', '["int","string"]') == [
        ("TYPE_MISMATCH", "/1", "reader type: LONG not compatible with writer type: STRING")]
    assert _pair('{"type":"fixed","name":"F","size":4}', '{"type":"fixed","name":"G","size":5}') == [
        ("NAME_MISMATCH", "/name", "expected: G"), ("FIXED_SIZE_MISMATCH", "/size", "expected: 5, found: 4")]


def test_recursive_schemas_terminate() -> None:
    a = '{"type":"record","name":"L","fields":[{"name":"n","type":["null","L"]},{"name":"v","type":"int"}]}'
    b = a.replace('"int"', '"string"')
    assert _pair(a, a) == []
    assert _pair(a, b)[0][0] == "TYPE_MISMATCH"


def test_confluent_messages() -> None:
    new = FORMAT.parse('{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}', {})
    old = FORMAT.parse('{"type":"record","name":"R","fields":[]}', {})
    assert old.compatibility_errors(new) == []
    [message] = new.compatibility_errors(old)
    assert message % ("new", "old") == (
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'a' at path '/fields/0' in "
        "the new schema has no default value and is missing in the old schema', additionalInfo:'a'}")


def test_normalize_keeps_confluent_examples() -> None:
    # Confluent's AvroSchemaTest.testNormalization and ...PreservesMetadataForPrimitiveTypes:
    # the canonical string and the normalized schema's canonical string are the same.
    doc = ('{"type":"record","name":"myrecord","doc":"hi\\"there","fields":[{"type":"string","name":"f1",'
           '"doc":"bye\\"now"}]}')
    expected = ('{"type":"record","name":"myrecord","doc":"hi\\"there","fields":[{"name":"f1","type":"string",'
                '"doc":"bye\\"now"}]}')
    parsed = FORMAT.parse(doc, {})
    assert parsed.canonical() == expected
    assert parsed.normalized().canonical() == expected
    envelope = ('{"connect.name":"some.scope.Envelope","fields":[{"default":null,"name":"before","type":["null",'
                '{"connect.name":"some.scope.Value","fields":[{"name":"created_at","type":{"connect.name":'
                '"io.debezium.time.Timestamp","connect.version":1,"type":"long"}},{"name":"normal_long","type":'
                '"long"}],"name":"Value","type":"record"}]},{"default":null,"name":"after","type":["null","Value"]}],'
                '"name":"Envelope","namespace":"some.scope","type":"record"}')
    expected = ('{"type":"record","name":"Envelope","namespace":"some.scope","fields":[{"name":"before","type":'
                '["null",{"type":"record","name":"Value","fields":[{"name":"created_at","type":{"type":"long",'
                '"connect.name":"io.debezium.time.Timestamp","connect.version":1}},{"name":"normal_long","type":'
                '"long"}],"connect.name":"some.scope.Value"}],"default":null},{"name":"after","type":["null",'
                '"Value"],"default":null}],"connect.name":"some.scope.Envelope"}')
    parsed = FORMAT.parse(envelope, {})
    assert parsed.canonical() == expected
    assert parsed.normalized().canonical() == expected


def test_normalize_converts_defaults_as_field_default_val_does() -> None:
    text = ('{"type":"record","name":"R","fields":[{"name":"f","type":"float","default":0.1},'
            '{"name":"g","type":["null","double"],"default":null},{"name":"h","type":"double","default":3},'
            '{"name":"n","type":"float","default":"NaN"},{"name":"o","type":"int","order":"ignore"}]}')
    assert FORMAT.parse(text, {}).normalized().canonical() == (
        '{"type":"record","name":"R","fields":[{"name":"f","type":"float","default":0.1},'
        '{"name":"g","type":["null","double"],"default":null},{"name":"h","type":"double","default":3.0},'
        '{"name":"n","type":"float","default":"NaN"},{"name":"o","type":"int","order":"ignore"}]}')


def test_normalize_with_references_keeps_them_by_name() -> None:
    refs = {"Addr": '{"type":"record","name":"Addr","fields":[{"name":"z","type":"string"}]}'}
    parsed = FORMAT.parse('{"type":"record","name":"P","fields":[{"name":"a","type":"Addr"}]}', refs)
    assert parsed.normalized().canonical() == parsed.canonical() == (
        '{"type":"record","name":"P","fields":[{"name":"a","type":"Addr"}]}')


def test_normalize_is_idempotent_and_keeps_the_parsing_form() -> None:
    from hypothesis import HealthCheck, given, settings

    from tests.differential.test_avro_java import schema_pairs

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(pair=schema_pairs())
    def check(pair: tuple[str, str]) -> None:
        for text in pair:
            try:
                parsed = FORMAT.parse(text, {})
            except InvalidSchema:
                continue
            once = parsed.normalized()
            # Confluent writes each type's full name alone: a type in the null namespace nested
            # in a namespaced one then moves into the enclosing namespace, in Confluent as here.
            if '"namespace": ""' not in text:
                assert once.parsing_form() == parsed.parsing_form()
            assert once.normalized().canonical() == once.canonical()

    check()


def test_lone_surrogate_stays_escaped() -> None:
    # AVRO_DIVERGENCES["lone surrogates"]
    text = canon('{"type":"string","k":"a\\ud800b\\u00e9\\u0001"}')
    assert text == '{"type":"string","k":"a\\ud800b\u00e9\\u0001"}'
    text.encode("utf-8")


def test_a_schema_not_new_is_parsed_without_validation() -> None:
    # A lookup, or a schema read back from _schemas that an older registry accepted: Confluent
    # parses it without name or default validation, then checks its own names (UTF rules).
    text = ('{"type":"record","name":"Réc","namespace":"1a","fields":[{"name":"a","type":"int",'
            '"default":"oops"}]}')
    with pytest.raises(InvalidSchema):
        FORMAT.parse(text, {})
    parsed = FORMAT.parse(text, {}, new=False)
    assert parsed.canonical() == ('{"type":"record","name":"Réc","namespace":"1a","fields":[{"name":"a",'
                                  '"type":"int","default":"oops"}]}')
    # normalize writes Field.defaultVal(), which has no value for a string default of an int
    assert parsed.normalized().canonical() == ('{"type":"record","name":"Réc","namespace":"1a","fields":'
                                               '[{"name":"a","type":"int"}]}')
    with pytest.raises(InvalidSchema, match="Illegal character in: a-b"):
        FORMAT.parse('{"type":"enum","name":"E","symbols":["a-b"]}', {}, new=False)


def test_compatibility_errors_for_other_types_and_checker_failures() -> None:
    class Other:
        schema_type = "JSON"

    avro = FORMAT.parse('"int"', {})
    assert avro.compatibility_errors(Other()) == ["Incompatible because of different schema type"]
    reader = FORMAT.parse('{"type":"record","name":"R","fields":[{"name":"a","type":"int","aliases":["x"]}]}', {})
    writer = FORMAT.parse('{"type":"record","name":"R","fields":[{"name":"a","type":"int"},'
                          '{"name":"x","type":"int"}]}', {})
    # Avro's checker throws when a reader field matches two writer fields; Confluent reports it.
    assert reader.compatibility_errors(writer) == [
        "Unexpected exception during compatibility check: Reader record field a type:INT pos:0 matches "
        'multiple fields in writer record schema {"type":"record","name":"R","fields":[{"name":"a",'
        '"type":"int"},{"name":"x","type":"int"}]}']
