"""Dead-letter queues of share groups (KIP-1191): which archivings go through the DLQ (the
``dlq_cause`` of a share partition's events, where Kafka's SharePartition moves records to
ARCHIVING) and what coordinator/share/dlq.py appends to the DLQ topic for them, on a real
LogManager."""

from __future__ import annotations

import dataclasses

import pytest

from minibroker.coordinator.share.dlq import DeadLetterQueues, DlqEntry, entries
from minibroker.coordinator.share.explain import explain
from minibroker.coordinator.share.history import decode
from minibroker.coordinator.share.history import encode as encode_event
from minibroker.coordinator.share.partition import (
    DLQ_CLIENT_REJECT,
    DLQ_DELIVERY_COUNT_EXCEEDED,
    AckBatch,
    LogBatch,
    LogRead,
    ShareConfig,
    SharePartition,
)
from minibroker.core.clock import ManualClock
from minibroker_protocol.batch import iter_headers
from minibroker_protocol.records import build_batch, decode_batch
from minibroker_storage import LogConfig, LogManager

LOCK = 30_000
REJECT, RELEASE, ACCEPT, GAP = 3, 2, 1, 0


def _sp(limit: int = 2) -> SharePartition:
    return SharePartition("g", "t", 0, ShareConfig(delivery_count_limit=limit))


def _acquire(sp: SharePartition, first: int, last: int, now: int = 0) -> None:
    got = sp.acquire("m", LogRead([LogBatch(first, last)]), max_records=500, batch_size=500, now_ms=now)
    assert got.records


def _causes(events) -> list[tuple[int, int, int, str | None]]:
    return [(e.first_offset, e.last_offset, e.delivery_count, e.dlq_cause) for e in events]


def test_reject_is_client_reject_and_accept_gap_are_nothing():
    sp = _sp()
    _acquire(sp, 0, 3)
    out = sp.acknowledge("m", [AckBatch(0, 3, (REJECT, ACCEPT, GAP, REJECT))], 1)
    assert _causes(out.events) == [(0, 0, 1, DLQ_CLIENT_REJECT), (1, 1, 1, None), (2, 2, 1, None),
                                   (3, 3, 1, DLQ_CLIENT_REJECT)]
    assert entries(out.events) == [DlqEntry(0, 0, 1, DLQ_CLIENT_REJECT), DlqEntry(3, 3, 1, DLQ_CLIENT_REJECT)]


def test_release_expiry_and_member_release_at_the_limit_exceed_the_count():
    sp = _sp()
    _acquire(sp, 0, 1)
    assert _causes(sp.acknowledge("m", [AckBatch(0, 1, (RELEASE,))], 1).events) == [(0, 1, 1, None)]
    _acquire(sp, 0, 1, now=2)
    assert _causes(sp.acknowledge("m", [AckBatch(0, 1, (RELEASE,))], 3).events) == [
        (0, 1, 2, DLQ_DELIVERY_COUNT_EXCEEDED)]
    _acquire(sp, 2, 2, now=4)
    assert _causes(sp.expire(4 + LOCK).events) == [(2, 2, 1, None)]
    _acquire(sp, 2, 2, now=LOCK + 10)
    assert _causes(sp.expire(2 * LOCK + 10).events) == [(2, 2, 2, DLQ_DELIVERY_COUNT_EXCEEDED)]
    _acquire(sp, 3, 3, now=3 * LOCK)
    sp.release_member("m", 3 * LOCK + 1)
    _acquire(sp, 3, 3, now=3 * LOCK + 2)
    assert _causes(sp.release_member("m", 3 * LOCK + 3).events) == [(3, 3, 2, DLQ_DELIVERY_COUNT_EXCEEDED)]


def test_records_below_a_moved_start_offset_are_archived_without_the_dlq():
    sp = _sp(limit=1)
    _acquire(sp, 0, 4)
    sp.update_log_start(3, 1)  # InFlightState: below the start offset is ARCHIVED, not ARCHIVING
    assert _causes(sp.expire(LOCK).events) == [(0, 2, 1, None), (3, 4, 1, DLQ_DELIVERY_COUNT_EXCEEDED)]


@pytest.fixture
def logs(tmp_path):
    m = LogManager(tmp_path / "data", LogConfig())
    m.create_topic("src", 3, {})
    for p in range(3):
        m.get_log("src", p).append(build_batch([{"key": b"k%d-%d" % (p, i), "value": b"v%d-%d" % (p, i),
                                                 "headers": [("h", b"x")]} for i in range(4)]))
    yield m
    m.close_all()


def _dlq(logs, configs: dict[str, str], *, enabled: bool = True, **kw) -> DeadLetterQueues:
    woken: list = []
    d = DeadLetterQueues(logs=logs, clock=ManualClock(), enabled=lambda: enabled,
                         group_config=lambda g, name: configs.get(name, ""),
                         notify=lambda t, p: woken.append((t, p)), **kw)
    d.woken = woken  # type: ignore[attr-defined]
    return d


def _records(logs, topic: str, partition: int):
    plog = logs.get_log(topic, partition)
    raw = bytes(plog.read_to(0, 1 << 20, upper_bound=plog.high_watermark)[0])
    return [r for h in iter_headers(raw) for r in decode_batch(raw, h.position)]


def test_one_record_per_offset_in_source_partition_mod_dlq_partitions(logs):
    logs.create_topic("dlq.x", 2, {"errors.deadletterqueue.group.enable": "true"})
    d = _dlq(logs, {"errors.deadletterqueue.topic.name": "dlq.x"})
    d.write("g", "src", 2, [DlqEntry(1, 2, 3, DLQ_DELIVERY_COUNT_EXCEEDED)])
    assert _records(logs, "dlq.x", 1) == [] and d.woken == [("dlq.x", 0)] and d.written == {"g": 2}
    got = _records(logs, "dlq.x", 0)
    assert [(r.key, r.value, r.timestamp) for r in got] == [(None, None, d.clock.wall_ms())] * 2
    assert [r.headers for r in got] == [[
        ("__dlq.errors.topic", b"src"), ("__dlq.errors.partition", b"2"), ("__dlq.errors.offset", str(o).encode()),
        ("__dlq.errors.group", b"g"), ("__dlq.errors.delivery.count", b"3"),
        ("__dlq.errors.message", DLQ_DELIVERY_COUNT_EXCEEDED.encode())] for o in (1, 2)]


def test_copy_record_takes_the_source_key_and_value_only(logs):
    logs.create_topic("dlq.x", 1, {"errors.deadletterqueue.group.enable": "true"})
    d = _dlq(logs, {"errors.deadletterqueue.topic.name": "dlq.x",
                    "errors.deadletterqueue.copy.record.enable": "true"})
    d.write("g", "src", 1, [DlqEntry(0, 0, 1, DLQ_CLIENT_REJECT), DlqEntry(3, 5, 1, DLQ_CLIENT_REJECT)])
    got = _records(logs, "dlq.x", 0)
    # offsets 4 and 5 are past the log: headers only, as Kafka's fetcher leaves them
    assert [(r.key, r.value, dict(r.headers)["__dlq.errors.offset"]) for r in got] == [
        (b"k1-0", b"v1-0", b"0"), (b"k1-3", b"v1-3", b"3"), (None, None, b"4"), (None, None, b"5")]
    assert all("h" not in dict(r.headers) for r in got)


@pytest.mark.parametrize("name, create, why", [
    ("dlq.none", None, "DLQ topic does not exist and auto create is disabled on cluster"),
    ("dlq.plain", {}, "DLQ is not enabled on configured DLQ topic"),
    ("other", {"errors.deadletterqueue.group.enable": "true"}, "does not comply with the DLQ topic prefix"),
    ("__x", None, "cannot start with __"),
])
def test_refusals_write_nothing_and_count_a_failure(logs, name, create, why):
    if create is not None:
        logs.create_topic(name, 1, create)
    d = _dlq(logs, {"errors.deadletterqueue.topic.name": name})
    d.write("g", "src", 0, [DlqEntry(0, 1, 1, DLQ_CLIENT_REJECT)])
    assert (d.written, d.failed) == ({}, {"g": 2})
    if create is not None:
        assert _records(logs, name, 0) == []
    assert logs.topic("dlq.none") is None


def test_nothing_below_share_version_2_or_without_a_topic_name(logs):
    logs.create_topic("dlq.x", 1, {"errors.deadletterqueue.group.enable": "true"})
    for d in (_dlq(logs, {"errors.deadletterqueue.topic.name": "dlq.x"}, enabled=False), _dlq(logs, {})):
        d.write("g", "src", 0, [DlqEntry(0, 1, 1, DLQ_CLIENT_REJECT)])
        assert (d.written, d.failed) == ({}, {})
    assert _records(logs, "dlq.x", 0) == []


def test_auto_creation_asks_for_kafkas_topic_configs(logs):
    asked = []

    def create(name, configs):
        asked.append((name, configs))
        logs.create_topic(name, 2, configs)
    d = _dlq(logs, {"errors.deadletterqueue.topic.name": "dlq.new"}, create_topic=create)
    d.write("g", "src", 1, [DlqEntry(2, 2, 1, DLQ_CLIENT_REJECT)])
    assert asked == [("dlq.new", {"errors.deadletterqueue.group.enable": "true",
                                  "message.timestamp.type": "CreateTime"})]
    assert len(_records(logs, "dlq.new", 1)) == 1 and d.written == {"g": 1}


def test_merged_events_keep_their_cause():
    """Per-offset acknowledgements of neighbours merge into one event (the history's), and the
    merged event still goes to the DLQ."""
    sp = _sp()
    _acquire(sp, 0, 3)
    out = sp.acknowledge("m", [AckBatch(0, 3, (REJECT, REJECT, ACCEPT, REJECT))], 1)
    assert entries(out.events) == [DlqEntry(0, 1, 1, DLQ_CLIENT_REJECT), DlqEntry(3, 3, 1, DLQ_CLIENT_REJECT)]


def test_the_story_says_where_the_records_went():
    """The coordinator marks the events it wrote to a DLQ (dlq_topic); the history keeps it and
    `share explain` tells it."""
    sp = _sp()
    acquired = sp.acquire("m", LogRead([LogBatch(0, 0)]), max_records=1, batch_size=1, now_ms=1_000).events
    [rejected] = sp.acknowledge("m", [AckBatch(0, 0, (REJECT,))], 2_000).events
    written = dataclasses.replace(rejected, dlq_topic="dlq.x")
    assert decode(encode_event(written)) == dataclasses.replace(written, dlq_cause=None)
    story = explain("g", "t", 0, [*acquired, encode_event(written)], offset=0).text()
    assert ("REJECTED by member m → archived, never delivered again, written to the dead-letter "
            "queue dlq.x") in story, story
    assert "dead-letter" not in explain("g", "t", 0, [*acquired, rejected], offset=0).text()
