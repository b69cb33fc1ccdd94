"""Dispatcher: a handler's Response (or awaitable of one) passed through, and Kafka's
refusals of unservable requests."""

from __future__ import annotations

import asyncio
import struct

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

from minibroker.handlers.api import NO_RESPONSE, Api, RequestContext, Response
from minibroker.net.dispatch import Disconnect, Dispatcher
from minibroker_protocol import codec
from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build
from minibroker_protocol.errors import ErrorCode

CORR = 31337


def _frame(api_key: int, version: int, entity=None) -> memoryview:
    if entity is None:
        entity = load_request_schema(api_key, version)()
    return memoryview(codec.encode_request(entity, correlation_id=CORR, client_id="t"))


def _find_coordinator_entity(ctx: RequestContext):
    R = codec.response_type(ctx.api_key, ctx.api_version)
    return build(R, error_code=ErrorCode.coordinator_not_available, node_id=-1, host="",
                 port=-1, error_message=None)


def _dispatcher(handler) -> Dispatcher:
    d = Dispatcher()
    d.register(Api(ApiKey.FindCoordinator, 0, 0, handler))
    return d


def _request():
    R = load_request_schema(ApiKey.FindCoordinator, 0)
    return _frame(ApiKey.FindCoordinator, 0, R(key="g"))


def _decoded(resp: Response):
    data = b"".join(bytes(c) for c in resp.chunks)
    assert len(data) == resp.size
    assert struct.unpack_from(">i", data, 0) == (CORR,)
    entity, _ = entity_reader(load_response_schema(ApiKey.FindCoordinator, 0))(data[4:], 0)
    return entity


def test_response_passes_through():
    seen = []

    def handler(ctx, req):
        seen.append((ctx.api_key, ctx.api_version, ctx.correlation_id, ctx.client_id, req.key))
        return Response.of(ctx.correlation_id, _find_coordinator_entity(ctx))

    resp = _dispatcher(handler).handle(_request(), None)
    assert isinstance(resp, Response)
    assert seen == [(ApiKey.FindCoordinator, 0, CORR, "t", "g")]
    assert _decoded(resp).error_code == ErrorCode.coordinator_not_available


def test_no_response_passes_through():
    resp = _dispatcher(lambda ctx, req: NO_RESPONSE).handle(_request(), None)
    assert resp is NO_RESPONSE and resp.silent


@pytest.mark.parametrize("shape", ["response", "none"])
def test_coroutine_answers_are_awaited_to_their_response(shape):
    async def handler(ctx, req):
        await asyncio.sleep(0)
        if shape == "response":
            return Response.of(ctx.correlation_id, _find_coordinator_entity(ctx))
        return NO_RESPONSE

    pending = _dispatcher(handler).handle(_request(), None)
    assert not isinstance(pending, Response)
    resp = asyncio.run(_await(pending))
    assert isinstance(resp, Response)
    if shape == "response":
        assert _decoded(resp).error_code == ErrorCode.coordinator_not_available
    else:
        assert resp.silent


async def _await(aw):
    return await aw


def test_unknown_api_key_and_version_disconnect():
    d = Dispatcher()
    with pytest.raises(Disconnect) as e:
        d.handle(memoryview(struct.pack(">hhih", ApiKey.Metadata, 1, CORR, -1)), None)
    assert e.value.reason == "unknown_api_key"
    d.register(Api(ApiKey.Metadata, 4, 12, lambda ctx, req: NO_RESPONSE))
    with pytest.raises(Disconnect) as e:
        d.handle(memoryview(struct.pack(">hhih", ApiKey.Metadata, 1, CORR, -1)), None)
    assert e.value.reason == "unsupported_version"


def test_api_versions_lists_registered_keys():
    d = _dispatcher(lambda ctx, req: NO_RESPONSE)
    resp = d.handle(_frame(ApiKey.ApiVersions, 0), None)
    data = b"".join(bytes(c) for c in resp.chunks)
    entity, _ = entity_reader(load_response_schema(ApiKey.ApiVersions, 0))(data[4:], 0)
    assert {(a.api_key, a.min_version, a.max_version) for a in entity.api_keys} == {(10, 0, 0), (18, 0, 5)}
