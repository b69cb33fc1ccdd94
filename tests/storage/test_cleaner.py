"""Log compaction: the cleaner's rules (Kafka's Cleaner) on real segment files."""

from __future__ import annotations

import os

import pytest

from minibroker_protocol.batch import DELETE_HORIZON_BIT, iter_headers
from minibroker_protocol.records import build_batch, build_control_batch, decode_batch
from minibroker_storage import segment_swap
from minibroker_storage.config import LogConfig
from minibroker_storage.manager import LogManager

from .batches import TS0

DAY = 86_400_000


class Clock:
    def __init__(self) -> None:
        self.now = TS0

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def manager(tmp_path, clock):
    opened = []

    def _open() -> LogManager:
        m = LogManager(tmp_path / "data", LogConfig(), clock=clock)
        opened.append(m)
        return m

    yield _open
    for m in opened:
        m.close_all()


COMPACT = {"cleanup.policy": "compact", "segment.bytes": "1000", "min.cleanable.dirty.ratio": "0.01"}


def put(plog, key, value, *, pid=-1, epoch=0, seq=-1, txn=False, ts=TS0):
    records = [{"key": None if key is None else key.encode(),
                "value": None if value is None else value.encode(), "timestamp": ts}]
    return plog.append(build_batch(records, producer_id=pid, producer_epoch=epoch,
                                   base_sequence=seq, transactional=txn))


def marker(plog, pid, commit, epoch=0):
    return plog.append(build_control_batch(producer_id=pid, producer_epoch=epoch, commit=commit,
                                           coordinator_epoch=0, timestamp_ms=TS0), origin="coordinator")


def batches(plog):
    """(header, records) of every stored batch, in offset order."""
    out = []
    for seg in plog.segments:
        view = seg.view(0, seg.size)
        for h in iter_headers(view, 0, seg.size):
            out.append((h, decode_batch(view[h.position:h.end])))
    return out


def kv(plog):
    return [(r.offset, r.key.decode() if r.key else None, r.value.decode() if r.value else None)
            for h, recs in batches(plog) if not h.is_control for r in recs]


def fill(plog, n=60, keys=5, start=0):
    for i in range(start, start + n):
        put(plog, f"k{i % keys}", f"v{i}")


def test_keeps_the_latest_record_of_each_key_at_its_offset(manager):
    m = manager()
    m.create_topic("c", 1, COMPACT)
    plog = m.get_log("c", 0)
    fill(plog, 60)
    end = plog.log_end_offset
    before = len(plog.segments)
    [result] = m.cleaner.clean()
    active_base = plog.active_segment.base_offset
    kept = [e for e in kv(plog) if e[0] < active_base]
    latest = {}
    for i in range(active_base):
        latest[f"k{i % 5}"] = i
    assert [o for o, _, _ in kept] == sorted(latest.values())
    assert all(v == f"v{o}" for o, _, v in kept)
    assert result.end_offset == active_base
    assert plog.log_end_offset == end and plog.log_start_offset == 0
    assert len(plog.segments) <= before
    # Reading from an offset that was compacted away gives the next record
    view = plog.read(1, 10_000)
    first = next(iter_headers(view, 0, len(view)))
    assert first.base_offset == kept[0][0]
    # and a restart reads the same log
    m.close_all()
    m2 = manager()
    assert [e for e in kv(m2.get_log("c", 0)) if e[0] < active_base] == kept
    assert m2.cleaner.checkpoints[("c", 0)] == active_base


def test_nothing_is_cleaned_below_the_dirty_ratio(manager):
    m = manager()
    m.create_topic("c", 1, {**COMPACT, "min.cleanable.dirty.ratio": "0.99"})
    fill(m.get_log("c", 0), 60)
    m.cleaner.clean()  # the first round: everything is dirty (ratio 1.0)
    fill(m.get_log("c", 0), 3, start=60)
    assert m.cleaner.plan() is None


def test_a_compact_only_topic_is_not_deleted_by_retention(manager, clock):
    m = manager()
    m.create_topic("c", 1, {**COMPACT, "retention.ms": "1000"})
    m.create_topic("d", 1, {"cleanup.policy": "compact,delete", "segment.bytes": "1000",
                            "retention.ms": "1000"})
    for name in ("c", "d"):
        fill(m.get_log(name, 0), 40)
    clock.now += 10_000
    m.apply_retention()
    assert m.get_log("c", 0).log_start_offset == 0
    assert m.get_log("d", 0).log_start_offset > 0


def test_tombstones_go_after_delete_retention_ms(manager, clock):
    m = manager()
    m.create_topic("c", 1, {**COMPACT, "delete.retention.ms": str(DAY)})
    plog = m.get_log("c", 0)
    put(plog, "a", "1")
    put(plog, "b", "1")
    put(plog, "a", None)  # tombstone
    fill(plog, 40, keys=3, start=100)  # keys k0..k2: rolls a few segments
    m.cleaner.clean()
    tomb = [(h, r) for h, recs in batches(plog) for r in recs if r.key == b"a"]
    assert [r.value for _, r in tomb] == [None]
    h = tomb[0][0]
    assert h.attributes & DELETE_HORIZON_BIT and h.base_timestamp == clock.now + DAY
    assert tomb[0][1].timestamp == TS0  # record timestamps survive the new base timestamp
    clock.now += DAY - 1
    fill(plog, 40, keys=3, start=200)
    m.cleaner.clean()
    assert [r.value for _, recs in batches(plog) for r in recs if r.key == b"a"] == [None]
    clock.now += 2
    assert m.cleaner.plan() is None  # as in Kafka: no round without new dirty data
    fill(plog, 40, keys=3, start=300)
    [result] = m.cleaner.clean()
    assert result.stats.tombstones_removed == 1
    assert not [r for _, recs in batches(plog) for r in recs if r.key == b"a"]
    assert [r.value for _, recs in batches(plog) for r in recs if r.key == b"b"] == [b"1"]


def test_aborted_records_go_and_their_marker_after_the_horizon(manager, clock):
    m = manager()
    m.create_topic("c", 1, {**COMPACT, "delete.retention.ms": "1000"})
    plog = m.get_log("c", 0)
    put(plog, "x", "aborted", pid=7, seq=0, txn=True)
    put(plog, "y", "aborted", pid=7, seq=1, txn=True)
    marker(plog, 7, commit=False)
    put(plog, "x", "kept", pid=8, seq=0, txn=True)
    marker(plog, 8, commit=True)
    put(plog, "z", "later", pid=7, seq=2, txn=True)  # pid 7's last batch is no longer aborted
    marker(plog, 7, commit=True)
    fill(plog, 40, keys=3, start=100)
    m.cleaner.clean()
    values = [(r.key, r.value) for h, recs in batches(plog) if not h.is_control for r in recs]
    assert (b"x", b"aborted") not in values and (b"y", b"aborted") not in values
    assert (b"x", b"kept") in values
    # The aborted batches went; the ABORT marker stays (with its .txnindex entry) this round
    assert [t.producer_id for t in plog.aborted_txns()] == [7]
    markers = [h for h, _ in batches(plog) if h.is_control]
    assert [(h.producer_id, h.delete_horizon_ms) for h in markers] == [(7, None), (8, None), (7, None)]
    # Next round: no batch of pid 7's aborted transaction is left, so its marker gets a
    # horizon and loses its index entry; the committed ones keep their records
    fill(plog, 40, keys=3, start=200)
    m.cleaner.clean()
    markers = [h for h, _ in batches(plog) if h.is_control]
    assert [(h.producer_id, h.delete_horizon_ms) for h in markers] == [
        (7, clock.now + 1000), (8, None), (7, None)]
    assert plog.aborted_txns() == []
    # ...and goes once the horizon has passed
    clock.now += 1001
    fill(plog, 40, keys=3, start=300)
    [result] = m.cleaner.clean()
    assert result.stats.markers_removed == 1
    markers = [h for h, _ in batches(plog) if h.is_control]
    assert [h.producer_id for h in markers] == [8, 7]


def test_an_aborted_batch_that_is_its_producers_last_keeps_its_marker(manager):
    """Kafka keeps the producer's last batch (empty), which still counts as a batch of the
    aborted transaction, so the marker and its index entry stay too."""
    m = manager()
    m.create_topic("c", 1, COMPACT)
    plog = m.get_log("c", 0)
    put(plog, "x", "aborted", pid=7, seq=0, txn=True)
    marker(plog, 7, commit=False)
    fill(plog, 40, keys=3, start=100)
    for _ in range(2):
        m.cleaner.clean()
        fill(plog, 40, keys=3, start=200)
    left = [(h.is_control, h.record_count) for h, _ in batches(plog) if h.producer_id == 7]
    assert left == [(False, 0), (True, 1)]
    assert [t.producer_id for t in plog.aborted_txns()] == [7]


def test_nothing_at_or_past_an_open_transaction_is_cleaned(manager):
    m = manager()
    m.create_topic("c", 1, COMPACT)
    plog = m.get_log("c", 0)
    fill(plog, 20)
    put(plog, "open", "txn", pid=9, seq=0, txn=True)
    lso = plog.last_stable_offset
    fill(plog, 60, start=20)
    before = [(o, k, v) for o, k, v in kv(plog) if o >= lso]
    m.cleaner.clean()
    after = [(o, k, v) for o, k, v in kv(plog) if o >= lso]
    assert after == before  # untouched from the segment holding the open transaction on
    assert m.cleaner.checkpoints[("c", 0)] <= lso


def test_a_producers_last_batch_survives_as_an_empty_batch(manager):
    m = manager()
    m.create_topic("c", 1, COMPACT)
    plog = m.get_log("c", 0)
    put(plog, "k0", "idempotent", pid=5, epoch=3, seq=0)
    put(plog, "k0", "idempotent2", pid=5, epoch=3, seq=1)
    fill(plog, 60)  # k0 superseded
    m.cleaner.clean()
    kept = [h for h, _ in batches(plog) if h.producer_id == 5]
    assert [(h.base_sequence, h.record_count, h.producer_epoch) for h in kept] == [(1, 0, 3)]
    # Without producer snapshots the state comes back from that empty batch alone
    m.close_all()
    for name in os.listdir(plog.path):
        if name.endswith(".snapshot"):
            os.unlink(os.path.join(plog.path, name))
    m2 = manager()
    entry = m2.get_log("c", 0).producer_state[5]
    assert (entry.epoch, entry.last_seq) == (3, 1)


def test_min_compaction_lag_holds_back_recent_segments(manager, clock):
    m = manager()
    m.create_topic("c", 1, {**COMPACT, "min.compaction.lag.ms": "60000"})
    plog = m.get_log("c", 0)
    fill(plog, 60)
    assert m.cleaner.plan(now_ms=TS0 + 1000) is None
    assert m.cleaner.plan(now_ms=TS0 + 61_000) is not None


def test_a_round_is_dropped_when_the_log_changed_under_it(manager):
    m = manager()
    m.create_topic("c", 1, {**COMPACT, "cleanup.policy": "compact,delete"})
    plog = m.get_log("c", 0)
    fill(plog, 60)
    before = kv(plog)
    task = m.cleaner.plan()
    result = m.cleaner.run(task)
    m.delete_records({("c", 0): plog.segments[1].base_offset})
    assert not m.cleaner.install(task, result)
    assert not os.path.exists(os.path.join(plog.path, segment_swap.STAGING_DIR))
    assert kv(plog) == [e for e in before if e[0] >= plog.log_start_offset]


def test_a_crash_before_the_commit_keeps_the_old_segments(manager):
    m = manager()
    m.create_topic("c", 1, COMPACT)
    plog = m.get_log("c", 0)
    fill(plog, 60)
    before = kv(plog)
    m.cleaner.run(m.cleaner.plan())  # staged, never installed
    m.close_all()
    m2 = manager()
    assert kv(m2.get_log("c", 0)) == before
    assert not os.path.exists(os.path.join(plog.path, segment_swap.STAGING_DIR))


@pytest.mark.parametrize("step", ["committed", "olds_deleted"])
def test_a_crash_after_the_commit_finishes_the_swap_at_open(manager, step):
    m = manager()
    m.create_topic("c", 1, COMPACT)
    plog = m.get_log("c", 0)
    fill(plog, 60)
    task = m.cleaner.plan()
    result = m.cleaner.run(task)
    olds = [s for g in result.groups for s in g]
    expected_bases = [g[0].base_offset for g in result.groups]
    m.close_all()
    segment_swap.commit(plog.path, [s.base_offset for s in olds])
    if step == "olds_deleted":
        swap = os.path.join(plog.path, segment_swap.SWAP_DIR)
        for s in olds:
            for suffix in (".log", ".index", ".timeindex", ".txnindex"):
                p = os.path.join(plog.path, f"{s.base_offset:020d}{suffix}")
                if os.path.exists(p):
                    os.unlink(p)
        os.unlink(os.path.join(swap, "replaces"))
        # one new file already moved in
        name = f"{expected_bases[0]:020d}.log"
        os.rename(os.path.join(swap, name), os.path.join(plog.path, name))
    m2 = manager()
    reopened = m2.get_log("c", 0)
    kept = [o for o, _, _ in kv(reopened)]
    active_base = reopened.active_segment.base_offset
    latest = {f"k{i % 5}": i for i in range(active_base)}
    assert [o for o in kept if o < active_base] == sorted(latest.values())
    assert [s.base_offset for s in reopened.segments][:len(expected_bases)] == expected_bases
    assert not os.path.exists(os.path.join(plog.path, segment_swap.SWAP_DIR))


def test_cleaned_logs_serve_transactions_read_committed(manager, clock):
    """The aborted transactions' index entries keep read_committed right on a cleaned log."""
    m = manager()
    m.create_topic("c", 1, COMPACT)
    plog = m.get_log("c", 0)
    for i in range(10):
        put(plog, f"t{i % 2}", f"v{i}", pid=20 + i, seq=0, txn=True)
        marker(plog, 20 + i, commit=i % 3 != 0)
    fill(plog, 60, start=100)
    m.cleaner.clean()
    aborted = {pid for pid, _ in plog.aborted_transactions(0, plog.last_stable_offset)}
    visible = [(r.key, r.value) for h, recs in batches(plog)
               if not h.is_control and h.producer_id not in aborted for r in recs
               if r.key and r.key.startswith(b"t")]
    # the latest committed value of each key: t0 <- v8 (i=8 committed), t1 <- v7
    assert sorted(visible) == [(b"t0", b"v8"), (b"t1", b"v7")]


def test_a_compacted_log_scrubs_clean_and_a_corrupt_base_offset_is_still_caught(manager):
    """Gaps are allowed only inside a sealed segment's offset range: a base offset past the
    next segment's base (a flipped bit outside the CRC) is still a bad batch."""
    import struct

    from minibroker_storage.scrub import scrub_data_dir

    m = manager()
    m.create_topic("c", 1, COMPACT)
    plog = m.get_log("c", 0)
    fill(plog, 60)
    m.cleaner.clean()
    data_dir = m.data_dir
    seg = next(s for s in plog.segments[:-1] if s.size)
    assert [h.base_offset for h in iter_headers(seg.view(0, seg.size), 0, seg.size)][0] > seg.base_offset
    m.close_all()
    assert not [f for f in scrub_data_dir(data_dir).findings]
    with open(seg.path, "r+b") as f:
        f.write(struct.pack(">q", 1 << 40))
    assert [f.segment for f in scrub_data_dir(data_dir).findings] == [seg.path]


def test_a_topic_made_again_under_a_cleaned_name_is_all_dirty(manager):
    m = manager()
    m.create_topic("c", 1, COMPACT)
    fill(m.get_log("c", 0), 60)
    m.cleaner.clean()
    m.close_all()
    m2 = manager()  # the cleaner not made yet when the topic goes
    m2.delete_topic("c")
    m2.create_topic("c", 1, COMPACT)
    fill(m2.get_log("c", 0), 200)
    assert ("c", 0) not in m2.cleaner.checkpoints
    task = m2.cleaner.plan()
    assert task is not None and task.first_dirty == 0


def test_a_batch_gone_bad_since_it_was_written_fails_the_round_and_changes_nothing(manager):
    m = manager()
    m.create_topic("c", 1, COMPACT)
    plog = m.get_log("c", 0)
    fill(plog, 60)
    seg = plog.segments[1]
    with open(seg.path, "r+b") as f:  # a flipped byte inside the second batch's CRC range
        f.seek(seg.size // 2)
        byte = f.read(1)
        f.seek(seg.size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    before = {s.path: open(s.path, "rb").read() for s in plog.segments[:-1]}
    assert m.cleaner.clean() == []
    assert {s.path: open(s.path, "rb").read() for s in plog.segments[:-1]} == before
    assert m.cleaner.plan() is None  # left alone until restart, as Kafka's uncleanable partitions
    assert not os.path.exists(os.path.join(plog.path, segment_swap.STAGING_DIR))


def test_a_transaction_aborted_below_the_dirty_range_does_not_hide_its_producers_later_commits(manager):
    """Kafka's map pass takes only the aborted transactions ending in the dirty range: one whose
    marker lies below would otherwise never close, and the producer's later committed records
    would not count as their keys' latest."""
    m = manager()
    m.create_topic("c", 1, COMPACT)
    plog = m.get_log("c", 0)
    put(plog, "a", "old")
    put(plog, "x", "aborted", pid=7, seq=0, txn=True)
    marker(plog, 7, commit=False)
    fill(plog, 40, keys=3, start=100)
    m.cleaner.clean()
    assert [t.producer_id for t in plog.aborted_txns()] == [7]  # marker and entry kept: pid 7's last batch
    put(plog, "a", "new", pid=7, seq=1, txn=True)
    marker(plog, 7, commit=True)
    fill(plog, 40, keys=3, start=200)
    m.cleaner.clean()
    assert [r.value for _, recs in batches(plog) for r in recs if r.key == b"a"] == [b"new"]
