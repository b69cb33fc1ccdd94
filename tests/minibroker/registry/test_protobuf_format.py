"""The PROTOBUF format: .proto text and base64 FileDescriptorProto in, Confluent's canonical
string (ProtobufSchemaUtils.toString) and normalized string out, and Confluent's compatibility
rules (protobuf-provider's diff package), each pair asked both ways."""
from __future__ import annotations

import base64

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker.registry.formats.base import InvalidSchema
from minibroker.registry.formats.protobuf import FORMAT


def parse(text, refs=None):
    return FORMAT.parse(text, refs or {})


def errors(reader, writer, reader_refs=None, writer_refs=None):
    return parse(reader, reader_refs).compatibility_errors(parse(writer, writer_refs))


def kinds(messages):
    return sorted(m.split('"')[1] for m in messages)


USER = '''syntax = "proto3";
package com.acme;

import "google/protobuf/timestamp.proto";
// comments are not part of the schema
option java_package = "com.acme.proto";
option java_multiple_files = true;

message User {
  string name = 1 [json_name = "n", deprecated = true];
  int32 favorite_number = 2;
  map<string, Address> addresses = 3;
  google.protobuf.Timestamp at = 4;
  oneof contact { string email = 6; string phone = 5; }
  enum Kind { KIND_UNSPECIFIED = 0; ADMIN = 1; }
  Kind kind = 7;
  reserved 9, 10 to 12, "old";
  message Address { string city = 1; }
  optional int64 x = 8;
}
'''


def test_canonical_is_confluents_layout():
    assert parse(USER).canonical() == '''syntax = "proto3";
package com.acme;

import "google/protobuf/timestamp.proto";

option java_package = "com.acme.proto";
option java_multiple_files = true;

message User {
  reserved 9, 10 to 12, "old";

  string name = 1 [
    deprecated = true,
    json_name = "n"
  ];
  int32 favorite_number = 2;
  map<string, Address> addresses = 3;
  google.protobuf.Timestamp at = 4;
  Kind kind = 7;
  optional int64 x = 8;

  oneof contact {
    string email = 6;
    string phone = 5;
  }

  message Address {
    string city = 1;
  }
  enum Kind {
    KIND_UNSPECIFIED = 0;
    ADMIN = 1;
  }
}
'''


def test_normalized_resolves_names_and_sorts():
    normalized = parse(USER).normalized().canonical()
    assert "  map<string, .com.acme.User.Address> addresses = 3;\n" in normalized
    assert "  .google.protobuf.Timestamp at = 4;\n" in normalized
    assert "  .com.acme.User.Kind kind = 7;\n" in normalized
    assert "    string phone = 5;\n    string email = 6;\n" in normalized
    assert "  reserved 9;\n  reserved 10 to 12;\n  reserved \"old\";\n" in normalized
    assert "option java_multiple_files = true;\noption java_package" in normalized
    # Normalizing is idempotent, and equal schemas written differently normalize equal.
    assert parse(normalized).normalized().canonical() == normalized
    shuffled = USER.replace("  int32 favorite_number = 2;\n", "").replace(
        "  optional int64 x = 8;\n", "  optional int64 x = 8;\n  int32 favorite_number = 2;\n")
    assert parse(shuffled).canonical() != parse(USER).canonical()
    assert parse(shuffled).normalized().canonical() == normalized


def test_enum_reserved_layout_from_confluents_test():
    # ProtobufSchemaTest.testEnumReserved: the canonical string is the text itself.
    text = ('\nimport "google/protobuf/descriptor.proto";\n\nmessage FooOptions {\n'
            '  optional string name = 1;\n  optional FooParameterType type = 2;\n}\n'
            'enum FooParameterType {\n  reserved 20, 100 to max;\n  reserved 10;\n'
            '  reserved 1 to 3;\n  reserved "BAD", "OLD";\n  NUMBER = 1;\n  STRING = 2;\n}\n')
    schema = parse(text)
    assert schema.canonical() == text
    assert schema.normalized().canonical() == (
        '\nimport "google/protobuf/descriptor.proto";\n\nmessage FooOptions {\n'
        '  optional string name = 1;\n  optional .FooParameterType type = 2;\n}\n'
        'enum FooParameterType {\n  reserved 1 to 3;\n  reserved 10;\n  reserved 20;\n'
        '  reserved 100 to max;\n  reserved "BAD";\n  reserved "OLD";\n  NUMBER = 1;\n'
        '  STRING = 2;\n}\n')


def test_options_escapes_and_custom_option_paths():
    text = '''syntax = "proto2";
import "google/protobuf/descriptor.proto";
extend google.protobuf.FieldOptions { optional Rule rule = 50000; }
message Rule { optional int32 min = 1; optional int32 max = 2; }
message M {
  option (my) = { a: 1 b: "x\\ty" };
  optional string s = 1 [default = "a\\"b", (rule).min = 1, (rule).max = 5];
}
'''
    canonical = parse(text).canonical()
    assert '  option (my) = {\n    a: 1,\n    b: "x\\ty"\n  };\n' in canonical
    assert ('  optional string s = 1 [\n    (rule).min = 1,\n    (rule).max = 5,\n'
            '    default = "a\\"b"\n  ];\n') in canonical
    normalized = parse(text).normalized().canonical()
    # One non-repeated custom option set twice is merged into one map; options sort by name.
    assert ('  optional string s = 1 [\n    default = "a\\"b",\n    (rule) = {\n      max: 5,\n'
            '      min: 1\n    }\n  ];\n') in normalized


def test_services_and_rpcs():
    text = ('syntax = "proto3";\npackage p;\nmessage A {}\nmessage B {}\n'
            'service S { rpc Get (A) returns (stream B); rpc Put (stream A) returns (B) '
            '{ option deprecated = true; } }\n')
    s = parse(text)
    assert s.canonical().endswith(
        "service S {\n  rpc Get (A) returns (stream B);\n"
        "  rpc Put (stream A) returns (B) {\n    option deprecated = true;\n  };\n}\n")
    assert "rpc Get (.p.A) returns (stream .p.B);" in s.normalized().canonical()


@pytest.mark.parametrize("text, words", [
    ('syntax = "proto3";\nmessage M { string s = 1 }', "expected ';'"),
    ('syntax = "proto3";\nmessage M { required string s = 1; }', "'required' label forbidden"),
    ('syntax = "proto2";\nmessage M { string s = 1; }', "unexpected label: string"),
    ('syntax = "proto4";', "unexpected syntax"),
    ('message M { optional Missing m = 1; }', "Could not resolve type: Missing"),
    ('syntax = "proto3";\nimport "dep.proto";\nmessage M { dep.D d = 1; }', "dep.D"),
    ("not a schema at all", "Could not parse Protobuf"),
])
def test_invalid_schemas_are_refused_with_one_line(text, words):
    with pytest.raises(InvalidSchema) as e:
        parse(text)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_references_resolve_by_import_path():
    dep = 'syntax = "proto3";\npackage dep;\nmessage D { int32 id = 1; }\n'
    main = 'syntax = "proto3";\nimport "dep.proto";\nmessage M { dep.D d = 1; }\n'
    assert "  .dep.D d = 1;\n" in parse(main, {"dep.proto": dep}).normalized().canonical()


# --- compatibility -----------------------------------------------------------------------------

V1 = '''syntax = "proto3";
package p;
message M {
  string a = 1;
  int32 b = 2;
  oneof choice { string c = 3; int64 d = 4; }
  Inner inner = 5;
  message Inner { string x = 1; }
}
enum E { E0 = 0; E1 = 1; }
'''


def edit(old, new, text=V1):
    assert old in text
    return text.replace(old, new)


def test_identical_is_compatible():
    assert errors(V1, V1) == []


def test_field_added_and_removed_are_compatible_both_ways():
    v2 = edit("  int32 b = 2;\n", "  int32 b = 2;\n  double z = 9;\n")
    assert errors(v2, V1) == [] and errors(V1, v2) == []


def test_field_renamed_is_compatible():
    assert errors(edit("string a = 1", "string renamed = 1"), V1) == []


def test_scalar_kind_groups():
    # int32 -> int64, uint32, bool: same wire kind (varint)
    for t in ("int64", "uint32", "uint64", "bool"):
        assert errors(edit("int32 b = 2", f"{t} b = 2"), V1) == []
    # string <-> bytes
    assert errors(edit("string a = 1", "bytes a = 1"), V1) == []
    for t in ("sint32", "fixed32", "double", "float"):
        assert kinds(errors(edit("int32 b = 2", f"{t} b = 2"), V1)) == ["FIELD_SCALAR_KIND_CHANGED"]
    # an enum is a varint number
    assert errors(edit("int32 b = 2", "E b = 2"), V1) == []


def test_field_kind_changed():
    assert kinds(errors(edit("int32 b = 2", "Inner b = 2"), V1)) == ["FIELD_KIND_CHANGED"]
    assert kinds(errors(edit("int32 b = 2", "map<string, int32> b = 2"), V1)) \
        == ["FIELD_KIND_CHANGED"]


def test_named_type_changed():
    v2 = edit("  Inner inner = 5;\n", "  Other inner = 5;\n") + "message Other { string x = 1; }\n"
    assert kinds(errors(v2, V1)) == ["FIELD_NAMED_TYPE_CHANGED"]


def test_message_removed_is_incompatible_added_is_not():
    v2 = edit("enum E", "message Extra { int32 q = 1; }\nenum E")
    assert errors(v2, V1) == []
    assert kinds(errors(V1, v2)) == ["MESSAGE_REMOVED"]


def test_enum_constants_change_compatibly():
    assert errors(edit("E1 = 1;", "E1 = 1; E2 = 2;"), V1) == []
    assert errors(edit("E1 = 1;", "RENAMED = 1;"), V1) == []


def test_oneof_rules():
    # A field moved out of its oneof: compatible; removed from a oneof: not.
    moved = edit("  oneof choice { string c = 3; int64 d = 4; }\n",
                 "  string c = 3;\n  oneof choice { int64 d = 4; }\n")
    assert errors(moved, V1) == []
    removed = edit("  oneof choice { string c = 3; int64 d = 4; }\n",
                   "  oneof choice { int64 d = 4; }\n")
    assert kinds(errors(removed, V1)) == ["ONEOF_FIELD_REMOVED"]
    # Two top-level fields moved into a new oneof.
    into = edit("  string a = 1;\n  int32 b = 2;\n", "  oneof ab { string a = 1; int32 b = 2; }\n")
    assert kinds(errors(into, V1)) == ["MULTIPLE_FIELDS_MOVED_TO_ONEOF"]
    # One top-level field moved into the existing oneof.
    existing = edit("  int32 b = 2;\n  oneof choice { string c = 3; int64 d = 4; }\n",
                    "  oneof choice { string c = 3; int64 d = 4; int32 b = 2; }\n")
    assert kinds(errors(existing, V1)) == ["FIELD_MOVED_TO_EXISTING_ONEOF"]


def test_required_fields_proto2():
    p1 = 'syntax = "proto2";\nmessage M { optional string a = 1; }\n'
    p2 = 'syntax = "proto2";\nmessage M { optional string a = 1; required int32 b = 2; }\n'
    assert kinds(errors(p2, p1)) == ["REQUIRED_FIELD_ADDED"]
    assert kinds(errors(p1, p2)) == ["REQUIRED_FIELD_REMOVED"]
    # Label changes of numbers break packed/unpacked readers; strings only change cardinality.
    n1 = 'syntax = "proto2";\nmessage M { optional int32 a = 1; optional string s = 2; }\n'
    n2 = 'syntax = "proto2";\nmessage M { repeated int32 a = 1; repeated string s = 2; }\n'
    assert kinds(errors(n2, n1)) == ["FIELD_NUMERIC_LABEL_CHANGED"]


def test_package_changed():
    assert kinds(errors(edit("package p;", "package q;"), V1)) == ["PACKAGE_CHANGED"]


def test_changes_inside_a_referenced_message_are_found():
    dep1 = 'syntax = "proto3";\npackage d;\nmessage D { int32 id = 1; }\n'
    dep2 = 'syntax = "proto3";\npackage d;\nmessage D { string id = 1; }\n'
    main = 'syntax = "proto3";\nimport "d.proto";\nmessage M { d.D d = 1; }\n'
    messages = errors(main, main, {"d.proto": dep2}, {"d.proto": dep1})
    assert kinds(messages) == ["FIELD_NAMED_TYPE_CHANGED", "FIELD_SCALAR_KIND_CHANGED"]
    assert "#/D/1" in messages[1] or "#/D/1" in messages[0]
    assert errors(main, main, {"d.proto": dep1}, {"d.proto": dep1}) == []


def test_message_wording_is_confluents():
    [message] = errors(V1, edit("enum E", "message Extra { int32 q = 1; }\nenum E"))
    assert message == ('{errorType:"MESSAGE_REMOVED", description:"The %s schema is missing a '
                       "MESSAGE type at path '#/Extra' in the %s schema\"}")


# --- what confluent-kafka's ProtobufSerializer registers ----------------------------------------


def _user_class():
    from google.protobuf import descriptor_pb2, descriptor_pool, timestamp_pb2
    from google.protobuf.message_factory import GetMessageClass

    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(
        name="acme/user.proto", package="acme", syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"])
    fdp.options.java_package = "com.acme"
    m = fdp.message_type.add(name="User")
    # json_name set as protoc sets it in the descriptors it embeds in generated code
    m.field.add(name="name", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL,
                json_name="name")
    m.field.add(name="tags", number=3, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                type_name=".acme.User.TagsEntry", json_name="tags")
    m.field.add(name="at", number=4, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                type_name=".google.protobuf.Timestamp", json_name="at")
    m.oneof_decl.add(name="contact")
    m.field.add(name="email", number=5, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL,
                oneof_index=0, json_name="email")
    entry = m.nested_type.add(name="TagsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL,
                    json_name="key")
    entry.field.add(name="value", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL,
                    json_name="value")
    kind = m.enum_type.add(name="Kind")
    kind.value.add(name="KIND_UNSPECIFIED", number=0)
    m.field.add(name="kind", number=6, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL,
                type_name=".acme.User.Kind", json_name="kind")
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(fdp)
    return GetMessageClass(pool.FindMessageTypeByName("acme.User"))


def test_the_protobuf_serializer_registration_parses():
    from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
        MockSchemaRegistryClient,
    )
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    user = _user_class()
    client = MockSchemaRegistryClient({"url": "mock://srformats"})
    serializer = ProtobufSerializer(user, client, {"use.deprecated.format": False})
    serializer(user(name="ada"), SerializationContext("users", MessageField.VALUE))
    registered = client.get_latest_version("users-value").schema
    assert registered.schema_type == "PROTOBUF"
    assert registered.references == []  # the well-known import is not registered
    base64.b64decode(registered.schema_str, validate=True)  # the client sends a descriptor
    schema = FORMAT.parse(registered.schema_str, {})
    assert schema.canonical() == '''syntax = "proto3";
package acme;

import "google/protobuf/timestamp.proto";

option java_package = "com.acme";

message User {
  string name = 1 [json_name = "name"];
  repeated .acme.User.TagsEntry tags = 3 [json_name = "tags"];
  .google.protobuf.Timestamp at = 4 [json_name = "at"];
  .acme.User.Kind kind = 6 [json_name = "kind"];

  oneof contact {
    string email = 5 [json_name = "email"];
  }

  message TagsEntry {
    option map_entry = true;
<BLANK>
    string key = 1 [json_name = "key"];
    string value = 2 [json_name = "value"];
  }
  enum Kind {
    KIND_UNSPECIFIED = 0;
  }
}
'''.replace("<BLANK>", "  ")  # Confluent indents the empty line too
    # The registry answers text; that text parses to the same canonical string.
    assert parse(schema.canonical()).canonical() == schema.canonical()
    normalized = schema.normalized().canonical()
    assert "  map<string, string> tags = 3 [json_name = \"tags\"];\n" in normalized
    assert "TagsEntry" not in normalized
    # The descriptor and the text of the same file are compatible both ways.
    text = parse(schema.canonical())
    assert text.compatibility_errors(schema) == [] and schema.compatibility_errors(text) == []


def test_the_protobuf_serializer_registers_references_that_resolve():
    from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
        MockSchemaRegistryClient,
    )
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf import descriptor_pb2, descriptor_pool
    from google.protobuf.message_factory import GetMessageClass

    F = descriptor_pb2.FieldDescriptorProto
    dep = descriptor_pb2.FileDescriptorProto(name="acme/address.proto", package="acme.geo",
                                             syntax="proto3")
    address = dep.message_type.add(name="Address")
    address.field.add(name="city", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    main = descriptor_pb2.FileDescriptorProto(name="acme/order.proto", package="acme",
                                              syntax="proto3", dependency=["acme/address.proto"])
    order = main.message_type.add(name="Order")
    order.field.add(name="to", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".acme.geo.Address")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(dep)
    pool.Add(main)
    cls = GetMessageClass(pool.FindMessageTypeByName("acme.Order"))
    client = MockSchemaRegistryClient({"url": "mock://srformats-refs"})
    ProtobufSerializer(cls, client, {"use.deprecated.format": False})(
        cls(), SerializationContext("orders", MessageField.VALUE))
    registered = client.get_latest_version("orders-value").schema
    [ref] = registered.references
    assert ref.name == "acme/address.proto"
    dep_text = client.get_version(ref.subject, ref.version).schema.schema_str
    references = {ref.name: dep_text}
    schema = FORMAT.parse(registered.schema_str, references)
    assert "  .acme.geo.Address to = 1;\n" in schema.canonical()
    assert FORMAT.parse(dep_text, {}).canonical().startswith('syntax = "proto3";\npackage acme.geo;')
    # Without the reference the type does not resolve: Confluent answers 42201.
    with pytest.raises(InvalidSchema, match="acme.geo.Address"):
        FORMAT.parse(registered.schema_str, {})


_TOKENS = ['syntax = "proto3";', 'syntax = "proto2";', "message", "M", "N", "{", "}", ";", "=",
           "1", "2", "string", "int32", "repeated", "optional", "oneof", "enum", "map<string, M>",
           "option", "(x).y", "[", "]", "reserved", "to", "max", '"a"', "package p;", "import",
           '"m.proto"', "extend", "service", "rpc", "(", ")", "returns", "stream", ".", ",", "//c\n",
           "/*", "*/", "-1", "0x10", "group", "extensions", "{a: 1}", "N.M", ".p.M"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=200),
                 st.lists(st.sampled_from(_TOKENS), max_size=60).map(" ".join)))
def test_any_text_parses_or_is_refused_cleanly(text):
    try:
        schema = FORMAT.parse(text, {})
    except InvalidSchema as e:
        assert "\n" not in str(e)
        return
    assert parse(schema.canonical()).canonical() == schema.canonical()
    assert schema.compatibility_errors(schema) == []


def test_deep_nesting_is_refused_cleanly():
    with pytest.raises(InvalidSchema):
        FORMAT.parse("message M {" * 3000 + "}" * 3000, {})


def test_confluent_meta_options_normalize_as_confluents():
    # confluent/meta.proto is always in scope (Confluent's KNOWN_DEPENDENCIES): its tags merge.
    text = ('syntax = "proto3";\nimport "confluent/meta.proto";\nmessage R {\n'
            '  int32 f = 1 [(confluent.field_meta).tags = "a", (confluent.field_meta).tags = "b"];\n'
            '  confluent.type.Decimal d = 2;\n}\n')
    normalized = parse(text).normalized().canonical()
    assert ('  int32 f = 1 [(confluent.field_meta) = {\n    tags: [\n      "a",\n      "b"\n'
            '    ]\n  }];\n') in normalized
    assert "  .confluent.type.Decimal d = 2;\n" in normalized


def test_extension_keys_inside_option_maps_get_full_names():
    text = ('syntax = "proto2";\npackage p;\nimport "google/protobuf/descriptor.proto";\n'
            'message Opt { extensions 100 to 200; }\n'
            'extend Opt { optional int32 inner = 100; }\n'
            'extend google.protobuf.MessageOptions { optional Opt opt = 50000; }\n'
            'message M { option (opt) = { [inner]: 5 }; optional int32 a = 1; }\n')
    assert "  option (p.opt) = {\n    [p.inner]: 5\n  };\n" in parse(text).normalized().canonical()


# Cases restated from Confluent's protobuf-provider diff-schema-examples.json (writer, reader,
# every difference as "TYPE path", compatible); the last two follow SchemaDiff.java's rules for
# added and reordered top-level messages.
_P3 = 'syntax = "proto3";\n'
CONFLUENT_CASES = [
    (_P3 + "message T { string s = 1; }", _P3 + "message T { string s = 2; }",
     ["FIELD_REMOVED #/T/1", "FIELD_ADDED #/T/2"], True),
    (_P3 + "message W { int32 i = 1; message T { string s = 1; } }",
     _P3 + "message W { int32 i = 1; message T { string s = 1; string t = 2; } }",
     ["FIELD_ADDED #/W/T/2"], True),
    (_P3 + "message T { int32 i = 2; }",
     _P3 + "message T { Status i = 2; }\nenum Status { ACTIVE = 0; INACTIVE = 1; }",
     ["ENUM_ADDED #/Status"], True),
    (_P3 + "message T { Status i = 2; }\nenum Status { ACTIVE = 0; INACTIVE = 1; }",
     _P3 + "message T { Status i = 2; }\nenum Status { ACTIVE = 0; NOT_ACTIVE = 1; }",
     ["ENUM_CONST_CHANGED #/Status/1"], True),
    (_P3 + "message T { string a = 1; string b = 2; }",
     _P3 + "message T { string a = 1; oneof o { string b = 2; int32 c = 3; } }",
     ["ONEOF_ADDED #/T/o", "ONEOF_FIELD_ADDED #/T/o/3"], True),
    (_P3 + "message T { oneof o { string a = 1; string b = 2; int32 c = 3; } }",
     _P3 + "message T { oneof o { string a = 1; string b = 2; } }",
     ["ONEOF_FIELD_REMOVED #/T/o/3"], False),
    (_P3 + "message T { string a = 1; oneof o { string b = 2; string c = 3; } }",
     _P3 + "message T { oneof o { string a = 1; string b = 2; string c = 3; } }",
     ["FIELD_MOVED_TO_EXISTING_ONEOF #/T/o"], False),
    (_P3 + "message T { string a = 1; }", _P3 + "message T { string a = 1; }\nmessage U { }",
     ["MESSAGE_ADDED #/U"], True),
    (_P3 + "message A { }\nmessage B { }", _P3 + "message B { }\nmessage A { }",
     ["MESSAGE_MOVED #/A", "MESSAGE_MOVED #/B"], True),
]


@pytest.mark.parametrize("writer, reader, changes, compatible", CONFLUENT_CASES)
def test_confluents_documented_differences(writer, reader, changes, compatible):
    from minibroker.registry.formats import protobuf_diff as diff

    w, r = parse(writer), parse(reader)
    ctx = diff.Context(w.types(), r.types())
    diff.compare_files(ctx, w.element, r.element)
    assert sorted(f"{kind} {path}" for kind, path in ctx.diffs) == sorted(changes)
    assert (r.compatibility_errors(w) == []) is compatible
