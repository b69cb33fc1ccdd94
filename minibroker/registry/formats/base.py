"""The contract between the registry and a schema format.

The registry resolves a schema's references itself (subject and version to the referenced
schema's text, transitively, in dependency order) and hands the format the texts by reference
name; the format never looks anything up. Compatibility is asked one way only, as Confluent's
``ParsedSchema.isBackwardCompatible(previous)`` asks it: can a reader holding *this* schema read
what a writer holding *previous* wrote. The registry derives the levels from it (BACKWARD: new
reads old; FORWARD: old reads new; FULL: both; the _TRANSITIVE ones against every live version
rather than the latest).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class InvalidSchema(ValueError):
    """The text is not a schema of this type: Confluent answers 42201 with this message."""


class UnknownSchemaType(ValueError):
    """A ``schemaType`` no format serves (Confluent: 42201 "Invalid schema type X")."""


class ParsedSchema(Protocol):
    schema_type: str  # "AVRO", "JSON" or "PROTOBUF"

    def canonical(self) -> str:
        """The string the registry stores, answers in ``schema`` and compares to decide that two
        registrations are the same schema (Confluent's ``canonicalString()``)."""
        ...

    def normalized(self) -> ParsedSchema:
        """The schema as ``normalize=true`` registers and looks it up (Confluent's
        ``normalize()``)."""
        ...

    def compatibility_errors(self, previous: ParsedSchema) -> list[str]:
        """Why a reader with this schema cannot read data written with ``previous``, one message
        per problem in Confluent's wording; empty when it can. ``previous`` is of the same type."""
        ...


class SchemaFormat(Protocol):
    name: str  # "AVRO", "JSON" or "PROTOBUF"

    def parse(self, text: str, references: Mapping[str, str]) -> ParsedSchema:
        """Parse ``text`` with the referenced schemas' texts by reference name (for AVRO the full
        name of a type the text uses, for PROTOBUF an import path, for JSON a ``$ref`` URL).
        Raises :class:`InvalidSchema`."""
        ...
