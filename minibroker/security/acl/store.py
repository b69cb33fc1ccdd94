"""The ACLs of a broker, kept in one JSON file in its data directory (``acls.json``),
rewritten whole and atomically at each change: ACL changes are rare and small."""

from __future__ import annotations

import json
from pathlib import Path

from minibroker_storage.atomic_file import write_atomically

from .model import AclBinding, ResourceType

FILE_NAME = "acls.json"
FORMAT_VERSION = 1


class AclStore:
    def __init__(self, data_dir: Path | None) -> None:
        # None: in memory only (unit tests)
        self.path = data_dir / FILE_NAME if data_dir is not None else None
        self._acls: dict[AclBinding, None] = {}  # insertion-ordered set
        # per resource type: literal name -> its ACLs, and the PREFIXED ones
        self._literal: dict[ResourceType, dict[str, list[AclBinding]]] = {}
        self._prefixed: dict[ResourceType, list[AclBinding]] = {}
        if self.path is not None and self.path.exists():
            doc = json.loads(self.path.read_text())
            if doc.get("version") != FORMAT_VERSION:
                raise ValueError(f"{self.path}: unknown format version {doc.get('version')!r}")
            for d in doc["acls"]:
                self._acls[AclBinding.from_json(d)] = None
        self._reindex()

    def __len__(self) -> int:
        return len(self._acls)

    def __contains__(self, acl: AclBinding) -> bool:
        return acl in self._acls

    def all(self) -> list[AclBinding]:
        return list(self._acls)

    def of_type(self, resource_type: ResourceType) -> list[AclBinding]:
        return [*(a for acls in self._literal.get(resource_type, {}).values() for a in acls),
                *self._prefixed.get(resource_type, ())]

    def candidates(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """Every ACL that can apply to the resource: its literal name, ``*``, and the prefixes
        (the decision checks each again; this only narrows the scan)."""
        literal = self._literal.get(resource_type, {})
        out = [*literal.get(name, ()), *(literal.get("*", ()) if name != "*" else ())]
        out += [a for a in self._prefixed.get(resource_type, ()) if name.startswith(a.resource_name)]
        return out

    def replace(self, added: list[AclBinding], removed: set[AclBinding]) -> None:
        """Apply one request's change and persist it before it is answered."""
        acls = {a: None for a in self._acls if a not in removed}
        for a in added:
            acls[a] = None
        self._save(list(acls))
        self._acls = acls
        self._reindex()

    def _save(self, acls: list[AclBinding]) -> None:
        if self.path is None:
            return
        doc = {"version": FORMAT_VERSION, "acls": [a.to_json() for a in acls]}
        write_atomically(self.path, json.dumps(doc, indent=1) + "\n", sync_dir=True)

    def _reindex(self) -> None:
        from .model import PatternType

        self._literal, self._prefixed = {}, {}
        for a in self._acls:
            if a.pattern_type == PatternType.PREFIXED:
                self._prefixed.setdefault(a.resource_type, []).append(a)
            else:
                self._literal.setdefault(a.resource_type, {}).setdefault(a.resource_name, []).append(a)
