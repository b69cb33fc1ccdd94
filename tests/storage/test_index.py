import os
import struct

import pytest

from minibroker_storage.index import IndexCorrupt, OffsetIndex, TimeIndex
from minibroker_storage.sync_job import SyncJob


def test_offset_index_lookup_and_persist(tmp_path):
    path = str(tmp_path / "00000000000000000100.index")
    index = OffsetIndex(path, 100)
    assert index.lookup(150) == 0
    assert index.last() is None
    for i in range(1, 50):
        index.append(100 + 10 * i, 1000 * i)  # batch ending at offset 100+10i starts at 1000i
    assert index.lookup(99) == 0
    assert index.lookup(109) == 0
    assert index.lookup(110) == 1000
    assert index.lookup(119) == 1000
    assert index.lookup(10_000) == 49_000
    assert index.floor_position(999) == 0
    assert index.floor_position(2000) == 2000
    assert index.floor_position(2999) == 2000
    job = SyncJob()
    index.add_sync(job)
    job.wait()
    raw = open(path, "rb").read()
    assert len(raw) == 49 * 8
    assert struct.unpack_from(">ii", raw, 0) == (10, 1000)  # Kafka's layout: relative offset, position
    loaded = OffsetIndex.load(path, 100, log_size=10**6)
    assert loaded.entries() == index.entries()
    assert loaded.last() == (590, 49_000)


def test_offset_index_load_rejects_inconsistent_files(tmp_path):
    path = str(tmp_path / "0.index")
    assert OffsetIndex.load(path, 0, 100) is None
    open(path, "wb").write(b"\x00" * 7)
    with pytest.raises(IndexCorrupt):
        OffsetIndex.load(path, 0, 100)
    open(path, "wb").write(struct.pack(">iiii", 5, 10, 5, 20))
    with pytest.raises(IndexCorrupt):
        OffsetIndex.load(path, 0, 100)
    open(path, "wb").write(struct.pack(">iiii", 5, 10, 6, 200))
    with pytest.raises(IndexCorrupt):
        OffsetIndex.load(path, 0, 100)


def test_time_index(tmp_path):
    path = str(tmp_path / "00000000000000000010.timeindex")
    index = TimeIndex(path, 10)
    index.maybe_append(-1, 10)  # no timestamp: never indexed
    index.maybe_append(1000, 12)
    index.maybe_append(1000, 15)  # not larger: skipped
    index.maybe_append(999, 16)
    index.maybe_append(2000, 20)
    assert index.entries() == [(1000, 12), (2000, 20)]
    assert index.lookup(500) == 10
    assert index.lookup(1000) == 12
    assert index.lookup(1999) == 12
    assert index.lookup(5000) == 20
    index.persist()
    assert struct.unpack(">qiqi", open(path, "rb").read()) == (1000, 2, 2000, 10)
    loaded = TimeIndex.load(path, 10, next_offset=21)
    assert loaded.entries() == index.entries()
    with pytest.raises(IndexCorrupt):
        TimeIndex.load(path, 10, next_offset=20)  # points past the segment


def test_rewrite_replaces_file(tmp_path):
    path = str(tmp_path / "0.index")
    open(path, "wb").write(b"junk" * 10)
    index = OffsetIndex(path, 0)
    index.append(5, 100)
    index.rewrite()
    assert open(path, "rb").read() == struct.pack(">ii", 5, 100)
    assert not os.path.exists(path + ".tmp")
