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
}


def value(option: str):
    return SHARED[option][1]


# The transaction.version Kafka is formatted with (tests/reference/kafka.py's default): the
# reference of transactions v1. A pair's minibroker finalizes the same level; tests of
# transactions v2 ask both for 2.
TRANSACTION_VERSION = 1


def minibroker_options(transaction_version: int = TRANSACTION_VERSION) -> dict[str, object]:
    return {**{opt: v for opt, (_prop, v) in SHARED.items()}, "transaction_version": transaction_version}


def kafka_properties() -> dict[str, str]:
    def text(v: object) -> str:
        return ("true" if v else "false") if isinstance(v, bool) else str(v)

    return {prop: text(v) for prop, v in SHARED.values()}
