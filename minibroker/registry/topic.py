"""``_schemas`` in the broker's own log: one compacted partition, created on first write as
Confluent's KafkaStore creates it (``cleanup.policy=compact``, one partition), appended to the
way the group coordinator appends to ``__consumer_offsets`` (a coordinator-origin batch on the
partition log, as durable on return as the broker's fsync policy makes any append: ``always``
syncs before it returns), read back at start with the coordinators' replay."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from minibroker_protocol.records import build_batch

from ..coordinator import replay

TOPIC = "_schemas"  # Confluent's kafkastore.topic default
CONFIGS = {"cleanup.policy": "compact"}


class BrokerSchemasTopic:
    def __init__(self, *, existing: Callable[[], Any], create: Callable[[], Any],
                 wall_ms: Callable[[], int], appended: Callable[[], None] = lambda: None) -> None:
        self._existing = existing  # the partition log, or None before the topic exists
        self._create = create      # creates the topic, returns the partition log
        self._wall_ms = wall_ms
        self._appended = appended  # wakes consumers of _schemas (a Confluent registry tailing it)

    def append(self, records: list[tuple[bytes, bytes | None]]) -> tuple[int, int]:
        plog = self._existing() or self._create()
        now = self._wall_ms()
        batch = build_batch([{"key": k, "value": v, "timestamp": now} for k, v in records])
        plog.append(batch, origin="coordinator")
        self._appended()
        end: int = plog.log_end_offset
        return end, now

    def end_offset(self) -> int:
        plog = self._existing()
        return 0 if plog is None else int(plog.log_end_offset)

    def read(self, start: int) -> Iterator[tuple[int, bytes | None, bytes | None, int]]:
        """(offset, key, value, timestamp) of every record from ``start`` on, read with the
        coordinators' replay: a batch that does not decode is skipped and logged as
        ``registry.record_skipped``, a log that cannot be read ends the replay, not the broker."""
        plog = self._existing()
        if plog is None:
            return
        start = max(start, plog.log_start_offset)
        for header, recs in replay.batches(plog, TOPIC, 0, start, "registry.record_skipped"):
            if header.is_control:
                continue
            for rec in recs:
                if rec.offset >= start:
                    yield rec.offset, rec.key, rec.value, rec.timestamp
