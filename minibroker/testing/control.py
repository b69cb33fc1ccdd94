"""The control plane of a running broker from Python (standard library only).

    with MiniBroker(control=True) as b:
        b.control.add_fault(api="EndTxn", action="drop-response")
        b.control.advance("90s")                       # transaction timeouts fire
        versions = {r["api_version"] for r in b.control.requests(api="EndTxn")}

Each method is one HTTP call to the broker's ``--control-listener`` (docs/testing-the-bad-days.md);
a refusal raises :class:`ControlError` with the broker's one-line reason.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

__all__ = ["Control", "ControlError", "call"]


class ControlError(Exception):
    pass


def call(control: str, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
    """One JSON request to the control plane at ``control`` (HOST:PORT)."""
    url = f"http://{control}{path}"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        try:
            message = json.loads(e.read()).get("error", e.reason)
        except ValueError:
            message = e.reason
        raise ControlError(f"{method} {path}: {message}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise ControlError(f"cannot reach the control plane at {control}: {reason}") from None


class Control:
    def __init__(self, address: str) -> None:
        self.address = address

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        return call(self.address, method, path, body)

    # -- faults
    def add_fault(self, **rule: Any) -> dict[str, Any]:
        """Add one rule (the fields of POST /v1/faults: api, action, error, count, ...)."""
        return self._call("POST", "/v1/faults", rule)["rules"][0]

    def add_faults(self, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return self._call("POST", "/v1/faults", {"rules": rules})["rules"]

    def faults(self) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/faults")["rules"]

    def fault(self, rule_id: int) -> dict[str, Any]:
        for r in self.faults():
            if r["id"] == rule_id:
                return r
        raise ControlError(f"no fault rule {rule_id}")

    def remove_fault(self, rule_id: int) -> dict[str, Any]:
        return self._call("DELETE", f"/v1/faults/{rule_id}")

    def clear_faults(self) -> dict[str, Any]:
        return self._call("DELETE", "/v1/faults")

    def release(self, rule_id: int | None = None) -> int:
        path = "/v1/faults/release" if rule_id is None else f"/v1/faults/{rule_id}/release"
        return self._call("POST", path)["released"]

    # -- clock
    def advance(self, duration: str | float) -> dict[str, Any]:
        """Move the broker's clock: ``"90s"``, ``"1500ms"``, ``"2m"``, or milliseconds."""
        body = {"duration": duration} if isinstance(duration, str) else {"ms": duration}
        return self._call("POST", "/v1/clock/advance", body)

    def clock(self) -> dict[str, Any]:
        return self._call("GET", "/v1/clock")

    # -- requests
    def requests(self, **filters: Any) -> list[dict[str, Any]]:
        """Recorded requests, filtered by api, client, transactional_id, group, topic, since, limit."""
        query = {k: v for k, v in filters.items() if v is not None}
        path = "/v1/requests" + ("?" + urllib.parse.urlencode(query) if query else "")
        return self._call("GET", path)["requests"]

    def request_counts(self) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/requests/counts")["counts"]

    def clear_requests(self) -> int:
        return self._call("DELETE", "/v1/requests")["cleared"]

    # -- virtual brokers (--brokers N)
    def cluster(self) -> dict[str, Any]:
        return self._call("GET", "/v1/cluster")

    def stop_broker(self, node_id: int) -> dict[str, Any]:
        return self._call("POST", f"/v1/brokers/{node_id}/stop")

    def start_broker(self, node_id: int) -> dict[str, Any]:
        return self._call("POST", f"/v1/brokers/{node_id}/start")

    def move_leader(self, topic: str, partition: int, broker: int) -> dict[str, Any]:
        return self._call("POST", "/v1/partitions/leader",
                          {"topic": topic, "partition": partition, "broker": broker})

    def move_coordinator(self, broker: int, *, transactional_id: str | None = None,
                         group: str | None = None, load_in_progress: int = 0) -> dict[str, Any]:
        """Move the coordinator; ``load_in_progress=N``: the new one answers its next N requests
        of each coordinator API with COORDINATOR_LOAD_IN_PROGRESS, as while it loads."""
        body: dict[str, Any] = {"broker": broker, "load_in_progress": load_in_progress}
        if transactional_id is not None:
            body["transactional_id"] = transactional_id
        if group is not None:
            body["group"] = group
        return self._call("POST", "/v1/coordinators/move", body)
