"""The control plane: an HTTP JSON API on its own listener (``--control-listener``), served on
the broker's event loop by aiohttp.

Everything on it changes or reads the broker the way the protocol cannot: fault rules
(``/v1/faults``), the clock (``/v1/clock``), the request log (``/v1/requests``). Every answer is
JSON; a bad request is ``400 {"error": "<one line>"}``, never a traceback. aiohttp is imported
only when the listener is on, so a broker without it starts as fast as before.

    GET    /v1/health                  {"node_id", "clock", "faults", "held"}
    GET    /v1/faults                  {"rules": [...]}       (with how often each matched and fired)
    POST   /v1/faults                  a rule, or {"rules": [...]}  -> 201 {"rules": [...]}
    DELETE /v1/faults                  remove every rule (held requests go on)
    DELETE /v1/faults/{id}             remove one
    POST   /v1/faults/release          let every held request go on; /v1/faults/{id}/release: one rule's
    GET    /v1/clock                   {"mode", "wall_ms", "offset_ms"}
    POST   /v1/clock/advance           {"duration": "90s"} or {"ms": 90000}: what was due then ran
    GET    /v1/requests                ?api=&client=&transactional_id=&group=&topic=&since=&limit=
    GET    /v1/requests/counts         requests per API, version and client software since start
    DELETE /v1/requests                forget the recorded requests
    GET    /v1/cluster                 (--brokers N) the virtual brokers, up or stopped, and addresses
    POST   /v1/brokers/{id}/stop|start stop or start one virtual broker (leaders and coordinators move)
    POST   /v1/partitions/leader       {"topic", "partition", "broker"}: move a partition's leader
    POST   /v1/coordinators/move       {"transactional_id" or "group", "broker"[, "load_in_progress": N]}:
                                       move a coordinator; N: its next N requests of each coordinator
                                       API are answered COORDINATOR_LOAD_IN_PROGRESS (as while loading)
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

from aiohttp import web

from minibroker_storage.lazylog import get_logger

from ..core.clock import ControlledClock
from .durations import DurationError, parse_duration_ms
from .faults.actions import Injector
from .faults.rules import FaultError, parse_api
from .replies import bad as _bad
from .replies import json_body as _json_body
from .request_counts import RequestCounts
from .request_log import RequestLog

log = get_logger("minibroker.control")


_TXN_COORDINATOR_APIS = ("InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn")
_GROUP_COORDINATOR_APIS = ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit",
                           "OffsetFetch", "TxnOffsetCommit", "ConsumerGroupHeartbeat", "ShareGroupHeartbeat")


class ControlPlane:
    def __init__(self, *, node_id: int, clock: ControlledClock, injector: Injector,
                 request_log: RequestLog, counts: RequestCounts,
                 clock_advanced: Callable[[float], dict[str, Any]], broker: Any = None) -> None:
        self.node_id = node_id
        # The Broker (minibroker.broker): what the transaction, console and metrics routes read.
        self.broker = broker
        self.clock = clock
        self.injector = injector
        self.request_log = request_log
        self.counts = counts
        self.clock_advanced = clock_advanced
        self.runner: web.AppRunner | None = None
        self.port = 0
        # app.RunningBroker with --brokers N: stops, starts and moves virtual brokers' work.
        self.cluster_ops: Any = None

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._errors])
        r = app.router
        r.add_get("/v1/health", self.health)
        r.add_get("/v1/faults", self.list_faults)
        r.add_post("/v1/faults", self.add_faults)
        r.add_delete("/v1/faults", self.clear_faults)
        r.add_post("/v1/faults/release", self.release)
        r.add_delete("/v1/faults/{id}", self.remove_fault)
        r.add_post("/v1/faults/{id}/release", self.release)
        r.add_get("/v1/clock", self.show_clock)
        r.add_post("/v1/clock/advance", self.advance_clock)
        r.add_get("/v1/requests", self.requests)
        r.add_get("/v1/requests/counts", self.request_counts)
        r.add_delete("/v1/requests", self.clear_requests)
        r.add_get("/v1/cluster", self.show_cluster)
        r.add_post("/v1/brokers/{id}/stop", self.stop_broker)
        r.add_post("/v1/brokers/{id}/start", self.start_broker)
        r.add_post("/v1/partitions/leader", self.move_leader)
        r.add_post("/v1/coordinators/move", self.move_coordinator)
        from . import console, metrics, share_routes, txn_routes
        txn_routes.add_routes(r, self)
        share_routes.add_routes(r, self)
        metrics.add_routes(r, self)
        console.add_routes(r, self)
        return app

    @web.middleware
    async def _errors(self, request: web.Request, handler):
        try:
            return await handler(request)
        except web.HTTPException as e:
            if e.content_type == "application/json" or e.status < 400:
                raise
            return _bad(e.reason, e.status)
        except Exception:
            log.exception("control.failed", path=request.path)
            return _bad("internal error (see the broker's log)", 500)

    async def start(self, sock: socket.socket) -> None:
        self.runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await self.runner.setup()
        site = web.SockSite(self.runner, sock)
        await site.start()
        self.port = sock.getsockname()[1]

    async def close(self) -> None:
        self.injector.release()
        if self.runner is not None:
            await self.runner.cleanup()

    # -- health -------------------------------------------------------------------------------
    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"node_id": self.node_id, "clock": self._clock(),
                                  "faults": len(self.injector.book.rules),
                                  "held": sum(self.injector.held().values())})

    # -- faults --------------------------------------------------------------------------------
    async def list_faults(self, request: web.Request) -> web.Response:
        held = self.injector.held()
        rules = [{**r, "held": held.get(r["id"], 0)} for r in self.injector.book.listing()]
        return web.json_response({"rules": rules})

    async def add_faults(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        specs = body.get("rules") if isinstance(body, dict) and "rules" in body else body
        if isinstance(specs, dict):
            specs = [specs]
        if not isinstance(specs, list) or not specs:
            return _bad("post a rule (a JSON object) or {\"rules\": [...]}")
        try:  # all or nothing
            added = self.injector.book.add_all(specs, numbered=len(specs) > 1)
        except FaultError as e:
            return _bad(str(e))
        return web.json_response({"rules": [r.describe() for r in added]}, status=201)

    async def clear_faults(self, request: web.Request) -> web.Response:
        gone = self.injector.book.clear()
        released = self.injector.release()
        return web.json_response({"removed": len(gone), "released": released})

    def _rule_id(self, request: web.Request) -> int:
        try:
            return int(request.match_info["id"])
        except ValueError:
            raise web.HTTPNotFound(text=json.dumps({"error": "no such rule"}),
                                   content_type="application/json") from None

    async def remove_fault(self, request: web.Request) -> web.Response:
        rule_id = self._rule_id(request)
        rule = self.injector.book.remove(rule_id)
        if rule is None:
            return _bad(f"no fault rule {rule_id}", 404)
        released = self.injector.release(rule_id)
        return web.json_response({"removed": rule.describe(), "released": released})

    async def release(self, request: web.Request) -> web.Response:
        rule_id = self._rule_id(request) if "id" in request.match_info else None
        return web.json_response({"released": self.injector.release(rule_id)})

    # -- clock ---------------------------------------------------------------------------------
    def _clock(self) -> dict[str, Any]:
        return {"mode": "virtual" if self.clock.virtual else "system",
                "wall_ms": self.clock.wall_ms(), "offset_ms": self.clock.offset_ms}

    async def show_clock(self, request: web.Request) -> web.Response:
        return web.json_response(self._clock())

    async def advance_clock(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        if not isinstance(body, dict):
            return _bad('post {"duration": "90s"} or {"ms": 90000}')
        try:
            if "ms" in body:
                ms = float(body["ms"])
            elif "duration" in body:
                ms = parse_duration_ms(str(body["duration"]))
            else:
                return _bad('post {"duration": "90s"} or {"ms": 90000}')
        except (DurationError, TypeError, ValueError) as e:
            return _bad(str(e))
        if ms < 0:
            return _bad("a clock does not go back: the duration must be >= 0")
        before = self.clock.wall_ms()
        self.clock.advance(ms)
        ran = self.clock_advanced(ms)
        log.info("clock.advanced", by_ms=ms, before_ms=before, now_ms=self.clock.wall_ms(), **ran)
        return web.json_response({**self._clock(), "advanced_ms": ms, "ran": ran})

    # -- requests ------------------------------------------------------------------------------
    async def requests(self, request: web.Request) -> web.Response:
        q = request.query
        try:
            api = parse_api(q["api"]) if q.get("api") else None
        except FaultError as e:
            return _bad(str(e))
        try:
            since = int(q.get("since", "0"))
            limit = int(q["limit"]) if q.get("limit") else None
        except ValueError:
            return _bad("since and limit must be integers")
        records = self.request_log.query(api=api, client=q.get("client") or None,
                                         transactional_id=q.get("transactional_id") or None,
                                         group=q.get("group") or None, topic=q.get("topic") or None,
                                         since=since, limit=limit)
        return web.json_response({"requests": [r.as_dict() for r in records]})

    async def request_counts(self, request: web.Request) -> web.Response:
        return web.json_response({"counts": self.counts.table()})

    async def clear_requests(self, request: web.Request) -> web.Response:
        n = len(self.request_log.records)
        self.request_log.clear()
        return web.json_response({"cleared": n})

    def require_broker(self) -> Any:
        """The broker the transaction and console routes read (503 without one)."""
        if self.broker is None:  # a ControlPlane built without one (unit tests of http.py)
            raise web.HTTPServiceUnavailable(reason="no broker behind this control plane")
        return self.broker

    # -- virtual brokers -----------------------------------------------------------------------
    def _ops(self) -> Any:
        if self.cluster_ops is None:
            raise web.HTTPBadRequest(text=json.dumps({"error": "one broker: start with --brokers N"}),
                                     content_type="application/json")
        return self.cluster_ops

    async def show_cluster(self, request: web.Request) -> web.Response:
        ops = self._ops()
        cluster = ops.broker.cluster
        out = cluster.describe()
        for b in out["brokers"]:
            host, port = ops.broker.node_endpoints[b["node_id"]]
            b["host"], b["port"] = host, port
        return web.json_response(out)

    async def _broker_op(self, request: web.Request, op: str) -> web.Response:
        from ..cluster import ClusterError
        ops = self._ops()
        try:
            node = int(request.match_info["id"])
            moved = await (ops.stop_node(node) if op == "stop" else ops.start_node(node))
        except ValueError as e:  # ClusterError is one
            return _bad(str(e) if isinstance(e, ClusterError) else "the broker id must be an integer")
        return web.json_response({"broker": node, "up": op == "start", "leaders_moved": moved})

    async def stop_broker(self, request: web.Request) -> web.Response:
        return await self._broker_op(request, "stop")

    async def start_broker(self, request: web.Request) -> web.Response:
        return await self._broker_op(request, "start")

    async def move_leader(self, request: web.Request) -> web.Response:
        from ..cluster import ClusterError
        ops = self._ops()
        body = await _json_body(request)
        try:
            topic, partition, node = str(body["topic"]), int(body["partition"]), int(body["broker"])
        except (KeyError, TypeError, ValueError):
            return _bad('post {"topic": T, "partition": P, "broker": B}')
        info = ops.broker.logs.topic(topic)
        if info is None or not 0 <= partition < info.partitions:
            return _bad(f"no partition {topic}-{partition}", 404)
        try:
            moved = ops.broker.cluster.move_leader(topic, partition, node)
        except ClusterError as e:
            return _bad(str(e))
        return web.json_response({"topic": topic, "partition": partition, "leader": node,
                                  "leaders_moved": moved})

    async def move_coordinator(self, request: web.Request) -> web.Response:
        from minibroker_protocol.topics import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC

        from ..cluster import ClusterError
        ops = self._ops()
        body = await _json_body(request)
        try:
            node = int(body["broker"])
        except (KeyError, TypeError, ValueError):
            return _bad('post {"transactional_id": ID or "group": G, "broker": B}')
        broker = ops.broker
        if body.get("transactional_id"):
            key = str(body["transactional_id"])
            topic, partition = TRANSACTION_STATE_TOPIC, broker.transaction_partition_for(key)
        elif body.get("group"):
            key = str(body["group"])
            topic, partition = GROUP_METADATA_TOPIC, broker.offsets_partition_for(key)
        else:
            return _bad('post {"transactional_id": ID or "group": G, "broker": B}')
        try:
            loading = int(body.get("load_in_progress", 0))
        except (TypeError, ValueError):
            return _bad("load_in_progress must be an integer")
        try:
            moved = broker.cluster.move_leader(topic, partition, node)
        except ClusterError as e:
            return _bad(str(e))
        rules = []
        if loading > 0:
            # Kafka's new coordinator loads the partition first: its answers say so meanwhile.
            field = "transactional_id" if topic == TRANSACTION_STATE_TOPIC else "group"
            apis = _TXN_COORDINATOR_APIS if field == "transactional_id" else _GROUP_COORDINATOR_APIS
            rules = [self.injector.book.add({"api": api, "action": "error", field: key, "broker": node,
                                             "error": "COORDINATOR_LOAD_IN_PROGRESS", "count": loading}).id
                     for api in apis]
        log.info("cluster.coordinator_moved", key=key, partition=f"{topic}-{partition}", broker=node,
                 load_in_progress=loading)
        return web.json_response({"coordinator": node, "partition": f"{topic}-{partition}",
                                  "leaders_moved": moved, "fault_rules": rules})
