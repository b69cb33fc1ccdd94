"""DeleteRecords' log start offset (kept across restarts) and leader epochs (stamped on every
batch, answered as Kafka's LeaderEpochFileCache answers)."""

from __future__ import annotations

import struct

import pytest

from minibroker_storage import LogConfig, OffsetOutOfRange
from minibroker_storage.leader_epochs import FILE, LeaderEpochs
from minibroker_storage.manager import LogManager

from .batches import make_batch, split_batches


def epochs_of(log) -> list[int]:
    return [struct.unpack_from(">i", b, 12)[0] for b in split_batches(log.read(log.log_start_offset, 1 << 20))]


def test_end_offset_for_follows_kafka(tmp_path):
    c = LeaderEpochs(str(tmp_path))
    assert c.end_offset_for(0, 10) == (-1, -1)  # nothing known
    for epoch, start in [(1, 5), (3, 20), (7, 40)]:
        c.assign(epoch, start)
    assert c.end_offset_for(7, 55) == (7, 55)      # the current epoch: the log end
    assert c.end_offset_for(3, 55) == (3, 40)      # a finished epoch: where the next began
    assert c.end_offset_for(4, 55) == (3, 40)      # between: the epoch below, the next start
    assert c.end_offset_for(0, 55) == (0, 5)       # below every epoch: the first start
    assert c.end_offset_for(8, 55) == (-1, -1)     # above every epoch
    assert c.end_offset_for(-1, 55) == (-1, -1)
    assert LeaderEpochs.load(str(tmp_path), 0, 55).entries == [(1, 5), (3, 20), (7, 40)]
    c.assign(5, 30)                                # a conflicting later entry goes
    assert c.entries == [(1, 5), (3, 20), (5, 30)]
    c.truncate_from_start(25)
    assert c.entries == [(3, 25), (5, 30)]
    c.truncate_from_end(30)
    assert c.entries == [(3, 25)]


def test_only_epoch_zero_writes_no_file(tmp_path):
    c = LeaderEpochs(str(tmp_path))
    c.assign(0, 0)
    c.truncate_from_start(10)
    assert not (tmp_path / FILE).exists()
    c.assign(1, 12)
    assert (tmp_path / FILE).read_text() == "0\n2\n0 10\n1 12\n"


def test_batches_are_stamped_with_the_leader_epoch(open_log):
    log = open_log()
    log.append(make_batch(2))
    log.become_leader(3)
    log.append(make_batch(2))
    assert epochs_of(log) == [0, 3]
    assert log.end_offset_for_epoch(0) == (0, 2) and log.end_offset_for_epoch(3) == (3, 4)
    log.close()
    again = open_log()
    assert again.leader_epoch == 3 and again.end_offset_for_epoch(0) == (0, 2)


def test_delete_records_moves_the_start_durably(tmp_path):
    config = LogConfig(segment_bytes=4096)
    with LogManager(tmp_path, config) as m:
        m.create_topic("t", 1)
        log = m.get_log("t", 0)
        for _ in range(30):
            log.append(make_batch(2, 200))
        segments = len(log.segments)
        assert segments > 2
        assert m.delete_records({("t", 0): 21}) == {("t", 0): 21}
        assert log.log_start_offset == 21 and len(log.segments) < segments
        assert m.delete_records({("t", 0): 5}) == {("t", 0): 21}  # never moves back
        with pytest.raises(OffsetOutOfRange):
            log.read(20, 1000)
        with pytest.raises(OffsetOutOfRange):
            log.delete_records_before(61)
    with LogManager(tmp_path, config) as m:
        assert m.get_log("t", 0).log_start_offset == 21
        m.delete_topic("t")
        m.create_topic("t", 1)
    with LogManager(tmp_path, config) as m:
        assert m.get_log("t", 0).log_start_offset == 0  # a new topic of that name starts at 0
