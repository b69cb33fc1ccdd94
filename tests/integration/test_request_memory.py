"""The request-memory budget shared by all connections (issue 13, defect 2), in process.

KafkaConnection is driven as uvloop drives it (get_buffer / buffer_updated) through a fake
transport, so every pause and resume, and the budget after each step, can be checked.
"""

from __future__ import annotations

import asyncio

from minibroker.handlers.api import Response
from minibroker.net.server import KafkaConnection, RequestMemory
from minibroker_protocol.framing import frame


class FakeTransport:
    def __init__(self) -> None:
        self.reading = True
        self.pauses = 0
        self.written: list[bytes] = []
        self.closed = False

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 1) if name == "peername" else default

    def pause_reading(self) -> None:
        assert self.reading, "paused twice"
        self.reading = False
        self.pauses += 1

    def resume_reading(self) -> None:
        assert not self.reading, "resumed while reading"
        self.reading = True

    def write(self, data) -> None:
        self.written.append(bytes(data))

    def writelines(self, chunks) -> None:
        self.written.append(b"".join(bytes(c) for c in chunks))

    def close(self) -> None:
        self.closed = True


class Echo:
    """A dispatcher answering every frame with its length, optionally after a wait."""

    def __init__(self) -> None:
        self.seen: list[bytes] = []
        self.gate: asyncio.Event | None = None

    def handle(self, frame_, conn):
        self.seen.append(bytes(frame_[:8]) + len(frame_).to_bytes(4, "big"))
        body = len(frame_).to_bytes(4, "big")
        if self.gate is None:
            return Response.encoded([body], len(body))

        async def later():  # holds the request, as a handler holds its decoded records
            await self.gate.wait()
            return Response.encoded([len(frame_).to_bytes(4, "big")], len(body))
        return later()


def connect(memory, dispatcher=None):
    conn = KafkaConnection(dispatcher or Echo(), 200_000_000, set(), memory=memory)
    transport = FakeTransport()
    conn.connection_made(transport)
    return conn, transport


def push(conn, transport, data: bytes, pos: int, limit: int | None = None) -> int:
    """Read from ``data`` into the connection while its transport reads; the new position."""
    for _ in range(100_000):
        if pos >= len(data) or not transport.reading or conn.closed:
            break
        buf = conn.get_buffer(-1)
        n = min(len(buf), len(data) - pos, limit or len(buf))
        buf[:n] = data[pos : pos + n]
        del buf
        pos += n
        conn.buffer_updated(n)
    return pos


async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


def answer(n: int) -> bytes:
    return (4).to_bytes(4, "big") + n.to_bytes(4, "big")


async def test_connections_past_the_budget_stop_reading_and_resume_when_memory_frees():
    limit = 3 * 1024 * 1024
    memory = RequestMemory(limit)
    payload = bytes(range(256)) * 8192  # 2 MiB frames: two cannot both be whole within 3 MiB
    conns = [connect(memory) for _ in range(4)]
    streams = [frame(bytes([i]) + payload) for i in range(4)]
    # Every connection gets 1.5 MB of its frame in, or as much as it is allowed to read.
    positions = [push(c, t, s[:1_500_000], 0) for (c, t), s in zip(conns, streams)]
    assert memory.overdraft is not None
    assert memory.used <= limit + 2 * len(streams[0])
    paused = [c for c, t in conns if not t.reading]
    assert paused, "nobody was paused past the budget"
    assert list(memory.waiting) == paused
    assert all(p < 1_500_000 for p, (c, t) in zip(positions, conns) if not t.reading)
    # Everyone sends the rest whenever it may read, until all frames are answered.
    for _ in range(100):
        for i, (conn, t) in enumerate(conns):
            positions[i] = push(conn, t, streams[i], positions[i])
        await settle()
        assert memory.used <= limit + 2 * len(streams[0])
        if all(t.written for _, t in conns):
            break
    assert [t.written for _, t in conns] == [[answer(len(s) - 4)] for s in streams]
    assert all(t.reading for _, t in conns) and not memory.waiting
    for conn, _ in conns:
        conn.connection_lost(None)
    assert memory.used == 0 and not memory.waiting and not memory.holders and memory.overdraft is None


async def test_a_frame_larger_than_the_budget_still_arrives():
    """Kafka lets one request through an empty pool; here one frame at a time may pass."""
    memory = RequestMemory(1024 * 1024)
    conn, t = connect(memory)
    stream = frame(b"x" * 5_000_000) + frame(b"small")
    assert push(conn, t, stream, 0) == len(stream)
    assert t.written == [answer(5_000_000), answer(5)]
    await settle()
    conn.connection_lost(None)
    assert memory.used == 0 and memory.overdraft is None


async def test_an_unanswered_request_holds_its_memory_until_answered():
    memory = RequestMemory(1024 * 1024)
    echo = Echo()
    echo.gate = asyncio.Event()
    (a, ta), (b, tb), (c, tc) = (connect(memory, echo) for _ in range(3))
    push(a, ta, frame(b"a" * 900_000), 0)
    push(b, tb, frame(b"b" * 900_000), 0)  # the one frame allowed past the budget
    await settle()
    assert ta.written == tb.written == [] and memory.used >= 1_800_000  # being handled: still counted
    stream_c = frame(b"c" * 900_000)
    pos_c = push(c, tc, stream_c, 0)
    assert not tc.reading and c in memory.waiting, "c grew past the budget while a and b were unanswered"
    echo.gate.set()
    await settle()
    assert ta.written and tb.written
    assert tc.reading, "c was not resumed when the requests before it were answered"
    pos_c = push(c, tc, stream_c, pos_c)
    await settle()
    assert tc.written == [answer(900_000)] and pos_c == len(stream_c)
    for conn in (a, b, c):
        conn.connection_lost(None)
    assert memory.used == 0


async def test_write_pause_and_memory_pause_do_not_undo_each_other():
    memory = RequestMemory(300_000)
    (a, ta), (b, tb) = connect(memory), connect(memory)
    stream_a = frame(b"a" * 600_000)
    pos_a = push(a, ta, stream_a[:400_000], 0)  # a passes the budget, and stops half way
    stream_b = frame(b"b" * 600_000)
    pos_b = push(b, tb, stream_b, 0)
    assert not tb.reading and b in memory.waiting
    b.pause_writing()
    b.resume_writing()
    assert not tb.reading, "resume_writing resumed a connection waiting for memory"
    b.pause_writing()
    push(a, ta, stream_a, pos_a)
    await settle()
    assert ta.written and "memory" not in b.paused and not tb.reading  # memory back, writes still paused
    b.resume_writing()
    assert tb.reading
    push(b, tb, stream_b, pos_b)
    await settle()
    assert tb.written == [answer(600_000)]
    a.connection_lost(None)
    b.connection_lost(None)
    assert memory.used == 0
