import os
import subprocess
import sys

import pytest

from minibroker_storage import (
    DataDirLocked,
    InvalidConfig,
    InvalidTopic,
    LogConfig,
    LogManager,
    SyncJob,
    TopicExists,
    UnknownTopic,
)
from minibroker_storage.manager import kafka_uuid, parse_partition_dir

from .batches import TS0, make_batch


@pytest.fixture
def manager(tmp_path):
    managers = []

    def _open(**kwargs):
        m = LogManager(tmp_path / "data", kwargs.pop("config", LogConfig(segment_bytes=4096)), **kwargs)
        managers.append(m)
        return m

    yield _open
    for m in managers:
        m.close_all()


def test_create_append_reopen(manager, tmp_path):
    m = manager()
    info = m.create_topic("my-topic", 3, {"retention.ms": "1000", "cleanup.policy": "delete"})
    assert sorted(m.logs()) == [("my-topic", 0), ("my-topic", 1), ("my-topic", 2)]
    log = m.get_log("my-topic", 1)
    assert m.get_log("my-topic", 3) is None and m.get_log("other", 0) is None
    assert log.config.retention_ms == 1000 and log.config.segment_bytes == 4096
    for _ in range(5):
        log.append(make_batch(2))
    data = tmp_path / "data"
    assert sorted(os.listdir(data / "my-topic-1"))[:3] == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
    ]
    meta = (data / "my-topic-1" / "partition.metadata").read_text()
    assert meta == f"version: 0\ntopic_id: {kafka_uuid(info.topic_id)}\n"
    m.close_all()

    m = manager()
    assert m.load_seconds >= 0
    assert m.topic("my-topic") == info
    assert m.topic_by_id(info.topic_id) == info
    assert m.get_log("my-topic", 1).log_end_offset == 10
    assert m.get_log("my-topic", 0).log_end_offset == 0
    assert m.config_for("my-topic").retention_ms == 1000
    assert dict(m.topic("my-topic").configs)["cleanup.policy"] == "delete"


def test_second_manager_on_same_dir_fails(manager, tmp_path):
    manager()
    with pytest.raises(DataDirLocked, match=str(os.getpid())):
        manager()
    # Another process too (flock is per open file, so this also holds across processes).
    code = (
        "import sys; from minibroker_storage import LogManager, DataDirLocked\n"
        f"try:\n    LogManager({str(tmp_path / 'data')!r})\nexcept DataDirLocked:\n    sys.exit(3)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=os.getcwd(), env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert result.returncode == 3


def test_lock_released_on_close(manager):
    manager().close_all()
    manager()


def test_topic_errors(manager):
    m = manager()
    m.create_topic("a.b", 1)
    with pytest.raises(TopicExists):
        m.create_topic("a.b", 1)
    with pytest.raises(InvalidTopic):
        m.create_topic("a_b", 1)  # collides with a.b
    with pytest.raises(InvalidTopic):
        m.create_topic("bad/name", 1)
    with pytest.raises(InvalidConfig):
        m.create_topic("c", 1, {"segment.bytes": "lots"})
    with pytest.raises(InvalidConfig):
        m.create_topic("c", 1, {"retention.ms": "-5"})
    assert m.topic("c") is None
    with pytest.raises(UnknownTopic):
        m.delete_topic("zzz")


def test_delete_topic(manager, tmp_path):
    m = manager()
    m.create_topic("gone", 2)
    held = m.get_log("gone", 0)
    held.append(make_batch(1))
    view = held.read(0, 100)
    m.delete_topic("gone")
    assert m.topic("gone") is None and m.get_log("gone", 0) is None
    assert [n for n in os.listdir(tmp_path / "data") if n.startswith("gone")] == []
    assert len(bytes(view)) > 0
    m.create_topic("gone", 1)
    assert m.get_log("gone", 0).log_end_offset == 0


def test_interrupted_delete_and_stray_dirs(manager, tmp_path):
    m = manager()
    m.create_topic("t", 1)
    m.get_log("t", 0).append(make_batch(1))
    m.close_all()
    data = tmp_path / "data"
    (data / "old-0.1234-delete").mkdir()
    (data / "old-0.1234-delete" / "00000000000000000000.log").write_bytes(b"x")
    (data / "ghost-0").mkdir()  # no topic owns it
    (data / "t-5").mkdir()  # beyond t's partition count
    (data / "notes").mkdir()

    m = manager()
    names = sorted(os.listdir(data))
    assert "old-0.1234-delete" not in names
    assert "ghost-0" not in names and any(n.startswith("ghost-0.") and n.endswith("-stray") for n in names)
    assert any(n.startswith("t-5.") and n.endswith("-stray") for n in names)
    assert "notes" in names
    assert m.get_log("t", 0).log_end_offset == 1


def test_overrides_and_alter(manager):
    m = manager()
    m.create_topic("t", 2, {"segment.bytes": "1024", "retention.bytes": "2048", "flush.messages": "1"})
    cfg = m.config_for("t")
    assert (cfg.segment_bytes, cfg.retention_bytes, cfg.flush.mode) == (1024, 2048, "always")
    assert cfg.to_kafka()["segment.bytes"] == "1024"
    m.alter_topic_configs("t", {"retention.ms": "5", "flush.ms": "100"})
    log = m.get_log("t", 1)
    assert log.config.retention_ms == 5 and log.config.segment_bytes == 4096
    assert log.config.flush.mode == "interval" and log.config.flush.interval_ms == 100


def test_retention_flush_and_partitions(manager):
    m = manager(config=LogConfig(segment_bytes=4096, retention_ms=1000))
    m.create_topic("t", 2)
    log = m.get_log("t", 0)
    for i in range(4):
        log.append(make_batch(1, 3000, timestamp=TS0 + i))
    m.flush_all()
    job = SyncJob()
    assert m.add_due_flushes(job, TS0) is None and len(job) == 0  # flush.ms is not set: never due
    assert m.apply_retention(TS0 + 10_000) == 3
    assert log.log_start_offset == 3
    m.add_partitions("t", 4)
    assert m.get_log("t", 3) is not None
    assert m.topic("t").partitions == 4


def test_parse_partition_dir():
    assert parse_partition_dir("my-topic-12") == ("my-topic", 12)
    assert parse_partition_dir("x-") is None
    assert parse_partition_dir("x") is None
    assert parse_partition_dir("-3") is None


def test_partition_dir_of_another_topic_id_is_set_aside(manager, tmp_path):
    m = manager()
    m.create_topic("t", 1)
    m.get_log("t", 0).append(make_batch(1))
    m.close_all()
    meta = tmp_path / "data" / "t-0" / "partition.metadata"
    meta.write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
    m = manager()
    assert m.get_log("t", 0).log_end_offset == 0
    assert any(n.startswith("t-0.") and n.endswith("-stray") for n in os.listdir(tmp_path / "data"))
