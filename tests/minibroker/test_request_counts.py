"""Request counts per API, version and client software (issue 16: proof of the path a client took)."""

from __future__ import annotations

import json

from kio.index import load_request_schema

from minibroker.control.request_counts import RequestCounts
from minibroker.net.dispatch import Dispatcher
from minibroker.testing import requests_seen
from minibroker_protocol import codec
from minibroker_protocol.api_keys import ApiKey


class _Conn:
    client_software = ("unknown", "unknown")


def _send(d: Dispatcher, conn, api_key: int, version: int, **fields) -> None:
    req = load_request_schema(api_key, version)(**fields)
    d.handle(memoryview(codec.encode_request(req, correlation_id=1, client_id="c1")), conn)


def test_counts_follow_the_connection_software_named_by_apiversions():
    d = Dispatcher()
    conn = _Conn()
    _send(d, conn, ApiKey.ApiVersions, 0)
    _send(d, conn, ApiKey.ApiVersions, 3, client_software_name="franz-go", client_software_version="1.22.2")
    _send(d, conn, ApiKey.ApiVersions, 3, client_software_name="franz-go", client_software_version="1.22.2")
    assert dict(d.counts.counts) == {
        (ApiKey.ApiVersions, 0, "unknown", "unknown"): 1,
        (ApiKey.ApiVersions, 3, "franz-go", "1.22.2"): 2,
    }
    assert conn.client_software == ("franz-go", "1.22.2")


class _ConsoleLines:
    """A logger writing what the broker's console renderer writes (minibroker/core/logs.py)."""

    def __init__(self) -> None:
        import structlog

        self.render = structlog.dev.ConsoleRenderer(colors=False)
        self.lines: list[str] = []

    def info(self, event: str, **fields) -> None:
        self.lines.append(self.render(None, "info", {"event": event, "level": "info", **fields}))


def test_first_of_each_combination_is_logged_once():
    out = _ConsoleLines()
    c = RequestCounts(out)
    for _ in range(3):
        c.count(ApiKey.EndTxn, 5, ("apache-kafka-java", "4.4.0"), "p-1")
    c.count(ApiKey.Produce, 12, ("apache-kafka-java", "4.4.0"), "p-1")
    c.log_table()
    err = "\n".join(out.lines)
    assert err.count("request.first_seen") == 2
    assert "EndTxn v5 apache-kafka-java/4.4.0: 3" in err
    assert requests_seen(err) == {("EndTxn", 5, "apache-kafka-java"), ("Produce", 12, "apache-kafka-java")}


def test_requests_seen_reads_json_logs_and_ignores_other_lines():
    lines = [
        json.dumps({"event": "request.first_seen", "api": "ConsumerGroupHeartbeat", "api_key": 68,
                    "api_version": 1, "client_software_name": "librdkafka"}),
        json.dumps({"event": "txn.committed", "api": "EndTxn", "api_version": 3}),
        "===== start #1: python -m minibroker",
        "not json {",
    ]
    assert requests_seen("\n".join(lines)) == {("ConsumerGroupHeartbeat", 1, "librdkafka")}
