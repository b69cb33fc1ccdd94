"""KIP-714 client telemetry with real clients: the Java Admin client subscribes (as
kafka-client-metrics.sh does), the Java producer 4.4 and librdkafka (confluent-kafka) push their
metrics, and the console shows each client's pushed metrics in a real headless browser.

Kafka serves GetTelemetrySubscriptions/PushTelemetry only with a metrics receiver configured;
minibroker's receiver is its console, so they are served with --control-listener.
"""

from __future__ import annotations

import json
import time

from minibroker.testing.control import call

from .clients import create_topic
from .test_console import DOCS, UPDATE_DOCS, WAIT_MS, console_page

PREFIX = "org.apache.kafka.producer."


def _telemetry(b) -> dict:
    return call(b.control.address, "GET", "/v1/console/telemetry")


def _client(t: dict, client_id: str) -> dict | None:
    pushed = [c for c in t["clients"] if c["client_id"] == client_id and c["pushes"] > 0]
    return pushed[0] if pushed else None


def _rdkafka_produce(bootstrap: str, topic: str, seconds: float) -> int:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "client.id": "metrics-rdkafka", "linger.ms": 5,
                  "enable.metrics.push": True})
    sent, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        p.produce(topic, key=b"k%d" % sent, value=b"v%d" % sent)
        p.poll(0.02)
        sent += 1
    assert p.flush(10) == 0
    return sent


def test_real_clients_push_their_metrics_and_the_console_shows_them(broker_factory, topic, tmp_path):
    from . import java_client

    tc = java_client.java_toolchain()
    classes = java_client.compile_drivers(tc)
    b = broker_factory([], control=True)
    create_topic(b.bootstrap_servers, topic, 1)

    r = java_client.run_driver(tc, classes, "ClientMetrics",
                               [b.bootstrap_servers, "subscribe", "producers", PREFIX, 500, "client_id=metrics-.*"],
                               timeout=120)
    sub = json.loads(r.stdout.strip().splitlines()[-1])
    assert sub["ok"] and "producers" in sub["listed"], r.stdout + r.stderr[-3000:]
    assert sub["configs"] == {"interval.ms": "500", "match": "client_id=metrics-.*", "metrics": PREFIX}

    java = java_client.start_driver(tc, classes, "ClientMetrics",
                                    [b.bootstrap_servers, "produce", topic, 4, "metrics-java"], "256m")
    sent = _rdkafka_produce(b.bootstrap_servers, topic, 3.0)
    out = java_client.finish_driver(java, 120)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    produced = json.loads(out.stdout.strip().splitlines()[-1])
    assert sent > 0 and produced["sent"] > 0

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        t = _telemetry(b)
        rd, jv = _client(t, "metrics-rdkafka"), _client(t, "metrics-java")
        if rd and jv:
            break
        time.sleep(0.2)
    assert rd and jv, json.dumps(t)[:4000]
    print(f"telemetry: java {jv['pushes']} pushes, {len(jv['metrics'])} series, {jv['software']}; "
          f"librdkafka {rd['pushes']} pushes, {len(rd['metrics'])} series, {rd['software']}; "
          f"terminated: java {jv['terminated']}, librdkafka {rd['terminated']}")
    assert t["served"] and t["subscriptions"]["producers"]["metrics"] == PREFIX
    assert jv["client_instance_id"] == produced["instance"]  # the id the broker gave the Java client
    assert jv["software"].startswith("apache-kafka-java")
    for c in (jv, rd):
        names = {m["name"] for m in c["metrics"]}
        assert names and all(n.startswith(PREFIX) for n in names), names
    assert any(m["name"] == PREFIX + "record.send.total" for m in jv["metrics"])
    assert not b.log_text().count("telemetry.payload_refused")

    from playwright.sync_api import expect

    problems: list[str] = []
    with console_page(problems) as page:
        page.goto(f"http://{b.control.address}/", timeout=WAIT_MS)
        page.wait_for_selector("body[data-loaded=overview]")
        for client_id in ("metrics-java", "metrics-rdkafka"):
            box = page.locator(f'.client[data-client-id="{client_id}"]').first
            if box.locator("details:not([open])").count():  # over 25 series: folded
                box.locator("details summary").click()
            expect(box.locator(f'tr[data-metric^="{PREFIX}"]').first).to_be_visible()
            # both producers are closed by now: their instances went with their connections
            expect(box.locator(".tag.gone")).to_contain_text("gone (disconnected")
        expect(page.locator("#subscriptions")).to_contain_text("producers")
        page.locator('.client[data-client-id="metrics-java"] details summary').first.click()  # fold
        section = page.locator("#clients-section")
        section.scroll_into_view_if_needed()
        if UPDATE_DOCS:
            section.screenshot(path=str(DOCS / "console-clients.png"))
        section.screenshot(path=str(tmp_path / "console-clients.png"))
        print(f"screenshot: {tmp_path / 'console-clients.png'}")
    assert problems == []

    # the subscription is kept in the data dir
    b.restart()
    t = _telemetry(b)
    assert t["subscriptions"] == {"producers": {"metrics": PREFIX, "interval.ms": "500",
                                                "match": "client_id=metrics-.*"}}


def _asked(b) -> int:
    """GetTelemetrySubscriptions requests, as `minibroker requests --counts` reads them."""
    counts = call(b.control.address, "GET", "/v1/requests/counts")["counts"]
    return sum(r["count"] for r in counts if r["api"] == "GetTelemetrySubscriptions")


def test_a_client_that_asked_with_no_subscription_is_listed_as_requests_counts_it(broker_factory, topic,
                                                                                     tmp_path):
    """No subscription at all: librdkafka still asks (and is told to push nothing every 5 min).
    The console lists it, live then gone, and every client's asks add up to what the request
    counts show (create_topic's admin client asked too, and is gone)."""
    from confluent_kafka import Producer
    from playwright.sync_api import expect

    b = broker_factory([], control=True)
    create_topic(b.bootstrap_servers, topic, 1)
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "client.id": "asks-nothing",
                  "enable.metrics.push": True})
    p.produce(topic, b"v")
    assert p.flush(10) == 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _asked(b) < 2:
        p.poll(0.1)
    t = _telemetry(b)
    assert t["served"] and t["subscriptions"] == {}
    [c] = [c for c in t["clients"] if c["client_id"] == "asks-nothing"]
    assert c["live"] and c["requested_metrics"] == [] and c["push_interval_ms"] == 300_000
    assert c["asks"] == 1
    assert sum(c["asks"] for c in t["clients"]) == _asked(b) == 2, (t["clients"], _asked(b))
    del p  # closes its connections: Kafka forgets the instance, the console keeps it as gone

    problems: list[str] = []
    with console_page(problems) as page:
        page.goto(f"http://{b.control.address}/", timeout=WAIT_MS)
        page.wait_for_selector("body[data-loaded=overview]")
        box = page.locator('.client[data-client-id="asks-nothing"]')
        expect(box).to_have_count(1)
        expect(page.locator("#clients-empty")).to_be_hidden()
        expect(page.locator("#telemetry-note")).to_contain_text("No client metrics subscription")
        expect(box.locator(".members")).to_contain_text("asked for: nothing (no subscription matches it)")
        expect(box.locator(".tag.gone")).to_contain_text("gone (disconnected")
        expect(box.locator(".meta")).to_contain_text("asked once")
        expect(page.locator(".client .tag.gone")).to_have_count(2)
        page.locator("#clients-section").screenshot(path=str(tmp_path / "console-asked.png"))
        print(f"screenshot: {tmp_path / 'console-asked.png'}")
    assert problems == []
    assert sum(c["asks"] for c in _telemetry(b)["clients"]) == _asked(b)


def test_telemetry_is_not_served_without_a_receiver(broker_factory):
    from tests.reference.client import Connection, api_versions

    b = broker_factory([])
    with Connection("127.0.0.1", b.port) as c:
        served = api_versions(c)
    assert 71 not in served and 72 not in served and 44 in served and 74 in served
