"""Listening sockets bound as Kafka's SocketServer binds them (the JVM's dual-stack rules).

Its own module because the CLI binds the listeners before the broker's modules are imported
(minibroker/net/early.py): only ``socket`` is needed here.
"""

from __future__ import annotations

import socket
from typing import Any

from ..config.listeners import host_port

__all__ = ["ListenError", "bind", "bind_control", "bind_listeners", "bind_registry", "node_port",
           "prepare_accepted"]


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
                raise OSError(e.errno, e.strerror) from None
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


class ListenError(OSError):
    """A listener that cannot be bound: ``str()`` is the one line the CLI prints."""

    def __init__(self, listener: str, error: OSError):
        why = error.strerror or str(error)
        super().__init__(error.errno, f"cannot listen on {listener}: {why[:1].lower()}{why[1:]}")


def bind_listeners(config: Any) -> list[list[socket.socket]]:
    """Every Kafka listener's bound sockets (not listening yet), in
    Config.effective_listeners() × node_ids order; ListenError naming the first that fails,
    the ones bound before it closed. Bound before the data dir is touched: a busy port must
    not leave a directory created or written."""
    bound: list[list[socket.socket]] = []
    try:
        for spec in config.effective_listeners():
            for i in range(len(config.node_ids)):
                port = node_port(spec.port, i)
                try:
                    bound.append(bind(spec.host, port))
                except OSError as e:
                    raise ListenError(f"{spec.name}://{host_port(spec.host, port)}", e) from None
    except OSError:
        close_all(bound)
        raise
    return bound


def _bind_one(label: str, host: str, port: int) -> socket.socket:
    """One socket for an option's single address (extra ones closed), or ListenError ``label``."""
    try:
        socks = bind(host, port)
    except OSError as e:
        raise ListenError(label, e) from None
    for extra in socks[1:]:
        extra.close()
    return socks[0]


def bind_control(config: Any) -> socket.socket | None:
    """The --control-listener's socket (None without one), or ListenError naming it."""
    if config.control_listener is None:
        return None
    host, port = config.control_listener
    return _bind_one(f"--control-listener {host_port(host, port)}", host, port)


def bind_registry(config: Any) -> socket.socket | None:
    """The --schema-registry-listener's socket (None without one), listening at once: a client
    that connects before the registry serves (it starts after the Kafka listeners, and the
    ready file may be written before either) waits in the backlog instead of being refused.
    ListenError naming it."""
    if config.schema_registry_listener is None:
        return None
    scheme, host, port = config.schema_registry_listener
    label = f"--schema-registry-listener {scheme}://{host_port(host, port)}"
    sock = _bind_one(label, host, port)
    try:
        sock.listen(128)
    except OSError as e:
        sock.close()
        raise ListenError(label, e) from None
    return sock


def close_all(bound: list[list[socket.socket]]) -> None:
    for socks in bound:
        for s in socks:
            s.close()
