"""`share explain` without sockets: scripted SharePartition runs record into a ShareHistory in
a temporary directory; explain() tells each record's story and diagnosis."""

from __future__ import annotations

import os

import pytest

from minibroker.coordinator.share import history as share_history
from minibroker.coordinator.share.explain import explain
from minibroker.coordinator.share.history import ShareHistory
from minibroker.coordinator.share.partition import (
    AbortedTxn,
    AckBatch,
    LogBatch,
    LogRead,
    ShareConfig,
    SharePartition,
)
from minibroker_storage.share_history import HISTORY_FILE

T = 1_700_000_000_000  # 22:13:20.000 UTC
LOCK = 30_000
ACCEPT, RELEASE, REJECT = 1, 2, 3


class Run:
    """A share partition whose every outcome goes to the history, as the coordinator does it."""

    def __init__(self, hist: ShareHistory, limit: int = 5, start: int = 0) -> None:
        self.hist = hist
        self.limit = limit
        self.sp = SharePartition("g", "t", 0, ShareConfig(delivery_count_limit=limit), start)

    def _keep(self, events) -> None:
        self.hist.record("g", "t", 0, events, delivery_limit=self.limit)

    def acquire(self, member: str, at: int, first: int = 0, last: int = 9, read: LogRead | None = None):
        got = self.sp.acquire(member, read or LogRead([LogBatch(first, last)]), max_records=500,
                              batch_size=500, now_ms=T + at)
        self._keep(got.events)
        return [(r.first_offset, r.last_offset, r.delivery_count) for r in got.records]

    def ack(self, member: str, at: int, *batches: tuple[int, int, int]) -> None:
        out = self.sp.acknowledge(member, [AckBatch(f, la, (t,)) for f, la, t in batches], T + at)
        assert out.error is None, out.error
        self._keep(out.events)

    def expire(self, at: int) -> None:
        self._keep(self.sp.expire(T + at).events)

    def leave(self, member: str, at: int) -> None:
        self._keep(self.sp.release_member(member, T + at).events)

    def explain(self, offset: int | None = None, live: bool = True):
        return explain("g", "t", 0, self.hist.events("g", "t", 0), offset=offset,
                       in_flight=self.sp.in_flight() if live else None, start_offset=self.sp.start_offset,
                       delivery_limit=self.limit if live else None, broker_starts=self.hist.broker_starts())


@pytest.fixture
def hist(tmp_path):
    h = ShareHistory(tmp_path)
    h.open(T - 1000)
    yield h
    h.close()


def _one(x, offset):
    recs = [r for r in x.records if r.first_offset <= offset <= r.last_offset]
    assert len(recs) == 1, x.text()
    return recs[0]


def test_lock_expiry_then_accept(hist):
    run = Run(hist)
    assert run.acquire("A", 0) == [(0, 9, 1)]
    run.expire(LOCK)
    assert run.acquire("B", LOCK + 1000) == [(0, 9, 2)]
    run.ack("B", LOCK + 2000, (0, 9, ACCEPT))
    x = run.explain()
    assert len(x.records) == 1, x.text()  # ten offsets, one history: told once
    r = x.records[0]
    assert (r.first_offset, r.last_offset, r.deliveries) == (0, 9, 2)
    assert r.story[0] == "22:13:20.000  acquired by member A — delivery 1 of 5, lock until 22:13:50.000 (30 s)"
    assert r.story[1].startswith("22:13:50.000  lock of member A expired (deadline 22:13:50.000)")
    assert r.story[1].endswith("→ available")
    assert r.story[3] == "22:13:52.000  ACCEPTED by member B"
    assert r.diagnosis == ("Accepted by member B on delivery 2 of 5; redelivered once because the lock of "
                           "member A expired at 22:13:50.000.")
    assert r.redeliveries == {"lock_expired": 1} and r.state == "ACKNOWLEDGED"
    assert x.summary == "10 records told from 4 events; 10 redelivered (lock expiry 10)."


def test_release_and_reject_split_the_range(hist):
    run = Run(hist)
    run.acquire("A", 0)
    run.ack("A", 100, (0, 4, RELEASE), (5, 8, ACCEPT), (9, 9, REJECT))
    x = run.explain()
    assert [(r.first_offset, r.last_offset) for r in x.records] == [(0, 4), (5, 8), (9, 9)], x.text()
    released, accepted, rejected = x.records
    assert released.story[-1] == "22:13:20.100  RELEASED by member A → available"
    assert released.diagnosis.startswith("Available again because member A RELEASED it at 22:13:20.100 "
                                         "(after delivery 1 of 5)")
    assert accepted.diagnosis == "Accepted by member A on delivery 1 of 5; delivered once."
    assert rejected.story[-1] == "22:13:20.100  REJECTED by member A → archived, never delivered again"
    assert rejected.diagnosis.startswith("Rejected by member A on delivery 1 of 5: archived, not redelivered")
    # the released records come to the next member: the release is now a redelivery's cause
    run.acquire("B", 200)
    r = _one(run.explain(), 2)
    assert r.redeliveries == {"released": 1}
    assert r.diagnosis.startswith("Held by member B (delivery 2 of 5), lock until 22:13:50.200; redelivered "
                                  "once because member A RELEASED it at 22:13:20.100"), r.diagnosis


def test_the_delivery_limit_archives(hist):
    run = Run(hist, limit=2)
    run.acquire("A", 0, 0, 0)
    run.expire(LOCK)
    run.acquire("B", LOCK + 1, 0, 0)
    run.expire(2 * LOCK + 1)
    x = run.explain(offset=0)
    r = x.records[0]
    assert r.story[-1].endswith("→ archived: delivery limit 2 reached"), r.story
    assert r.diagnosis.startswith("Archived: delivery limit 2 reached — the last delivery ended because the "
                                  "lock of member B expired at 22:14:20.001; redelivered once because the "
                                  "lock of member A expired at 22:13:50.000"), r.diagnosis
    assert "1 archived at the delivery limit" in x.summary
    # a data dir has no live view: the limit comes from the kept events
    assert run.explain(offset=0, live=False).records[0].diagnosis == r.diagnosis


def test_a_member_leaving_gives_its_records_back(hist):
    run = Run(hist)
    run.acquire("A", 0, 0, 2)
    run.leave("A", 500)
    run.acquire("B", 600, 0, 2)
    r = run.explain(offset=1).records[0]
    assert "member A left the group or closed its share session while holding it → available" in r.story[1]
    assert r.redeliveries == {"member_released": 1}
    assert "redelivered once because member A left or closed its session at 22:13:20.500" in r.diagnosis


def test_a_broker_restart_forgets_the_acquisition(tmp_path):
    hist = ShareHistory(tmp_path)
    hist.open(T - 1000)
    run = Run(hist)
    run.acquire("A", 0, 0, 4)
    run.ack("A", 100, (0, 1, ACCEPT))
    hist.close()  # kill -9: the acquisition of 2-4 is not persisted
    hist = ShareHistory(tmp_path)
    hist.open(T + 5000)
    loaded = SharePartition.load("g", "t", 0, run.sp.start_offset, run.sp.snapshot_batches(),
                                 config=run.sp.config)
    run.hist, run.sp = hist, loaded
    # live, before anyone acquires again: the view says the broker restarted
    r = _one(run.explain(), 3)
    assert r.story[-1] == ("now: AVAILABLE, delivery 0 of 5 — the broker restarted since its last "
                           "acquisition (not persisted)"), r.story
    assert r.diagnosis.startswith("Available again because the broker restarted at 22:13:25.000 while "
                                  "member A held it"), r.diagnosis
    assert run.acquire("B", 6000, 0, 4) == [(2, 4, 1)]
    r = _one(run.explain(), 3)
    assert "22:13:25.000  broker restarted: acquisitions are not persisted" in r.story[1], r.story
    assert r.redeliveries == {"broker_restart": 1} and r.deliveries == 2
    assert "redelivered once because the broker restarted at 22:13:25.000 while member A held it" in r.diagnosis
    assert _one(run.explain(), 0).diagnosis == "Accepted by member A on delivery 1 of 5; delivered once."
    hist.close()


def test_aborted_transaction_records_are_archived(hist):
    run = Run(hist)
    read = LogRead([LogBatch(0, 2, producer_id=7, transactional=True),
                    LogBatch(3, 3, producer_id=7, control=True, abort_marker=True), LogBatch(4, 5)],
                   read_committed=True, last_stable_offset=6, aborted=[AbortedTxn(7, 0)])
    run.acquire("A", 0, read=read)
    r = _one(run.explain(), 1)
    assert "archived: the record belongs to an aborted transaction" in r.story[-1], r.story
    assert r.diagnosis.startswith("Archived: it belongs to an aborted transaction")


def test_unknown_partition_and_offset():
    x = explain("g", "t", 0, [])
    assert not x.known and x.records == []
    assert x.summary.startswith("No history and no live state for this partition")
    assert not explain("g", "t", 0, [], offset=3).known


def test_history_older_than_the_kept_events(hist):
    run = Run(hist)
    run.acquire("A", 0, 0, 0)
    run.expire(LOCK)
    run.acquire("B", LOCK + 1, 0, 0)
    second = hist.events("g", "t", 0)[-1:]  # as if the first two had been dropped
    x = explain("g", "t", 0, second, offset=0)
    assert x.records[0].story[0] == "(deliveries before the 2nd are older than the kept history)"


def test_the_history_survives_a_reopen_and_a_torn_line(tmp_path):
    hist = ShareHistory(tmp_path)
    hist.open(T)
    Run(hist).acquire("A", 0, 0, 3)
    hist.close()
    path = os.path.join(tmp_path, HISTORY_FILE)
    with open(path, "ab") as f:
        f.write(b'{"key":"[\\"g\\",\\"t\\",0]","ts":1,"fir')  # a write cut short by a crash
    parts, starts = share_history.read(tmp_path)  # read-only, as `share explain --data-dir`
    assert list(parts) == [("g", "t", 0)] and starts == [T]
    assert [e["action"] for e in parts[("g", "t", 0)]] == ["acquired"]
    again = ShareHistory(tmp_path)
    again.open(T + 10)
    assert again.skipped == 1
    Run(again).acquire("B", 20, 4, 4)
    again.close()
    parts, starts = share_history.read(tmp_path)
    assert [e["member"] for e in parts[("g", "t", 0)]] == ["A", "B"], "the torn line was ended, not glued"
    assert starts == [T, T + 10]


def test_the_history_is_bounded_and_counts_redeliveries(tmp_path):
    hist = ShareHistory(tmp_path, per_key=4, max_keys=2)
    hist.open(T)
    run = Run(hist, limit=100)
    for i in range(5):
        run.acquire("A", i * LOCK * 2, 0, 0)
        run.expire(i * LOCK * 2 + LOCK)
    assert len(hist.events("g", "t", 0)) == 4
    assert hist.redeliveries[("g", "t", 0)] == 4 and hist.acquisitions[("g", "t", 0)] == 5
    for group in ("g2", "g3"):
        other = SharePartition(group, "t", 0)
        hist.record(group, "t", 0, other.acquire("A", LogRead([LogBatch(1, 1)]), max_records=1,
                                                 batch_size=1, now_ms=T).events)
    # the two keys most recently written are kept (the broker's start was one of them)
    assert hist.partitions() == [("g2", "t", 0), ("g3", "t", 0)]
    hist.close()


def test_group_and_topic_names_with_any_character(hist):
    hist.record('a"b,c', "t\n1", 2, Run(hist).sp.acquire("A", LogRead([LogBatch(0, 0)]), max_records=1,
                                                            batch_size=1, now_ms=T).events)
    assert ('a"b,c', "t\n1", 2) in hist.partitions()
    assert len(hist.events('a"b,c', "t\n1", 2, offset=0)) == 1 and hist.events('a"b,c', "t\n1", 2, 1) == []


def test_a_delivery_ended_by_no_kept_event_is_not_called_a_restart_for_sure(hist):
    run = Run(hist)
    run.acquire("A", 0, 0, 0)
    events = hist.events("g", "t", 0)
    # the second acquisition as the restarted broker would record it, with no start known
    later = {**events[0], "ts": T + 90_000, "member": "B", "lock_ms": T + 120_000}
    r = explain("g", "t", 0, [events[0], later], offset=0).records[0]
    assert r.story[1] == ("no kept event ended that delivery: the broker restarted (acquisitions are not "
                          "persisted) or the history lost the event")
    assert "redelivered once because the delivery to member A ended with no kept event (a broker restart?)" \
        in r.diagnosis, r.diagnosis


def test_offline_a_start_after_an_acquisition_gives_it_back(tmp_path):
    hist = ShareHistory(tmp_path)
    hist.open(T - 1000)
    Run(hist).acquire("A", 0, 0, 0)
    hist.close()  # kill -9 while A holds offset 0
    restarted = ShareHistory(tmp_path)
    restarted.open(T + 7000)  # the next start, nothing delivered since
    restarted.close()
    parts, starts = share_history.read(tmp_path)
    r = explain("g", "t", 0, parts[("g", "t", 0)], broker_starts=starts, offset=0).records[0]
    assert r.story[-1] == ("22:13:27.000  broker restarted: acquisitions are not persisted, so the record is "
                           "available again with delivery count 0"), r.story
    assert r.state == "AVAILABLE"
    assert r.diagnosis.startswith("Available again because the broker restarted at 22:13:27.000 while member A "
                                  "held it"), r.diagnosis


def test_a_leader_move_gives_the_records_back_with_the_persisted_count(hist):
    from minibroker.coordinator.share.partition import Action, HistoryEvent
    from minibroker.coordinator.share.record_state import RecordState

    run = Run(hist)
    run.acquire("A", 0, 0, 2)
    # what the coordinator tells when the leader moves (nothing persisted: count 0)
    run._keep([HistoryEvent(0, 2, Action.LEADER_MOVED, "A", T + 500, RecordState.AVAILABLE, 0, T + LOCK)])
    run.sp = SharePartition("g", "t", 0, ShareConfig(delivery_count_limit=5), 0)  # the new leader's load
    assert run.acquire("A", 600, 0, 2) == [(0, 2, 1)]
    run.ack("A", 700, (0, 2, ACCEPT))
    r = run.explain(offset=1).records[0]
    assert "the partition's leader moved while member A held it" in r.story[1], r.story
    assert "delivery count 0" in r.story[1]
    assert r.redeliveries == {"leader_moved": 1}
    assert "the partition's leader moved at 22:13:20.500 while member A held it" in r.diagnosis, r.diagnosis
