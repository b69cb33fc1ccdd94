"""The settings both brokers of a differential test get, in each one's own words.

One table, so Kafka's server.properties and minibroker's command line cannot drift
apart: a timing that differs between the two would show up as a false divergence.
"""

from __future__ import annotations

# minibroker option (MiniBroker keyword) -> Kafka broker property.
SHARED = {
    "num_partitions": ("num.partitions", 3),
    "auto_create_topics": ("auto.create.topics.enable", True),
    "group_initial_rebalance_delay_ms": ("group.initial.rebalance.delay.ms", 0),
    "transaction_max_timeout_ms": ("transaction.max.timeout.ms", 900_000),
    # Short, so "wait past the transaction timeout" costs seconds, not minutes.
    "transaction_abort_check_interval_ms": ("transaction.abort.timed.out.transaction.cleanup.interval.ms", 200),
    "transactional_id_expiration_ms": ("transactional.id.expiration.ms", 604_800_000),
    # Short, so a producer's state on a partition can expire within one example.
    "producer_id_expiration_ms": ("producer.id.expiration.ms", 3_000),
    "producer_id_expiration_check_interval_ms": ("producer.id.expiration.check.interval.ms", 200),
    # Short, so a compaction round follows a segment roll within a test's patience.
    "log_cleaner_backoff_ms": ("log.cleaner.backoff.ms", 100),
}


# ACLs (tests/differential/test_acls.py): both brokers run Kafka's StandardAuthorizer with the
# PLAINTEXT listener's principal, User:ANONYMOUS, a super user, so every other differential test
# is unaffected; a SASL_PLAINTEXT listener with these PLAIN users gives the ACL tests principals
# that are not (admin is a super user there too).
KAFKA_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SUPER_USERS = "User:ANONYMOUS;User:admin"
SASL_USERS = {"alice": "alice-secret", "bob": "bob-secret", "admin": "admin-secret"}


def value(option: str):
    return SHARED[option][1]


# The transaction.version Kafka is formatted with (tests/reference/kafka.py's default): the
# reference of transactions v1. A pair's minibroker finalizes the same level; tests of
# transactions v2 ask both for 2.
TRANSACTION_VERSION = 1


def minibroker_options(transaction_version: int = TRANSACTION_VERSION) -> dict[str, object]:
    return {**{opt: v for opt, (_prop, v) in SHARED.items()}, "transaction_version": transaction_version,
            "client_telemetry": "on" if telemetry_sink() else "off",
            "authorizer": "standard", "super_users": SUPER_USERS}


def kafka_properties() -> dict[str, str]:
    def text(v: object) -> str:
        return ("true" if v else "false") if isinstance(v, bool) else str(v)

    props = {prop: text(v) for prop, v in SHARED.values()}
    props["authorizer.class.name"] = KAFKA_AUTHORIZER
    props["super.users"] = SUPER_USERS
    if telemetry_sink():
        props["metric.reporters"] = TELEMETRY_SINK_CLASS
    return props


# KIP-714: Kafka serves GetTelemetrySubscriptions/PushTelemetry only with a metrics receiver
# configured; the reference Kafka gets one (tests/reference/telemetry_sink.py) and the pair's
# minibroker --client-telemetry on. Without a JDK neither serves them.
TELEMETRY_SINK_CLASS = "minibroker.reference.TelemetrySink"
_sink: list = []


def telemetry_sink():
    """The compiled sink's classes dir (compiled once per process), or None."""
    if not _sink:
        from .kafka import libs_dir
        from .telemetry_sink import classes

        try:
            _sink.append(classes(libs_dir()))
        except RuntimeError:  # javac failed: Kafka runs without the sink
            _sink.append(None)
    return _sink[0]


def kafka_classpath() -> list:
    sink = telemetry_sink()
    return [sink] if sink else []
