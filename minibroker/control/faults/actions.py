"""Carrying out a fault rule that fired on a request: the one place an injected failure
touches the request's path.

Each action is a different "bad day" seen from the client:

- ``error``: the request is not applied; the answer carries the rule's error code
  (minibroker/control/faults/error_answers.py shapes it for the request's API and version);
- ``error-after-apply``: applied, then answered with the error: the client believes it failed;
- ``drop-response``: applied, and the answer never comes — the connection then goes silent
  (reads nothing more, answers nothing more), as across a network partition, until the client
  gives up on it after its request timeout and reconnects. This is the "commit gap";
- ``delay``: applied, answered ``delay_ms`` later;
- ``disconnect``: the connection is closed, before or after applying (``when``);
- ``hold``: not applied until the rule is released (control plane) or removed;
- ``throttle``: applied, answered at once with ``throttle_time_ms`` = ``throttle_ms``, and the
  connection reads nothing more for that time: what a client quota does (minibroker/handlers/quotas.py),
  without the traffic that would take a client over one;
- ``crash``: the broker SIGKILLs itself before or after applying the request (or, at a named
  point of the transaction and produce paths, through :class:`minibroker.core.crash_points.CrashPoints`).

Answers keep their order on the connection (minibroker/net/server.py): a held or delayed request
holds back the answers of the requests pipelined behind it, as on a Kafka connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from minibroker_storage.lazylog import get_logger

from ...core import crash_points
from ...handlers.api import NO_RESPONSE, Answer, Disconnect, RequestContext, Response
from ..request_counts import api_name
from .error_answers import NoErrorShape, error_entity
from .rules import FaultBook, FaultRule

log = get_logger("minibroker.faults")


class Disconnecting(Disconnect):
    """Close this connection: the server logs it as any refused connection."""

    def __init__(self, rule: FaultRule) -> None:
        super().__init__("fault_injected", f"fault rule {rule.id} ({rule.action})", fault=rule.id)


def kill_self(rule: FaultRule, where: str) -> None:
    crash_points.kill_self(rule.id, where)


class Injector:
    def __init__(self, book: FaultBook, crash: Callable[[FaultRule, str], None] = kill_self) -> None:
        self.book = book
        self.crash = crash
        self._held: dict[int, list[asyncio.Future]] = {}

    # -- holds ---------------------------------------------------------------------------
    def release(self, rule_id: int | None = None) -> int:
        """Let the requests a hold rule keeps (all of them, without an id) go on; how many."""
        ids = list(self._held) if rule_id is None else [rule_id]
        n = 0
        for i in ids:
            for fut in self._held.pop(i, []):
                if not fut.done():
                    fut.set_result(None)
                    n += 1
        if n:
            log.info("fault.released", id=rule_id, requests=n)
        return n

    def held(self) -> dict[int, int]:
        return {i: sum(not f.done() for f in futs) for i, futs in self._held.items() if futs}

    # -- one request ---------------------------------------------------------------------
    def apply(self, rule: FaultRule, run: Callable[[], Answer], ctx: RequestContext,
              request: Any) -> Answer:
        log.info("fault.fired", id=rule.id, action=rule.action, api=api_name(ctx.api_key),
                 api_version=ctx.api_version, correlation_id=ctx.correlation_id,
                 client_id=ctx.client_id, conn=getattr(ctx.connection, "conn_id", None),
                 fired=rule.fired, error=rule.error_name)
        action = rule.action
        if action == "error":
            return self._error(rule, ctx, request)
        if action == "disconnect" and rule.when == "before":
            raise Disconnecting(rule)
        if action == "crash" and rule.point == "before-apply":
            self.crash(rule, "before-apply")
        if action == "hold":
            return self._hold(rule, run)
        return self._after(rule, run(), ctx, request)

    def _error(self, rule: FaultRule, ctx: RequestContext, request: Any) -> Response:
        assert rule.error is not None  # parse_rule requires it for this action
        try:
            entity = error_entity(ctx.api_key, ctx.api_version, request, rule.error, rule.message)
        except NoErrorShape as e:
            log.warning("fault.not_applicable", id=rule.id, reason=str(e))
            raise Disconnecting(rule) from None
        return Response.of(ctx.correlation_id, entity)

    async def _hold(self, rule: FaultRule, run: Callable[[], Answer]) -> Response:
        fut = asyncio.get_running_loop().create_future()
        self._held.setdefault(rule.id, []).append(fut)
        await fut
        answer = run()
        return answer if isinstance(answer, Response) else await answer

    async def _after(self, rule: FaultRule, answer: Answer, ctx: RequestContext,
                     request: Any) -> Response:
        response = answer if isinstance(answer, Response) else await answer
        action = rule.action
        if action == "crash":
            self.crash(rule, "after-apply")
        if action == "error-after-apply":
            return self._error(rule, ctx, request)
        if action == "delay":
            await asyncio.sleep(rule.delay_ms / 1000)
            return response
        if action == "disconnect":
            raise Disconnecting(rule)
        if action == "throttle":
            from ...handlers.quotas import throttled
            assert rule.throttle_ms is not None  # parse_rule requires it for this action
            return throttled(ctx, response, rule.throttle_ms, quota="fault rule", rule=rule.id)
        if action == "drop-response":
            mute = getattr(ctx.connection, "mute", None)
            if mute is not None:
                mute(f"fault rule {rule.id}: the answer to {api_name(ctx.api_key)} was dropped")
            return NO_RESPONSE
        return response
