from minibroker_storage.producer_ids import ProducerIdAllocator


def test_ids_are_unique_and_increasing(tmp_path):
    a = ProducerIdAllocator(tmp_path, block_size=10)
    ids = [a.next_id() for _ in range(25)]
    assert ids == list(range(25))


def test_restart_never_reuses_an_id(tmp_path):
    a = ProducerIdAllocator(tmp_path, block_size=10)
    first = [a.next_id() for _ in range(3)]
    # a crash right now: the allocator is simply dropped, nothing is saved at exit
    b = ProducerIdAllocator(tmp_path, block_size=10)
    second = [b.next_id() for _ in range(12)]
    assert min(second) > max(first)
    c = ProducerIdAllocator(tmp_path, block_size=10)
    assert c.next_id() > max(second)


def test_corrupt_file_is_refused(tmp_path):
    (tmp_path / "producer-id-block").write_bytes(b"xx")
    import pytest
    with pytest.raises(ValueError):
        ProducerIdAllocator(tmp_path)
