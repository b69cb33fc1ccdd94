"""Which module serves a ``schemaType``, imported on first use."""
from __future__ import annotations

import importlib

from .base import SchemaFormat, UnknownSchemaType

# Confluent's names for the schema types (``GET /schemas/types`` answers them in this order).
MODULES = {"AVRO": "avro", "JSON": "json_schema", "PROTOBUF": "protobuf"}


def lookup(schema_type: str | None) -> SchemaFormat:
    """The format of ``schemaType`` (absent means AVRO, as in Confluent's API)."""
    name = "AVRO" if schema_type is None else schema_type
    module = MODULES.get(name)
    if module is None:
        raise UnknownSchemaType(name)
    fmt: SchemaFormat = importlib.import_module(f"{__package__}.{module}").FORMAT
    return fmt
