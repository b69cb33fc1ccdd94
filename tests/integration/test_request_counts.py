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
        # librdkafka does not speak transactions v2: at the broker's default level 2 it stays on the
        # classic path (AddPartitionsToTxn, EndTxn below v5, Produce below v12), as against Kafka 4.
        assert _finalized_tv(b) == 2
        versions = {(api, v) for api, v, s in seen if s == software}
        assert max(v for api, v in versions if api == "EndTxn") <= 4, versions
        assert max(v for api, v in versions if api == "Produce") <= 11, versions
        # librdkafka sends its first ApiVersions before it knows the broker's range, v3 or v4.
        assert any(api == "ApiVersions" and v >= 3 for api, v, _ in seen)
        assert b.stop() == 0
        assert "request.counts" in b.log_text()


def _finalized_tv(b: MiniBroker) -> int:
    """transaction.version as ApiVersions v3 finalizes it (confluent-kafka's admin has no feature
    call; the raw request is the client's view)."""
    from tests.reference.client import Connection, req

    with Connection("127.0.0.1", b.port) as conn:
        r = conn.call(req(18, 3, client_software_name="counts", client_software_version="1"))
    return {f.name: f.max_version_level for f in r.finalized_features}.get("transaction.version", 0)
