"""The share coordinator's per-fetch work (issue 33): the state-batch overlay (newer batches over
older ones, as Kafka's PersisterStateBatchCombiner leaves them) works on ranges and must give
exactly what painting offset by offset gives; a ShareFetch answer carries only the log batches
of the acquired range (Kafka's ShareFetchUtils.maybeSliceFetchRecords)."""

from __future__ import annotations

import random

from minibroker.coordinator.share.coordinator import _overlay, _slice_to_acquired
from minibroker.coordinator.share.partition import Acquired, AcquiredRange
from minibroker_protocol.records import build_batch
from minibroker_protocol.share_log import StateBatch


def _per_offset(old, new):
    per = {}
    for b in (*old, *new):
        for o in range(b.first_offset, b.last_offset + 1):
            per[o] = (b.delivery_state, b.delivery_count)
    out = []
    for o in sorted(per):
        st, c = per[o]
        if out and out[-1].last_offset + 1 == o and (out[-1].delivery_state, out[-1].delivery_count) == (st, c):
            out[-1] = StateBatch(out[-1].first_offset, o, st, c)
        else:
            out.append(StateBatch(o, o, st, c))
    return out


def _batches(rng: random.Random, n: int, span: int, disjoint: bool) -> list[StateBatch]:
    out = []
    at = rng.randrange(span)
    for _ in range(n):
        if disjoint:
            first = at + rng.randrange(3)
        else:
            first = rng.randrange(span)
        last = first + rng.randrange(6)
        out.append(StateBatch(first, last, rng.choice((0, 2, 4)), rng.randrange(3)))
        at = last + 1
    return out


def test_overlay_equals_painting_offset_by_offset() -> None:
    rng = random.Random(31)
    for _ in range(3000):  # bounded: random cases of up to 8 + 8 batches over ~60 offsets
        disjoint = rng.random() < 0.5
        old = _batches(rng, rng.randrange(9), 40, disjoint)
        new = _batches(rng, rng.randrange(9), 40, disjoint)
        assert _overlay(old, new) == _per_offset(old, new), (old, new)


def test_overlay_cost_follows_batches_not_offsets() -> None:
    # one batch of a million offsets: painting them one by one took seconds
    old = [StateBatch(0, 999_999, 4, 1)]
    new = [StateBatch(500_000, 500_009, 2, 1), StateBatch(999_990, 1_000_100, 4, 1)]
    assert _overlay(old, new) == [StateBatch(0, 499_999, 4, 1), StateBatch(500_000, 500_009, 2, 1),
                                  StateBatch(500_010, 1_000_100, 4, 1)]
    assert _overlay([], []) == []


def _log(*sizes: int) -> tuple[bytes, list[bytes]]:
    out, base = [], 0
    for n in sizes:
        out.append(build_batch([(None, b"v%d" % i) for i in range(n)], base_offset=base))
        base += n
    return b"".join(out), out


def _acq(*ranges: tuple[int, int]) -> Acquired:
    return Acquired(records=[AcquiredRange(a, b, 1) for a, b in ranges])


def test_answer_carries_only_the_batches_of_the_acquired_range() -> None:
    raw, b = _log(10, 10, 10, 10)  # offsets 0-9, 10-19, 20-29, 30-39
    assert _slice_to_acquired(raw, _acq((0, 9))) == b[0]
    assert _slice_to_acquired(raw, _acq((10, 29))) == b[1] + b[2]
    # a first offset inside a batch keeps that batch; a last offset inside one keeps it whole
    assert _slice_to_acquired(raw, _acq((15, 16), (25, 31))) == b[1] + b[2] + b[3]
    assert _slice_to_acquired(raw, _acq((0, 39))) is raw
    assert _slice_to_acquired(raw, _acq((38, 39))) == b[3]
