"""The share coordinator's per-fetch work (issue 33): the state-batch overlay (newer batches over
older ones, as Kafka's PersisterStateBatchCombiner leaves them) works on ranges and must give
exactly what painting offset by offset gives; a ShareFetch answer carries only the log batches
of the acquired range (Kafka's ShareFetchUtils.maybeSliceFetchRecords)."""

from __future__ import annotations

import random
import uuid

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


# ---- the first, shorter log read of a ShareFetch acquires what the full read would -------------

class _Log:
    """A partition log of whole batches, read as PartitionLog.read_to reads (at least one
    batch, whole batches up to max_bytes, never past the upper bound)."""

    def __init__(self, batches: list[bytes], sizes: list[int]) -> None:
        self.batches, self.bases, at = batches, [], 0
        for n in sizes:
            self.bases.append(at)
            at += n
        self.log_start_offset, self.high_watermark = 0, at
        self.last_stable_offset = at
        self.reads: list[int] = []

    def read_to(self, offset: int, max_bytes: int, upper_bound: int | None = None):
        self.reads.append(max_bytes)
        out, after = b"", offset
        for base, b, nxt in zip(self.bases, self.batches, [*self.bases[1:], self.high_watermark]):
            if nxt <= offset or (upper_bound is not None and base >= upper_bound):
                continue
            if out and len(out) + len(b) > max_bytes:
                break
            out += b
            after = nxt
        return memoryview(out), after

    def aborted_transactions(self, start: int, end: int):
        return []


class _Info:
    def __init__(self) -> None:
        self.name, self.partitions = "t", 1
        self.topic_id = uuid.UUID(int=7)


class _Logs:
    def __init__(self, plog: _Log) -> None:
        self.plog = plog

    def topic(self, name: str):
        return _Info() if name == "t" else None

    def get_log(self, topic: str, partition: int):
        return self.plog

    def topics(self):
        return [_Info()]


class _StateLog:
    def __init__(self) -> None:
        self.n = 0

    def append(self, batch: bytes, origin: str = "client"):
        self.n += 1
        return type("Info", (), {"base_offset": self.n - 1})()


_CONFIG = {"share.record.lock.duration.ms": "30000", "share.delivery.count.limit": "5",
           "share.partition.max.record.locks": "2000", "share.renew.acknowledge.enable": "false",
           "share.isolation.level": "read_uncommitted", "share.auto.offset.reset": "earliest"}


def _run(monkeypatch, first_read: int, sizes: list[int], batches: list[bytes]) -> tuple[list, list[int]]:
    """Fetches of two members with acknowledgements and releases; what each got."""
    from minibroker.coordinator.share import coordinator as co
    from minibroker.coordinator.share.partition import AckBatch, AcquireMode
    monkeypatch.setattr(co, "FIRST_READ_BYTES", first_read)
    plog = _Log(batches, sizes)
    share = co.ShareCoordinator(logs=_Logs(plog), state_log=lambda p: _StateLog(),
                                write_group_records=lambda g, r: None,
                                group_config=lambda g, n: _CONFIG[n])
    view = share.partition("g", "t", 0)
    assert view is not None
    got = []
    for i in range(12):  # bounded: 12 fetches
        member = f"m{i % 2}"
        acquired, data = share.acquire(view, member, max_records=500, batch_size=500,
                                       max_bytes=50 << 20, mode=AcquireMode.BATCH_OPTIMIZED)
        got.append((member, [(r.first_offset, r.last_offset, r.delivery_count) for r in acquired.records],
                    data))
        if acquired.records:
            kind = 2 if i % 3 == 0 else 1  # every third fetch RELEASEs, the rest ACCEPT
            out = share.acknowledge(view, member, [AckBatch(r.first_offset, r.last_offset, [kind])
                                                   for r in acquired.records])
            assert out.error is None
    return got, plog.reads


def test_short_first_read_acquires_what_the_full_read_does(monkeypatch) -> None:
    # batches of 300 and 40 records (~30 KiB and ~4 KiB): several fit in a short read
    sizes = [300, 40, 40, 700, 40, 300, 300, 40, 1000, 40, 300, 40, 40, 40, 300]
    _, batches = _log(*sizes)
    short, short_reads = _run(monkeypatch, 8 * 1024, sizes, batches)
    full, full_reads = _run(monkeypatch, 1 << 40, sizes, batches)
    assert sum(b - a + 1 for _, rs, _ in full for a, b, _ in rs) > 3000  # most of the log went out
    assert short == full
    assert any(r == 8 * 1024 for r in short_reads)  # the short read was used
    assert all(r > 8 * 1024 for r in full_reads)
