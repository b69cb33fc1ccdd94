"""The ``_schemas`` topic's records in Confluent's key/value JSON, so that a Confluent registry or
Karapace pointed at the same broker reads the same state.

Keys and values are Jackson-serialised in Confluent's ``storage/*Key.java``/``*Value.java``:
``@JsonInclude(NON_EMPTY)`` (nulls and empty lists left out) and ``@JsonPropertyOrder`` for
the keys, e.g. ``{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}``. Compact JSON (no
spaces), as Jackson writes it: compaction keys on the bytes, so one key must always be the same
bytes.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

SCHEMA, CONFIG, MODE, NOOP = "SCHEMA", "CONFIG", "MODE", "NOOP"
DELETE_SUBJECT, CLEAR_SUBJECT = "DELETE_SUBJECT", "CLEAR_SUBJECT"


def _dump(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def schema_key(subject: str, version: int) -> bytes:
    # SchemaKey.java: magic 1, order keytype, subject, version, magic
    return _dump({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def subject_key(keytype: str, subject: str | None) -> bytes:
    """CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT keys (magic 0); the global CONFIG and MODE
    have no subject (null is left out by NON_EMPTY)."""
    key: dict[str, Any] = {"keytype": keytype}
    if subject is not None:
        key["subject"] = subject
    key["magic"] = 0
    return _dump(key)


def noop_key() -> bytes:
    return _dump({"keytype": NOOP, "magic": 0})


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass
class SchemaValue:
    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()
    deleted: bool = False
    # fields Confluent writes that this registry does not interpret (metadata, ruleSet, md5):
    # kept so that rewriting a version (soft delete) does not drop them
    extra: dict[str, Any] = field(default_factory=dict)
    # the timestamp of the _schemas record it came in (not in the value: Confluent's reader sets
    # it from the record, KafkaStoreMessageHandler, and answers it as ``ts``)
    ts: int | None = field(default=None, compare=False)

    def encode(self) -> bytes:
        # SchemaValue.java's constructor order: subject, version, id, md5, schemaType,
        # references, metadata, ruleSet, schema, deleted
        out: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id}
        if "md5" in self.extra:
            out["md5"] = self.extra["md5"]
        out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [r.as_json() for r in self.references]
        for name in ("metadata", "ruleSet"):
            if name in self.extra:
                out[name] = self.extra[name]
        out["schema"] = self.schema
        out["deleted"] = self.deleted
        return _dump(out)


class BadRecord(ValueError):
    """A ``_schemas`` record this registry cannot read (replay skips it and says why)."""


def decode_key(raw: bytes | None) -> dict[str, Any]:
    if raw is None:
        raise BadRecord("a record without a key")
    try:
        key = json.loads(raw)
    except ValueError as e:
        raise BadRecord(f"key is not JSON: {e}") from None
    if not isinstance(key, dict) or not isinstance(key.get("keytype"), str):
        raise BadRecord("key has no keytype")
    return key


def decode_json(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError as e:
        raise BadRecord(f"value is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise BadRecord("value is not a JSON object")
    return value


def decode_schema_value(raw: bytes) -> SchemaValue:
    v = decode_json(raw)
    try:
        refs = tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                     for r in v.get("references") or ())
        extra = {k: v[k] for k in ("md5", "metadata", "ruleSet") if v.get(k) is not None}
        return SchemaValue(str(v["subject"]), int(v["version"]), int(v["id"]),
                           str(v.get("schemaType") or "AVRO"), str(v["schema"]), refs,
                           bool(v.get("deleted", False)), extra)
    except (KeyError, TypeError, ValueError) as e:
        raise BadRecord(f"schema value lacks {e}") from None


def config_value(subject: str | None, level: str | None, normalize: bool | None) -> bytes:
    # ConfigValue.java: subject first, then the fields set (NON_EMPTY leaves the rest out)
    out: dict[str, Any] = {}
    if subject is not None:
        out["subject"] = subject
    if normalize is not None:
        out["normalize"] = normalize
    if level is not None:
        out["compatibilityLevel"] = level
    return _dump(out)


def mode_value(subject: str | None, mode: str) -> bytes:
    out: dict[str, Any] = {}
    if subject is not None:
        out["subject"] = subject
    out["mode"] = mode
    return _dump(out)


def delete_subject_value(subject: str, version: int) -> bytes:
    return _dump({"subject": subject, "version": version})


def clear_subject_value(subject: str | None) -> bytes:
    return _dump({"subject": subject} if subject is not None else {})
