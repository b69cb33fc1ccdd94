"""The smallest real Kafka round trip: ApiVersions v0, encoded without loading kio.

``minibroker health`` runs it every few seconds inside a container's HEALTHCHECK, so it must
cost milliseconds, not the ~100 ms kio's schema imports take. v0 is what every broker since
Kafka 0.10 answers (an unknown version would get a v0 error answer anyway, KIP-511).
"""

from __future__ import annotations

import struct

from .api_keys import ApiKey


class ProbeError(Exception):
    pass


def api_versions_request(correlation_id: int, client_id: str = "minibroker-health") -> bytes:
    """A whole frame: size, request header v1 (key, version 0, correlation id, client id)."""
    cid = client_id.encode()
    body = struct.pack(">hhih", ApiKey.ApiVersions, 0, correlation_id, len(cid)) + cid
    return struct.pack(">i", len(body)) + body


def parse_api_versions_response(frame: bytes, correlation_id: int) -> tuple[int, list[tuple[int, int, int]]]:
    """(error code, [(api key, min version, max version)]) of a v0 answer, frame without its size."""
    try:
        corr, error, count = struct.unpack_from(">ihi", frame, 0)
        if corr != correlation_id:
            raise ProbeError(f"correlation id {corr} answers a request we did not send "
                             f"({correlation_id})")
        if count < 0 or 10 + 6 * count > len(frame):
            raise ProbeError(f"api array length {count} does not fit a {len(frame)}-byte answer")
        apis = [struct.unpack_from(">hhh", frame, 10 + 6 * i) for i in range(count)]
    except struct.error as e:
        raise ProbeError(f"truncated ApiVersions answer: {e}") from None
    return error, apis
