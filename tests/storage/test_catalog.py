import json
import os
import uuid

import pytest

from minibroker_storage import (
    Catalog,
    InvalidPartitions,
    InvalidTopic,
    StorageError,
    TopicExists,
    UnknownTopic,
    validate_topic_name,
)


def test_catalog_persists(tmp_path):
    catalog = Catalog.load(str(tmp_path))
    assert catalog.list() == []
    a = catalog.create("orders", 4, {"retention.ms": 1000})
    b = catalog.create("__consumer_offsets", 50, topic_id=uuid.UUID(int=7))
    assert isinstance(a.topic_id, uuid.UUID)
    assert dict(a.configs) == {"retention.ms": "1000"}

    again = Catalog.load(str(tmp_path))
    assert again.list() == [b, a]
    assert again.get("orders") == a
    assert again.by_id(uuid.UUID(int=7)) == b
    assert "orders" in again and len(again) == 2
    assert not os.path.exists(tmp_path / "topics.json.tmp")

    again.update_configs("orders", {"segment.bytes": "2048"})
    again.set_partitions("orders", 6)
    again.delete("__consumer_offsets")
    third = Catalog.load(str(tmp_path))
    assert [t.name for t in third.list()] == ["orders"]
    assert third.get("orders").partitions == 6
    assert dict(third.get("orders").configs) == {"segment.bytes": "2048"}
    assert third.by_id(uuid.UUID(int=7)) is None


def test_catalog_errors(tmp_path):
    catalog = Catalog.load(str(tmp_path))
    catalog.create("t", 1)
    with pytest.raises(TopicExists):
        catalog.create("t", 1)
    with pytest.raises(InvalidPartitions):
        catalog.create("u", 0)
    with pytest.raises(UnknownTopic):
        catalog.delete("nope")
    with pytest.raises(InvalidPartitions):
        catalog.set_partitions("t", 1)
    assert [t.name for t in Catalog.load(str(tmp_path)).list()] == ["t"]


def test_corrupt_catalog_is_an_error(tmp_path):
    (tmp_path / "topics.json").write_text("{not json")
    with pytest.raises(StorageError):
        Catalog.load(str(tmp_path))
    (tmp_path / "topics.json").write_text(json.dumps({"version": 99, "topics": {}}))
    with pytest.raises(StorageError):
        Catalog.load(str(tmp_path))
    (tmp_path / "topics.json").write_text(json.dumps({"version": 1, "topics": {"t": {"partitions": 1}}}))
    with pytest.raises(StorageError):
        Catalog.load(str(tmp_path))


@pytest.mark.parametrize("name", ["a", "A.b_c-9", "__consumer_offsets", "x" * 249])
def test_legal_topic_names(name):
    validate_topic_name(name)


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "a b", "a/b", "é", "a:b"])
def test_illegal_topic_names(name):
    with pytest.raises(InvalidTopic) as err:
        validate_topic_name(name)
    assert err.value.error_code == 17
