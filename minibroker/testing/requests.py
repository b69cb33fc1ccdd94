"""Which requests a broker served, read from its log (standard library only).

The broker logs ``request.first_seen`` the first time it serves each (API, version, client
software) combination; ``requests_seen(broker.log_text())`` turns those lines into a set, so a test
can assert the path a client took::

    seen = requests_seen(broker.log_text())
    assert ("EndTxn", 5, "apache-kafka-java") in seen
    assert not any(api == "AddPartitionsToTxn" for api, _, _ in seen)

Both of the broker's log formats are read: ``--log-format console`` (key=value) and ``json``.
"""

from __future__ import annotations

import json
import re

__all__ = ["requests_seen"]

_EVENT = "request.first_seen"
_FIELD = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\S+)")


def _fields(line: str) -> dict[str, str] | None:
    line = line.strip()
    if line.startswith("{"):
        try:
            record = json.loads(line)
        except ValueError:
            return None
        if not isinstance(record, dict) or record.get("event") != _EVENT:
            return None
        return {k: str(v) for k, v in record.items()}
    if _EVENT not in line:
        return None
    out = {}
    for key, value in _FIELD.findall(line.split(_EVENT, 1)[1]):
        out[key] = value[1:-1] if value[:1] in "'\"" else value
    return out


def requests_seen(log_text: str) -> set[tuple[str, int, str]]:
    """(API name, version, client software name) of every request the log says was served."""
    seen = set()
    for line in log_text.splitlines():
        f = _fields(line)
        if f and "api" in f and "api_version" in f:
            seen.add((f["api"], int(f["api_version"]), f.get("client_software_name", "unknown")))
    return seen
