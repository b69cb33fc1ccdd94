"""A connection reading a large frame lets the kernel wake it only once the frame's missing bytes
are there over TLS (SO_RCVLOWAT, minibroker/net/server.py), and back to every byte between frames, so a
small request that follows is answered at once. Driven as uvloop drives it, on a real socket."""

from __future__ import annotations

import socket
import ssl

import pytest

from minibroker.net.server import _LOWAT_MAX, _TLS_RECORD_MAX, KafkaConnection
from minibroker_protocol.framing import frame

from ..integration.test_request_memory import Echo, FakeTransport, push


class SocketTransport(FakeTransport):
    def __init__(self, sock: socket.socket, tls: bool) -> None:
        super().__init__()
        self.sock = sock
        self.tls = tls

    def get_extra_info(self, name, default=None):
        if name == "socket":
            return self.sock
        if name == "sslcontext":
            return ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER) if self.tls else None
        return super().get_extra_info(name, default)


@pytest.fixture
def tcp_socket():
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    yield server
    for s in (server, client, listener):
        s.close()


def lowat(sock: socket.socket) -> int:
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT)


def test_over_tls_the_wait_follows_the_large_frame_and_ends_with_it(tcp_socket):
    echo = Echo()
    conn = KafkaConnection(echo, 200_000_000, set())
    transport = SocketTransport(tcp_socket, tls=True)
    conn.connection_made(transport)
    big = frame(b"b" * 300_000)
    stream = big + frame(b"small request")
    pos = push(conn, transport, stream[:80_000], 0, limit=30_000)
    assert lowat(tcp_socket) == _LOWAT_MAX
    pos = push(conn, transport, stream[: len(big) - 25_000], pos)
    assert lowat(tcp_socket) == min(25_000 - _TLS_RECORD_MAX, _LOWAT_MAX)
    pos = push(conn, transport, stream[: len(big) - 10_000], pos)
    # 10,000 bytes missing: they may already wait, undecrypted, inside the TLS layer
    assert lowat(tcp_socket) == 1
    pos = push(conn, transport, stream[: len(big)], pos)
    assert lowat(tcp_socket) == 1  # the frame is whole: any byte of the next one wakes the loop
    push(conn, transport, stream, pos)
    assert [bytes(s[8:]) for s in echo.seen] == [(300_000).to_bytes(4, "big"), (13).to_bytes(4, "big")]
    assert lowat(tcp_socket) == 1


def test_plaintext_connections_never_set_a_wait(tcp_socket):
    """A plaintext request arrives in one or two reads already: no wait to save."""
    echo = Echo()
    conn = KafkaConnection(echo, 200_000_000, set())
    transport = SocketTransport(tcp_socket, tls=False)
    conn.connection_made(transport)
    stream = frame(b"b" * 300_000) + frame(b"x")
    pos = push(conn, transport, stream[:80_000], 0, limit=30_000)
    assert lowat(tcp_socket) == 1 and conn._rcv_sock is None
    push(conn, transport, stream, pos)
    assert len(echo.seen) == 2


def test_small_frames_never_set_a_wait(tcp_socket):
    conn = KafkaConnection(Echo(), 200_000_000, set())
    transport = SocketTransport(tcp_socket, True)
    conn.connection_made(transport)
    stream = b"".join(frame(b"r" * 1000) for _ in range(50))
    push(conn, transport, stream, 0, limit=700)
    assert lowat(tcp_socket) == 1
    assert len(conn.dispatcher.seen) == 50


def test_a_socket_that_refuses_the_option_is_read_as_before(tcp_socket):
    class NoLowat:
        family = socket.AF_INET

        def setsockopt(self, *args):
            raise OSError(92, "Protocol not available")

    echo = Echo()
    conn = KafkaConnection(echo, 200_000_000, set())
    transport = SocketTransport(NoLowat(), True)  # type: ignore[arg-type]
    conn.connection_made(transport)
    stream = frame(b"b" * 200_000) + frame(b"after")
    pos = push(conn, transport, stream[:50_000], 0)
    assert conn._rcv_sock is None and not conn.closed
    push(conn, transport, stream, pos)
    assert len(echo.seen) == 2
