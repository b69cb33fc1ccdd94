from __future__ import annotations

import pytest

from minibroker_storage import group_configs as store


def test_round_trip_and_absence(tmp_path):
    assert store.load(tmp_path) == {}
    store.save(tmp_path, {"g": {"consumer.session.timeout.ms": "50000"}})
    assert store.load(tmp_path) == {"g": {"consumer.session.timeout.ms": "50000"}}
    assert not (tmp_path / (store.FILE + ".tmp")).exists()


@pytest.mark.parametrize("text", ["{", "[]", '{"groups": {"g": {"a": 5}}}', '{"groups": 3}', '{"groups": {"g": 1}}'])
def test_a_bad_file_is_reported(tmp_path, text):
    (tmp_path / store.FILE).write_text(text)
    with pytest.raises(store.GroupConfigsFileError):
        store.load(tmp_path)
