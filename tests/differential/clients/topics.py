"""Topics for the client scenarios, created the same way on both brokers."""

from __future__ import annotations

import time


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """CreateTopics, then wait until Metadata lists every partition.

    Kafka (KRaft) answers CreateTopics before its broker has the topic's metadata, so a client
    started at once could see an unknown topic; minibroker has it when it answers.
    """
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                                  operation_timeout=timeout, request_timeout=timeout)
    futures[topic].result(timeout=timeout)
    deadline = time.monotonic() + timeout
    got = 0
    for _ in range(int(timeout / 0.1) + 1):
        md = admin.list_topics(topic=topic, timeout=timeout)
        got = len(md.topics[topic].partitions) if topic in md.topics and not md.topics[topic].error else 0
        if got == partitions or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert got == partitions, f"{bootstrap}: {topic} has {got} partitions {timeout} s after CreateTopics({partitions})"
