"""The JSON schema type (``schemaType: JSON``).

Identity is Confluent's ``JsonSchema.canonicalString()`` (json-schema-provider's JsonSchema.java):
the text parsed by Jackson and written back compact, keys in their order, floats as exact
``BigDecimal``s; ``normalize()`` reads that string back with sorted object keys. A schema is
checked against its draft's meta-schema (``$schema``, draft-07 when absent, Confluent's default)
with the ``jsonschema`` library, imported on first use. Compatibility is in
:mod:`.json_schema_diff`.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import InvalidSchema, ParsedSchema
from .json_schema_text import read, write


def _check_meta_schema(node: Any) -> None:
    """Refuse a schema that its draft's meta-schema refuses (Confluent loads it with everit or
    json-sKema, which refuse such a schema as well)."""
    if isinstance(node, bool):
        return
    if not isinstance(node, dict):
        raise InvalidSchema(f"Invalid JSON schema: expected an object or a boolean, found {write(node)}")
    import jsonschema.validators  # imported on the first JSON schema only

    dialect = node.get("$schema")
    validator = jsonschema.validators.Draft7Validator
    if isinstance(dialect, str):
        known = jsonschema.validators.validator_for({"$schema": dialect}, default=None)
        if known is not None:
            validator = known
    # The meta-schema validators compare numbers; Decimal values compare fine with ints.
    try:
        validator.check_schema(node)
    except jsonschema.exceptions.SchemaError as e:
        path = "/".join(str(p) for p in e.absolute_path)
        raise InvalidSchema(f"Invalid JSON schema at '#/{path}': {e.message}") from None


class JsonSchema:
    schema_type = "JSON"

    def __init__(self, node: Any, references: Mapping[str, Any], canonical: str) -> None:
        self.node = node
        # The referenced documents by reference name (a $ref URL), parsed.
        self.references = references
        self._canonical = canonical

    def canonical(self) -> str:
        return self._canonical

    def normalized(self) -> JsonSchema:
        return JsonSchema(self.node, self.references, write(self.node, sort_keys=True))

    def compatibility_errors(self, previous: ParsedSchema) -> list[str]:
        if not isinstance(previous, JsonSchema):
            return ["Incompatible because of different schema type"]
        from .json_schema_diff import incompatibilities

        return incompatibilities(previous.node, previous.references, self.node, self.references)

    def __repr__(self) -> str:
        return f"JsonSchema({self._canonical})"


class JsonSchemaFormat:
    name = "JSON"

    def parse(self, text: str, references: Mapping[str, str]) -> JsonSchema:
        try:
            return self._parse(text, references)
        except RecursionError:
            raise InvalidSchema("Invalid JSON schema: nested too deeply") from None
        except InvalidSchema as e:
            # One line, whatever the schema's text put in the detail.
            raise InvalidSchema(str(e).replace("\n", "\\n")) from None

    def _parse(self, text: str, references: Mapping[str, str]) -> JsonSchema:
        node = _parse_document(text, "schema")
        _check_meta_schema(node)
        refs = {name: _parse_document(ref_text, f"reference '{name}'")
                for name, ref_text in references.items()}
        _check_refs(node, refs)
        return JsonSchema(node, refs, write(node))


# Keywords whose values are data, not schemas: a "$ref" key inside them is not a reference.
_DATA_KEYWORDS = frozenset(["enum", "const", "default", "examples"])


def _check_refs(node: Any, references: Mapping[str, Any]) -> None:
    """Refuse a ``$ref`` that cannot resolve, as Confluent does when it loads the schema (with
    remote fetching off for a new registration, a reference must be one of the schema's
    references). Skipped for schemas with nested ``$id``s, whose refs resolve against base URIs
    this check does not track."""
    refs: list[str] = []
    anchors: set[str] = set()
    nested_ids = [False]

    def walk(n: Any, depth: int) -> None:
        if isinstance(n, dict):
            if depth and isinstance(n.get("$id", n.get("id")), str) \
                    and not str(n.get("$id", n.get("id"))).startswith("#"):
                nested_ids[0] = True
            for key in ("$anchor", "$dynamicAnchor"):
                if isinstance(n.get(key), str):
                    anchors.add(n[key])
            for key in ("$id", "id"):
                if isinstance(n.get(key), str) and n[key].startswith("#"):
                    anchors.add(n[key][1:])
            ref = n.get("$ref")
            if isinstance(ref, str):
                refs.append(ref)
            for k, v in n.items():
                if k not in _DATA_KEYWORDS:
                    walk(v, depth + 1)
        elif isinstance(n, list):
            for v in n:
                walk(v, depth + 1)

    walk(node, 0)
    if nested_ids[0]:
        return
    from .json_schema_diff import Loader

    loader = Loader(node, dict(references))
    for ref in refs:
        location, _, fragment = ref.partition("#")
        if "json-schema.org/" in location:
            continue  # the meta-schemas are bundled
        if not location and fragment and not fragment.startswith("/"):
            if fragment in anchors:
                continue
            raise InvalidSchema(f"Invalid JSON schema: unresolved $ref '{ref}'")
        if location and fragment and not fragment.startswith("/"):
            continue  # an anchor in another document: resolved when compared
        try:
            loader.resolve(ref, node)
        except ValueError:
            raise InvalidSchema(f"Invalid JSON schema: unresolved $ref '{ref}'") from None


def _parse_document(text: str, what: str) -> Any:
    try:
        return read(text)
    except (ValueError, RecursionError) as e:
        raise InvalidSchema(f"Invalid JSON in {what}: {e}") from None


FORMAT = JsonSchemaFormat()
