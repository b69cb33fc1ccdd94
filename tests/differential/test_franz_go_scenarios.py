"""franz-go (tests/go/mbgo) against Apache Kafka 4.4.0 and minibroker: the same program, the same
observable outcome (tests/differential/clients/franz_go_scenarios.py), and that outcome is the one
exactly-once promises.

At transaction.version 1 both brokers are the session's (Kafka is formatted at level 1, like
minibroker's default). At level 2 (KIP-890 part 2: franz-go sends EndTxn v5 and no
AddPartitionsToTxn/AddOffsetsToTxn, and each EndTxn bumps the epoch) this module starts its own
minibroker with ``--transaction-version 2`` and, only if that broker accepts the option, its own
Kafka formatted at level 2; before the option exists those cases are skipped.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from minibroker.testing import MiniBroker, topic_name
from tests.integration import franz_go
from tests.reference import settings
from tests.reference.kafka import KafkaReference

from .clients import franz_go_scenarios as sc
from .clients.topics import create_topic

READ_COMMITTED, READ_UNCOMMITTED = sc.READ_COMMITTED, sc.READ_UNCOMMITTED


@pytest.fixture(scope="module")
def mbgo():
    return franz_go.binary()


@pytest.fixture(scope="module")
def level1(kafka_reference, mbgo):
    with MiniBroker(name="fg-scenarios", **settings.minibroker_options()) as mb:
        yield {"kafka": kafka_reference.bootstrap_servers, "minibroker": mb.bootstrap_servers}


@pytest.fixture(scope="module")
def level2(kafka_reference, mbgo):
    mb = MiniBroker(name="fg-scenarios-tv2", **settings.minibroker_options(transaction_version=2))
    franz_go.start_or_skip(mb)
    try:
        with KafkaReference(settings.kafka_properties(), transaction_version=2,
                            classpath=settings.kafka_classpath()) as kafka:
            yield {"kafka": kafka.bootstrap_servers, "minibroker": mb.bootstrap_servers}
    finally:
        mb.close()


@pytest.fixture(params=[1, 2], ids=["tv1", "tv2"])
def brokers(request):
    return request.getfixturevalue(f"level{request.param}"), request.param


def on_both(brokers: dict, fn) -> dict:
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(fn, bootstrap) for name, bootstrap in brokers.items()}
        return {name: f.result() for name, f in futures.items()}


def assert_same(out: dict, what: str) -> None:
    assert out["minibroker"] == out["kafka"], (
        f"{what}: minibroker's outcome differs from Kafka's\n kafka:      {out['kafka']}\n"
        f" minibroker: {out['minibroker']}")


def test_franz_go_commit_abort(brokers):
    """commit, abort, commit, abort: same offsets, epochs (bumped per transaction at level 2 only)
    and records on both; read_committed sees transactions 0 and 2."""
    bs, level = brokers
    topic, parts, txns, per_txn = topic_name(f"fg-ca-tv{level}"), 2, 4, 6
    for b in bs.values():
        create_topic(b, topic, parts)
    out = on_both(bs, lambda b: sc.commit_abort(b, topic, parts, txns, per_txn, topic))
    assert_same(out, f"franz-go commit/abort at transaction.version {level}")
    res = out["kafka"]
    assert [t["commit"] for t in res["txns"]] == [True, False, True, False]
    assert [t["epoch_delta"] for t in res["txns"]] == ([0, 1, 2, 3] if level >= 2 else [0, 0, 0, 0])
    every = sorted([i % parts, k * (per_txn // parts + 1) + i // parts, "", f"t{k}-{i}"]
                   for k in range(txns) for i in range(per_txn))
    assert res["records"] == {READ_COMMITTED: [r for r in every if r[3][1] in "02"], READ_UNCOMMITTED: every}


def test_franz_go_idempotent(level1):
    topic, parts, n = topic_name("fg-idem"), 3, 90
    for b in level1.values():
        create_topic(b, topic, parts)
    out = on_both(level1, lambda b: sc.idempotent(b, topic, parts, n))
    assert_same(out, "franz-go idempotent produce")
    expected = sorted([i % parts, i // parts, f"r-{i}"] for i in range(n))
    assert out["kafka"]["produced"] == expected and out["kafka"]["idempotent"]


def test_franz_go_eos(brokers):
    """consume-transform-produce in a group with GroupTransactSession: the same output on both,
    every input record once, in order per key."""
    bs, level = brokers
    src, dst, group = (topic_name(f"fg-eos-{w}-tv{level}") for w in ("in", "out", "group"))
    parts = 3
    for b in bs.values():
        create_topic(b, src, parts)
        create_topic(b, dst, parts)
    records = sc.keyed_input(600, 10, seed=level)
    out = on_both(bs, lambda b: sc.eos(b, src, dst, group, parts, records))
    assert_same(out, f"franz-go EOS at transaction.version {level}")
    expected: dict[str, list[str]] = {}
    for key, value in records:
        expected.setdefault(key, []).append(value.upper())
    assert out["kafka"]["count"] == len(records) and out["kafka"]["values"] == expected
