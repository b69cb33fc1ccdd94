"""Listeners as Kafka users know them: ``NAME://host:port`` lists, each with its advertised address.

The classic compose set-up has two: clients inside the compose network bootstrap on
``minibroker:29092``, clients on the host on ``localhost:9092``. A broker must answer Metadata
and FindCoordinator with the advertised address of the listener the request *came in on*,
otherwise a host client is sent to ``minibroker:29092``, which it cannot resolve (Kafka:
``KafkaApis.handleTopicMetadataRequest`` looks brokers up by ``request.context.listenerName``).

Each listener speaks the security protocol ``listener.security.protocol.map`` gives its name
(Kafka's default map: every protocol's own name, so ``SSL://`` is TLS). PLAINTEXT and SSL are
served; SASL_PLAINTEXT and SASL_SSL are refused until SASL exists, never silently served
without authentication.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

DEFAULT_NAME = "PLAINTEXT"
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's default listener.security.protocol.map: each protocol names itself.
DEFAULT_PROTOCOL_MAP = {p: p for p in PROTOCOLS}
WILDCARDS = ("", "0.0.0.0", "::")


class ListenerError(ValueError):
    pass


def host_port(host: str, port: int) -> str:
    """``host:port`` as Kafka clients parse a bootstrap address (IPv6 in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True)
class Endpoint:
    """A listener's name and the host and port it binds or advertises."""
    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{host_port(self.host, self.port)}"


@dataclass(frozen=True)
class Listener:
    """One socket the broker binds, and the address clients that reach it are given."""
    name: str
    host: str
    port: int
    advertised_host: str | None = None
    advertised_port: int | None = None
    protocol: str = "PLAINTEXT"

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def advertised(self, bound_port: int) -> tuple[str, int]:
        host = self.advertised_host
        if not host:
            host = self.host if self.host not in WILDCARDS else "localhost"
        return host, self.advertised_port or bound_port


@dataclass(frozen=True)
class BoundListener:
    """A listener after bind: its real port and the advertised address answered on it."""
    name: str
    host: str
    port: int
    advertised_host: str
    advertised_port: int
    node_id: int | None = None  # the (virtual) broker it belongs to; None: the only one

    @property
    def advertised(self) -> tuple[str, int]:
        return self.advertised_host, self.advertised_port

    def config_value(self) -> str:
        return str(Endpoint(self.name, self.host, self.port))

    def advertised_value(self) -> str:
        return str(Endpoint(self.name, self.advertised_host, self.advertised_port))


def parse_endpoints(text: str, option: str) -> list[Endpoint]:
    """``NAME://host:port[,NAME://host:port...]``; an empty host means every interface."""
    out: list[Endpoint] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, rest = item.partition("://")
        if not sep or not name:
            raise ListenerError(f"{option}: {item!r} is not NAME://host:port")
        name = name.upper()
        if rest.startswith("["):
            host, bracket, port_text = rest[1:].partition("]")
            if not bracket or not port_text.startswith(":"):
                raise ListenerError(f"{option}: {item!r} has a malformed IPv6 address")
            port_text = port_text[1:]
        else:
            host, colon, port_text = rest.rpartition(":")
            if not colon:
                raise ListenerError(f"{option}: {item!r} has no port")
        if not (port_text.isascii() and port_text.isdigit()):
            raise ListenerError(f"{option}: {item!r} has a non-numeric port")
        port = int(port_text)
        if not 0 <= port <= 65535:
            raise ListenerError(f"{option}: port {port} of {item!r} is out of range")
        if any(e.name == name for e in out):
            raise ListenerError(f"{option}: listener name {name} appears twice")
        out.append(Endpoint(name, host, port))
    if not out:
        raise ListenerError(f"{option}: no listener given")
    return out


def _family(host: str) -> int | None:
    try:
        return socket.getaddrinfo(host, None, flags=socket.AI_NUMERICHOST)[0][0]
    except (socket.gaierror, UnicodeError):
        return None  # a name, or the empty every-interface host


def _check_ports(bind: list[Endpoint]) -> None:
    """Each listener its own port, except (as Kafka allows, CoreUtils.listenerListToEndPoints)
    one IPv4 and one IPv6 literal sharing a port; port 0 is always a fresh port."""
    by_port: dict[int, list[Endpoint]] = {}
    for e in bind:
        if e.port:
            by_port.setdefault(e.port, []).append(e)
    for port, same in by_port.items():
        if len(same) == 1:
            continue
        if len(same) == 2 and {_family(e.host) for e in same} == {socket.AF_INET, socket.AF_INET6}:
            continue
        raise ListenerError(f"--listeners: each listener needs its own port (port {port} is "
                            "used twice; only one IPv4 and one IPv6 address may share one)")


def parse_protocol_map(text: str | None, option: str = "--listener-security-protocol-map"
                       ) -> dict[str, str] | None:
    """``NAME:PROTOCOL[,...]``; None when not given."""
    if not text or not text.strip():
        return None
    out: dict[str, str] = {}
    for pair in (p.strip() for p in text.split(",")):
        if not pair:
            continue
        name, sep, proto = pair.partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not name:
            raise ListenerError(f"{option}: {pair!r} is not NAME:PROTOCOL")
        if proto not in PROTOCOLS:
            raise ListenerError(f"{option}: {proto!r} is not a security protocol "
                                f"({', '.join(PROTOCOLS)})")
        if name in out:
            raise ListenerError(f"{option}: listener name {name} appears twice")
        out[name] = proto
    return out


def _protocol(name: str, protocols: dict[str, str] | None) -> str:
    proto: str | None
    if protocols is None:
        # No map given: the protocol names map to themselves (Kafka's default map), and any
        # other name is PLAINTEXT, as minibroker has always served it (compose files name
        # their listeners INTERNAL/EXTERNAL without a map; Kafka would refuse to start).
        proto = DEFAULT_PROTOCOL_MAP.get(name, "PLAINTEXT")
    else:
        proto = protocols.get(name)
    if proto is None:
        # Kafka: "No security protocol defined for listener NAME" (KafkaConfig validation)
        raise ListenerError(f"--listeners: no security protocol defined for listener {name} "
                            "(--listener-security-protocol-map / listener.security.protocol.map)")
    return proto


def resolve(listeners: str | None, advertised: str | None, *, host: str, port: int,
            advertised_host: str | None, advertised_port: int | None,
            protocol_map: str | None = None) -> tuple[Listener, ...]:
    """The listeners to bind: from ``--listeners``/``--advertised-listeners`` when given,
    else the one-listener shorthand ``--host/--port/--advertised-host/--advertised-port``."""
    protocols = parse_protocol_map(protocol_map)
    if not listeners:
        if advertised:
            raise ListenerError("--advertised-listeners needs --listeners")
        return (Listener(DEFAULT_NAME, host, port, advertised_host, advertised_port),)
    if advertised_host or advertised_port:
        raise ListenerError("--advertised-host/--advertised-port apply to the one-listener "
                            "shorthand; with --listeners use --advertised-listeners")
    bind = parse_endpoints(listeners, "--listeners")
    _check_ports(bind)
    adv = {e.name: e for e in parse_endpoints(advertised, "--advertised-listeners")} if advertised else {}
    unknown = sorted(set(adv) - {e.name for e in bind})
    if unknown:
        # Kafka: advertised.listeners names must be a subset of listeners' (KafkaConfig validation).
        raise ListenerError(f"--advertised-listeners names {', '.join(unknown)} that --listeners "
                            "does not define")
    out = []
    for e in bind:
        a = adv.get(e.name)
        if a is not None and a.host in WILDCARDS:
            raise ListenerError(f"--advertised-listeners: {a} is not an address a client can "
                                "connect to")
        out.append(Listener(e.name, e.host, e.port,
                            a.host if a else None, (a.port or None) if a else None,
                            _protocol(e.name, protocols)))
    return tuple(out)
