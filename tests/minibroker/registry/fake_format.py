"""A toy schema format for the registry's state-machine tests (the real formats have their own):
a schema is a JSON object {"fields": {"name": has_default}}; a reader can read a writer's data
when every field the reader has without a default is one the writer wrote."""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from minibroker.registry.formats.base import InvalidSchema


@dataclass
class Toy:
    fields: dict[str, bool]
    refs: tuple[str, ...] = ()
    schema_type: str = "AVRO"

    def canonical(self) -> str:
        return json.dumps({"fields": self.fields}, sort_keys=True, separators=(",", ":"))

    def normalized(self) -> Toy:
        return Toy({k.lower(): v for k, v in self.fields.items()}, self.refs)

    def compatibility_errors(self, previous) -> list[str]:
        return [f"READER_FIELD_MISSING_DEFAULT_VALUE {f}" for f, has_default in self.fields.items()
                if not has_default and f not in previous.fields]


class ToyFormat:
    name = "AVRO"

    def __init__(self) -> None:
        self.parsed: list[tuple[str, dict]] = []

    def parse(self, text: str, references: Mapping[str, str]) -> Toy:
        self.parsed.append((text, dict(references)))
        try:
            obj = json.loads(text)
            fields = obj["fields"]
            assert isinstance(fields, dict)
        except (ValueError, KeyError, TypeError, AssertionError) as e:
            raise InvalidSchema(f"not a toy schema: {e}") from None
        return Toy(fields, tuple(references))


class MemoryLog:
    """_schemas as a list of (key, value) (the broker's topic is tested in the integration tests)."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []
        # offset -> timestamp of what append wrote; a test may put records straight in the list
        self.timestamps: dict[int, int] = {}
        self.clock_ms = 1_700_000_000_000  # each append a millisecond later

    def append(self, records):
        self.clock_ms += 1
        for _ in records:
            self.timestamps[len(self.records)] = self.clock_ms
            self.records.append(_)
        return len(self.records), self.clock_ms

    def read(self, start):
        for i in range(start, len(self.records)):
            yield i, *self.records[i], self.timestamps.get(i, self.clock_ms)
