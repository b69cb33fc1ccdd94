"""How many requests of each API, version and client software the broker served.

Tests prove that a client took a protocol path (EndTxn v5 under transactions v2, AddPartitionsToTxn
under v1, ConsumerGroupHeartbeat with ``group.protocol=consumer``) from these counts, not only that
it worked. The client software is what the connection's ApiVersions v3+ request named (KIP-511);
Kafka's own request metrics say ``unknown`` before that, as here.

The first request of each combination is logged (``request.first_seen``), the whole table at
shutdown (``request.counts``). Counting is one dict increment per request.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_storage.lazylog import get_logger

log = get_logger("minibroker.requests")

UNKNOWN = "unknown"

Key = tuple[int, int, str, str]  # api key, api version, client software name, version


def api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)


class RequestCounts:
    def __init__(self, logger: Any = None) -> None:
        self.counts: Counter[Key] = Counter()
        # For /metrics: answers with an error code, by api key (counted only where the request
        # log is on, i.e. with the control plane, the only place they are read), and the
        # bytes read from and written to Kafka connections (the 4-byte size prefixes included).
        self.errors: Counter[int] = Counter()
        self.bytes_in = 0
        self.bytes_out = 0
        self.log = logger if logger is not None else log

    def count(self, api_key: int, api_version: int, software: tuple[str, str], client_id: str | None) -> None:
        key = (api_key, api_version, software[0], software[1])
        n = self.counts[key]
        self.counts[key] = n + 1
        if n == 0:
            self.log.info("request.first_seen", api=api_name(api_key), api_key=api_key,
                          api_version=api_version, client_id=client_id,
                          client_software_name=software[0], client_software_version=software[1])

    def by_api(self) -> Counter[int]:
        """Requests per api key, every version and client software together."""
        out: Counter[int] = Counter()
        for key, n in self.counts.items():
            out[key[0]] += n
        return out

    def table(self) -> list[dict[str, object]]:
        return [{"api": api_name(k[0]), "api_key": k[0], "api_version": k[1], "client_software_name": k[2],
                 "client_software_version": k[3], "count": n} for k, n in sorted(self.counts.items())]

    def log_table(self) -> None:
        lines = [f"{r['api']} v{r['api_version']} {r['client_software_name']}/"
                 f"{r['client_software_version']}: {r['count']}" for r in self.table()]
        self.log.info("request.counts", requests=sum(self.counts.values()), table=lines)
