"""Dead-letter queues of share groups (KIP-1191, share.version 2) on Kafka 4.4 and minibroker:
the same real-client program (tests/integration/share_dlq_program.py — a confluent-kafka
ShareConsumer REJECTing records and RELEASEing others up to the delivery count limit, a plain
Consumer reading the DLQ topic) runs on both brokers of the pair; what each consumer received and
every DLQ record — partition, key, value, timestamp type, headers in order — are compared field
by field. Timestamps (the broker's clock) are checked to lie within the run on each side, and the
order in which two share partitions' writes interleave in one DLQ partition is a race on both,
so records compare sorted by their source partition and offset."""

from __future__ import annotations

import uuid

import pytest

from tests.integration import share_dlq_program as prog


def _bootstrap(side) -> str:
    host, port = side.conn.address
    return f"{host}:{port}"


@pytest.mark.parametrize("copy", [False, True], ids=["headers-only", "copy-record"])
def test_dlq_records_are_kafkas(differential_pair, copy):
    # the same names on both (other tests list every group with configs and compare)
    suffix = "dlqdiff-" + uuid.uuid4().hex[:8]
    kafka, mini = (prog.scenario(_bootstrap(s), copy=copy, suffix=suffix) for s in differential_pair.sides)
    assert mini["seen"] == kafka["seen"]
    assert len(kafka["dlq"]) == 9, kafka  # 3 partitions x (2 rejected + 1 at the limit)
    for k, m in zip(kafka["dlq"], mini["dlq"], strict=True):
        assert m == k, f"\n  Kafka:      {k}\n  minibroker: {m}"
