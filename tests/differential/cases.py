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
    # KIP-890 part 1: a transactional batch for a partition outside the transaction, and a
    # TxnOffsetCommit without AddOffsetsToTxn, at the versions before and since the clients
    # understand TRANSACTION_ABORTABLE (Produce v11, TxnOffsetCommit v4).
    "outside-the-transaction-by-version": [
        ("init_producer_id", dict(who="A", version=4, ids="none", timeout="short")),
        ("produce", dict(who="A", topic=0, partition=0, version=10, epoch_delta=0, seq="next", count=1)),
        ("produce", dict(who="A", topic=0, partition=0, version=11, epoch_delta=0, seq="next", count=1)),
        ("txn_offset_commit", dict(who="A", version=3, epoch_delta=0, member="none", offset=0)),
        ("txn_offset_commit", dict(who="A", version=4, epoch_delta=0, member="none", offset=0)),
        ("add_partitions", dict(who="A", version=3, which="t0p0", epoch_delta=0)),
        ("produce", dict(who="A", topic=0, partition=1, version=11, epoch_delta=0, seq="next", count=1)),
        ("end_txn", dict(who="A", version=4, commit=False, ids="own")),
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


_INIT = ("init_producer_id", dict(who="A", version=5, ids="none", timeout="short"))


def _produce(version=12, partition=0, epoch_delta=0, count=1):
    return ("produce", dict(who="A", topic=0, partition=partition, version=version,
                            epoch_delta=epoch_delta, seq="next", count=count))


def _end(version=5, commit=True, ids="own"):
    return ("end_txn", dict(who="A", version=version, commit=commit, ids=ids))


# Transactions v2 (KIP-890 part 2), run with transaction.version 2 finalized on both brokers
# (tests/differential/test_transactions_v2.py): Produce v12 and TxnOffsetCommit v5 register
# their partition implicitly, EndTxn v5 bumps the epoch and answers the ids to go on with.
CASES_V2: dict[str, list[tuple[str, dict]]] = {
    "v2-implicit-produce-then-commit": [
        _INIT, _produce(count=2), _produce(partition=1), _end(),
        ("fetch", dict(topic=0, isolation=1, version=17)),
        ("describe_transactions", dict()),
        _end(),                      # a commit with nothing open, at the new epoch
        _end(commit=False),          # an empty abort: the epoch moves on again
        ("describe_transactions", dict()),
    ],
    "v2-retried-end-txn": [
        _INIT, _produce(), _end(),
        _end(ids="stale_epoch"),     # the retry of the commit: the same answer
        _end(commit=False, ids="stale_epoch"),
        _end(version=4, ids="stale_epoch"),
        _end(ids="bumped_epoch"),
        ("describe_transactions", dict()),
    ],
    "v2-late-batch-of-the-ended-transaction": [
        _INIT, _produce(), _end(),
        _produce(epoch_delta=-1),    # the old epoch, after the markers of the bumped one
        _produce(version=11),        # v11 never registers: outside the transaction
        _produce(), _end(commit=False),
        ("fetch", dict(topic=0, isolation=1, version=17)),
        ("fetch", dict(topic=0, isolation=0, version=17)),
    ],
    "v2-txn-offset-commit-registers-the-group": [
        _INIT,
        ("txn_offset_commit", dict(who="A", version=5, epoch_delta=0, member="none", offset=3)),
        ("offset_fetch", dict(require_stable=True, version=8)),
        _end(),
        ("offset_fetch", dict(require_stable=True, version=8)),
        ("txn_offset_commit", dict(who="A", version=5, epoch_delta=-1, member="none", offset=4)),
        ("describe_transactions", dict()),
    ],
    "v2-empty-abort-after-init": [
        _INIT, _end(commit=False), _end(), _end(commit=False, ids="stale_epoch"),
        ("describe_transactions", dict()),
        ("init_producer_id", dict(who="A", version=5, ids="own", timeout="short")),
    ],
    "v2-timeout-overtakes-the-commit": [
        _INIT, _produce(count=2),
        ("wait_txn_timeout", dict()),
        ("describe_transactions", dict()),
        _end(),                      # one epoch behind the coordinator's abort
        _end(commit=False),
        ("init_producer_id", dict(who="A", version=5, ids="own", timeout="short")),
        ("fetch", dict(topic=0, isolation=1, version=17)),
    ],
    "v2-v1-requests-in-a-v2-transaction": [
        _INIT, _produce(), _end(version=4),  # EndTxn v4 does not bump
        ("add_partitions", dict(who="A", version=3, which="t0p1", epoch_delta=0)),
        _produce(version=11, partition=1), _end(),
        ("describe_transactions", dict()),
    ],
    "v2-epoch-exhausted-at-end-txn": [
        ("fast_forward_epoch", dict(who="A", to=32766)),
        _produce(), _end(),          # markers at 32767, then a new producer id at epoch 0
        ("describe_transactions", dict()),
        _produce(), _end(commit=False),
        ("fetch", dict(topic=0, isolation=0, version=17)),
    ],
}


def script(name: str) -> str:
    """The case as the replayable script hypothesis would print."""
    lines = ["state = DifferentialEOS()", "state.setup()"]
    for rule, kwargs in {**CASES, **CASES_V2}[name]:
        args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        lines.append(f"state.{rule}({args})")
    return "\n".join(lines + ["state.teardown()"]) + "\n"


def run_case(name: str) -> None:
    from .machine import DifferentialEOS

    state = DifferentialEOS()
    try:
        state.setup()
        for rule, kwargs in {**CASES, **CASES_V2}[name]:
            getattr(state, rule)(**kwargs)
        state.teardown()
    except AssertionError as e:
        raise AssertionError(f"{e}\n\nreplay with python -m tests.differential --replay FILE, FILE holding:\n"
                             f"{script(name)}") from None
