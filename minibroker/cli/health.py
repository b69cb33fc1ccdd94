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

from minibroker.config.listeners import WILDCARDS, ListenerError, host_port, parse_endpoints
from minibroker_protocol.probe import ProbeError, api_versions_request, parse_api_versions_response

_MAX_ANSWER = 1 << 20


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 1, not argparse's 2: Docker reserves HEALTHCHECK exit code 2."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def _split(bootstrap: str) -> tuple[str, int]:
    first = bootstrap.split(",")[0].strip()
    if "://" in first:
        first = first.split("://", 1)[1]
    host, _, port = first.rpartition(":")
    if not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        raise ValueError(port)
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
    deadline = time.monotonic() + timeout

    def left() -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ProbeError(f"no answer within {timeout:g} s")
        return remaining
    with socket.create_connection((host, port), timeout=left()) as sock:
        sock.settimeout(left())
        sock.sendall(api_versions_request(corr))
        sock.settimeout(left())
        (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
        if not 0 < size <= _MAX_ANSWER:
            raise ProbeError(f"answer size {size} is not a Kafka ApiVersions answer")
        sock.settimeout(left())
        error, apis = parse_api_versions_response(_recv_exactly(sock, size), corr)
    return error, len(apis), time.perf_counter() - t0


def default_bootstrap(env=os.environ) -> str:
    """What the broker configured by this environment listens on: its first listener
    (every-interface hosts become localhost), else localhost:$MINIBROKER_PORT. KAFKA_LISTENERS
    comes first, as it does for the broker (minibroker/config/options.py), less its controller
    listeners, which the broker does not bind."""
    if env.get("MINIBROKER_HEALTH_BOOTSTRAP"):
        return env["MINIBROKER_HEALTH_BOOTSTRAP"]
    controllers = {n.strip().upper() for n in env.get("KAFKA_CONTROLLER_LISTENER_NAMES", "").split(",")}
    for var in ("KAFKA_LISTENERS", "MINIBROKER_LISTENERS"):
        if not env.get(var):
            continue
        try:
            usable = [e for e in parse_endpoints(env[var], var) if e.name not in controllers]
        except ListenerError:
            continue
        if usable:
            host = usable[0].host if usable[0].host not in WILDCARDS else "localhost"
            return host_port(host, usable[0].port)
    host = env.get("MINIBROKER_HOST") or ""
    return host_port(host if host not in WILDCARDS else "localhost",
                     env.get("MINIBROKER_PORT") or 9092)


def main(argv: list[str] | None = None) -> int:
    default = default_bootstrap()
    p = _Parser(
        prog="minibroker health",
        description="Check that a Kafka broker answers: one ApiVersions round trip. "
                    "Exit 0 when it answers without error, 1 otherwise.")
    p.add_argument("--bootstrap", default=default, metavar="HOST:PORT",
                   help="broker to ask (env MINIBROKER_HEALTH_BOOTSTRAP, else the first of "
                        "KAFKA_LISTENERS or MINIBROKER_LISTENERS, else "
                        "$MINIBROKER_HOST:$MINIBROKER_PORT with localhost for every-interface "
                        "hosts; default %(default)s)")
    p.add_argument("--timeout", type=float, default=5.0, metavar="SECONDS",
                   help="bound on connecting and on the answer (default %(default)s)")
    p.add_argument("--quiet", "-q", action="store_true", help="print nothing")
    ns = p.parse_args(argv)
    if not ns.timeout > 0:
        p.error("--timeout must be > 0")
    try:
        host, port = _split(ns.bootstrap)
    except ValueError:
        p.error(f"--bootstrap {ns.bootstrap!r} is not HOST:PORT with a port in 1-65535")
    try:
        error, count, seconds = probe(host, port, ns.timeout)
    except (OSError, ProbeError) as e:
        if not ns.quiet:
            print(f"unhealthy: {host_port(host, port)}: {e}", file=sys.stderr)
        return 1
    if error != 0:
        if not ns.quiet:
            print(f"unhealthy: {host_port(host, port)} answered ApiVersions with error code {error}",
                  file=sys.stderr)
        return 1
    if not ns.quiet:
        print(f"healthy: {host_port(host, port)} answered ApiVersions with {count} apis "
              f"in {seconds * 1000:.1f} ms")
    return 0
