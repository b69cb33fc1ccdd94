"""Listening sockets bound as Kafka's SocketServer binds them (the JVM's dual-stack rules).

Its own module because the CLI binds the listeners before the broker's modules are imported
(minibroker/net/early.py): only ``socket`` is needed here.
"""

from __future__ import annotations

import socket

__all__ = ["bind", "node_port", "prepare_accepted"]


def _listening_socket(host: str, port: int) -> socket.socket | None:
    """A dual-stack socket for an empty host or ``::``, as the JVM binds them for Kafka.

    asyncio would bind ``::`` IPv6-only (so the advertised ``localhost`` could resolve to an
    address nobody listens on), and an empty host as two sockets that, with port 0, get two
    different ports. None: let asyncio bind ``host`` itself.
    """
    if host not in ("", "::") or not socket.has_ipv6:
        return None
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    except OSError:
        if host == "::":
            raise
        return None  # no IPv6 here: the empty host falls back to IPv4's every-interface
    try:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("::", port))
    except OSError:
        s.close()
        raise
    return s


def _bound_sockets(host: str, port: int) -> list[socket.socket]:
    """One bound socket per address ``host`` resolves to, as ``loop.create_server`` binds them
    (IPv6 ones IPv6-only, so ``localhost`` can hold both families on one port)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise OSError(e.errno, f"cannot resolve {host!r}: {e.strerror}") from None
    socks: list[socket.socket] = []
    seen = set()
    try:
        for family, kind, proto, _name, addr in infos:
            if (family, addr) in seen:
                continue
            seen.add((family, addr))
            s = socket.socket(family, kind, proto)
            socks.append(s)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and len(socks) > 1:
                # Every address on the port the first one got, not a port each.
                addr = (addr[0], socks[0].getsockname()[1], *addr[2:])
            try:
                s.bind(addr)
            except OSError as e:
                assert e.strerror is not None  # bind's errors come from the OS, with their text
                raise OSError(e.errno, f"error while attempting to bind on address {addr!r}: "
                                       f"{e.strerror.lower()}") from None
    except OSError:
        for s in socks:
            s.close()
        raise
    return socks


def bind(host: str, port: int) -> list[socket.socket]:
    """The bound sockets of one listener address (one dual-stack socket where that applies)."""
    sock = _listening_socket(host, port)
    return [sock] if sock is not None else _bound_sockets(host or "0.0.0.0", port)


def node_port(port: int, i: int) -> int:
    """The port the ``i``-th (virtual) broker of a listener asks for: consecutive ports from
    ``port``, or a free one each with port 0."""
    return port + i if port else 0


def prepare_accepted(conn: socket.socket) -> bool:
    """An accepted connection made non-blocking, with Nagle off on TCP as Kafka's
    socket.tcp.no.delay; False (and closed) when the peer already went away."""
    try:
        conn.setblocking(False)
        if conn.family in (socket.AF_INET, socket.AF_INET6):
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        conn.close()
        return False
    return True
