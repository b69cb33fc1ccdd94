"""Build kio entities for any version from one set of keyword arguments.

Each API version is its own generated class with its own field set; handlers
describe an answer once and ``build`` keeps the fields that version has, so a
field added in v5 is simply dropped when answering v3.
"""

from __future__ import annotations

import dataclasses
import sys
from functools import cache


@cache
def _field_names(cls) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def build(cls, **values):
    names = _field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})


def nested(entity_cls, name: str):
    """A nested schema class (e.g. MetadataResponseBroker) of the same version."""
    return getattr(sys.modules[entity_cls.__module__], name)


def has_field(cls, name: str) -> bool:
    return name in _field_names(cls)
