"""The transaction timeline and its story, without sockets: the coordinator's core on a
ManualClock records into a TxnHistory in a temporary directory; explain() tells it."""

from __future__ import annotations

import os

import pytest

from minibroker.coordinator.txn.explain import explain
from minibroker.coordinator.txn.machine import TxnError
from minibroker.coordinator.txn.timeline import Requester, Timeline, txn_key
from minibroker_protocol.errors import ErrorCode
from minibroker_storage.txn_history import HISTORY_FILE, TxnHistory, read_history

from .test_txn_state_machine import machine

APP1 = Requester("orders-1", "librdkafka/2.6.0", "10.0.0.4:51000")
APP7 = Requester("orders-7", "librdkafka/2.6.0", "10.0.0.5:52000")


@pytest.fixture
def recorded(tmp_path):
    history = TxnHistory(tmp_path)
    history.open()
    m, clock, _log, _markers = machine()
    m.timeline = Timeline(history, clock)
    yield m, clock, history, tmp_path
    history.close()


def _kinds(history, tid):
    return [e["kind"] for e in history.events(txn_key(tid))]


def test_a_commit_is_told_step_by_step(recorded):
    m, clock, history, _ = recorded
    pid, epoch = m.init_producer_id("t", 60_000, who=APP1)
    clock.advance(5)
    m.add_partitions("t", pid, epoch, [("orders", 0), ("orders", 1)], who=APP1)
    clock.advance(1000)
    m.end_txn("t", pid, epoch, True, who=APP1)
    assert _kinds(history, "t") == ["init", "add_partitions", "end_txn", "prepare", "complete"]
    x = explain("t", history.events(txn_key("t")))
    assert "client `orders-1`" in x.story[0] and "new transactional id" in x.story[0]
    assert "orders-0, orders-1 join the transaction" in x.story[1] and "timeout 60 s" in x.story[1]
    assert x.diagnosis.startswith("Committed at ")


def test_the_seeds_incident_diagnosis_names_the_timeout(recorded):
    m, clock, history, _ = recorded
    pid, epoch = m.init_producer_id("inc", 60_000, who=APP1)
    m.add_partitions("inc", pid, epoch, [("payments", 0)], who=APP1)
    clock.advance(62_000)  # the broker was down; it comes back 62 s after the transaction began
    assert m.abort_timed_out() == 1
    with pytest.raises(TxnError) as refused:
        m.end_txn("inc", pid, epoch, True, who=APP1)
    assert refused.value.code == ErrorCode.producer_fenced
    # the handler records the refusal (handlers/txn.py _refused); here by hand, as it would
    m.timeline.record("inc", "refused", api="EndTxn", error="PRODUCER_FENCED", producer_id=pid,
                      epoch=epoch, current_epoch=epoch + 1, **APP1.fields())
    x = explain("inc", history.events(txn_key("inc")))
    timed_out = next(line for line in x.story if "TIMED OUT" in line)
    assert "timeout 60 s" in timed_out and "2.0 s past the" in timed_out, timed_out
    assert x.diagnosis.startswith("Fenced: EndTxn with epoch 0 refused"), x.diagnosis
    assert "no EndTxn 62 s after the transaction began, timeout 60 s" in x.diagnosis, x.diagnosis
    assert m.stats["timed_out"] == 1 and m.stats["requests_fenced"] == 1


def test_a_zombie_is_told_who_fenced_it(recorded):
    m, clock, history, _ = recorded
    pid, epoch = m.init_producer_id("z", 60_000, who=APP1)
    m.add_partitions("z", pid, epoch, [("orders", 3)], who=APP1)
    clock.advance(2000)
    m.init_producer_id("z", 60_000, who=APP7)  # a second instance while the first is in a transaction
    with pytest.raises(TxnError):
        m.add_partitions("z", pid, epoch, [("orders", 4)], who=APP1)
    m.timeline.record("z", "refused", api="AddPartitionsToTxn", error="PRODUCER_FENCED", producer_id=pid,
                      epoch=epoch, current_epoch=epoch + 2, **APP1.fields())
    x = explain("z", history.events(txn_key("z")))
    assert "client `orders-7`" in x.diagnosis and "10.0.0.5" in x.diagnosis, x.diagnosis
    assert "while this one was in a transaction" in x.diagnosis
    assert any("FENCED: a new instance (client `orders-7`" in line for line in x.story)
    assert "  REFUSED AddPartitionsToTxn from client `orders-1`" in x.story[-1]
    assert "— epoch 0 < current 2: fenced because a new instance (client `orders-7`" in x.story[-1], x.story[-1]
    assert m.stats["fenced_by_new_instance"] == 1


def test_an_open_transaction_is_diagnosed_by_its_age(recorded):
    m, clock, history, _ = recorded
    pid, epoch = m.init_producer_id("o", 30_000)
    m.add_partitions("o", pid, epoch, [("t", 0)])
    meta = m.txns["o"]
    clock.advance(12_000)
    x = explain("o", history.events(txn_key("o")), clock.wall_ms(),
                {"start_ms": meta.start_ms, "timeout_ms": meta.timeout_ms, "partitions": sorted(meta.partitions)})
    assert x.diagnosis.startswith("Open for 12 s of its 30 s timeout") and "t-0" in x.diagnosis


def test_markers_tell_how_long_the_lso_was_held():
    events = [{"ts": 1000, "kind": "add_partitions", "partitions": [["t", 0]], "begins": True},
              {"ts": 3500, "kind": "marker", "topic": "t", "partition": 0, "offset": 10, "first_offset": 4,
               "commit": True},
              {"ts": 3501, "kind": "complete", "commit": True, "partitions": 1, "duration_ms": 2501}]
    x = explain("h", events)
    assert "LSO held from offset 4 for 2.5 s" in x.story[1]
    assert x.held == [{"topic": "t", "partition": 0, "from_ms": 1000, "to_ms": 3500, "held_ms": 2500,
                       "first_offset": 4, "marker_offset": 10}]


def test_no_history():
    x = explain("nobody", [])
    assert x.diagnosis.startswith("No history") and not x.known and x.as_dict()["known"] is False


def test_a_fence_then_a_later_commit_is_told_as_committed(recorded):
    """The zombie was fenced, then the new instance committed: the id is CompleteCommit now, so
    the headline says so; the fence and the zombie's refusal stay in the story, in agreement."""
    m, clock, history, _ = recorded
    pid, epoch = m.init_producer_id("zc", 60_000, who=APP1)
    m.add_partitions("zc", pid, epoch, [("orders", 3)], who=APP1)
    clock.advance(2000)
    pid7, epoch7 = m.init_producer_id("zc", 60_000, who=APP7)
    with pytest.raises(TxnError):
        m.add_partitions("zc", pid, epoch, [("orders", 4)], who=APP1)
    m.timeline.record("zc", "refused", api="AddPartitionsToTxn", error="PRODUCER_FENCED", producer_id=pid,
                      epoch=epoch, current_producer_id=pid7, current_epoch=epoch7, **APP1.fields())
    clock.advance(500)
    m.add_partitions("zc", pid7, epoch7, [("orders", 0)], who=APP7)
    clock.advance(500)
    m.end_txn("zc", pid7, epoch7, True, who=APP7)
    assert m.txns["zc"].state_name == "CompleteCommit"
    x = explain("zc", history.events(txn_key("zc")))
    assert x.diagnosis.startswith("Committed at ") and "nothing is pending" in x.diagnosis, x.diagnosis
    assert (f"An older instance's AddPartitionsToTxn with epoch {epoch} was refused at "
            in x.diagnosis and "(PRODUCER_FENCED); the story tells why." in x.diagnosis), x.diagnosis
    assert any("FENCED: a new instance (client `orders-7`" in line for line in x.story)
    assert any("REFUSED AddPartitionsToTxn from client `orders-1`" in line
               and "fenced because a new instance (client `orders-7`" in line for line in x.story)
    # one partition joins, two join
    assert sum("orders-3 joins the transaction by client `orders-1`" in line for line in x.story) == 1
    assert sum("orders-0 joins the transaction by client `orders-7`" in line for line in x.story) == 1
    assert not any(" join the transaction" in line for line in x.story), x.story
    # A zombie refused after the commit does not turn the committed id's headline into a fence.
    m.timeline.record("zc", "refused", api="EndTxn", error="PRODUCER_FENCED", producer_id=pid, epoch=epoch,
                      current_producer_id=pid7, current_epoch=epoch7, **APP1.fields())
    again = explain("zc", history.events(txn_key("zc")))
    assert again.diagnosis.startswith("Committed at ") and "older instance's EndTxn" in again.diagnosis
    # Without the commit (the zombie's refusal is the news) the headline is the fence, as before.
    events = history.events(txn_key("zc"))
    cut = next(i for i, e in enumerate(events) if e["kind"] == "refused") + 1
    assert explain("zc", events[:cut]).diagnosis.startswith("Fenced: AddPartitionsToTxn with epoch 0 refused")


# -- the file ----------------------------------------------------------------------------------
def test_the_history_survives_a_reopen_and_a_torn_line(tmp_path):
    h = TxnHistory(tmp_path)
    h.open()
    h.append("txn:a", {"ts": 1, "kind": "init"})
    h.append("txn:b", {"ts": 2, "kind": "init", "client_id": "é\U0001f600"})
    h.close()  # as a kill -9 would leave it: every append is in the file already
    with open(os.path.join(tmp_path, HISTORY_FILE), "ab") as f:
        f.write(b'{"key":"txn:a","ts":3,"ki')  # a write cut short
    h2 = TxnHistory(tmp_path)
    h2.open()
    assert h2.events("txn:a") == [{"ts": 1, "kind": "init"}] and h2.skipped == 1
    assert h2.events("txn:b")[0]["client_id"] == "é\U0001f600"
    h2.append("txn:a", {"ts": 4, "kind": "complete"})
    h2.close()
    assert [e["ts"] for e in read_history(tmp_path)["txn:a"]] == [1, 4]


def test_the_history_is_bounded(tmp_path):
    h = TxnHistory(tmp_path, per_key=5, max_keys=3, max_bytes=4000)
    h.open()
    for i in range(200):
        h.append(f"txn:{i % 4}", {"ts": i, "kind": "init", "pad": "x" * 20})
    assert len(h.keys()) == 3 and all(len(h.events(k)) <= 5 for k in h.keys())
    h.close()
    assert os.path.getsize(os.path.join(tmp_path, HISTORY_FILE)) <= 4000
    assert set(read_history(tmp_path)) <= {"txn:0", "txn:1", "txn:2", "txn:3"}


# -- hanging transactions and their abort (txn_inspect), on a Broker without sockets ---------------
def test_a_hanging_transaction_is_found_and_aborted(tmp_path):
    """A transactional batch whose producer no coordinator knows (as a partition restored from
    another cluster, or a marker lost to a bug, leaves one): `txn hanging` finds it, `txn abort
    --start-offset` writes its abort marker, the LSO moves, and the timeline says who aborted it."""
    import asyncio

    from minibroker.broker import Broker
    from minibroker.cli import txn_offline
    from minibroker.config.options import Config
    from minibroker.coordinator.txn import inspect as txn_inspect
    from minibroker_protocol.records import build_batch

    broker = Broker(Config(data_dir=tmp_path, port=0))
    try:
        broker.logs.create_topic("orders", 1, {})
        plog = broker.logs.get_log("orders", 0)
        plog.append(build_batch([{"key": b"k", "value": b"v"}], producer_id=4242, producer_epoch=3,
                                base_sequence=0, transactional=True))
        assert plog.last_stable_offset == 0
        found = txn_inspect.hanging(broker)
        assert [(h["topic"], h["partition"], h["producer_id"], h["start_offset"], h["producer_epoch"])
                for h in found] == [("orders", 0, 4242, 0, 3)]
        assert found[0]["reason"] == "the coordinator does not hold this transaction open here"
        with pytest.raises(txn_inspect.AbortError):
            txn_inspect.abort(broker, "orders", 0, start_offset=7)
        out = txn_inspect.abort(broker, "orders", 0, start_offset=0)
        assert out["error"] == "NONE" and out["marker_offset"] == 1 and out["producer_epoch"] == 3
        assert plog.last_stable_offset == 2 and txn_inspect.hanging(broker) == []
        story = broker.timeline.producer_events(4242)
        assert story[-1]["kind"] == "marker" and story[-1]["by"] == "txn abort (an operator)"
    finally:
        asyncio.run(broker.stop())
    assert txn_offline.hanging(str(tmp_path)) == []
