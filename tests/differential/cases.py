"""Explicit differential cases: the divergences the issue-14 audit found, as step lists.

Random examples reach most of these in a few dozen examples, but not reliably in CI's budget,
and one (the end of the epoch range) not at all: each case here is a script of machine rules
(tests/differential/machine.py) that runs against both brokers in every CI run.
"""

from __future__ import annotations

CASES: dict[str, list[tuple[str, dict]]] = {
    # Kafka's TransactionCoordinator sets lastProducerEpoch = -1 when a new instance initialises,
    # so the fenced instance's (producerId, oldEpoch) is not taken for a retry of the newer one.
    "fenced-instance-cannot-retake-epoch": [
        ("init_producer_id", dict(who="A", version=4, ids="none", timeout="short")),
        ("init_producer_id", dict(who="B", version=4, ids="none", timeout="short")),
        ("add_partitions", dict(who="B", version=3, which="t0p0", epoch_delta=0)),
        ("produce", dict(who="B", topic=0, partition=0, version=9, epoch_delta=0, seq="next", count=2)),
        ("init_producer_id", dict(who="A", version=4, ids="own", timeout="short")),
        ("end_txn", dict(who="A", version=3, commit=True, ids="own")),
        ("end_txn", dict(who="B", version=3, commit=True, ids="own")),
    ],
    # Only one of producerId/producerEpoch set: INVALID_REQUEST.
    "half-set-ids": [
        ("init_producer_id", dict(who="A", version=4, ids="none", timeout="short")),
        ("init_producer_id", dict(who="A", version=4, ids="pid_only", timeout="short")),
        ("init_producer_id", dict(who="A", version=4, ids="epoch_only", timeout="short")),
    ],
    # TransactionMetadata.prepareFenceProducerEpoch: a timeout at epoch 32766 still fences (32767).
    "timeout-at-epoch-32766-fences": [
        ("fast_forward_epoch", dict(who="A", to=32766)),
        ("add_partitions", dict(who="A", version=3, which="t0p0", epoch_delta=0)),
        ("produce", dict(who="A", topic=0, partition=0, version=9, epoch_delta=0, seq="next", count=2)),
        ("wait_txn_timeout", dict()),
        ("add_partitions", dict(who="A", version=3, which="t0p1", epoch_delta=0)),
        ("produce", dict(who="A", topic=0, partition=1, version=9, epoch_delta=0, seq="next", count=1)),
        ("end_txn", dict(who="A", version=3, commit=True, ids="own")),
        ("fetch", dict(topic=0, isolation=1, version=12)),
        ("describe_transactions", dict()),
        ("init_producer_id", dict(who="A", version=4, ids="own", timeout="short")),
    ],
    # KIP-890 verification: the batch's epoch must equal the coordinator's, higher is refused too.
    "batch-epoch-above-coordinator": [
        ("init_producer_id", dict(who="A", version=4, ids="none", timeout="short")),
        ("add_partitions", dict(who="A", version=3, which="t0p0", epoch_delta=0)),
        ("produce", dict(who="A", topic=0, partition=0, version=9, epoch_delta=1, seq="next", count=1)),
        ("produce", dict(who="A", topic=0, partition=0, version=11, epoch_delta=1, seq="next", count=1)),
        ("end_txn", dict(who="A", version=3, commit=True, ids="own")),
        ("list_offsets", dict(topic=0, isolation=1, earliest=False, version=7)),
    ],
    # KafkaApis.handleAddPartitionsToTxnRequest refuses internal topics.
    "internal-topic-in-transaction": [
        ("init_producer_id", dict(who="A", version=4, ids="none", timeout="short")),
        ("add_partitions", dict(who="A", version=0, which="internal", epoch_delta=0)),
        ("add_partitions", dict(who="A", version=3, which="t0p0+internal", epoch_delta=0)),
        ("end_txn", dict(who="A", version=3, commit=False, ids="own")),
    ],
    # ProducerStateManager: a producer whose state expired may come back at any sequence (KIP-360).
    "expired-producer-returns-mid-sequence": [
        ("init_idempotent", dict(version=4)),
        ("produce", dict(who="I", topic=0, partition=0, version=9, epoch_delta=0, seq="next", count=2)),
        ("wait_producer_expiry", dict()),
        ("produce", dict(who="I", topic=0, partition=0, version=9, epoch_delta=0, seq="next", count=1)),
        ("describe_producers", dict(topic=0)),
    ],
}


def script(name: str) -> str:
    """The case as the replayable script hypothesis would print."""
    lines = ["state = DifferentialEOS()", "state.setup()"]
    for rule, kwargs in CASES[name]:
        args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        lines.append(f"state.{rule}({args})")
    return "\n".join(lines + ["state.teardown()"]) + "\n"


def run_case(name: str) -> None:
    from .machine import DifferentialEOS

    state = DifferentialEOS()
    try:
        state.setup()
        for rule, kwargs in CASES[name]:
            getattr(state, rule)(**kwargs)
        state.teardown()
    except AssertionError as e:
        raise AssertionError(f"{e}\n\nreplay with python -m tests.differential --replay FILE, FILE holding:\n"
                             f"{script(name)}") from None
