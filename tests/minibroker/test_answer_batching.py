"""The answers to the frames of one read leave with one transport write, in request order
(minibroker/net/server.py, KafkaConnection._flush): a write is a send() and a wake-up of the
client, and a pipelining client (librdkafka keeps up to 5 requests in flight) often has more than
one frame complete per read. What must not change: the order, an answer that waits (a long poll)
holding back the ones behind it, the answers before a disconnect still leaving, a muted
connection answering nothing more, and TLS getting whole answers rather than one record per piece."""

from __future__ import annotations

import asyncio
import ssl

from minibroker.handlers.api import Disconnect, Response
from minibroker.net.server import KafkaConnection
from minibroker_protocol.framing import frame

from ..integration.test_request_memory import Echo, FakeTransport, answer, push, settle


class CallsTransport(FakeTransport):
    """Records each transport call as (method, bytes written)."""

    def __init__(self, tls: bool = False) -> None:
        super().__init__()
        self.tls = tls
        self.calls: list[tuple[str, bytes]] = []

    def get_extra_info(self, name, default=None):
        if name == "sslcontext" and self.tls:
            return ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        return super().get_extra_info(name, default)

    def write(self, data) -> None:
        super().write(data)
        self.calls.append(("write", bytes(data)))

    def writelines(self, chunks) -> None:
        chunks = list(chunks)
        super().writelines(chunks)
        self.calls.append(("writelines", b"".join(bytes(c) for c in chunks)))


def connect(dispatcher, tls: bool = False) -> tuple[KafkaConnection, CallsTransport]:
    conn = KafkaConnection(dispatcher, 200_000_000, set())
    transport = CallsTransport(tls)
    conn.connection_made(transport)
    return conn, transport


def frames(*sizes: int) -> bytes:
    return b"".join(frame(bytes(n)) for n in sizes)


def test_the_answers_of_one_read_leave_in_one_write_in_request_order():
    conn, transport = connect(Echo())
    data = frames(10, 11, 12)
    assert push(conn, transport, data, 0) == len(data)
    assert transport.calls == [("writelines", answer(10) + answer(11) + answer(12))]


def test_one_answer_is_one_write_as_before():
    conn, transport = connect(Echo())
    push(conn, transport, frames(10), 0)
    push(conn, transport, frames(11), 0)
    assert transport.calls == [("write", answer(10)), ("write", answer(11))]


def test_over_tls_a_batch_is_joined_so_it_is_not_one_record_per_piece():
    conn, transport = connect(Echo(), tls=True)
    push(conn, transport, frames(10, 11, 12), 0)
    assert transport.calls == [("write", answer(10) + answer(11) + answer(12))]


class GateSecond(Echo):
    """Echo, but the second frame's answer waits for ``gate``."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0
        self.release = asyncio.Event()

    def handle(self, frame_, conn):
        self.n += 1
        if self.n != 2:
            return super().handle(frame_, conn)
        size = len(frame_)

        async def later():
            await self.release.wait()
            body = size.to_bytes(4, "big")
            return Response.encoded([body], len(body))
        return later()


async def test_an_answer_that_waits_holds_back_those_behind_it_which_then_leave_together():
    dispatcher = GateSecond()
    conn, transport = connect(dispatcher)
    push(conn, transport, frames(10, 11, 12, 13), 0)
    await settle()
    assert transport.calls == [("write", answer(10))]
    dispatcher.release.set()
    await settle()
    assert transport.calls == [("write", answer(10)),
                               ("writelines", answer(11) + answer(12) + answer(13))]


class OnSecond(Echo):
    """Echo, but the second request calls ``action(conn)`` before it is answered."""

    def __init__(self, action) -> None:
        super().__init__()
        self.n = 0
        self.action = action

    def handle(self, frame_, conn):
        self.n += 1
        if self.n == 2:
            self.action(conn)
        return super().handle(frame_, conn)


def _bad_request(conn):
    raise Disconnect("malformed_request", "a test's bad request")


def test_answers_before_a_disconnect_still_leave_before_the_close():
    conn, transport = connect(OnSecond(_bad_request))
    push(conn, transport, frames(10, 11, 12), 0)
    assert conn.closed and transport.closed
    assert transport.calls == [("write", answer(10))]


def test_a_mute_keeps_the_answers_given_before_it_and_drops_the_rest():
    # the second request mutes the connection, as a fault rule that drops its answer does
    conn, transport = connect(OnSecond(lambda c: c.mute("a test's drop rule")))
    push(conn, transport, frames(10, 11, 12), 0)
    assert conn.muted and not transport.reading
    assert transport.calls == [("write", answer(10))]
