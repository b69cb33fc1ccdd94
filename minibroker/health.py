"""``minibroker health``: one real ApiVersions round trip; exit 0 when a broker answers.

Made for a container HEALTHCHECK and for CI scripts waiting for a broker, so it imports
neither kio nor asyncio, and every step is bounded by ``--timeout``.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import sys
import time

from minibroker.listeners import ListenerError, parse_endpoints
from protocol.probe import ProbeError, api_versions_request, parse_api_versions_response

_MAX_ANSWER = 1 << 20


def _split(bootstrap: str) -> tuple[str, int]:
    first = bootstrap.split(",")[0].strip()
    if "://" in first:
        first = first.split("://", 1)[1]
    host, _, port = first.rpartition(":")
    return host.strip("[]") or "localhost", int(port)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ProbeError("the broker closed the connection before answering")
        data += chunk
    return bytes(data)


def probe(host: str, port: int, timeout: float) -> tuple[int, int, float]:
    """(error code, number of apis, seconds) of one ApiVersions round trip."""
    corr = os.getpid() & 0x7FFFFFFF
    t0 = time.perf_counter()
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(api_versions_request(corr))
        (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
        if not 0 < size <= _MAX_ANSWER:
            raise ProbeError(f"answer size {size} is not a Kafka ApiVersions answer")
        error, apis = parse_api_versions_response(_recv_exactly(sock, size), corr)
    return error, len(apis), time.perf_counter() - t0


def default_bootstrap(env=os.environ) -> str:
    """What the broker configured by this environment listens on: its first listener
    (every-interface hosts become localhost), else localhost:$MINIBROKER_PORT."""
    if env.get("MINIBROKER_HEALTH_BOOTSTRAP"):
        return env["MINIBROKER_HEALTH_BOOTSTRAP"]
    if env.get("MINIBROKER_LISTENERS"):
        try:
            first = parse_endpoints(env["MINIBROKER_LISTENERS"], "MINIBROKER_LISTENERS")[0]
        except ListenerError:
            pass
        else:
            host = first.host if first.host not in ("", "0.0.0.0", "::") else "localhost"
            return f"{host}:{first.port}"
    host = env.get("MINIBROKER_HOST") or "localhost"
    if host in ("0.0.0.0", "::"):
        host = "localhost"
    return f"{host}:{env.get('MINIBROKER_PORT') or 9092}"


def main(argv: list[str] | None = None) -> int:
    default = default_bootstrap()
    p = argparse.ArgumentParser(
        prog="minibroker health",
        description="Check that a Kafka broker answers: one ApiVersions round trip. "
                    "Exit 0 when it answers without error, 1 otherwise.")
    p.add_argument("--bootstrap", default=default, metavar="HOST:PORT",
                   help="broker to ask (env MINIBROKER_HEALTH_BOOTSTRAP, else the first of "
                        "MINIBROKER_LISTENERS, else $MINIBROKER_HOST:$MINIBROKER_PORT with "
                        "localhost for every-interface hosts; default %(default)s)")
    p.add_argument("--timeout", type=float, default=5.0, metavar="SECONDS",
                   help="bound on connecting and on the answer (default %(default)s)")
    p.add_argument("--quiet", "-q", action="store_true", help="print nothing")
    ns = p.parse_args(argv)
    try:
        host, port = _split(ns.bootstrap)
    except ValueError:
        p.error(f"--bootstrap {ns.bootstrap!r} is not HOST:PORT")
    try:
        error, count, seconds = probe(host, port, ns.timeout)
    except (OSError, ProbeError) as e:
        if not ns.quiet:
            print(f"unhealthy: {host}:{port}: {e}", file=sys.stderr)
        return 1
    if error != 0:
        if not ns.quiet:
            print(f"unhealthy: {host}:{port} answered ApiVersions with error code {error}",
                  file=sys.stderr)
        return 1
    if not ns.quiet:
        print(f"healthy: {host}:{port} answered ApiVersions with {count} apis "
              f"in {seconds * 1000:.1f} ms")
    return 0
