"""The built-in Schema Registry on the control listener: ``/metrics`` counts its subjects,
versions, schemas and answers by route and status, and the web console (Debian's chromium in
Playwright, as tests/integration/test_console.py) lists the subjects and shows a diff between two
versions of one. Everything is registered with confluent-kafka's SchemaRegistryClient."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from .registry_pipelines import USER_BAD, USER_V1, USER_V2
from .test_console import WAIT_MS, console_page

USER_V3 = json.dumps({"type": "record", "name": "User", "namespace": "test",
                      "fields": [{"name": "name", "type": "string"},
                                 {"name": "age", "type": "int", "default": 0},
                                 {"name": "city", "type": ["null", "string"], "default": None}]})


def _metrics(control: str) -> dict[str, float]:
    with urllib.request.urlopen(f"http://{control}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("minibroker_schema_registry") and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


@pytest.fixture
def registry_broker(broker_factory):
    return broker_factory(name="registry-console", schema_registry=True, control=True)


def _populate(url: str) -> SchemaRegistryClient:
    client = SchemaRegistryClient({"url": url})
    client.register_schema("users-value", Schema(USER_V1, "AVRO"))
    client.register_schema("users-value", Schema(USER_V2, "AVRO"))
    client.register_schema("users-value", Schema(USER_V3, "AVRO"))
    client.register_schema("copy-value", Schema(USER_V1, "AVRO"))  # the same schema: the same id
    client.register_schema("gone-value", Schema(USER_V2, "AVRO"))
    client.delete_subject("gone-value")  # soft
    with pytest.raises(SchemaRegistryError):
        client.register_schema("users-value", Schema(USER_BAD, "AVRO"))
    with pytest.raises(SchemaRegistryError):
        client.get_version("users-value", 9)
    return client


def test_metrics_count_the_registry(registry_broker):
    control = registry_broker.control.address
    # the registry serves once the Kafka listeners do (its socket is bound before): asked first,
    # it has started by the time it answers
    assert SchemaRegistryClient({"url": registry_broker.schema_registry_url}).get_subjects() == []
    sizes = {k: v for k, v in _metrics(control).items() if "_requests" not in k}
    assert sizes == {
        "minibroker_schema_registry_subjects": 0, "minibroker_schema_registry_deleted_subjects": 0,
        'minibroker_schema_registry_versions{state="live"}': 0,
        'minibroker_schema_registry_versions{state="deleted"}': 0,
        "minibroker_schema_registry_schemas": 0}
    _populate(registry_broker.schema_registry_url)
    m = _metrics(control)
    assert m["minibroker_schema_registry_subjects"] == 2
    assert m["minibroker_schema_registry_deleted_subjects"] == 1
    assert m['minibroker_schema_registry_versions{state="live"}'] == 4
    assert m['minibroker_schema_registry_versions{state="deleted"}'] == 1
    assert m["minibroker_schema_registry_schemas"] == 3
    route = 'minibroker_schema_registry_requests_total{method="%s",route="%s",status="%s"}'
    # four new versions and one already there (v1 under copy-value is a new version of id 1)
    assert m[route % ("GET", "/subjects", 200)] == 1
    assert m[route % ("POST", "/subjects/{subject}/versions", 200)] == 5
    assert m[route % ("POST", "/subjects/{subject}/versions", 409)] == 1
    assert m[route % ("GET", "/subjects/{subject}/versions/{version}", 404)] == 1
    assert m[route % ("DELETE", "/subjects/{subject}", 200)] == 1
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(registry_broker.schema_registry_url + "/no/such/route", timeout=10)
    assert _metrics(control)[route % ("GET", "unmatched", 404)] == 1


def test_metrics_without_a_registry(broker_factory):
    b = broker_factory(name="no-registry", control=True)
    assert _metrics(b.control.address) == {}


def test_the_console_lists_subjects_and_diffs_versions(registry_broker, tmp_path):
    from playwright.sync_api import expect

    control = registry_broker.control.address
    _populate(registry_broker.schema_registry_url)
    problems: list[str] = []
    with console_page(problems) as page:
        page.goto(f"http://{control}/", timeout=WAIT_MS)
        page.wait_for_selector("body[data-loaded=overview]")
        expect(page.locator("#registry-counts")).to_have_text(
            "2 subjects · 4 versions · 3 schemas · 1 soft-deleted versions")
        users = page.locator('#registry-subjects tr[data-subject="users-value"]')
        expect(users).to_contain_text("1, 2, 3")
        expect(users).to_contain_text("AVRO")
        expect(users).to_contain_text("BACKWARD")
        expect(page.locator('#registry-subjects tr[data-subject="gone-value"]')).to_contain_text("(deleted)")
        page.screenshot(path=str(tmp_path / "registry.png"), full_page=True)

        # a subject: the latest version against the one before by default
        users.locator("text=versions").click()
        page.wait_for_selector("body[data-loaded=registry]")
        expect(page.locator("#sr-versions tbody tr")).to_have_count(3)
        expect(page.locator("#sr-summary")).to_have_text("v2 (id 2) → v3 (id 3): 8 lines added, 0 removed")
        expect(page.locator("#sr-diff .add")).to_contain_text(['"name": "city"'])
        # v1 to v3 by choosing them
        page.select_option("#sr-a", "1")
        page.wait_for_function("() => location.hash.endsWith('/1/3')")
        expect(page.locator("#sr-summary")).to_have_text("v1 (id 1) → v3 (id 3): 13 lines added, 0 removed")
        expect(page.locator("#sr-diff .add")).to_contain_text(['"name": "age"', '"name": "city"'])
        expect(page.locator("#sr-diff .del")).to_have_count(0)
        # the same version both sides: the schema itself, no diff
        page.select_option("#sr-b", "1")
        page.wait_for_function("() => location.hash.endsWith('/1/1')")
        expect(page.locator("#sr-summary")).to_have_text("v1 (id 1) → v1 (id 1): the same schema")
        expect(page.locator("#sr-diff")).to_contain_text('"name": "User"')
        page.screenshot(path=str(tmp_path / "registry-diff.png"), full_page=True)
        print(f"screenshots in {tmp_path}")
    assert problems == []


def test_the_console_without_a_registry(broker_factory):
    b = broker_factory(name="console-no-registry", control=True)
    problems: list[str] = []
    with console_page(problems) as page:
        page.goto(f"http://{b.control.address}/", timeout=WAIT_MS)
        page.wait_for_selector("body[data-loaded=overview]")
        from playwright.sync_api import expect
        expect(page.locator("#registry-note")).to_contain_text("--schema-registry-listener")
        expect(page.locator("#registry-subjects")).to_be_hidden()
    assert problems == []
