from __future__ import annotations

import pytest

from minibroker_storage import client_metrics as store


def test_round_trip_and_absence(tmp_path):
    assert store.load(tmp_path) == {}
    store.save(tmp_path, {"all": {"metrics": "*", "interval.ms": "1000"}})
    assert store.load(tmp_path) == {"all": {"metrics": "*", "interval.ms": "1000"}}
    assert not (tmp_path / (store.FILE + ".tmp")).exists()


@pytest.mark.parametrize("text", ["{", "[]", '{"subscriptions": {"a": {"metrics": 5}}}', '{"subscriptions": 3}'])
def test_a_bad_file_is_reported(tmp_path, text):
    (tmp_path / store.FILE).write_text(text)
    with pytest.raises(store.ClientMetricsFileError):
        store.load(tmp_path)
