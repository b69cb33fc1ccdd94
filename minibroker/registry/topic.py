"""``_schemas`` in the broker's own log: one compacted partition, created on first write as
Confluent's KafkaStore creates it (``cleanup.policy=compact``, one partition), appended to the
way the group coordinator appends to ``__consumer_offsets`` (a coordinator-origin batch on the
partition log, as durable on return as the broker's fsync policy makes any append: ``always``
syncs before it returns), read back at start batch by batch."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from minibroker_protocol.batch import iter_headers
from minibroker_protocol.records import build_batch, decode_batch
from minibroker_storage.lazylog import get_logger

log = get_logger("minibroker.registry")

TOPIC = "_schemas"  # Confluent's kafkastore.topic default
CONFIGS = {"cleanup.policy": "compact"}
READ_BYTES = 1 << 20


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
        plog = self._existing()
        if plog is None:
            return
        offset = max(start, plog.log_start_offset)
        # each pass moves ``offset`` forward or ends; the bound is a backstop
        for _ in range(1 << 40):
            if offset >= plog.log_end_offset:
                return
            try:
                view = plog.read(offset, READ_BYTES)
            except Exception as e:  # a damaged log ends the replay, not the broker
                log.error("registry.replay_stopped", offset=offset, reason=str(e))
                return
            moved = offset
            for header in iter_headers(view):
                moved = max(moved, header.next_offset)
                if header.is_control:
                    continue
                try:
                    recs = decode_batch(view, header.position)
                except Exception as e:
                    log.warning("registry.record_skipped", offset=header.base_offset,
                                reason=f"batch does not decode: {e}")
                    continue
                for rec in recs:
                    if rec.offset >= offset:
                        yield rec.offset, rec.key, rec.value, rec.timestamp
            if moved <= offset:
                log.warning("registry.replay_stopped", offset=offset, reason="no complete batch")
                return
            offset = moved
