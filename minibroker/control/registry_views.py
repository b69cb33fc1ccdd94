"""What the console and ``/metrics`` show of the built-in Schema Registry
(``--schema-registry-listener``), read from its state when they ask.

The registry is ``broker.schema_registry`` (a ``registry.http.RegistryServer``, None until it
serves): its ``registry`` is the state machine (registry/state.py) and ``requests`` its answers
by (method, route, status). Both are read on the broker's loop, like views.py.
"""

from __future__ import annotations

import difflib
import json
from typing import Any


def _state(broker: Any) -> Any:
    server = getattr(broker, "schema_registry", None)
    return None if server is None else server.registry


def counts(broker: Any) -> dict[str, int] | None:
    """Subjects, versions (live and soft-deleted) and schema ids; None without a registry."""
    reg = _state(broker)
    if reg is None:
        return None
    live_versions = deleted_versions = live_subjects = deleted_subjects = 0
    for versions in reg.versions.values():
        live = sum(1 for sv in versions.values() if not sv.deleted)
        live_versions += live
        deleted_versions += len(versions) - live
        if live:
            live_subjects += 1
        else:  # a subject's dict goes when its last version does (Registry._tombstone)
            deleted_subjects += 1
    return {"subjects": live_subjects, "deleted_subjects": deleted_subjects,
            "versions": live_versions, "deleted_versions": deleted_versions,
            "schemas": len(reg.schemas)}


def requests(broker: Any) -> dict[tuple[str, str, int], int]:
    server = getattr(broker, "schema_registry", None)
    return {} if server is None else dict(server.requests)


def subjects(broker: Any) -> dict[str, Any]:
    """{"enabled", "counts", "subjects": [{"subject", "deleted", "compatibility", "mode",
    "versions": [{"version", "id", "type", "deleted"}]}]}: soft-deleted versions and subjects
    included (flagged), as ``?deleted=true`` lists them."""
    reg = _state(broker)
    if reg is None:
        return {"enabled": False, "counts": None, "subjects": []}
    rows = []
    for subject in sorted(reg.versions):
        versions = reg.versions[subject]
        rows.append({
            "subject": subject,
            "deleted": all(sv.deleted for sv in versions.values()),
            "compatibility": reg.level(subject),
            "mode": reg.mode(subject),
            "versions": [{"version": v, "id": sv.id, "type": sv.schema_type, "deleted": sv.deleted}
                         for v, sv in sorted(versions.items())],
        })
    return {"enabled": True, "counts": counts(broker), "subjects": rows}


def _pretty(schema_type: str, text: str) -> list[str]:
    """The schema as lines to diff: AVRO and JSON indented (a one-line schema would diff as one
    line), PROTOBUF as written."""
    if schema_type in ("AVRO", "JSON"):
        try:
            text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pass
    return text.splitlines()


def version_diff(broker: Any, subject: str, a: int, b: int) -> dict[str, Any] | None:
    """Two versions of ``subject`` (soft-deleted ones too) and a unified diff from ``a`` to ``b``;
    None when the registry, the subject or a version is missing."""
    reg = _state(broker)
    versions = None if reg is None else reg.versions.get(subject)
    if not versions or a not in versions or b not in versions:
        return None
    old, new = versions[a], versions[b]
    old_lines, new_lines = _pretty(old.schema_type, old.schema), _pretty(new.schema_type, new.schema)
    diff = list(difflib.unified_diff(old_lines, new_lines, f"{subject} v{a} (id {old.id})",
                                     f"{subject} v{b} (id {new.id})", lineterm=""))
    return {"subject": subject,
            "a": {"version": a, "id": old.id, "type": old.schema_type, "schema": "\n".join(old_lines)},
            "b": {"version": b, "id": new.id, "type": new.schema_type, "schema": "\n".join(new_lines)},
            "diff": diff}
