"""The registry's state machine over an in-memory _schemas: Confluent's rules for register, lookup,
deletes, configs and modes, and that replaying the records written rebuilds the same state."""
from __future__ import annotations

import json

import pytest

from minibroker.registry import records as r
from minibroker.registry.formats.base import UnknownSchemaType
from minibroker.registry.state import Registry, RegistryError

from .fake_format import MemoryLog, ToyFormat


def _formats(fmt):
    def lookup(t):
        if t not in (None, "AVRO"):
            raise UnknownSchemaType(t)
        return fmt
    return lookup


def body(fields, **extra):
    return {"schema": json.dumps({"fields": fields}), **extra}


def new(log=None):
    reg = Registry(log or MemoryLog(), formats=_formats(ToyFormat()))
    assert reg.replay()
    return reg


def code(call):
    with pytest.raises(RegistryError) as e:
        call()
    return e.value.status, e.value.code


def test_register_ids_versions_and_lookup():
    reg = new()
    assert reg.register("a-value", body({"x": False})) == (1, 1)
    assert reg.register("a-value", body({"x": False})) == (1, 1)  # same schema, same answer
    assert reg.register("b-value", body({"x": False})) == (1, 1)  # one id across subjects
    assert reg.register("a-value", body({"x": False, "y": True})) == (2, 2)
    assert reg.lookup("a-value", body({"x": False})).version == 1
    assert code(lambda: reg.lookup("a-value", body({"z": True}))) == (404, 40403)
    assert code(lambda: reg.lookup("nope", body({"z": True}))) == (404, 40401)
    assert reg.subjects() == ["a-value", "b-value"]
    assert reg.version_list("a-value") == [1, 2]
    assert reg.get_version("a-value", -1).id == 2
    assert sorted(reg.id_versions(1)) == [("a-value", 1), ("b-value", 1)]
    assert code(lambda: reg.get_version("a-value", 7)) == (404, 40402)
    assert code(lambda: reg.schema_by_id(99)) == (404, 40403)


def test_incompatible_is_409_and_none_allows_it():
    reg = new()
    reg.register("s", body({"x": False}))
    with pytest.raises(RegistryError) as e:
        reg.register("s", body({"x": False, "y": False}))
    assert (e.value.status, e.value.code) == (409, 409)
    assert 'incompatible with an earlier schema for subject "s"' in e.value.message
    assert "READER_FIELD_MISSING_DEFAULT_VALUE y" in e.value.message
    assert reg.set_config("s", {"compatibility": "none"}) == {"compatibility": "NONE"}
    assert reg.register("s", body({"x": False, "y": False})) == (2, 2)
    assert reg.get_config("s") == {"compatibilityLevel": "NONE"}
    assert reg.get_config(None) == {"compatibilityLevel": "BACKWARD"}
    assert code(lambda: reg.get_config("other")) == (404, 40408)
    assert reg.get_config("other", default_to_global=True) == {"compatibilityLevel": "BACKWARD"}
    assert code(lambda: reg.set_config(None, {"compatibility": "SIDEWAYS"})) == (422, 42203)
    assert code(lambda: reg.delete_config("other")) == (404, 40401)
    assert code(lambda: reg.delete_mode("other")) == (404, 40401)
    assert reg.delete_config("s") == {"compatibilityLevel": "NONE"}
    assert reg.delete_config(None) == {"compatibilityLevel": "BACKWARD"}


def test_transitive_checks_every_version_and_forward_is_the_other_way():
    reg = new()
    reg.set_config(None, {"compatibility": "NONE"})
    reg.register("s", body({"a": False}))
    reg.register("s", body({"b": False}))
    reg.set_config("s", {"compatibility": "BACKWARD"})
    assert reg.check_compatibility("s", "latest", body({"b": False, "c": True})) == []
    reg.set_config("s", {"compatibility": "BACKWARD_TRANSITIVE"})
    errors = reg.check_compatibility("s", None, body({"b": False}))
    assert "READER_FIELD_MISSING_DEFAULT_VALUE b" in errors and "{oldSchemaVersion: 1}" in errors
    reg.set_config("s", {"compatibility": "FORWARD"})
    # old (b) reads new (c): b is missing
    assert reg.check_compatibility("s", "2", body({"c": False}))
    # CompatibilityResource: no such subject with "latest" is compatible, a missing version is
    # 40402, an invalid schema one message with verbose
    assert reg.check_compatibility("nope", "latest", body({"c": False})) == []
    assert code(lambda: reg.check_compatibility("nope", "3", body({"c": False}))) == (404, 40402)
    assert len(reg.check_compatibility("s", "latest", {"schema": "{"}, verbose=True)) == 1
    assert code(lambda: reg.check_compatibility("s", "latest", {"schema": "{"})) == (422, 42201)


def test_soft_then_permanent_delete_order_rules():
    reg = new()
    reg.register("s", body({"a": False}))
    reg.register("s", body({"a": False, "b": True}))
    assert code(lambda: reg.delete_version("s", "1", permanent=True)) == (404, 40407)
    assert reg.delete_version("s", "1", permanent=False) == 1
    assert code(lambda: reg.delete_version("s", "1", permanent=False)) == (404, 40406)
    assert reg.version_list("s") == [2]
    assert reg.version_list("s", deleted=True) == [1, 2]
    assert code(lambda: reg.get_version("s", 1)) == (404, 40402)
    assert reg.get_version("s", 1, deleted=True).deleted
    assert code(lambda: reg.delete_subject("s", permanent=True)) == (404, 40405)
    assert reg.delete_subject("s", permanent=False) == [2]
    assert code(lambda: reg.delete_subject("s", permanent=False)) == (404, 40404)
    assert reg.subjects() == [] and reg.subjects(deleted=True) == ["s"]
    assert code(lambda: reg.version_list("s")) == (404, 40401)
    # registering again continues the numbering
    assert reg.register("s", body({"z": False})) == (3, 3)
    reg.delete_version("s", "3", permanent=False)
    assert reg.delete_subject("s", permanent=True) == [1, 2, 3]
    assert reg.subjects(deleted=True) == []
    assert code(lambda: reg.schema_by_id(1)) == (404, 40403)


def test_references_resolved_and_protected():
    fmt = ToyFormat()
    reg = Registry(MemoryLog(), formats=_formats(fmt))
    reg.replay()
    reg.register("base", body({"id": False}))
    refs = [{"name": "Base", "subject": "base", "version": 1}]
    sid, _ = reg.register("top", body({"b": False}, references=refs))
    assert fmt.parsed[-1][1] == {"Base": '{"fields":{"id":false}}'}  # its canonical text
    assert reg.referenced_by("base", 1) == [sid]
    assert code(lambda: reg.delete_version("base", "1", permanent=False)) == (422, 42206)
    assert code(lambda: reg.delete_subject("base", permanent=False)) == (422, 42206)
    missing = [{"name": "X", "subject": "nope", "version": 1}]
    assert code(lambda: reg.register("t2", body({"b": False}, references=missing))) == (422, 42201)
    # the same text with references is another schema than without
    assert reg.register("other", body({"b": False}))[0] != sid


def test_modes_readonly_and_import():
    reg = new()
    reg.register("s", body({"a": False}))
    assert code(lambda: reg.set_mode(None, {"mode": "IMPORT"})) == (422, 42205)
    assert code(lambda: reg.set_mode(None, {"mode": "SIDEWAYS"})) == (422, 42204)
    reg.set_mode("s", {"mode": "READONLY"})
    assert code(lambda: reg.register("s", body({"a": False, "b": True}))) == (422, 42205)
    assert reg.get_mode("s") == {"mode": "READONLY"}
    assert code(lambda: reg.get_mode("t")) == (404, 40409)
    assert reg.get_mode("t", default_to_global=True) == {"mode": "READWRITE"}
    reg.delete_mode("s")
    assert code(lambda: reg.register("t", body({"a": True}, id=50))) == (422, 42205)
    reg.set_mode("imp", {"mode": "IMPORT"})
    assert reg.register("imp", body({"q": False}, id=50, version=7)) == (50, 7)
    assert reg.register("imp", body({"r": False}, id=51, version=3)) == (51, 3)  # no compat check
    assert code(lambda: reg.register("imp", body({"w": False}, id=50, version=9))) == (422, 42205)
    assert code(lambda: reg.register("imp", body({"w": False}))) == (422, 42205)  # IMPORT needs ids
    reg.delete_mode("imp")
    assert reg.register("fresh", body({"n": False}))[0] == 52  # ids go on past imported ones


def test_errors_for_bad_bodies_and_versions():
    reg = new()
    assert code(lambda: reg.register("s", {"schema": "{nope"})) == (422, 42201)
    assert code(lambda: reg.register("s", {})) == (422, 42201)
    assert code(lambda: reg.register("s", body({}, schemaType="THRIFT"))) == (422, 42201)
    assert code(lambda: reg.delete_version("s", "0", False)) == (422, 42202)
    assert code(lambda: reg.delete_version("s", "x", False)) == (422, 42202)


def test_normalize_registers_the_normal_form():
    reg = new()
    assert reg.register("s", body({"A": False}), normalize=True) == (1, 1)
    assert reg.lookup("s", body({"a": False})).version == 1
    assert reg.lookup("s", body({"A": False}), normalize=True).version == 1


def test_replay_rebuilds_the_same_state_and_records_are_confluents():
    log = MemoryLog()
    reg = new(log)
    reg.register("s", body({"a": False}))
    reg.register("s", body({"a": False, "b": True}))
    reg.register("u", body({"a": False}))
    reg.delete_version("s", "1", permanent=False)
    reg.delete_subject("u", permanent=False)
    reg.set_config("s", {"compatibility": "FULL"})
    reg.set_mode("s", {"mode": "READONLY"})
    again = new(log)
    assert again.subjects(deleted=True) == reg.subjects(deleted=True) == ["s", "u"]
    assert again.subjects() == ["s"]
    assert again.version_list("s", deleted=True) == [1, 2] and again.version_list("s") == [2]
    assert again.level("s") == "FULL" and again.mode("s") == "READONLY"
    assert again.max_id == reg.max_id == 2
    keys = [json.loads(k) for k, _ in log.records]
    assert keys[0] == {"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1}
    assert log.records[0][0] == b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}'
    value = json.loads(log.records[0][1])
    assert value == {"subject": "s", "version": 1, "id": 1, "schemaType": "AVRO",
                     "schema": '{"fields":{"a":false}}', "deleted": False}
    assert {"keytype": "DELETE_SUBJECT", "subject": "u", "magic": 0} in keys
    assert {"keytype": "CONFIG", "subject": "s", "magic": 0} in keys
    assert {"keytype": "MODE", "subject": "s", "magic": 0} in keys


def test_replay_skips_what_it_cannot_read_and_honours_clear_subject():
    log = MemoryLog()
    reg = new(log)
    reg.register("s", body({"a": False}))
    reg.register("t", body({"a": False}))
    reg.delete_subject("s", permanent=False)
    log.records.append((b"not json", b"{}"))
    log.records.append((r.noop_key(), None))
    log.records.append((r.subject_key(r.CLEAR_SUBJECT, "s"), r.clear_subject_value("s")))
    again = new(log)
    assert again.skipped == 1
    assert again.subjects(deleted=True) == ["t"]  # only soft-deleted versions are cleared


def test_replay_in_steps():
    log = MemoryLog()
    reg = new(log)
    for i in range(5):
        reg.set_config(None, {"compatibility": "NONE"})
        reg.register("s", body({f"f{i}": False}))
    again = Registry(log, formats=_formats(ToyFormat()))
    steps = 0
    while not again.replay(limit=3):
        steps += 1
        assert steps < 10
    assert steps >= 2 and again.loaded and again.version_list("s") == [1, 2, 3, 4, 5]


def test_lookup_imports_the_formats_modules():
    from minibroker.registry.formats.lookup import lookup
    assert lookup(None).name == "AVRO" and lookup("AVRO").name == "AVRO"
    assert lookup("JSON").name == "JSON"
    with pytest.raises(UnknownSchemaType):
        lookup("THRIFT")


def test_a_schema_imported_under_two_ids_keeps_an_id_while_either_is_kept():
    """IMPORT can give one schema two ids; forgetting one of them (its last version deleted
    for good) must not make the schema look new while the other id still holds it."""
    reg = new()
    for subject, sid in (("a", 5), ("b", 7)):
        reg.set_mode(subject, {"mode": "IMPORT"})
        assert reg.register(subject, body({"s": False}, id=sid, version=1)) == (sid, 1)
        reg.delete_mode(subject)
    assert reg.register("c", body({"s": False})) == (7, 1)
    for subject in ("a", "b", "c"):  # 5 goes, then 7; 7 is still in use until c goes too
        reg.delete_subject(subject, permanent=False)
        reg.delete_subject(subject, permanent=True)
        if subject == "a":
            assert reg.register("d", body({"s": False})) == (7, 1)
            reg.delete_subject("d", permanent=False)
            reg.delete_subject("d", permanent=True)
    assert reg.register("e", body({"s": False})) == (8, 1)  # no id holds it any more


def test_a_twin_id_takes_the_index_when_the_indexed_one_goes():
    reg = new()
    for subject, sid in (("a", 5), ("b", 7)):
        reg.set_mode(subject, {"mode": "IMPORT"})
        reg.register(subject, body({"s": False}, id=sid, version=1))
        reg.delete_mode(subject)
    reg.delete_subject("b", permanent=False)
    reg.delete_subject("b", permanent=True)  # 7, the indexed id, goes; 5 holds the schema
    assert reg.register("c", body({"s": False})) == (5, 1)


def test_import_mode_clears_soft_deleted_versions_first():
    log = MemoryLog()
    reg = new(log)
    reg.register("s", body({"a": False}))
    reg.delete_subject("s", permanent=False)
    assert reg.set_mode("s", {"mode": "import"}) == {"mode": "IMPORT"}
    assert reg.subjects(deleted=True) == []
    assert json.loads(log.records[-2][0]) == {"keytype": "CLEAR_SUBJECT", "subject": "s", "magic": 0}
    assert reg.register("s", body({"z": False}, id=1, version=1)) == (1, 1)
    assert new(log).get_version("s", 1).schema == '{"fields":{"z":false}}'


def test_parsed_texts_are_reused_until_a_version_goes_for_good():
    fmt = ToyFormat()
    reg = Registry(MemoryLog(), formats=_formats(fmt))
    reg.replay()
    reg.register("base", body({"old": False}))
    refs = [{"name": "Base", "subject": "base", "version": 1}]
    reg.check_compatibility("top", "latest", body({"b": False}, references=refs))
    parsed = len(fmt.parsed)
    reg.check_compatibility("top", "latest", body({"b": False}, references=refs))
    assert len(fmt.parsed) == parsed  # the same text: parsed once
    reg.delete_subject("base", permanent=False)
    reg.delete_subject("base", permanent=True)
    reg.register("base", body({"new": False}))  # version 1 again, another text
    reg.check_compatibility("top", "latest", body({"b": False}, references=refs))
    assert fmt.parsed[-1][1] == {"Base": '{"fields":{"new":false}}'}


def test_a_stored_schema_that_does_not_parse_is_a_clear_50001():
    log = MemoryLog()
    log.records.append((r.schema_key("s", 1), r.SchemaValue("s", 1, 1, "AVRO", "{broken").encode()))
    reg = new(log)
    with pytest.raises(RegistryError) as e:
        reg.register("s", body({"a": True}))
    assert (e.value.status, e.value.code) == (500, 50001) and "Schema 1 in _schemas" in e.value.message


@pytest.mark.parametrize("level, reader, writer", [("BACKWARD", "new", "old"), ("FORWARD", "old", "new")])
def test_a_real_format_s_differences_name_the_reader_and_the_writer(level, reader, writer):
    # The formats leave Confluent's two %s (reader, writer); the checker names them per direction.
    from minibroker.registry.formats.lookup import lookup
    reg = Registry(MemoryLog(), formats=lookup)
    assert reg.replay()
    reg.set_config(None, {"compatibility": level})
    rec = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    reg.register("s", {"schema": json.dumps(rec)})
    changed = {**rec, "fields": [{"name": "a", "type": "string"}]}
    with pytest.raises(RegistryError) as e:
        reg.register("s", {"schema": json.dumps(changed)})
    assert "%s" not in e.value.message
    assert f"in the {reader} schema does not match with the {writer} schema" in e.value.message


def test_refusals_and_settings_are_logged_with_the_subject():
    from structlog.testing import capture_logs
    reg = new()
    reg.register("s", body({"x": False}))
    with capture_logs() as logs:
        with pytest.raises(RegistryError):
            reg.register("s", body({"x": False, "y": False}))
        reg.set_config("s", {"compatibility": "NONE"})
        reg.set_mode("s", {"mode": "READONLY"})
    events = {e["event"]: e for e in logs}
    assert events["registry.incompatible"]["subject"] == "s"
    assert events["registry.incompatible"]["level"] == "BACKWARD"
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in events["registry.incompatible"]["reason"]
    assert events["registry.config_set"]["compatibility"] == "NONE"
    assert events["registry.mode_set"]["mode"] == "READONLY"
