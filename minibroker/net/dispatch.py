"""Request routing: api key and version → handler, with Kafka's answers to bad requests.

What Kafka does with a request it cannot serve (RequestContext.parseRequest,
SocketServer.processCompletedReceives): an ApiVersions request of a version
it does not know is answered in the v0 format with UNSUPPORTED_VERSION and the
ApiVersions range, so the client can retry lower; any other unknown api key,
unsupported version or unparsable body closes the connection.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from minibroker_protocol import codec
from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.api_versions import valid_software
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.header import HeaderError, peek_header, read_request_header
from minibroker_storage.lazylog import get_logger

from ..config.features import Features
from ..control.request_counts import UNKNOWN, RequestCounts
from ..handlers.api import Answer, Api, Disconnect, RequestContext, Response

if TYPE_CHECKING:
    import uuid

    from ..control.faults.actions import Injector
    from ..control.request_log import RequestLog, RequestRecord
    from ..handlers.quotas import QuotaEnforcer

__all__ = ["Api", "Disconnect", "Dispatcher", "RequestContext", "Response"]

log = get_logger("minibroker.dispatch")

ZERO = datetime.timedelta(0)


_UNKNOWN_SOFTWARE = (UNKNOWN, UNKNOWN)


def _not_loaded(ctx: RequestContext, request: Any) -> Answer:
    raise AssertionError("a placeholder's family is built before its handler is called")


class Dispatcher:
    def __init__(self, features: Features | None = None, counts: RequestCounts | None = None,
                 *, injector: Injector | None = None, request_log: RequestLog | None = None,
                 node_id: int = 1, coordinator_node: Callable[[int, str], int | None] | None = None,
                 topic_name: Callable[[uuid.UUID], str | None] | None = None,
                 quotas: QuotaEnforcer | None = None,
                 cluster_id: str | None = None) -> None:
        self.apis: dict[int, Api] = {}
        self.features = features if features is not None else Features()
        self.counts = counts if counts is not None else RequestCounts()
        # Both only with the control plane on: without them a request costs nothing more.
        self.injector = injector
        self.request_log = request_log
        self.node_id = node_id
        # Virtual brokers: where a coordinator request must go (None: one broker, no check).
        self.coordinator_node = coordinator_node
        # Topic ids to names, for the rules and the log of requests that name topics by id.
        self.topic_name = topic_name
        # Client quotas (AlterClientQuotas): measured only once some quota is set
        self.quotas = quotas
        # What ApiVersions v5 checks a client's expected cluster against (KIP-1242)
        self.cluster_id = cluster_id
        # Told the id of every connection that closes (per-connection state elsewhere)
        self.on_disconnect: list[Callable[[str], None]] = []
        # Whether an api key and version's request header is flexible, by (key << 16) | version:
        # kio's schema lookup behind codec.is_flexible_request is a few calls per request.
        self._flexible: dict[int, bool] = {}
        self.register(Api(ApiKey.ApiVersions, 0, 5, self._api_versions))

    def register(self, api: Api) -> None:
        # kio's schema modules are imported on an api's first request, not here: importing
        # all of them costs ~140 ms of start-up (tests/minibroker/test_dispatch_schemas.py
        # checks that every advertised version has its schemas).
        self.apis[api.key] = api

    def register_lazy(self, key: int, min_version: int, max_version: int,
                      load: Callable[[], Sequence[Api]]) -> None:
        """Serve ``key`` in this range by the family ``load`` builds on the key's first request
        (its Apis then replace the placeholders of all its keys; the ranges stay these, which
        --as-version may have capped meanwhile)."""
        self.apis[key] = Api(ApiKey(key), min_version, max_version, _not_loaded, load=load)

    def _loaded(self, api: Api) -> Api:
        assert api.load is not None
        for real in api.load():
            placeholder = self.apis.get(real.key)
            if placeholder is not None and placeholder.load is not None:
                self.apis[real.key] = dataclasses.replace(
                    real, min_version=placeholder.min_version, max_version=placeholder.max_version)
        return self.apis[api.key]

    def handle(self, frame: Any, connection: Any) -> Answer:
        auth = getattr(connection, "auth", None)
        if auth is not None and auth.raw_tokens:
            from ..handlers.sasl import raw_token
            from ..security.sasl.common import AuthenticationFailed
            try:
                return raw_token(connection, frame)
            except AuthenticationFailed as e:
                raise Disconnect("sasl_" + e.reason, e.message) from None
        try:
            api_key, version, corr = peek_header(frame)
        except HeaderError as e:
            raise Disconnect("malformed_header", str(e)) from None
        api = self.apis.get(api_key)
        if api is None:
            raise Disconnect("unknown_api_key", f"api key {api_key} is not supported",
                             api_key=api_key, api_version=version)
        if not api.min_version <= version <= api.max_version:
            if api_key == ApiKey.ApiVersions and version > api.max_version:
                return self._unsupported_api_versions(corr)
            raise Disconnect("unsupported_version",
                             f"api key {api_key} v{version} is outside "
                             f"v{api.min_version}-v{api.max_version}",
                             api_key=api_key, api_version=version)
        if api.load is not None:
            api = self._loaded(api)
        flexible = self._flexible.get((api_key << 16) | version)
        if flexible is None:  # the range check above bounds both: the key is unique
            flexible = self._flexible[(api_key << 16) | version] = codec.is_flexible_request(api_key, version)
        try:
            header = read_request_header(frame, flexible)
        except HeaderError as e:
            raise Disconnect("malformed_header", str(e), api_key=api_key) from None
        body = frame[header.body_offset:]
        try:
            if api.decoder is not None:
                request = api.decoder(body, version)
            else:
                request = codec.decode_request(api_key, version, body)
        except Exception as e:
            raise Disconnect("malformed_request", str(e), api_key=api_key,
                             api_version=version) from None
        ctx = RequestContext(api_key, version, corr, header.client_id, connection)
        if auth is not None and (not auth.authenticated or auth.session_ends_ms is not None):
            admitted = self._admit(auth, ctx, request)
            if admitted is not None:
                return admitted
        if api_key == ApiKey.ApiVersions and version >= 3 and connection is not None:
            # KIP-511: the connection's client software, for the request counts (Kafka keeps it
            # per connection too). Malformed names are refused by the handler, and counted as sent.
            connection.client_software = (request.client_software_name or UNKNOWN,
                                          request.client_software_version or UNKNOWN)
        software = getattr(connection, "client_software", _UNKNOWN_SOFTWARE)
        self.counts.count(api_key, version, software, header.client_id)
        quotas = self.quotas
        if quotas is not None and quotas.active:
            started = time.perf_counter_ns()
            answer = self._answer(api, ctx, request, software)
            handler_ns = time.perf_counter_ns() - started
            if isinstance(answer, Response):
                return quotas.after(ctx, len(frame), handler_ns, answer)
            return self._quota_later(quotas, ctx, len(frame), handler_ns, answer)
        return self._answer(api, ctx, request, software)

    def _answer(self, api: Api, ctx: RequestContext, request: Any, software: tuple[str, str]) -> Answer:
        if self.request_log is None and self.coordinator_node is None and not (
                self.injector is not None and self.injector.book):
            return api.handler(ctx, request)
        return self._observed(api, ctx, request, software)

    @staticmethod
    async def _quota_later(quotas: QuotaEnforcer, ctx: RequestContext, size: int, handler_ns: int,
                           answer: Awaitable[Response]) -> Response:
        # a request that waited (a long poll) is measured by the time its handler ran before it
        # waited: waiting costs no thread time, as in Kafka's purgatory
        return quotas.after(ctx, size, handler_ns, await answer)

    def _admit(self, auth: Any, ctx: RequestContext, request: Any) -> Response | None:
        """A SASL connection before authentication, or with a session that ends: None lets the
        request through; otherwise the answer it gets, after which the connection closes."""
        from ..security.sasl.common import AuthenticationFailed
        try:
            auth.admit(ctx.api_key)
            return None
        except AuthenticationFailed as e:
            if not e.answer:
                raise Disconnect("sasl_" + e.reason, e.message, api_key=ctx.api_key,
                                 principal=auth.principal) from None
            from ..control.faults.error_answers import NoErrorShape, error_entity
            try:
                entity = error_entity(ctx.api_key, ctx.api_version, request, e.error_code, e.message)
            except NoErrorShape:  # an answer with nowhere to put the error: just the close
                raise Disconnect("sasl_" + e.reason, e.message, api_key=ctx.api_key) from None
            response = Response.of(ctx.correlation_id, entity)
            log.warning("sasl.unexpected_request", conn=ctx.connection.conn_id,
                        api_key=ctx.api_key, error=e.message)
            ctx.connection.close_after(response, "sasl_unexpected_request")
            return response

    # -- with the control plane: recorded, and open to fault rules -------------------------
    def _observed(self, api: Api, ctx: RequestContext, request: Any, software: tuple[str, str]) -> Answer:
        from ..cluster import connection_node
        from ..control.faults import subjects
        from ..control.faults.rules import RequestFacts

        txn_ids = subjects.transactional_ids(ctx.api_key, request)
        groups = subjects.groups(ctx.api_key, request)
        tps = subjects.topic_partitions(request, self.topic_name)
        record = None
        if self.request_log is not None:
            record = self.request_log.begin(ctx, software, txn_ids, groups, {t for t, _ in tps})
        rule = None
        injector = self.injector
        if injector is not None and injector.book:
            node = connection_node(ctx)
            rule = injector.book.decide(RequestFacts(
                ctx.api_key, ctx.api_version, ctx.client_id, software[0], txn_ids, groups, tps,
                node if node is not None else self.node_id))
        try:
            if rule is not None:
                assert injector is not None  # a rule comes from its book
                if record is not None:
                    record.fault = rule.id
                answer = injector.apply(rule, lambda: self._routed(api, ctx, request), ctx, request)
            else:
                answer = self._routed(api, ctx, request)
        except Disconnect:
            if record is not None:
                self._finish(record, None, "disconnected")
            raise
        if record is None:
            return answer
        if isinstance(answer, Response):
            self._finish(record, answer)
            return answer
        return self._observe(record, answer)

    def _routed(self, api: Api, ctx: RequestContext, request: Any) -> Answer:
        """The handler's answer, or NOT_COORDINATOR when the request reached a virtual broker
        that does not coordinate its group or transactional id (KafkaApis answers so)."""
        if self.coordinator_node is not None:
            from ..cluster import connection_node, coordinator_key
            key = coordinator_key(ctx.api_key, request)
            node = connection_node(ctx)
            if key is not None and node is not None and self.coordinator_node(*key) != node:
                from ..control.faults.error_answers import error_entity
                return Response.of(ctx.correlation_id, error_entity(
                    ctx.api_key, ctx.api_version, request, ErrorCode.not_coordinator,
                    "This is not the correct coordinator."))
        return api.handler(ctx, request)

    async def _observe(self, record: RequestRecord, answer: Awaitable[Response]) -> Response:
        try:
            response = await answer
        except Disconnect:
            self._finish(record, None, "disconnected")
            raise
        except asyncio.CancelledError:
            self._finish(record, None, "cancelled")
            raise
        self._finish(record, response)
        return response

    def _finish(self, record: RequestRecord, response: Response | None, outcome: str | None = None) -> None:
        from ..control.request_log import RequestLog, first_error
        if response is None:
            RequestLog.finish(record, outcome or "disconnected")
        elif response.silent:
            RequestLog.finish(record, "no_answer")
        else:
            error = first_error(response.entity) if response.entity is not None else response.error_code
            if error:
                self.counts.errors[record.api_key] += 1
            RequestLog.finish(record, "answered", error)

    # -- ApiVersions -----------------------------------------------------------
    def version_table(self) -> tuple[tuple[int, int, int], ...]:
        """(api key, min version, max version) of every API served, by key: what ApiVersions lists."""
        return tuple(sorted((int(a.key), a.min_version, a.max_version) for a in self.apis.values()))

    def _api_keys(self, cls: Any) -> tuple[Any, ...]:
        ApiVersion = nested(cls, "ApiVersion")
        return tuple(ApiVersion(api_key=k, min_version=lo, max_version=hi)
                     for k, lo, hi in self.version_table())

    def _api_versions(self, ctx: RequestContext, request: Any) -> Response:
        cls = codec.response_type(ApiKey.ApiVersions, ctx.api_version)
        error = ErrorCode.none
        if ctx.api_version >= 3 and not (
            valid_software(request.client_software_name)
            and valid_software(request.client_software_version)
        ):
            # KIP-511: Kafka refuses malformed client software names.
            error = ErrorCode.invalid_request
            log.info("api_versions.invalid_client_software", name=request.client_software_name,
                     version=request.client_software_version)
        fields: dict[str, Any] = {}
        if ctx.api_version >= 5 and error == ErrorCode.none:
            error = self._expected_broker(ctx, request)
            if error != ErrorCode.none:  # Kafka's answer then lists no API and no feature
                return Response.of(ctx.correlation_id, build(cls, error_code=error, api_keys=(),
                                                             throttle_time=ZERO))
        if ctx.api_version >= 3:
            fields = self._features(cls, ctx.api_version)
        return Response.of(ctx.correlation_id,
                           build(cls, error_code=error, api_keys=self._api_keys(cls), throttle_time=ZERO,
                                 **fields))

    def _expected_broker(self, ctx: RequestContext, request: Any) -> ErrorCode:
        """ApiVersions v5 (KIP-1242): a client names the cluster and node it means to reach
        (both, or neither: one alone is INVALID_REQUEST); another cluster or node is
        REBOOTSTRAP_REQUIRED, so a client whose bootstrap address now reaches another broker
        starts over. As Kafka 4.4 answers (tests/differential/test_version_raises.py)."""
        cluster_id, node_id = request.cluster_id, request.node_id
        if cluster_id is None and node_id == -1:
            return ErrorCode.none
        if cluster_id is None or node_id == -1:
            return ErrorCode.invalid_request
        listener = getattr(getattr(ctx, "connection", None), "listener", None)
        node = getattr(listener, "node_id", None)
        node = self.node_id if node is None else node
        if cluster_id != self.cluster_id or node_id != node:
            log.info("api_versions.rebootstrap_required", client_cluster_id=cluster_id,
                     client_node_id=node_id, cluster_id=self.cluster_id, node_id=node)
            return ErrorCode.rebootstrap_required
        return ErrorCode.none

    def _features(self, cls: Any, api_version: int) -> dict[str, Any]:
        Supported = nested(cls, "SupportedFeatureKey")
        Finalized = nested(cls, "FinalizedFeatureKey")
        f = self.features
        return {
            "supported_features": tuple(Supported(name=n, min_version=lo, max_version=hi)
                                        for n, lo, hi in f.supported(api_version)),
            "finalized_features_epoch": f.epoch,
            "finalized_features": tuple(Finalized(name=n, max_version_level=lv, min_version_level=lv)
                                        for n, lv in f.finalized()),
        }

    def _unsupported_api_versions(self, corr: int) -> Response:
        cls = codec.response_type(ApiKey.ApiVersions, 0)
        ApiVersion = nested(cls, "ApiVersion")
        api = self.apis[ApiKey.ApiVersions]
        entity = cls(
            error_code=ErrorCode.unsupported_version,
            api_keys=(ApiVersion(api_key=int(api.key), min_version=api.min_version,
                                 max_version=api.max_version),),
        )
        return Response.of(corr, entity)
