"""minibroker: a Kafka-protocol broker with exactly-once semantics you can run anywhere."""

__version__ = "0.1.0"
