"""The registry's state machine: what the ``_schemas`` records build, and the operations of
Confluent's REST API over it, without sockets.

Every change is first written to ``_schemas`` (through :class:`SchemasLog`, the broker's own log,
as durable as the broker's fsync policy makes an append) and then applied from the very records
written, by the same :meth:`Registry.apply` that replays the topic at start: what a restart
rebuilds is what was answered. The rules follow Confluent's ``storage/KafkaSchemaRegistry.java``
(register, deleteSchemaVersion, deleteSubject) and ``KafkaStoreMessageHandler.java`` (what a
DELETE_SUBJECT or CLEAR_SUBJECT record does to the versions before it).
"""
from __future__ import annotations

import base64
import hashlib
import struct
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from minibroker_storage.lazylog import get_logger

from . import records as r
from .formats.base import InvalidSchema, ParsedSchema, SchemaFormat, UnknownSchemaType
from .formats.lookup import lookup as lookup_format

log = get_logger("minibroker.registry")

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
          "FULL_TRANSITIVE")
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_LEVEL = "BACKWARD"  # Confluent's schema.compatibility.level default
DEFAULT_MODE = "READWRITE"
REQUEST_CACHE = 1024  # schema texts parsed and kept


class SchemasLog(Protocol):
    """What the registry needs of ``_schemas`` (the broker hands it: topic.BrokerSchemasTopic)."""

    def append(self, records: list[tuple[bytes, bytes | None]]) -> tuple[int, int]:
        """Append the records as one batch, durably per the broker's fsync policy; the offset
        after them and the batch's timestamp (epoch ms)."""
        ...

    def read(self, start: int) -> Iterator[tuple[int, bytes | None, bytes | None, int]]:
        """(offset, key, value, timestamp in epoch ms) of every record from ``start`` to the end."""
        ...


class RegistryError(Exception):
    """An answer of Confluent's ``rest/exceptions/Errors.java``: HTTP status, error code, message."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"error_code": self.code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: int) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(schema_id: int | None = None) -> RegistryError:
    return RegistryError(404, 40403, "Schema not found" if schema_id is None
                         else f"Schema {schema_id} not found")


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(422, 42201, detail)


def invalid_version(text: str) -> RegistryError:
    # RestInvalidVersionException.java
    return RegistryError(422, 42202, f"The specified version '{text}' is not a valid version id. "
                                     "Allowed values are between [1, 2^31-1] and the string \"latest\"")


def invalid_level() -> RegistryError:
    return RegistryError(422, 42203, "Invalid compatibility level. Valid values are none, backward, "
                                     "forward, full, backward_transitive, forward_transitive, and "
                                     "full_transitive")


def invalid_mode() -> RegistryError:
    return RegistryError(422, 42204, "Invalid mode. Valid values are READWRITE, READONLY, IMPORT "
                                     "and FORWARD.")


def not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


def references_exist(subject: str, version: int) -> RegistryError:
    return RegistryError(422, 42206, "One or more references exist to the schema "
                         f"{{magic=1,keytype=SCHEMA,subject={subject},version={version}}}.")


def check_subject(subject: str | None) -> None:
    """QualifiedSubject.isValidSubject as register, PUT /config/{s} and PUT /mode/{s} apply it:
    no ISO control character (Guava's javaIsoControl), not the reserved ``__GLOBAL`` or
    ``__EMPTY`` (empty and ``*`` pass: schema.reject.empty.subject is false by default)."""
    if subject is None:
        return
    name = subject.rsplit(":", 1)[-1] if subject.startswith(":.") else subject
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in subject) or name in ("__GLOBAL", "__EMPTY"):
        raise RegistryError(422, 42208, f"The specified subject '{subject}' is not a valid.")


def parse_version(text: str) -> int:
    """VersionId.java: "latest" (any case) or -1 is the latest, else 1..2^31-1."""
    if text.strip().lower() == "latest":
        return -1
    try:
        v = int(text.strip())
    except ValueError:
        raise invalid_version(text) from None
    if (v <= 0 and v != -1) or v > 2**31 - 1:
        raise invalid_version(text)
    return v


@dataclass
class Stored:
    """One id's schema: its identity is (type, canonical text, references)."""
    schema_type: str
    schema: str
    references: tuple[r.Reference, ...]


class Registry:
    def __init__(self, topic: SchemasLog, *,
                 formats: Callable[[str | None], SchemaFormat] = lookup_format) -> None:
        self.topic = topic
        self.formats = formats
        self.versions: dict[str, dict[int, r.SchemaValue]] = {}
        self.schemas: dict[int, Stored] = {}
        self.id_uses: dict[int, set[tuple[str, int]]] = {}
        self.by_identity: dict[tuple[str, str, tuple[r.Reference, ...]], int] = {}
        self.configs: dict[str | None, dict[str, Any]] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0
        self.applied = 0  # the offset of _schemas the state covers up to
        self.loaded = False
        self.skipped = 0
        self._parsed: dict[int, ParsedSchema] = {}
        # (type, text as sent, references, normalize) -> (parsed, canonical text): serializers
        # send the same text again and again (lookups, registrations of a known schema);
        # cleared when a version goes for good, since a reference may then name another text
        self._requests: dict[tuple[Any, ...], tuple[ParsedSchema, str]] = {}
        # guid -> lowest id, built on the first /schemas/guids request and dropped when an id
        # comes or goes: replay does not pay an MD5 per schema for a route few clients use
        self._guids: dict[str, int] | None = None

    # -- replay and apply -----------------------------------------------------------------
    def replay(self, limit: int | None = None) -> bool:
        """Apply what ``_schemas`` holds past :attr:`applied`, at most ``limit`` records; True
        once the end is reached (the registry is loaded)."""
        n = 0
        for offset, key, value, ts in self.topic.read(self.applied):
            problem = self.apply(key, value, ts)
            if problem is not None:
                self.skipped += 1
                log.warning("registry.record_skipped", offset=offset, reason=problem)
            self.applied = offset + 1
            n += 1
            if limit is not None and n >= limit:
                return False
        if not self.loaded:
            self.loaded = True
            log.info("registry.loaded", subjects=len(self.versions), schemas=len(self.schemas),
                     offset=self.applied, skipped=self.skipped)
        return True

    def apply(self, key_raw: bytes | None, value_raw: bytes | None, ts: int | None = None) -> str | None:
        """Apply one ``_schemas`` record; why it cannot be, if so."""
        try:
            key = r.decode_key(key_raw)
            kind = key["keytype"]
            subject = key.get("subject")
            if kind == r.SCHEMA:
                if value_raw is None:
                    self._tombstone(str(subject), int(key["version"]))
                else:
                    sv = r.decode_schema_value(value_raw)
                    sv.ts = ts
                    self._put(sv)
            elif kind == r.CONFIG:
                if value_raw is None:
                    self.configs.pop(subject, None)
                else:
                    self.configs[subject] = r.decode_json(value_raw)
            elif kind == r.MODE:
                if value_raw is None:
                    self.modes.pop(subject, None)
                else:
                    self.modes[subject] = str(r.decode_json(value_raw)["mode"])
            elif kind == r.DELETE_SUBJECT and value_raw is not None:
                value = r.decode_json(value_raw)
                # KafkaStoreMessageHandler.handleDeleteSubject: every version up to it is deleted
                upto = int(value["version"])
                for v, sv in self.versions.get(str(value["subject"]), {}).items():
                    if v <= upto:
                        sv.deleted = True
            elif kind == r.CLEAR_SUBJECT and value_raw is not None:
                # InMemoryCache.clearSubjects: the soft-deleted versions of the subject (of
                # every subject without one) are gone
                value = r.decode_json(value_raw)
                cleared = value.get("subject")
                for s in [cleared] if cleared is not None else list(self.versions):
                    for v, sv in list(self.versions.get(str(s), {}).items()):
                        if sv.deleted:
                            self._tombstone(str(s), v)
            # NOOP and kinds this registry does not keep (contexts, associations) change nothing
        except r.BadRecord as e:
            return str(e)
        except (KeyError, TypeError, ValueError) as e:
            return f"record lacks or mistypes {e}"
        return None

    def _put(self, sv: r.SchemaValue) -> None:
        old = self.versions.get(sv.subject, {}).get(sv.version)
        if old is not None and old.id != sv.id:
            self._forget_use(old.id, sv.subject, sv.version)
        self.versions.setdefault(sv.subject, {})[sv.version] = sv
        if sv.id not in self.schemas:
            stored = Stored(sv.schema_type, sv.schema, sv.references)
            self.schemas[sv.id] = stored
            self.by_identity[(stored.schema_type, stored.schema, stored.references)] = sv.id
            self._guids = None
        self.id_uses.setdefault(sv.id, set()).add((sv.subject, sv.version))
        self.max_id = max(self.max_id, sv.id)

    def _tombstone(self, subject: str, version: int) -> None:
        versions = self.versions.get(subject)
        if versions is None or version not in versions:
            return
        sv = versions.pop(version)
        self._requests.clear()
        if not versions:
            del self.versions[subject]
        self._forget_use(sv.id, subject, version)

    def _forget_use(self, schema_id: int, subject: str, version: int) -> None:
        uses = self.id_uses.get(schema_id)
        if uses is None:
            return
        uses.discard((subject, version))
        if not uses:
            # no record names the id any more: compaction would forget it as well
            del self.id_uses[schema_id]
            stored = self.schemas.pop(schema_id)
            key = (stored.schema_type, stored.schema, stored.references)
            if self.by_identity.get(key) == schema_id:
                # IMPORT can give one schema two ids (_put indexes the later): the index is
                # this id's only when no twin is still kept, else it goes to the twin
                twins = [i for i, other in self.schemas.items()
                         if (other.schema_type, other.schema, other.references) == key]
                if twins:
                    self.by_identity[key] = max(twins)
                else:
                    del self.by_identity[key]
            self._parsed.pop(schema_id, None)
            self._guids = None

    def _write(self, recs: list[tuple[bytes, bytes | None]]) -> None:
        """Append, then apply the very records written (the state never runs ahead of the log)."""
        end, ts = self.topic.append(recs)
        for key, value in recs:
            problem = self.apply(key, value, ts)
            assert problem is None, problem  # records this module made
        self.applied = end

    # -- scope: configs and modes --------------------------------------------------------------
    def level(self, subject: str | None) -> str:
        for scope in (subject, None):
            level = self.configs.get(scope, {}).get("compatibilityLevel")
            if level:
                return str(level)
        return DEFAULT_LEVEL

    def normalize_on(self, subject: str | None) -> bool:
        for scope in (subject, None):
            if scope in self.configs and self.configs[scope].get("normalize") is not None:
                return bool(self.configs[scope]["normalize"])
        return False

    def mode(self, subject: str | None) -> str:
        if subject is not None and subject in self.modes:
            return self.modes[subject]
        return self.modes.get(None, DEFAULT_MODE)

    def _check_writable(self, subject: str | None) -> None:
        # AbstractSchemaRegistry.checkRegisterMode's words; "." is the default context
        if self.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise not_permitted(f"Subject {subject} in context . is in read-only mode")

    # -- reading -------------------------------------------------------------------------------
    def subjects(self, deleted: bool = False, prefix: str = "", deleted_only: bool = False) -> list[str]:
        """GET /subjects: a subject is deleted when every version of it is (extractUniqueSubjects);
        ``deletedOnly`` wins over ``deleted``."""
        out = []
        for s, vs in self.versions.items():
            if not s.startswith(prefix):
                continue
            gone = all(v.deleted for v in vs.values())
            if (gone if deleted_only else deleted or not gone):
                out.append(s)
        return sorted(out)

    def all_versions(self, prefix: str, deleted: bool, latest_only: bool) -> list[r.SchemaValue]:
        out: list[r.SchemaValue] = []
        for subject in sorted(s for s in self.versions if s.startswith(prefix)):
            live = self._live(subject, deleted)
            chosen = [max(live)] if latest_only and live else sorted(live)
            out.extend(live[v] for v in chosen)
        return out

    def _live(self, subject: str, deleted: bool = False) -> dict[int, r.SchemaValue]:
        return {v: sv for v, sv in self.versions.get(subject, {}).items() if deleted or not sv.deleted}

    def version_list(self, subject: str, deleted: bool = False, deleted_only: bool = False,
                     as_negative: bool = False) -> list[int]:
        """GET /subjects/{s}/versions (SubjectVersionsResource.listVersions): 40401 unless the
        subject has a live version, or any with ``deleted``/``deletedOnly``; then
        ``deletedAsNegative`` (every version, the deleted ones negated, by absolute value) wins
        over ``deletedOnly``, which wins over ``deleted``."""
        every = self.versions.get(subject, {})
        if not self._live(subject, deleted or deleted_only):
            raise subject_not_found(subject)
        if as_negative:
            return [-v if every[v].deleted else v for v in sorted(every)]
        if deleted_only:
            return [v for v in sorted(every) if every[v].deleted]
        return sorted(self._live(subject, deleted))

    def get_version(self, subject: str, version: int, deleted: bool = False) -> r.SchemaValue:
        live = self._live(subject, deleted)
        if not live:
            raise subject_not_found(subject)
        if version == -1:
            # "latest" is the highest live version even with deleted=true
            # (AbstractSchemaRegistry.getLatestVersionFromSubjectSchemas skips deleted ones)
            undeleted = [v for v, sv in live.items() if not sv.deleted]
            if not undeleted:
                raise version_not_found(-1)
            return live[max(undeleted)]
        if version not in live:
            raise version_not_found(version)
        return live[version]

    def schema_by_id(self, schema_id: int) -> Stored:
        stored = self.schemas.get(schema_id)
        if stored is None:
            raise schema_not_found(schema_id)
        return stored

    def id_by_guid(self, wanted: str) -> int:
        """GET /schemas/guids/{guid}: the id whose schema hashes to it (AbstractSchemaRegistry
        .getByGuid; one context here). Confluent reads the guid as a UUID (MD5.fromString), so
        its spelling's case does not matter; one that is no UUID is not found."""
        try:
            key = str(uuid.UUID(wanted))
        except ValueError:
            raise RegistryError(404, 40403, f"Schema {wanted} not found") from None
        if self._guids is None:
            guids: dict[str, int] = {}
            for schema_id in sorted(self.schemas, reverse=True):
                st = self.schemas[schema_id]
                g = guid(st.schema, st.references)
                if g is not None:
                    guids[g] = schema_id
            self._guids = guids
        found = self._guids.get(key)
        if found is None:
            raise RegistryError(404, 40403, f"Schema {wanted} not found")
        return found

    def id_versions(self, schema_id: int, deleted: bool = False) -> list[tuple[str, int]]:
        if schema_id not in self.schemas:
            # listVersionsForId/listSubjectsForId answer null: Errors.schemaNotFoundException()
            raise schema_not_found()
        return sorted((s, v) for s, v in self.id_uses.get(schema_id, ())
                      if deleted or not self.versions[s][v].deleted)

    def referenced_by(self, subject: str, version: int, deleted: bool = False,
                      exclude_subject: str | None = None) -> list[int]:
        """The ids of the versions (outside ``exclude_subject``) whose references name
        (subject, version)."""
        target = self.get_version(subject, version, deleted=True)
        out = set()
        for s, vs in self.versions.items():
            if s == exclude_subject:
                continue
            for sv in vs.values():
                if (deleted or not sv.deleted) and any(
                        ref.subject == subject and ref.version == target.version for ref in sv.references):
                    out.add(sv.id)
        return sorted(out)

    # -- parsing ------------------------------------------------------------------------------
    def _references(self, raw: Any) -> tuple[r.Reference, ...]:
        if raw is None:
            return ()
        if not isinstance(raw, list):
            raise invalid_schema("references must be a list")
        out = []
        for ref in raw:
            if not isinstance(ref, dict) or not isinstance(ref.get("name"), str) \
                    or not isinstance(ref.get("subject"), str) or not isinstance(ref.get("version"), int):
                raise invalid_schema("a reference needs a name, a subject and a version")
            out.append(r.Reference(ref["name"], ref["subject"], ref["version"]))
        return tuple(out)

    def _resolve(self, refs: tuple[r.Reference, ...], into: dict[str, str],
                 seen: frozenset[tuple[str, int]] = frozenset()) -> dict[str, str]:
        """The referenced texts by name, transitively, a schema's dependencies before it."""
        for ref in refs:
            if (ref.subject, ref.version) in seen:
                raise invalid_schema(f"Circular reference to subject {ref.subject} version {ref.version}")
            live = self._live(ref.subject, deleted=True)
            version = max(live) if ref.version == -1 and live else ref.version
            sv = live.get(version)
            if sv is None:
                raise invalid_schema(f"Invalid schema reference {ref.name}: subject {ref.subject} "
                                     f"version {ref.version} not found")
            self._resolve(sv.references, into, seen | {(ref.subject, version)})
            into.setdefault(ref.name, sv.schema)
        return into

    def parse(self, schema_type: str | None, text: Any, refs: tuple[r.Reference, ...]) -> ParsedSchema:
        if not isinstance(text, str) or not text.strip():
            raise invalid_schema("Empty schema")
        try:
            fmt = self.formats(schema_type)
        except UnknownSchemaType as e:
            raise invalid_schema(f"Invalid schema type {e}") from None
        try:
            return fmt.parse(text, self._resolve(refs, {}))
        except InvalidSchema as e:
            raise invalid_schema(f"Invalid schema {text} with refs {[x.as_json() for x in refs]} "
                                 f"of type {fmt.name}, details: {e}") from None

    def _parsed_id(self, schema_id: int) -> ParsedSchema:
        p = self._parsed.get(schema_id)
        if p is None:
            st = self.schemas[schema_id]
            try:
                p = self.formats(st.schema_type).parse(st.schema, self._resolve(st.references, {}))
            except (InvalidSchema, UnknownSchemaType, RegistryError) as e:
                # a record another registry wrote that this one cannot read back
                raise RegistryError(500, 50001, f"Schema {schema_id} in _schemas cannot be parsed "
                                    f"to check compatibility against it: {e}") from None
            self._parsed[schema_id] = p
        return p

    def _request(self, body: Any, normalize: bool, subject: str
                 ) -> tuple[ParsedSchema, str, tuple[r.Reference, ...]]:
        if not isinstance(body, dict):
            raise invalid_schema("the body must be a JSON object with a schema")
        schema_type = body.get("schemaType")
        if schema_type is not None and not isinstance(schema_type, str):
            raise invalid_schema("schemaType must be a string")
        refs = self._references(body.get("references"))
        text = body.get("schema")
        normalize = normalize or self.normalize_on(subject)
        key = (schema_type or "AVRO", text, refs, normalize)
        known = self._requests.get(key) if isinstance(text, str) else None
        if known is None:
            parsed = self.parse(schema_type, text, refs)
            if normalize:
                parsed = parsed.normalized()
            known = (parsed, parsed.canonical())
            if len(self._requests) >= REQUEST_CACHE:
                self._requests.clear()
            self._requests[key] = known
        return known[0], known[1], refs

    # -- compatibility ----------------------------------------------------------------------
    def compatibility(self, parsed: ParsedSchema, previous: list[r.SchemaValue], level: str) -> list[str]:
        """Confluent's CompatibilityChecker: the latest (or, _TRANSITIVE, every) previous version,
        newest first; each failing one adds its errors and which version it was."""
        if level == "NONE" or not previous:
            return []
        against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
        errors: list[str] = []
        for sv in reversed(against):
            if sv.schema_type != parsed.schema_type:
                found = ["Incompatible because of different schema type"]
            else:
                old = self._parsed_id(sv.id)
                found = []
                if level.startswith(("BACKWARD", "FULL")):
                    found += [_name_sides(m, "new", "old") for m in parsed.compatibility_errors(old)]
                if level.startswith(("FORWARD", "FULL")):
                    found += [_name_sides(m, "old", "new") for m in old.compatibility_errors(parsed)]
            if found:
                errors += found
                errors.append(f"{{oldSchemaVersion: {sv.version}}}")
                errors.append(f"{{oldSchema: '{sv.schema}'}}")
                errors.append(f"{{compatibility: '{level}'}}")
        return errors

    def check_compatibility(self, subject: str, version_text: str | None, body: Any,
                            normalize: bool = False, verbose: bool = False) -> list[str]:
        """POST /compatibility/subjects/{s}/versions[/{v}] (CompatibilityResource): the errors
        (empty: compatible); against the live versions only; no subject or no live version with
        "latest" is compatible; an invalid schema is one message with ``verbose``, else 42201."""
        version = parse_version(version_text) if version_text is not None else None
        live = self._live(subject)
        if version is not None and version != -1 and version not in live:
            raise version_not_found(version)
        try:
            parsed, _text, _refs = self._request(body, normalize, subject)
        except RegistryError as e:
            if verbose and e.code == 42201:
                return [e.message]
            raise
        if version is None:
            # every version handed to the subject's checker, which looks at the latest only
            # unless the level is _TRANSITIVE
            previous = [live[v] for v in sorted(live)]
        else:
            previous = [live[max(live) if version == -1 else version]] if live else []
        return self.compatibility(parsed, previous, self.level(subject))

    # -- writing ------------------------------------------------------------------------------
    def lookup(self, subject: str, body: Any, normalize: bool = False,
               deleted: bool = False) -> r.SchemaValue:
        """POST /subjects/{s}: the version of ``subject`` that is this schema."""
        parsed, text, refs = self._request(body, normalize, subject)
        live = self._live(subject, deleted)
        if not live:
            raise subject_not_found(subject)
        identity = (parsed.schema_type, text, refs)
        for v in sorted(live, reverse=True):
            if _identity(live[v]) == identity:
                return live[v]
        raise schema_not_found()

    def register(self, subject: str, body: Any, normalize: bool = False,
                 force: bool = False) -> tuple[int, int]:
        """POST /subjects/{s}/versions: (id, version), as KafkaSchemaRegistry.register."""
        check_subject(subject)
        mode = self.mode(subject)
        self._check_writable(subject)
        if not isinstance(body, dict):
            raise invalid_schema("the body must be a JSON object with a schema")
        want_id = body.get("id", -1)
        want_version = body.get("version", 0)
        if not isinstance(want_id, int) or not isinstance(want_version, int):
            raise invalid_schema("id and version must be integers")
        importing = mode == "IMPORT"
        if want_id >= 0 and not importing:
            raise not_permitted(f"Subject {subject} in context . is not in import mode")
        if want_id < 0 and mode != "READWRITE":
            raise not_permitted(f"Subject {subject} in context . is not in read-write mode")
        parsed, text, refs = self._request(body, normalize, subject)
        every = self.versions.get(subject, {})
        live = self._live(subject)
        new_version = max(every, default=0) + 1
        identity = (parsed.schema_type, text, refs)
        existing = self.by_identity.get(identity)
        schema_id = want_id
        if want_id < 0 or want_id == existing:
            for v in sorted(live, reverse=True):
                sv = live[v]
                if _identity(sv) == identity and want_id in (-1, sv.id) and want_version in (0, -1, v):
                    return sv.id, v  # already registered under this subject
        if existing is not None and want_id < 0:
            schema_id = existing
        if not importing and not force:
            # ``force`` skips the checks outside IMPORT as IMPORT does (KafkaSchemaRegistry.register)
            errors = self.compatibility(parsed, [live[v] for v in sorted(live)], self.level(subject))
            if errors:
                log.info("registry.incompatible", subject=subject, level=self.level(subject),
                         against=len(live), reason=errors[0])
                raise RegistryError(409, 409, "Schema being registered is incompatible with an earlier "
                                    f"schema for subject \"{subject}\", details: [{', '.join(errors)}]")
        version = new_version
        if want_version > 0:
            if want_version != new_version and not importing:
                raise invalid_schema("Version is not one more than previous version")
            if want_version in every:
                raise invalid_schema(f"Version {want_version} of subject {subject} already exists")
            version = want_version
        if schema_id >= 0:
            taken = self.schemas.get(schema_id)
            if taken is not None and (taken.schema_type, taken.schema, taken.references) != identity:
                raise not_permitted(f"Overwrite new schema with id {schema_id} in context . is not "
                                    "permitted.")
        else:
            schema_id = self.max_id + 1
        recs: list[tuple[bytes, bytes | None]] = []
        # KafkaSchemaRegistry.register: an earlier soft-deleted version with the same id goes
        for v, sv in sorted(every.items()):
            if sv.deleted and sv.id == schema_id and v < version and not self.referenced_by(subject, v, True):
                recs.append((r.schema_key(subject, v), None))
        recs.append((r.schema_key(subject, version),
                     r.SchemaValue(subject, version, schema_id, parsed.schema_type, text, refs).encode()))
        self._write(recs)
        log.info("registry.registered", subject=subject, version=version, id=schema_id,
                 type=parsed.schema_type)
        return schema_id, version

    def delete_version(self, subject: str, version_text: str, permanent: bool) -> int:
        """DELETE /subjects/{s}/versions/{v} (KafkaSchemaRegistry.deleteSchemaVersion)."""
        version = parse_version(version_text)
        self._check_writable(subject)
        every = self.versions.get(subject, {})
        if not every:
            raise subject_not_found(subject)
        if version == -1:
            # validateDeleteSchemaVersion: "latest" is the latest version, soft-deleted or not
            version = max(every)
        sv = every.get(version)
        if sv is None:
            raise version_not_found(version)
        if not permanent and sv.deleted:
            raise RegistryError(404, 40406, f"Subject '{subject}' Version {version} was soft deleted."
                                "Set permanent=true to delete permanently")
        if permanent and not sv.deleted:
            raise RegistryError(404, 40407, f"Subject '{subject}' Version {version} was not deleted "
                                "first before being permanently deleted")
        if self.referenced_by(subject, version, deleted=permanent):
            raise references_exist(subject, version)
        if permanent:
            recs: list[tuple[bytes, bytes | None]] = [(r.schema_key(subject, version), None)]
            if len(every) == 1:  # the subject's last version: its mode and config go too
                recs += self._scope_tombstones(subject)
        else:
            gone = r.SchemaValue(sv.subject, sv.version, sv.id, sv.schema_type, sv.schema,
                                 sv.references, True, sv.extra)
            recs = [(r.schema_key(subject, version), gone.encode())]
        self._write(recs)
        log.info("registry.version_deleted", subject=subject, version=version, permanent=permanent)
        return version

    def _scope_tombstones(self, subject: str) -> list[tuple[bytes, bytes | None]]:
        recs: list[tuple[bytes, bytes | None]] = []
        if subject in self.modes:
            recs.append((r.subject_key(r.MODE, subject), None))
        if subject in self.configs:
            recs.append((r.subject_key(r.CONFIG, subject), None))
        return recs

    def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        """DELETE /subjects/{s} (KafkaSchemaRegistry.deleteSubject)."""
        self._check_writable(subject)
        every = self.versions.get(subject, {})
        live = self._live(subject)
        if not every:
            raise subject_not_found(subject)
        if not permanent and not live:
            raise RegistryError(404, 40404, f"Subject '{subject}' was soft deleted."
                                "Set permanent=true to delete permanently")
        if permanent and live:
            raise RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being "
                                "permanently deleted")
        versions = sorted(every if permanent else live)
        for v in versions:
            # references from inside the subject go with it
            if self.referenced_by(subject, v, deleted=permanent, exclude_subject=subject):
                raise references_exist(subject, v)
        recs: list[tuple[bytes, bytes | None]]
        if permanent:
            # in descending order, for references within the subject (as Confluent)
            recs = [(r.schema_key(subject, v), None) for v in reversed(versions)]
            recs += self._scope_tombstones(subject)
        else:
            recs = [(r.subject_key(r.DELETE_SUBJECT, subject),
                     r.delete_subject_value(subject, versions[-1]))]
        self._write(recs)
        log.info("registry.subject_deleted", subject=subject, versions=versions, permanent=permanent)
        return versions

    # -- config and mode -------------------------------------------------------------------------
    def get_config(self, subject: str | None, default_to_global: bool = False) -> dict[str, Any]:
        if subject is not None and subject not in self.configs:
            if not default_to_global:
                raise RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level "
                                    "compatibility configured")
            subject = None
        config = self.configs.get(subject, {})
        out: dict[str, Any] = {}
        if config.get("normalize") is not None:
            out["normalize"] = config["normalize"]
        out["compatibilityLevel"] = config.get("compatibilityLevel") or DEFAULT_LEVEL
        return out

    def set_config(self, subject: str | None, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise invalid_level()
        level = body.get("compatibility", body.get("compatibilityLevel"))
        normalize = body.get("normalize")
        if level is not None and (not isinstance(level, str) or level.upper() not in LEVELS):
            raise invalid_level()
        if level is None and normalize is None:
            raise invalid_level()
        if normalize is not None and not isinstance(normalize, bool):
            raise invalid_schema("normalize must be true or false")
        check_subject(subject)  # after the level, as ConfigResource.updateSubjectLevelConfig
        self._check_writable(subject)
        old = self.configs.get(subject, {})
        level = level.upper() if level is not None else old.get("compatibilityLevel")
        normalize = normalize if normalize is not None else old.get("normalize")
        self._write([(r.subject_key(r.CONFIG, subject), r.config_value(subject, level, normalize))])
        log.info("registry.config_set", subject=subject, compatibility=level, normalize=normalize)
        out: dict[str, Any] = {}
        if level is not None:
            out["compatibility"] = level
        if normalize is not None:
            out["normalize"] = normalize
        return out

    def delete_config(self, subject: str | None) -> dict[str, Any]:
        """DELETE /config[/{s}]: the config that was (ConfigResource: 40401 for a subject
        without one; the global one falls back to the default)."""
        if subject is not None and subject not in self.configs:
            raise subject_not_found(subject)
        self._check_writable(subject)
        old = self.get_config(subject)
        if subject is None and None not in self.configs:
            return old
        self._write([(r.subject_key(r.CONFIG, subject), None)])
        return old

    def get_mode(self, subject: str | None, default_to_global: bool = False) -> dict[str, str]:
        if subject is not None and subject not in self.modes:
            if not default_to_global:
                raise RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level "
                                    "mode configured")
            subject = None
        return {"mode": self.modes.get(subject, DEFAULT_MODE)}

    def set_mode(self, subject: str | None, body: Any, force: bool = False) -> dict[str, str]:
        check_subject(subject)  # first, as ModeResource.updateMode
        mode = body.get("mode") if isinstance(body, dict) else None
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise invalid_mode()
        mode = mode.upper()
        recs: list[tuple[bytes, bytes | None]] = []
        if mode == "IMPORT" and self.mode(subject) != "IMPORT" and not force:
            # KafkaSchemaRegistry.setMode: IMPORT only where no live version is; the
            # soft-deleted ones go for good first (so imported ids and versions are free)
            scope = list(self.versions) if subject is None else [subject]
            if any(self._live(s) for s in scope):
                raise not_permitted("Cannot import since found existing subjects")
            for s in scope:
                for v in sorted(self.versions.get(s, {})):
                    if self.referenced_by(s, v, deleted=True):
                        raise references_exist(s, v)
                    recs.append((r.schema_key(s, v), None))
            if recs or subject is not None:
                recs.append((r.subject_key(r.CLEAR_SUBJECT, subject), r.clear_subject_value(subject)))
        recs.append((r.subject_key(r.MODE, subject), r.mode_value(subject, mode)))
        self._write(recs)
        log.info("registry.mode_set", subject=subject, mode=mode)
        return {"mode": mode}

    def delete_mode(self, subject: str) -> dict[str, str]:
        if subject not in self.modes:
            raise subject_not_found(subject)  # ModeResource.deleteSubjectMode
        old = self.get_mode(subject)
        self._write([(r.subject_key(r.MODE, subject), None)])
        return old


def _identity(sv: r.SchemaValue) -> tuple[str, str, tuple[r.Reference, ...]]:
    return sv.schema_type, sv.schema, sv.references


def guid(schema: str, references: tuple[r.Reference, ...], extra: dict[str, Any] | None = None) -> str | None:
    """Confluent 8's ``guid``: the MD5 of the schema text then each reference's name, subject and
    4-byte big-endian version, read as a UUID (Schema.updateHash, SchemaReference.updateHash,
    MD5.toString). A record's own ``md5`` (base64, SchemaValue.getMd5Bytes) wins. Metadata and
    rule sets also enter Confluent's hash; this registry does not interpret them, so a version
    carrying them without an ``md5`` gets no guid rather than a wrong one."""
    extra = extra or {}
    stored = extra.get("md5")
    if isinstance(stored, str):
        try:
            raw = base64.b64decode(stored, validate=True)
        except ValueError:
            raw = b""
        if len(raw) == 16:
            return str(uuid.UUID(bytes=raw))
    if "metadata" in extra or "ruleSet" in extra:
        return None
    md = hashlib.md5(schema.encode("utf-8"), usedforsecurity=False)
    for ref in references:
        md.update(ref.name.encode("utf-8"))
        md.update(ref.subject.encode("utf-8"))
        md.update(struct.pack(">i", ref.version))
    return str(uuid.UUID(bytes=md.digest()))


def _body_fields(out: dict[str, Any], schema_type: str, schema: str,
                 references: tuple[r.Reference, ...], extra: dict[str, Any] | None) -> dict[str, Any]:
    # Confluent's entities are @JsonInclude(NON_EMPTY): no ``references`` when there are none.
    # ``schemaType`` is answered for AVRO too since Confluent 8.0 (DGS-14766 removed the
    # SchemaTypeConverter that left it out); the clients read it with AVRO as the default.
    g = guid(schema, references, extra)
    if g is not None:
        out["guid"] = g
    out["schemaType"] = schema_type
    if references:
        out["references"] = [x.as_json() for x in references]
    out["schema"] = schema
    return out


def schema_json(sv: r.SchemaValue) -> dict[str, Any]:
    """A version as Confluent's Schema entity answers it (SchemaValue.toSchemaEntity: subject,
    version, id, guid, schemaType, references, schema, deleted — a Boolean, so ``false`` is kept
    by NON_EMPTY)."""
    out = _body_fields({"subject": sv.subject, "version": sv.version, "id": sv.id},
                       sv.schema_type, sv.schema, sv.references, sv.extra)
    if sv.ts is not None:
        out["ts"] = sv.ts
    out["deleted"] = sv.deleted
    return out


def register_json(sv: r.SchemaValue) -> dict[str, Any]:
    """POST /subjects/{s}/versions as Confluent 8 answers it: RegisterSchemaResponse(Schema) with
    id, version, guid, schemaType, references and schema (no subject; no ts or deleted, which the
    registered request does not carry)."""
    return _body_fields({"id": sv.id, "version": sv.version}, sv.schema_type, sv.schema,
                        sv.references, None)


def stored_json(st: Stored, sv: r.SchemaValue | None = None, named: bool = False) -> dict[str, Any]:
    """GET /schemas/ids/{id}: Confluent's SchemaString of the version ``sv`` the id was found
    at (its ``ts`` and ``deleted``), with that subject and version only when the request names a
    ``subject`` (KafkaSchemaRegistry.get)."""
    out: dict[str, Any] = {}
    if named and sv is not None:
        out["subject"], out["version"] = sv.subject, sv.version
    out = _body_fields(out, st.schema_type, st.schema, st.references, None)
    if sv is not None:
        if sv.ts is not None:
            out["ts"] = sv.ts
        out["deleted"] = sv.deleted
    return out


def _name_sides(message: str, reader: str, writer: str) -> str:
    """The formats word a difference with two ``%s`` (reader, writer), as Confluent's
    ``Difference.error()`` does; the checker names them, "new"/"old" for BACKWARD and the other way
    round for FORWARD (CompatibilityChecker's String.format). One at a time, not ``%``: a path in
    the message may itself hold a ``%``."""
    return message.replace("%s", reader, 1).replace("%s", writer, 1)
