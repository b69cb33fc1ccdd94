"""The source's options, parsed once on the driver (no pyspark or Kafka client needed).

Names follow Spark's Kafka source (``KafkaSourceProvider``) so that code written for
``format("kafka")`` keeps its options. Spark passes option keys case-insensitively.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from .offsets import OffsetSpec, parse_offset_spec

# The format name users pass to ``spark.read.format``; here, not in the package's
# ``__init__``, so that the source module need not import its own package.
SOURCE_NAME = "minibroker"

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"

# Spark's Kafka source options we implement, lower-cased (Spark hands keys over in any case).
_KNOWN = {
    "kafka.bootstrap.servers", "subscribe", "subscribepattern", "assign", "startingoffsets",
    "endingoffsets", "maxoffsetspertrigger", "minpartitions", "maxrecordsperpartition",
    "includeheaders", "failondataloss", "kafkaconsumer.polltimeoutms", "isolation.level",
    "kafka.isolation.level", "path", "fetchoffset.numretries", "fetchoffset.retryintervalms",
}
# librdkafka settings the reader owns: a user value would break the planned ranges.
_RESERVED_KAFKA = {"enable.auto.commit", "enable.partition.eof", "auto.offset.reset",
                   "isolation.level", "bootstrap.servers", "enable.auto.offset.store"}


# A task reads at most this many offsets unless maxRecordsPerPartition says otherwise: one
# huge partition would otherwise be one long task (~5 s per million records per core).
DEFAULT_MAX_RECORDS_PER_PARTITION = 1_000_000


class OptionError(ValueError):
    """A bad option; the message names it."""


@dataclass(frozen=True)
class SourceOptions:
    bootstrap: str | None  # None: offline, ``path`` is set
    path: str | None
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[tuple[str, int], ...] = ()
    starting: OffsetSpec = field(default_factory=lambda: OffsetSpec("earliest"))
    ending: OffsetSpec = field(default_factory=lambda: OffsetSpec("latest"))
    starting_given: bool = False
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int = DEFAULT_MAX_RECORDS_PER_PARTITION
    include_headers: bool = False
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = 120_000
    isolation_level: str = READ_COMMITTED
    kafka_config: tuple[tuple[str, str], ...] = ()  # extra librdkafka settings (kafka.* options)

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == READ_COMMITTED

    @property
    def offline(self) -> bool:
        return self.path is not None

    def matches(self, topic: str) -> bool:
        """Whether ``subscribe``/``subscribePattern`` selects ``topic`` (not for ``assign``)."""
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return topic in self.subscribe

    def consumer_config(self) -> dict[str, object]:
        """librdkafka settings for a reader or a metadata client."""
        conf: dict[str, object] = {
            "bootstrap.servers": self.bootstrap,
            # librdkafka wants a group.id for a Consumer; nothing joins or commits with it.
            "group.id": "minibroker-spark",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            # A planned offset that no longer exists is data loss, never a silent jump.
            "auto.offset.reset": "error",
            "isolation.level": self.isolation_level,
        }
        conf.update(dict(self.kafka_config))
        return conf


def _int(options: Mapping[str, str], key: str, minimum: int) -> int | None:
    raw = options.get(key)
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(f"option {key!r} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise OptionError(f"option {key!r} must be >= {minimum}, got {value}")
    return value


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise OptionError(f"option {key!r} must be true or false, got {raw!r}")
    return text == "true"


def _assignment(raw: str) -> tuple[tuple[str, int], ...]:
    import json

    try:
        doc = json.loads(raw)
        pairs = [(str(t), int(p)) for t, parts in doc.items() for p in parts]
    except (ValueError, TypeError, AttributeError):
        raise OptionError(f'option assign must be JSON like {{"topicA":[0,1]}}, got {raw!r}') from None
    if not pairs:
        raise OptionError("option assign names no partition")
    return tuple(sorted(set(pairs)))


def parse_options(raw: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate and normalise the user's options (keys in any case)."""
    options = {str(k).lower(): str(v) for k, v in raw.items()}
    unknown = sorted(k for k in options if k not in _KNOWN and not k.startswith("kafka."))
    if unknown:
        raise OptionError(f"unknown option(s) {unknown}; see the minibroker.spark documentation")

    path = options.get("path")
    bootstrap = options.get("kafka.bootstrap.servers")
    if (path is None) == (bootstrap is None):
        raise OptionError("give exactly one of kafka.bootstrap.servers (a broker) and path "
                          "(a minibroker data directory, read offline)")

    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if k in options]
    if len(chosen) != 1:
        raise OptionError("give exactly one of subscribe, subscribePattern and assign")
    subscribe: tuple[str, ...] = ()
    pattern = None
    assign: tuple[tuple[str, int], ...] = ()
    if "subscribe" in options:
        subscribe = tuple(t.strip() for t in options["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise OptionError("option subscribe names no topic")
    elif "subscribepattern" in options:
        pattern = options["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError(f"option subscribePattern is not a regular expression: {e}") from None
    else:
        assign = _assignment(options["assign"])

    given = {k: options[k].strip().lower()
             for k in ("isolation.level", "kafka.isolation.level") if k in options}
    if len(set(given.values())) > 1:
        raise OptionError(f"isolation.level and kafka.isolation.level disagree: {given}; give one")
    iso = next(iter(given.values()), READ_COMMITTED)
    if iso not in (READ_COMMITTED, READ_UNCOMMITTED):
        raise OptionError(f"isolation.level must be read_committed or read_uncommitted, got {iso!r}")

    starting_given = "startingoffsets" in options
    starting = parse_offset_spec(options.get("startingoffsets", "latest" if streaming else "earliest"),
                                 "startingOffsets")
    if starting.kind == "latest" and not streaming:
        raise OptionError("startingOffsets=latest is not allowed for a batch query (Spark's rule too)")
    if "endingoffsets" in options and streaming:
        raise OptionError("endingOffsets is for batch queries only")
    ending = parse_offset_spec(options.get("endingoffsets", "latest"), "endingOffsets")
    if ending.kind == "earliest":
        raise OptionError("endingOffsets=earliest is not allowed (Spark's rule too)")
    if ending.kind == "json" and any(v == -2 for v in ending.offsets.values()):
        raise OptionError("endingOffsets cannot use -2 (earliest) for a partition")
    if starting.kind == "json" and any(v == -1 for v in starting.offsets.values()) and not streaming:
        raise OptionError("startingOffsets cannot use -1 (latest) for a partition of a batch query")

    kafka_config = []
    for k, v in options.items():
        if k.startswith("kafka.") and k not in ("kafka.bootstrap.servers", "kafka.isolation.level"):
            name = k[len("kafka."):]
            if name in _RESERVED_KAFKA:
                raise OptionError(f"option {k!r} is set by the source itself and cannot be given")
            kafka_config.append((name, v))

    return SourceOptions(
        bootstrap=bootstrap,
        path=path,
        subscribe=subscribe,
        pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        starting_given=starting_given,
        max_offsets_per_trigger=_int(options, "maxoffsetspertrigger", 1),
        min_partitions=_int(options, "minpartitions", 1),
        max_records_per_partition=(_int(options, "maxrecordsperpartition", 1)
                                   or DEFAULT_MAX_RECORDS_PER_PARTITION),
        include_headers=_bool(options, "includeheaders", False),
        fail_on_data_loss=_bool(options, "failondataloss", True),
        poll_timeout_ms=_int(options, "kafkaconsumer.polltimeoutms", 1) or 120_000,
        isolation_level=iso,
        kafka_config=tuple(sorted(kafka_config)),
    )
