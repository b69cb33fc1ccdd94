"""KafkaJS 2.x produce (acks -1); read back with confluent-kafka (KafkaJS consumes only through groups)."""

from __future__ import annotations

import json
import subprocess

import pytest

from . import wire
from .clients import check_contiguous, consume_assigned, create_topic, run_node

N = 5000
PARTITIONS = 4


def js_value(i: int) -> bytes:
    return f"js-{i}-".encode() + b"y" * ((i * 53) % 3000)


def _run_node(*args: str, timeout: float = 150.0) -> subprocess.CompletedProcess:
    return run_node("produce.js", *args, timeout=timeout)


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_kafkajs_produce(broker, topic, compression):
    create_topic(broker.bootstrap_servers, topic, PARTITIONS)
    r = _run_node("--broker", broker.bootstrap_servers, "--topic", topic, "--count", str(N),
                  "--partitions", str(PARTITIONS), "--compression", compression)
    assert r.returncode == 0, f"produce.js exit {r.returncode}\nstderr:\n{r.stderr[-4000:]}"
    acked = {(p, o): i for i, p, o in json.loads(r.stdout)["acked"]}
    assert len(acked) == N, f"{len(acked)} distinct offsets for {N} messages"

    ends = wire.high_watermarks(broker.port, topic, range(PARTITIONS))
    assert ends == {p: N // PARTITIONS + (p < N % PARTITIONS) for p in range(PARTITIONS)}, ends
    records, errors = consume_assigned(broker, topic, range(PARTITIONS), ends=ends)
    assert not errors, errors[:5]
    check_contiguous(records, ends)
    for p, recs in records.items():
        for off, key, value in recs:
            i = acked[(p, off)]
            assert key == f"k{i}".encode(), (p, off, key)
            assert value == js_value(i), (p, off, value[:40])
