"""FrameDecoder's large-frame buffer grows with the bytes that arrive (issue 13, defect 2).

A 4-byte prefix announcing 100 MB used to allocate (and zero-fill) 128 MiB at once.
"""

from __future__ import annotations

import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from minibroker_protocol.framing import (
    DEFAULT_MAX_FRAME,
    FIRST_BUFFER,
    SCRATCH_SIZE,
    FrameDecoder,
    frame,
    size_prefix,
)


class Ledger:
    """A budget that records every take and give, and refuses what it is told to."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.used = 0
        self.taken: list[int] = []
        self.refuse = False

    def take(self, decoder, n: int, force: bool = False) -> bool:
        if not force and (self.refuse or (self.limit is not None and self.used + n > self.limit)):
            return False
        self.used += n
        self.taken.append(n)
        return True

    def give(self, decoder, n: int) -> None:
        self.used -= n
        assert self.used >= 0


def read(decoder: FrameDecoder, data: bytes) -> list[bytes]:
    """Play a transport that reads everything offered, one get_buffer at a time."""
    out, pos = [], 0
    while pos < len(data) and not decoder.blocked:
        buf = decoder.get_buffer(-1)
        n = min(len(buf), len(data) - pos)
        buf[:n] = data[pos : pos + n]
        pos += n
        out.extend(bytes(f) for f in decoder.buffer_updated(n))
    return out, pos


def peak_allocated(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_huge_announced_size_allocates_only_what_arrives_buffered():
    d = FrameDecoder()
    d.get_buffer(-1)  # the scratch buffer is the connection's fixed cost

    def announce():
        buf = d.get_buffer(-1)
        data = size_prefix(DEFAULT_MAX_FRAME - 10) + b"x" * 10
        buf[: len(data)] = data
        assert d.buffer_updated(len(data)) == []

    peak = peak_allocated(announce)
    assert peak < 2 * FIRST_BUFFER, f"{peak} bytes allocated for 14 bytes received"
    assert d.buffered == 14


def test_a_huge_announced_size_allocates_only_what_arrives_fed():
    d = FrameDecoder()
    peak = peak_allocated(lambda: d.feed(size_prefix(DEFAULT_MAX_FRAME - 10) + b"x" * 10))
    assert peak < 2 * FIRST_BUFFER, f"{peak} bytes allocated for 14 bytes received"


def test_growth_is_amortised_and_bounded_by_what_arrived():
    ledger = Ledger()
    d = FrameDecoder(budget=ledger)
    payload = bytes(range(256)) * 40_000  # ~10 MB
    stream = frame(payload)
    pos, got = 0, []
    while pos < len(stream):
        buf = d.get_buffer(-1)
        n = min(len(buf), len(stream) - pos, 100_000)
        buf[:n] = stream[pos : pos + n]
        pos += n
        got.extend(d.buffer_updated(n))
        # Never more than twice what arrived (or the first buffer), never more than the frame.
        assert d.held <= max(2 * pos, FIRST_BUFFER) + 64 * 1024
    assert [bytes(f) for f in got] == [payload]
    # Doubling: a handful of buffers; the bytes copied from one to the next (each full
    # buffer but the last) add up to less than twice the frame.
    assert len(ledger.taken) <= 7 and sum(ledger.taken[:-1]) < 2 * len(payload)
    assert ledger.used == d.held


def test_a_kept_buffer_takes_the_next_large_frame_in_one_read():
    """The one-copy fast path: once a connection has had a 1 MiB request, the next one is
    read straight into the kept buffer, the rest of the frame in one get_buffer."""
    payload = bytes(range(256)) * 4096
    d = FrameDecoder()
    assert read(d, frame(payload))[0] == [payload]
    first = d.get_buffer(-1)
    stream = frame(payload[::-1])
    first[:100] = stream[:100]
    assert d.buffer_updated(100) == []
    rest = d.get_buffer(-1)
    assert len(rest) == len(payload) - 96
    rest[:] = stream[100:]
    (f,) = d.buffer_updated(len(rest))
    assert bytes(f) == payload[::-1]


def test_refused_growth_blocks_and_resume_finishes_the_frame():
    ledger = Ledger()
    d = FrameDecoder(budget=ledger)
    payload = bytes(range(256)) * 2048  # 512 KiB: needs growth past the first buffer
    stream = frame(payload) + frame(b"after") + frame(b"x" * 100_000)
    ledger.refuse = True
    out, pos = read(d, stream)
    assert out == [] and d.blocked and ledger.used == 0
    assert pos <= SCRATCH_SIZE  # what arrived waits in the scratch buffer
    # A read already under way when the owner paused still lands somewhere.
    extra = d.get_buffer(-1)
    assert len(extra) > 0
    n = min(len(extra), 10)
    extra[:n] = stream[pos : pos + n]
    assert d.buffer_updated(n) == []
    pos += n
    ledger.refuse = False
    got = [bytes(f) for f in d.resume()]
    assert not d.blocked
    more, used = read(d, stream[pos:])
    assert got + more == [payload, b"after", b"x" * 100_000]
    assert d.buffered == 0


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 5, 65_531, 65_533, 70_000, 300_000, 700_000]), min_size=1, max_size=5),
    limits=st.lists(st.integers(min_value=500, max_value=300_000), max_size=30),
    refusals=st.lists(st.booleans(), max_size=30),
    budget=st.sampled_from([None, 600_000, 2_000_000]),
)
def test_any_reads_and_refusals_give_back_the_payloads(sizes, limits, refusals, budget):
    payloads = [bytes([i % 251 + 1]) * n for i, n in enumerate(sizes)]
    stream = b"".join(frame(p) for p in payloads)
    ledger = Ledger(budget)
    d = FrameDecoder(budget=ledger)
    out, pos, step = [], 0, 0
    held: list[memoryview] = []
    for _ in range(10_000):
        if pos >= len(stream) and not d.blocked:
            break
        ledger.refuse = refusals[step % len(refusals)] if refusals else False
        step += 1
        if d.blocked:
            if step > 200:  # the server's overdraft: one frame may pass the limit
                ledger.refuse = False
                ledger.limit = None
            if ledger.limit is not None and ledger.used + 2_000_000 > ledger.limit:
                held.clear()  # the handlers finish: kept buffers become free
                d.release_idle(0)
            frames = d.resume()
        else:
            buf = d.get_buffer(-1)
            n = min(len(buf), len(stream) - pos, limits[step % len(limits)] if limits else len(buf))
            buf[:n] = stream[pos : pos + n]
            pos += n
            frames = d.buffer_updated(n)
        out.extend(bytes(f) for f in frames)
        held.extend(frames)
        if ledger.limit is not None:
            assert ledger.used <= ledger.limit
    assert out == payloads
    assert ledger.used == d.held
    held.clear()
    d.close()
    assert ledger.used == 0 and d.held == 0


def test_release_idle_keeps_small_buffers_and_gives_back_the_rest():
    ledger = Ledger()
    d = FrameDecoder(budget=ledger)
    stream = frame(b"a" * 200_000)
    buf = d.get_buffer(-1)
    buf[:SCRATCH_SIZE] = stream[:SCRATCH_SIZE]
    d.buffer_updated(SCRATCH_SIZE)
    buf = d.get_buffer(-1)
    buf[:] = stream[SCRATCH_SIZE:]
    (unanswered,) = d.buffer_updated(len(buf))
    del buf
    big = b"b" * (9 * 1024 * 1024)
    assert read(d, frame(big))[0] == [big]
    del unanswered
    assert d.release_idle() > 8 * 1024 * 1024  # above SPARE_MAX: given back
    assert 0 < d.held == ledger.used <= 300_000  # the 200 KB one is kept for reuse
    d.release_idle(0)
    assert d.held == ledger.used == 0


def test_a_frame_still_referred_to_stays_on_the_budget():
    ledger = Ledger()
    d = FrameDecoder(budget=ledger)
    stream = frame(b"z" * 300_000)
    frames, pos = [], 0
    while pos < len(stream):
        buf = d.get_buffer(-1)
        n = min(len(buf), len(stream) - pos)
        buf[:n] = stream[pos : pos + n]
        pos += n
        frames.extend(d.buffer_updated(n))
    (f,) = frames
    del frames, buf  # a transport lets go of the view it read into
    d.release_idle(0)
    assert ledger.used == d.held >= 300_000  # f is an unanswered request
    del f
    d.release_idle(0)
    assert ledger.used == d.held == 0


def test_fed_bytes_are_counted_even_past_the_budget():
    """feed() gets bytes already in memory: its buffer grows anyway, and the budget is told."""
    ledger = Ledger(limit=100_000)
    d = FrameDecoder(budget=ledger)
    data = frame(b"q" * 500_000)
    got = []
    for i in range(0, len(data), 100_000):
        got.extend(bytes(f) for f in d.feed(data[i : i + 100_000]))
    assert got == [b"q" * 500_000]
    assert ledger.used == d.held > 0
    d.close()
    assert ledger.used == 0


def test_missing_is_what_the_large_frame_still_needs():
    """What the transport may wait for before it wakes (SO_RCVLOWAT, minibroker/net/server.py)."""
    ledger = Ledger()
    d = FrameDecoder(budget=ledger)
    assert d.missing == 0
    small = frame(b"s" * 1000)
    read(d, small[:500])
    assert d.missing == 0  # a frame that fits the scratch buffer: no wait worth setting
    read(d, small[500:])
    payload = b"p" * 300_000
    stream = frame(payload)
    _, pos = read(d, stream[:100_000])
    assert d.missing == len(stream) - 100_000
    ledger.refuse = True
    d.get_buffer(-1)
    out, _ = read(d, stream[100_000:])  # the budget refuses to grow: reads stop, nothing to wait for
    assert d.blocked and d.missing == 0
    ledger.refuse = False
    d.resume()
    assert not d.blocked and d.missing > 0
