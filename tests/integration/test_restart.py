"""Graceful restart: produce, SIGTERM, start again on the same data dir, read everything back."""

from __future__ import annotations

from collections import Counter

from . import wire
from .clients import check_contiguous, check_readback, consume_assigned, create_topic, produce_confluent
from .support import log_files

PARTITIONS = 3


def _data_segments(b) -> list:
    return sorted(p.relative_to(b.data_dir) for p in log_files(b.data_dir)
                  if not p.parent.name.startswith("__"))


def test_restart_keeps_everything(broker_factory, topic):
    # Small segments, so the restart has to recover several of them per partition.
    b = broker_factory(["--segment-bytes", str(1024 * 1024), "--num-partitions", "2"])
    create_topic(b.bootstrap_servers, topic, PARTITIONS)
    acked, errors = produce_confluent(b.bootstrap_servers, topic, range(8000), codec="lz4", tag="r1")
    assert not errors, errors[:5]
    auto_topic = topic + "-auto"
    acked_auto, errors = produce_confluent(b.bootstrap_servers, auto_topic, range(500), tag="auto")
    assert not errors, errors[:5]
    ends = wire.high_watermarks(b.port, topic, range(PARTITIONS))
    assert sum(ends.values()) == 8000
    # The data topics' segments (reading back with a consumer group creates __consumer_offsets,
    # as Kafka's FindCoordinator does).
    segments_before = _data_segments(b)

    rc = b.stop()
    assert rc == 0, f"SIGTERM exit code {rc}"
    b.start()

    # Same topics, same partitions, same offsets, same bytes.
    assert wire.high_watermarks(b.port, topic, range(PARTITIONS)) == ends
    assert wire.list_offsets(b.port, topic, range(PARTITIONS), wire.EARLIEST) == {p: 0 for p in range(PARTITIONS)}
    records, errs = consume_assigned(b, topic, range(PARTITIONS), ends=ends)
    assert not errs, errs[:5]
    check_contiguous(records, ends)
    check_readback(records, acked, tag="r1")
    auto_ends = wire.high_watermarks(b.port, auto_topic, range(2))
    records, errs = consume_assigned(b, auto_topic, range(2), ends=auto_ends)
    assert not errs, errs[:5]
    check_readback(records, acked_auto, tag="auto")
    assert _data_segments(b) == segments_before

    # Appends continue where the log ended, and survive a second restart.
    more, errors = produce_confluent(b.bootstrap_servers, topic, range(8000, 9000), codec="none", tag="r1")
    assert not errors, errors[:5]
    for (p, off) in more:
        assert off >= ends[p], f"new message at p{p}@{off} below the old end {ends[p]}"
    acked.update(more)
    per_partition = Counter(p for p, _ in acked)
    b.restart()
    ends2 = wire.high_watermarks(b.port, topic, range(PARTITIONS))
    assert ends2 == dict(per_partition)
    records, errs = consume_assigned(b, topic, range(PARTITIONS), ends=ends2)
    assert not errs, errs[:5]
    check_contiguous(records, ends2)
    check_readback(records, acked, tag="r1")
