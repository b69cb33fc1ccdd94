"""Topic-level configs: the names Kafka accepts, their types and where defaults come from.

Only the ones marked ``honoured`` change broker behaviour; the rest are
accepted and reported so tools that set them (Connect, Streams, Schema
Registry) work, as the README's support table says.
"""

from __future__ import annotations

from dataclasses import dataclass

# DescribeConfigs config_type values (ConfigResource / ConfigDef.Type)
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = range(1, 10)

# DescribeConfigs config_source values
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
CLIENT_METRICS_CONFIG = 7  # a client metrics subscription's own config

# ConfigResource.Type values (DescribeConfigs, IncrementalAlterConfigs, ListConfigResources)
RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER = 2, 4, 8
RESOURCE_CLIENT_METRICS, RESOURCE_GROUP = 16, 32
RESOURCE_TYPES = (RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_CLIENT_METRICS,
                  RESOURCE_GROUP)


@dataclass(frozen=True)
class TopicConfigDef:
    """A topic config Kafka defines: type, default, choices, and whether minibroker honours it."""
    name: str
    type: int
    default: str
    honoured: bool = False
    broker_attr: str | None = None  # Config attribute supplying the default
    choices: tuple[str, ...] | None = None
    doc: str = ""


_LONG_MAX = str(2**63 - 1)

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in [
        TopicConfigDef("cleanup.policy", LIST, "delete", honoured=True,
                       choices=("compact", "delete"),
                       doc="delete: retention removes old segments; compact: the log cleaner "
                           "keeps the latest record per key."),
        TopicConfigDef("compression.type", STRING, "producer",
                       choices=("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
                       doc="Batches are stored as the producer compressed them."),
        TopicConfigDef("delete.retention.ms", LONG, "86400000", honoured=True),
        TopicConfigDef("file.delete.delay.ms", LONG, "60000"),
        TopicConfigDef("errors.deadletterqueue.group.enable", BOOLEAN, "false", honoured=True,
                       doc="Share groups may write the records they archive to this topic "
                           "(KIP-1191; coordinator/share/dlq.py)."),
        TopicConfigDef("flush.messages", LONG, _LONG_MAX),
        TopicConfigDef("flush.ms", LONG, _LONG_MAX),
        TopicConfigDef("index.interval.bytes", INT, "4096", honoured=True),
        TopicConfigDef("max.compaction.lag.ms", LONG, _LONG_MAX, honoured=True),
        TopicConfigDef("max.message.bytes", INT, "1048588", honoured=True, broker_attr="message_max_bytes",
                       doc="Largest record batch accepted."),
        TopicConfigDef("message.timestamp.type", STRING, "CreateTime", honoured=True,
                       broker_attr="log_message_timestamp_type", choices=("CreateTime", "LogAppendTime"),
                       doc="LogAppendTime: the broker stamps each batch with its time as it is appended."),
        TopicConfigDef("message.timestamp.before.max.ms", LONG, _LONG_MAX, honoured=True,
                       broker_attr="log_message_timestamp_before_max_ms"),
        # one hour since Kafka 4.0 (KIP-937): a record from further in the future is refused
        TopicConfigDef("message.timestamp.after.max.ms", LONG, "3600000", honoured=True,
                       broker_attr="log_message_timestamp_after_max_ms"),
        TopicConfigDef("min.cleanable.dirty.ratio", DOUBLE, "0.5", honoured=True),
        TopicConfigDef("min.compaction.lag.ms", LONG, "0", honoured=True),
        TopicConfigDef("min.insync.replicas", INT, "1", honoured=True, broker_attr="min_insync_replicas",
                       doc="acks=all writes need this many replicas in sync (virtual brokers up), "
                           "capped at the replication factor."),
        TopicConfigDef("preallocate", BOOLEAN, "false"),
        TopicConfigDef("retention.bytes", LONG, "-1", honoured=True, broker_attr="retention_bytes"),
        TopicConfigDef("retention.ms", LONG, "604800000", honoured=True, broker_attr="retention_ms"),
        TopicConfigDef("segment.bytes", INT, "1073741824", honoured=True, broker_attr="segment_bytes"),
        TopicConfigDef("segment.index.bytes", INT, "10485760"),
        TopicConfigDef("segment.jitter.ms", LONG, "0"),
        TopicConfigDef("segment.ms", LONG, "604800000", honoured=True, broker_attr="segment_ms"),
        TopicConfigDef("unclean.leader.election.enable", BOOLEAN, "false"),
        TopicConfigDef("remote.storage.enable", BOOLEAN, "false", choices=("false",)),
    ]
}


def validate_topic_config(name: str, value: str | None) -> str | None:
    """Why the setting is refused (Kafka answers INVALID_CONFIG), or None."""
    d = TOPIC_CONFIGS.get(name)
    if d is None:
        return f"Unknown topic config name: {name}"
    if value is None:
        return f"Null value not supported for topic config {name}"
    if d.type in (INT, LONG, SHORT):
        try:
            v = int(value)
        except ValueError:
            kind = "INT" if d.type == INT else "LONG"
            return f"Invalid value {value} for configuration {name}: Not a number of type {kind}"
        if d.type == INT and not -(2**31) <= v < 2**31:
            return f"Invalid value {value} for configuration {name}: out of range"
        if name == "min.insync.replicas" and v < 1:  # LogConfig: atLeast(1)
            return f"Invalid value {value} for configuration {name}: Value must be at least 1"
        if name == "segment.bytes" and v < 14:
            return f"Invalid value {value} for configuration segment.bytes: Value must be at least 14"
    elif d.type == BOOLEAN and value.lower() not in ("true", "false"):
        return f"Invalid value {value} for configuration {name}: Expected value to be either true or false"
    elif d.type == DOUBLE:
        try:
            float(value)
        except ValueError:
            return f"Invalid value {value} for configuration {name}: Not a number of type DOUBLE"
    if d.choices is not None and d.type == LIST:
        # ConfigDef.ValidList: every element one of the choices; an empty list is allowed
        # (cleanup.policy="" keeps everything, Kafka 4)
        items = [x.strip() for x in value.split(",")] if value.strip() else []
        bad = [v for v in items if v not in d.choices]
        if bad:
            return (f"Invalid value {bad[0]} for configuration {name}: "
                    f"String must be one of: {', '.join(d.choices)}")
        return None
    if d.choices is not None and value not in d.choices:
        return (f"Invalid value {value} for configuration {name}: "
                f"String must be one of: {', '.join(d.choices)}")
    return None


def default_for(name: str, broker_config) -> tuple[str, int]:
    """(value, source) of a topic config with no override."""
    d = TOPIC_CONFIGS[name]
    if d.broker_attr is not None:
        value = getattr(broker_config, d.broker_attr)
        if str(value) != d.default:
            return str(value), STATIC_BROKER_CONFIG
    return d.default, DEFAULT_CONFIG
