"""The broker's request counts show which protocol path a real client took (issue 16, item 4)."""

from __future__ import annotations

import pytest

from minibroker.testing import MiniBroker, requests_seen, topic_name

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402


def test_librdkafka_transaction_is_counted_by_api_version_and_software():
    with MiniBroker(name="counts") as b:
        topic = topic_name("counts")
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "transactional.id": topic,
                      "client.id": "counted"})
        p.init_transactions(20)
        p.begin_transaction()
        p.produce(topic, b"v")
        p.commit_transaction(20)
        seen = requests_seen(b.log_text())
        softwares = {software for _, _, software in seen}
        assert len(softwares - {"unknown"}) == 1, seen
        (software,) = softwares - {"unknown"}
        assert "librdkafka" in software or "confluent-kafka" in software, software
        apis = {api for api, _, s in seen if s == software}
        assert {"ApiVersions", "InitProducerId", "AddPartitionsToTxn", "Produce", "EndTxn"} <= apis, seen
        # librdkafka sends its first ApiVersions before it knows the broker's range, v3 or v4.
        assert any(api == "ApiVersions" and v >= 3 for api, v, _ in seen)
        assert b.stop() == 0
        assert "request.counts" in b.log_text()
