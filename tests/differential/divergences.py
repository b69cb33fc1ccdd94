"""Where minibroker answers differently from Apache Kafka ON PURPOSE — the one list.

The normaliser (tests/differential/normalise.py) reads this list and nothing else: every
difference not explained here fails the differential test and is a bug. Each entry names
the API and the field path it affects, and why minibroker differs.

A field path is a tuple of field names from the response's root, with ``*`` for any element
of a list; the normaliser drops that field from both answers before comparing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Divergence:
    api_key: int
    path: tuple[str, ...]
    reason: str
    # When set, only these values are rewritten (on both sides) instead of dropping the field:
    # a divergence in one error code then hides no other error at that field.
    replace: tuple[tuple[object, object], ...] = ()


DIVERGENCES: tuple[Divergence, ...] = (
    # None yet: every difference the differential test has found so far is a bug (issue 14).
)


# Differences found and reported as minibroker BUGS, not yet fixed. Never applied by default:
# ``MINIBROKER_DIFFERENTIAL_LOOK_PAST=name,name`` drops them for one local run, so a developer can
# look for the next divergence while one is being fixed. Remove an entry once it is fixed.
OPEN_BUGS: dict[str, tuple[Divergence, ...]] = {
    "describe-txn-not-found-ids": (
        Divergence(65, ("transaction_states", "*", "producer_id"),
                   "an unknown transactional id: Kafka answers producer id/epoch 0, minibroker -1"),
        Divergence(65, ("transaction_states", "*", "producer_epoch"), "same"),
    ),
    "txn-offset-commit-fenced-code": (
        Divergence(28, ("topics", "*", "partitions", "*", "error_code"),
                   "TxnOffsetCommit v3 with an old epoch: Kafka INVALID_PRODUCER_EPOCH (47), "
                   "minibroker PRODUCER_FENCED (90)", replace=((90, 47),)),
    ),
    "produce-error-log-start-offset": (
        Divergence(0, ("responses", "*", "partition_responses", "*", "log_start_offset"),
                   "a refused batch (e.g. INVALID_PRODUCER_EPOCH): Kafka answers log_start_offset -1, "
                   "minibroker the partition's"),
    ),
    "init-after-exhausted-fence": (
        Divergence(22, ("error_code",),
                   "after a timeout fenced epoch 32766 to 32767, InitProducerId(pid, 32766): Kafka 4.4.0 "
                   "answers UNKNOWN_SERVER_ERROR (-1), minibroker PRODUCER_FENCED (90)", replace=((-1, 90),)),
    ),
    # Looked past by not sending it (tests/differential/machine.py, produce).
    "txn-batch-without-pid": (),
}


def _looked_past() -> list[Divergence]:
    names = [n for n in os.environ.get("MINIBROKER_DIFFERENTIAL_LOOK_PAST", "").split(",") if n]
    unknown = [n for n in names if n not in OPEN_BUGS]
    if unknown:
        raise ValueError(f"MINIBROKER_DIFFERENTIAL_LOOK_PAST names no open bug: {unknown}; "
                         f"known: {sorted(OPEN_BUGS)}")
    return [d for n in names for d in OPEN_BUGS[n]]


def looked_past(name: str) -> bool:
    return name in os.environ.get("MINIBROKER_DIFFERENTIAL_LOOK_PAST", "").split(",")


def applicable(api_key: int) -> list[Divergence]:
    return [d for d in (*DIVERGENCES, *_looked_past()) if d.api_key == api_key]
