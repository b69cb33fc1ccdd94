"""Per-log configuration, and its mapping to Kafka's topic config names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from .errors import InvalidConfig

INT32_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
# Kafka's floor for segment.bytes (LegacyRecord.RECORD_OVERHEAD_V0).
MIN_SEGMENT_BYTES = 14

FlushMode = Literal["always", "interval", "never"]


@dataclass(frozen=True, slots=True)
class FlushPolicy:
    """When a log flushes its appends to disk."""
    # "never" is Kafka's default: leave write-back to the OS (flush.messages and
    # flush.ms both Long.MAX). "always" msyncs each append before it is acked.
    mode: FlushMode = "never"
    interval_ms: int = 1000
    # An owner flushes interval-mode logs off its own thread (``LogManager.add_due_flushes``);
    # appends then never wait for a flush. Without one, the append that finds flush.ms
    # elapsed flushes inline.
    background: bool = False

    def __post_init__(self) -> None:
        if self.mode not in ("always", "interval", "never"):
            raise InvalidConfig(f"unknown flush mode {self.mode!r}")
        if self.interval_ms < 0:
            raise InvalidConfig(f"flush interval {self.interval_ms} ms is negative")


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The per-log settings storage applies (Kafka's LogConfig subset)."""
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    retention_ms: int = 604800000  # -1 = keep forever
    retention_bytes: int = -1  # -1 = no size limit
    index_interval_bytes: int = 4096
    flush: FlushPolicy = field(default_factory=FlushPolicy)
    # Kafka's producer.id.expiration.ms: a broker-level setting, not a topic
    # config, so it has no entry in _KAFKA_NAMES and overrides leave it alone.
    producer_id_expiration_ms: int = 86400000
    # cleanup.policy and the cleaner's topic configs (storage/cleaner.py)
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 86400000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """Retention applies: Kafka deletes old segments only under the "delete" policy."""
        return "delete" in self.cleanup_policy

    def __post_init__(self) -> None:
        # Index positions are int32, so a segment can never exceed 2 GiB.
        if not MIN_SEGMENT_BYTES <= self.segment_bytes <= INT32_MAX:
            raise InvalidConfig(
                f"segment.bytes {self.segment_bytes} is outside "
                f"[{MIN_SEGMENT_BYTES}, {INT32_MAX}]"
            )
        if self.segment_ms < 1:
            raise InvalidConfig(f"segment.ms {self.segment_ms} must be at least 1")
        if self.retention_ms < -1:
            raise InvalidConfig(f"retention.ms {self.retention_ms} must be -1 or more")
        if self.index_interval_bytes < 0:
            raise InvalidConfig(
                f"index.interval.bytes {self.index_interval_bytes} is negative"
            )
        if self.producer_id_expiration_ms < 1:
            raise InvalidConfig(
                f"producer.id.expiration.ms {self.producer_id_expiration_ms} must be at least 1"
            )

    def with_overrides(self, overrides: Mapping[str, object] | None) -> LogConfig:
        """This config with Kafka topic-config overrides applied.

        Names this layer does not use are ignored: the catalog keeps them for
        DescribeConfigs, and whether a name is legal is the admin handler's call.
        """
        if not overrides:
            return self
        changes: dict[str, Any] = {}
        for name, attr in _KAFKA_NAMES.items():
            if name in overrides:
                changes[attr] = _long(name, overrides[name])
        if "cleanup.policy" in overrides:
            policy = str(overrides["cleanup.policy"])
            changes["cleanup_policy"] = tuple(p.strip() for p in policy.split(",") if p.strip())
        if "min.cleanable.dirty.ratio" in overrides:
            try:
                changes["min_cleanable_dirty_ratio"] = float(str(overrides["min.cleanable.dirty.ratio"]))
            except ValueError:
                raise InvalidConfig(
                    f"min.cleanable.dirty.ratio={overrides['min.cleanable.dirty.ratio']!r} "
                    "is not a number") from None
        flush = self.flush
        if "flush.messages" in overrides and _long("flush.messages", overrides["flush.messages"]) == 1:
            flush = replace(flush, mode="always")
        elif "flush.ms" in overrides:
            interval = _long("flush.ms", overrides["flush.ms"])
            flush = (replace(flush, mode="never") if interval >= LONG_MAX
                     else replace(flush, mode="interval", interval_ms=interval))
        return replace(self, flush=flush, **changes)

    def to_kafka(self) -> dict[str, str]:
        """The storage configs under Kafka's names, as DescribeConfigs shows them."""
        out = {name: str(getattr(self, attr)) for name, attr in _KAFKA_NAMES.items()}
        out["cleanup.policy"] = ",".join(self.cleanup_policy)
        out["min.cleanable.dirty.ratio"] = str(self.min_cleanable_dirty_ratio)
        mode = self.flush.mode
        out["flush.messages"] = "1" if mode == "always" else str(LONG_MAX)
        out["flush.ms"] = str(self.flush.interval_ms) if mode == "interval" else str(LONG_MAX)
        return out


_KAFKA_NAMES = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
}


def _long(name: str, value: object) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise InvalidConfig(f"{name}={value!r} is not an integer") from None
