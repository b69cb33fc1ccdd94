"""The REST routes' shapes, statuses and Confluent error bodies, over aiohttp's test client with
the toy format (real clients against a real broker: tests/integration/test_schema_registry.py)."""
from __future__ import annotations

import asyncio
import base64
import json

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from minibroker.registry.http import CONTENT_TYPE, RegistryServer
from minibroker.registry.state import Registry

from .fake_format import MemoryLog, ToyFormat
from .test_state import _formats

V1 = {"Content-Type": CONTENT_TYPE}
TEXT = '{"fields":{"a":false}}'
# Java's UUID of the MD5 of TEXT's UTF-8 bytes (Schema.getGuid), computed with java.security
GUID = "1c75cb98-6fb0-9eb4-39e3-5346e26cc894"
T1 = 1_700_000_000_001  # MemoryLog's timestamp of the first append: a version's ``ts``


def schema(fields):
    return json.dumps({"schema": json.dumps({"fields": fields})})


@pytest.fixture
async def client():
    server = RegistryServer(Registry(MemoryLog(), formats=_formats(ToyFormat())))
    await server.replay()
    # the clients' Content-Type by default: aiohttp would send text/plain for a str body, which
    # Confluent (and this registry) answer with 415
    async with TestClient(TestServer(server.app()), headers=V1) as c:
        yield c


async def _json(resp, status=200):
    assert resp.status == status, await resp.text()
    assert resp.headers["Content-Type"].startswith(CONTENT_TYPE)
    return await resp.json(content_type=None)


async def test_register_get_and_list(client):
    out = await _json(await client.post("/subjects/t-value/versions", data=schema({"a": False}), headers=V1))
    # Confluent 8's RegisterSchemaResponse: id, version, guid, schemaType (AVRO too), schema
    assert out == {"id": 1, "version": 1, "guid": GUID, "schemaType": "AVRO", "schema": TEXT}
    again = await client.post("/subjects/t-value/versions", data=schema({"a": False}), headers=V1)
    assert await _json(again) == out
    got = await _json(await client.get("/subjects/t-value/versions/latest"))
    assert got == {"subject": "t-value", "version": 1, "id": 1, "guid": GUID, "schemaType": "AVRO",
                   "schema": TEXT, "ts": T1, "deleted": False}
    assert await _json(await client.get("/subjects/t-value/versions/-1")) == got
    assert await _json(await client.get("/subjects")) == ["t-value"]
    assert await _json(await client.get("/subjects/t-value/versions")) == [1]
    by_id = {"guid": GUID, "schemaType": "AVRO", "schema": TEXT, "ts": T1, "deleted": False}
    assert await _json(await client.get("/schemas/ids/1")) == by_id
    # subject= names where the id is (that subject's when it has it, else any); fetchMaxId
    named = {"subject": "t-value", "version": 1, **by_id}
    assert await _json(await client.get("/schemas/ids/1?subject=t-value")) == named
    assert await _json(await client.get("/schemas/ids/1?subject=other")) == named
    assert (await _json(await client.get("/schemas/ids/1?fetchMaxId=true")))["maxId"] == 1
    raw = await client.get("/schemas/ids/1/schema")
    assert await raw.text() == '{"fields":{"a":false}}'
    assert await _json(await client.get("/schemas/ids/1/versions")) == [{"subject": "t-value", "version": 1}]
    assert await _json(await client.get("/schemas/ids/1/subjects")) == ["t-value"]
    assert await _json(await client.get("/schemas/types")) == ["AVRO", "JSON", "PROTOBUF"]
    found = await _json(await client.post("/subjects/t-value", data=schema({"a": False}),
                                          headers={"Content-Type": "application/json"}))
    assert found == {k: v for k, v in got.items() if k not in ("ts", "deleted")}
    assert await _json(await client.get("/")) == {}
    meta = await _json(await client.get("/v1/metadata/id"))
    assert meta["scope"]["clusters"]["schema-registry-cluster"] == "schema-registry"


@pytest.mark.parametrize("method,path,body,status,code", [
    ("get", "/subjects/nope/versions", None, 404, 40401),
    ("get", "/subjects/nope/versions/1", None, 404, 40401),
    ("get", "/schemas/ids/5", None, 404, 40403),
    ("get", "/subjects/nope/versions/zero", None, 422, 42202),
    ("post", "/subjects/x/versions", "{not json", 400, 400),
    ("post", "/subjects/x/versions", b"\xff\xfe{}", 400, 400),
    ("post", "/subjects/x/versions", json.dumps({"schema": "{"}), 422, 42201),
    ("put", "/config", json.dumps({"compatibility": "SIDEWAYS"}), 422, 42203),
    ("get", "/config/nope", None, 404, 40408),
    ("get", "/mode/nope", None, 404, 40409),
    ("put", "/mode", json.dumps({"mode": "SIDEWAYS"}), 422, 42204),
    ("get", "/no/such/route", None, 404, 404),
])
async def test_errors_are_confluents(client, method, path, body, status, code):
    resp = await getattr(client, method)(path, data=body, headers=V1)
    out = await _json(resp, status)
    assert out["error_code"] == code and out["message"]


async def test_409_and_compatibility_route(client):
    await client.post("/subjects/s/versions", data=schema({"a": False}), headers=V1)
    out = await _json(await client.post("/subjects/s/versions", data=schema({"b": False}), headers=V1), 409)
    assert out["error_code"] == 409 and "incompatible" in out["message"]
    # force skips the checks outside IMPORT (Confluent 8.4's register)
    forced = await _json(await client.post("/subjects/s/versions?force=true", data=schema({"b": False})))
    assert (forced["id"], forced["version"]) == (2, 2)
    await _json(await client.delete("/subjects/s/versions/2"))
    await _json(await client.delete("/subjects/s/versions/2?permanent=true"))
    ok = await _json(await client.post("/compatibility/subjects/s/versions/latest", data=schema({"a": False})))
    assert ok == {"is_compatible": True}
    bad = await _json(await client.post("/compatibility/subjects/s/versions/1?verbose=true",
                                        data=schema({"b": False})))
    assert bad["is_compatible"] is False and any("b" in m for m in bad["messages"])


async def test_deletes_config_and_mode(client):
    await client.post("/subjects/s/versions", data=schema({"a": False}), headers=V1)
    assert await _json(await client.delete("/subjects/s/versions/1?permanent=true"), 404) == {
        "error_code": 40407, "message": "Subject 's' Version 1 was not deleted first before being "
                                        "permanently deleted"}
    assert await _json(await client.delete("/subjects/s")) == [1]
    assert await _json(await client.get("/subjects?deleted=true")) == ["s"]
    gone = await _json(await client.get("/subjects/s/versions/1?deleted=true"))
    assert isinstance(gone.pop("ts"), int)
    assert gone == {"subject": "s", "version": 1, "id": 1, "guid": GUID, "schemaType": "AVRO",
                    "schema": TEXT, "deleted": True}
    assert await _json(await client.delete("/subjects/s?permanent=true")) == [1]
    assert await _json(await client.put("/config/s", data=json.dumps({"compatibility": "full"}))) == {
        "compatibility": "FULL"}
    assert await _json(await client.get("/config/s")) == {"compatibilityLevel": "FULL"}
    assert await _json(await client.get("/config/t?defaultToGlobal=true")) == {"compatibilityLevel": "BACKWARD"}
    assert await _json(await client.delete("/config/s")) == {"compatibilityLevel": "FULL"}
    assert await _json(await client.put("/mode", data=json.dumps({"mode": "READONLY"}))) == {"mode": "READONLY"}
    out = await _json(await client.post("/subjects/s/versions", data=schema({"a": False})), 422)
    assert out["error_code"] == 42205


async def test_basic_auth_and_loading():
    log = MemoryLog()
    reg = Registry(log, formats=_formats(ToyFormat()))
    server = RegistryServer(reg, users={"alice": "secret"}.get, wait_s=0.05)
    async with TestClient(TestServer(server.app())) as c:
        # not replayed yet: answered, with Confluent's timeout code
        assert (await _json(await c.get("/subjects", headers=_auth("alice", "secret")), 500))["error_code"] == 50002
        await server.replay()
        assert (await c.get("/subjects")).status == 401
        assert (await c.get("/subjects", headers=_auth("alice", "wrong"))).status == 401
        assert await _json(await c.get("/subjects", headers=_auth("alice", "secret"))) == []
        await asyncio.sleep(0)


def _auth(user, password):
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


async def test_guid_routes_and_contexts(client):
    await client.post("/subjects/s/versions", data=schema({"a": False}), headers=V1)
    # GET /schemas/guids/{guid}: the SchemaString without subject and version (getByGuid)
    by_guid = {"guid": GUID, "schemaType": "AVRO", "schema": TEXT, "ts": T1, "deleted": False}
    assert await _json(await client.get(f"/schemas/guids/{GUID}")) == by_guid
    assert await _json(await client.get(f"/schemas/guids/{GUID.upper()}")) == by_guid
    assert await _json(await client.get(f"/schemas/guids/{GUID}/ids")) == [{"context": ".", "id": 1}]
    other = "00000000-0000-0000-0000-000000000000"
    assert await _json(await client.get(f"/schemas/guids/{other}"), 404) == {
        "error_code": 40403, "message": f"Schema {other} not found"}
    assert await _json(await client.get(f"/schemas/guids/{other}/ids")) == []
    assert (await _json(await client.get("/schemas/guids/nope"), 404))["error_code"] == 40403
    assert await _json(await client.get("/contexts")) == ["."]
    # a permanently deleted version takes its guid along
    await client.delete("/subjects/s")
    await client.delete("/subjects/s?permanent=true")
    assert (await _json(await client.get(f"/schemas/guids/{GUID}"), 404))["error_code"] == 40403


async def test_lists_filter_and_page_as_confluent(client):
    for subject, fields in (("a", {"x": False}), ("a", {"x": False, "y": True}), ("b", {"z": False}),
                            ("c", {"w": False})):
        await client.put(f"/config/{subject}", data=json.dumps({"compatibility": "NONE"}))
        await _json(await client.post(f"/subjects/{subject}/versions", data=schema(fields), headers=V1))
    await _json(await client.delete("/subjects/a/versions/1"))
    await _json(await client.delete("/subjects/c"))
    assert await _json(await client.get("/subjects")) == ["a", "b"]
    assert await _json(await client.get("/subjects?deleted=true")) == ["a", "b", "c"]
    # deletedOnly: subjects all of whose versions are deleted, and it wins over deleted
    assert await _json(await client.get("/subjects?deletedOnly=true&deleted=true")) == ["c"]
    assert await _json(await client.get("/subjects?deleted=TRUE&offset=1&limit=1")) == ["b"]
    assert await _json(await client.get("/subjects?limit=0")) == ["a", "b"]
    assert await _json(await client.get("/subjects?offset=zz"), 404) == {
        "error_code": 404, "message": "HTTP 404 Not Found"}
    assert await _json(await client.get("/subjects/a/versions")) == [2]
    assert await _json(await client.get("/subjects/a/versions?deletedOnly=true")) == [1]
    assert await _json(await client.get("/subjects/a/versions?deletedAsNegative=true")) == [-1, 2]
    assert (await _json(await client.get("/subjects/c/versions"), 404))["error_code"] == 40401
    assert await _json(await client.get("/subjects/c/versions?deletedOnly=true")) == [1]
    # GET /schemas: every version by subject then version; deleted, latestOnly, paging
    listed = await _json(await client.get("/schemas"))
    assert [(s["subject"], s["version"], s["id"]) for s in listed] == [("a", 2, 2), ("b", 1, 3)]
    assert listed[0]["schemaType"] == "AVRO" and listed[0]["deleted"] is False
    every = await _json(await client.get("/schemas?deleted=true"))
    assert [(s["subject"], s["version"]) for s in every] == [("a", 1), ("a", 2), ("b", 1), ("c", 1)]
    latest = await _json(await client.get("/schemas?deleted=true&latestOnly=true&subjectPrefix=a"))
    assert [(s["subject"], s["version"]) for s in latest] == [("a", 2)]
    assert len(await _json(await client.get("/schemas?deleted=true&offset=3&limit=5"))) == 1
    assert await _json(await client.get("/schemas/ids/2/versions?limit=1")) == [{"subject": "a", "version": 2}]
    assert await _json(await client.get("/schemas/ids/9/versions"), 404) == {
        "error_code": 40403, "message": "Schema not found"}
    assert await _json(await client.get("/schemas/ids/9/subjects"), 404) == {
        "error_code": 40403, "message": "Schema not found"}


@pytest.mark.parametrize("accept,answered", [
    (None, CONTENT_TYPE),
    ("*/*", CONTENT_TYPE),
    ("application/json", "application/json"),
    ("application/vnd.schemaregistry+json", "application/vnd.schemaregistry+json"),
    # confluent-kafka's and the Java client's Accept: the first, by the server's qs
    ("application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json",
     CONTENT_TYPE),
    ("application/*", CONTENT_TYPE),
    ("application/json, */*;q=0.1", "application/json"),
    ("text/html, application/json;q=0.2", "application/json"),
    ("text/plain", None),
    ("application/json;q=0", None),
])
async def test_accept_is_negotiated_as_jersey_does(client, accept, answered):
    resp = await client.get("/subjects", headers={"Accept": accept} if accept else {})
    if answered is None:
        assert resp.status == 406
        assert await resp.json(content_type=None) == {"error_code": 406, "message": "HTTP 406 Not Acceptable"}
    else:
        assert resp.status == 200 and resp.headers["Content-Type"].split(";")[0] == answered
        assert await resp.json(content_type=None) == []


@pytest.mark.parametrize("content_type,status", [
    ("application/vnd.schemaregistry.v1+json", 200),
    ("application/vnd.schemaregistry+json", 200),
    ("application/json; charset=utf-8", 200),
    ("application/octet-stream", 200),
    (None, 200),
    ("text/plain", 415),
    ("application/xml", 415),
])
async def test_request_content_types_as_confluent_consumes(client, content_type, status):
    # a session without the fixture's default Content-Type, so that None sends none at all
    async with aiohttp.ClientSession() as bare:
        headers = {"Content-Type": content_type} if content_type else {}
        resp = await bare.post(client.make_url("/subjects/s/versions"), data=schema({"a": False}).encode(),
                               headers=headers, skip_auto_headers=("Content-Type",))
        await resp.read()
    assert resp.status == status, await resp.text()
    if status == 415:
        assert await resp.json(content_type=None) == {"error_code": 415,
                                                      "message": "HTTP 415 Unsupported Media Type"}
    # the path is matched first: an unknown route stays 404 whatever the types
    resp = await client.post("/no/such", data=b"{}", headers={"Content-Type": "text/plain"})
    assert resp.status == 404


async def test_latest_skips_deleted_versions_even_with_deleted_true(client):
    await client.put("/config/s", data=json.dumps({"compatibility": "NONE"}))
    await _json(await client.post("/subjects/s/versions", data=schema({"a": False})))
    await _json(await client.post("/subjects/s/versions", data=schema({"b": False})))
    await _json(await client.delete("/subjects/s/versions/2"))
    # getLatestVersionFromSubjectSchemas skips deleted versions whatever ``deleted`` says
    assert (await _json(await client.get("/subjects/s/versions/latest?deleted=true")))["version"] == 1
    assert (await _json(await client.get("/subjects/s/versions/2?deleted=true")))["deleted"] is True
    await _json(await client.delete("/subjects/s/versions/1"))
    assert await _json(await client.get("/subjects/s/versions/latest?deleted=true"), 404) == {
        "error_code": 40402, "message": "Version -1 not found."}
    assert (await _json(await client.get("/subjects/s/versions/latest"), 404))["error_code"] == 40401
    assert await _json(await client.get("/subjects/s/versions/1/referencedby?deleted=true&offset=1")) == []


@pytest.mark.parametrize("method,path,body", [
    ("post", "/subjects/__GLOBAL/versions", schema({"a": False})),
    ("post", "/subjects/__EMPTY/versions", schema({"a": False})),
    ("post", "/subjects/a%01b/versions", schema({"a": False})),
    ("put", "/config/__GLOBAL", json.dumps({"compatibility": "NONE"})),
    ("put", "/mode/__EMPTY", json.dumps({"mode": "READONLY"})),
])
async def test_reserved_and_control_subjects_are_42208(client, method, path, body):
    out = await _json(await getattr(client, method)(path, data=body), 422)
    assert out["error_code"] == 42208 and out["message"].startswith("The specified subject '")
    assert out["message"].endswith("' is not a valid.")
    # a wildcard passes, as schema.reject.empty.subject=false leaves it
    assert (await _json(await client.post("/subjects/*/versions", data=schema({"a": False}))))["id"] == 1
