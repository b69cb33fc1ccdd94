"""FrameDecoder: size-prefixed frames however the transport slices them."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minibroker_protocol.framing import DEFAULT_MAX_FRAME, FrameDecoder, InvalidFrame, frame, size_prefix


def wire(*payloads: bytes) -> bytes:
    return b"".join(frame(p) for p in payloads)


def feed_all(decoder: FrameDecoder, pieces) -> list[bytes]:
    out = []
    for piece in pieces:
        frames = decoder.feed(piece)
        assert all(isinstance(f, memoryview) for f in frames)
        out.extend(bytes(f) for f in frames)
    return out


# -- helpers -------------------------------------------------------------------


def test_frame_and_size_prefix():
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame(b"") == b"\x00\x00\x00\x00"
    assert size_prefix(258) == b"\x00\x00\x01\x02"
    assert DEFAULT_MAX_FRAME == 104_857_600


# -- whole deliveries ---------------------------------------------------------------


def test_whole_frame():
    d = FrameDecoder()
    frames = d.feed(frame(b"hello kafka"))
    assert [bytes(f) for f in frames] == [b"hello kafka"]
    assert d.buffered == 0


def test_whole_frame_is_a_view_of_the_delivery():
    data = frame(b"payload")
    (f,) = FrameDecoder().feed(data)
    assert isinstance(f, memoryview)
    assert f.obj is data  # no copy


def test_several_frames_in_one_delivery():
    payloads = [b"one", b"", b"three" * 100, b"\x00\xff"]
    d = FrameDecoder()
    assert feed_all(d, [wire(*payloads)]) == payloads
    assert d.buffered == 0


def test_empty_delivery():
    d = FrameDecoder()
    assert d.feed(b"") == []
    assert d.buffered == 0
    d.feed(b"\x00\x00")
    assert d.feed(b"") == []
    assert d.buffered == 2


# -- split deliveries ---------------------------------------------------------------


def test_byte_by_byte():
    payloads = [b"abc", b"", b"x" * 300, b"z"]
    data = wire(*payloads)
    d = FrameDecoder()
    out = []
    for i in range(len(data)):
        out.extend(bytes(f) for f in d.feed(data[i : i + 1]))
        assert d.buffered == i + 1 - sum(4 + len(p) for p in out)
    assert out == payloads
    assert d.buffered == 0


def test_partial_header_is_kept():
    d = FrameDecoder()
    data = frame(b"hello")
    assert d.feed(data[:3]) == []
    assert d.buffered == 3
    assert [bytes(f) for f in d.feed(data[3:])] == [b"hello"]
    assert d.buffered == 0


def test_partial_body_is_kept():
    d = FrameDecoder()
    data = frame(b"hello world")
    assert d.feed(data[:6]) == []
    assert d.buffered == 6
    assert d.feed(data[6:9]) == []
    assert d.buffered == 9
    assert [bytes(f) for f in d.feed(data[9:])] == [b"hello world"]
    assert d.buffered == 0


def test_frame_then_partial_next_frame():
    d = FrameDecoder()
    data = wire(b"first", b"second")
    cut = len(frame(b"first")) + 2
    assert feed_all(d, [data[:cut]]) == [b"first"]
    assert d.buffered == 2
    assert feed_all(d, [data[cut:]]) == [b"second"]
    assert d.buffered == 0


@settings(max_examples=200, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=40), max_size=6),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_any_slicing_gives_back_the_payloads(payloads, cuts):
    data = wire(*payloads)
    points = sorted({c for c in cuts if c <= len(data)} | {0, len(data)})
    pieces = [data[a:b] for a, b in zip(points, points[1:])]
    d = FrameDecoder()
    assert feed_all(d, pieces) == payloads
    assert d.buffered == 0


@pytest.mark.parametrize("payloads", [[b"hello"], [b"", b"ab", b""], [b"x" * 70, b"y"]])
def test_split_at_every_position(payloads):
    data = wire(*payloads)
    for a in range(len(data) + 1):
        for b in range(a, len(data) + 1):
            d = FrameDecoder()
            assert feed_all(d, [data[:a], data[a:b], data[b:]]) == payloads, (a, b)
            assert d.buffered == 0


def test_decoder_is_reusable_after_many_frames():
    d = FrameDecoder()
    for i in range(50):
        payload = bytes([i]) * i
        data = frame(payload)
        half = len(data) // 2
        assert feed_all(d, [data[:half], data[half:]]) == [payload]
    assert d.buffered == 0


# -- zero-size and invalid sizes ---------------------------------------------------


def test_zero_size_frame():
    d = FrameDecoder()
    assert feed_all(d, [frame(b"")]) == [b""]
    assert feed_all(d, [frame(b"") * 3]) == [b"", b"", b""]
    data = frame(b"")
    assert feed_all(d, [data[:1], data[1:2], data[2:3], data[3:]]) == [b""]
    assert d.buffered == 0


def test_negative_size():
    with pytest.raises(InvalidFrame):
        FrameDecoder().feed(struct.pack(">i", -1) + b"abc")
    with pytest.raises(InvalidFrame):
        FrameDecoder().feed(struct.pack(">i", -(2**31)))


def test_negative_size_after_a_partial_header():
    d = FrameDecoder()
    data = struct.pack(">i", -5)
    assert d.feed(data[:2]) == []
    with pytest.raises(InvalidFrame):
        d.feed(data[2:])


def test_negative_size_after_a_good_frame():
    d = FrameDecoder()
    with pytest.raises(InvalidFrame):
        d.feed(frame(b"ok") + struct.pack(">i", -1))


def test_size_above_the_maximum():
    d = FrameDecoder(max_size=10)
    with pytest.raises(InvalidFrame):
        d.feed(size_prefix(11))
    with pytest.raises(InvalidFrame):
        FrameDecoder().feed(size_prefix(DEFAULT_MAX_FRAME + 1))
    with pytest.raises(InvalidFrame):
        FrameDecoder().feed(size_prefix(2**31 - 1))


def test_size_above_the_maximum_is_refused_before_the_body_arrives():
    d = FrameDecoder(max_size=10)
    assert d.feed(b"\x00\x00") == []
    with pytest.raises(InvalidFrame):
        d.feed(b"\x00\x0b")


def test_size_at_the_maximum_is_accepted():
    d = FrameDecoder(max_size=10)
    assert feed_all(d, [frame(b"0123456789")]) == [b"0123456789"]
    assert FrameDecoder().feed(size_prefix(DEFAULT_MAX_FRAME)) == []  # waits for the body


# -- asyncio.BufferedProtocol side ---------------------------------------------------


def read_into(decoder: FrameDecoder, stream: bytes, limits) -> list[bytes]:
    """Play a transport: copy at most ``limit`` bytes into each get_buffer()."""
    out, pos, limits = [], 0, list(limits)
    while pos < len(stream):
        buf = decoder.get_buffer(-1)
        assert len(buf) > 0
        n = min(len(buf), len(stream) - pos, limits.pop(0) if limits else len(stream))
        buf[:n] = stream[pos : pos + n]
        pos += n
        frames = decoder.buffer_updated(n)
        assert all(isinstance(f, memoryview) for f in frames)
        out.extend(bytes(f) for f in frames)
    return out


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 1, 3, 100, 65_531, 65_532, 65_533, 70_000, 300_000]), max_size=6),
    limits=st.lists(st.integers(min_value=1, max_value=200_000), max_size=20),
)
def test_buffered_reads_give_back_the_payloads(sizes, limits):
    payloads = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    d = FrameDecoder()
    assert read_into(d, wire(*payloads), limits) == payloads
    assert d.buffered == 0


def test_buffered_large_frame_is_read_into_its_own_buffer():
    payload = bytes(range(256)) * 4096  # 1 MiB
    d = FrameDecoder()
    # The first large frame's buffer grows as its bytes arrive (never to the announced
    # size); it is kept, and the next large frame is read straight into it.
    assert read_into(d, frame(payload[::-1]), []) == [payload[::-1]]
    stream = frame(payload) + frame(b"next")
    first = d.get_buffer(-1)
    first[:100] = stream[:100]
    assert d.buffer_updated(100) == []
    rest = d.get_buffer(-1)
    # The rest of the frame and not a byte more: the next frame starts in scratch.
    assert len(rest) == len(payload) - 96
    rest[:] = stream[100 : 4 + len(payload)]
    (f,) = d.buffer_updated(len(rest))
    assert f.obj is rest.obj and bytes(f) == payload
    assert read_into(d, stream[4 + len(payload):], []) == [b"next"]
    assert d.buffered == 0


def test_buffered_small_frames_outlive_the_scratch_buffer():
    d = FrameDecoder()
    got = read_into(d, wire(b"a" * 10, b"b" * 20), [])
    kept = d.buffer_updated(0)
    assert got == [b"a" * 10, b"b" * 20] and kept == []
    (f,) = [memoryview(x) for x in read_into(d, frame(b"c" * 5), [])]
    assert bytes(f) == b"c" * 5


def test_buffered_invalid_sizes():
    d = FrameDecoder(max_size=10)
    buf = d.get_buffer(-1)
    buf[:4] = size_prefix(11)
    with pytest.raises(InvalidFrame):
        d.buffer_updated(4)
    d = FrameDecoder()
    buf = d.get_buffer(-1)
    buf[:4] = struct.pack(">i", -1)
    with pytest.raises(InvalidFrame):
        d.buffer_updated(4)


def test_buffered_large_buffer_is_reused_only_when_released():
    d = FrameDecoder()
    first = read_into(d, frame(b"x" * 100_000), [])  # bytes() copies: the view is gone
    assert first == [b"x" * 100_000]
    spare = [id(b) for b in d._spares]  # not a reference: that would count as a user
    assert read_into(d, frame(b"y" * 90_000), []) == [b"y" * 90_000]
    assert [id(b) for b in d._spares] == spare  # nothing held the first frame: same buffer

    held = []
    stream = frame(b"z" * 100_000)
    pos = 0
    while pos < len(stream):
        buf = d.get_buffer(-1)
        n = min(len(buf), len(stream) - pos)
        buf[:n] = stream[pos : pos + n]
        pos += n
        held.extend(d.buffer_updated(n))
    assert bytes(held[0]) == b"z" * 100_000
    read_into(d, frame(b"w" * 100_000), [])
    assert len(d._spares) == 2  # the held frame kept its buffer: a second one
    assert [id(b) for b in d._spares][0] == spare[0]
    assert bytes(held[0]) == b"z" * 100_000


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 2, 100, 65_531, 65_532, 65_533, 70_000, 300_000]), max_size=5),
    cuts=st.lists(st.integers(min_value=0, max_value=800_000), max_size=12),
)
def test_large_frames_fed_in_pieces(sizes, cuts):
    payloads = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    data = wire(*payloads)
    points = sorted({c for c in cuts if c <= len(data)} | {0, len(data)})
    d = FrameDecoder()
    got = []
    for a, b in zip(points, points[1:]):
        got.extend(bytes(f) for f in d.feed(data[a:b]))
        assert d.buffered == b - sum(4 + len(p) for p in got)
    assert got == payloads
    assert d.buffered == 0


def test_large_frame_fed_in_pieces_reuses_its_buffer():
    d = FrameDecoder()
    data = frame(b"a" * 200_000) + frame(b"b" * 200_000)
    frames = []
    for i in range(0, len(data), 65_536):
        frames.extend(d.feed(data[i : i + 65_536]))
    assert [bytes(f) for f in frames] == [b"a" * 200_000, b"b" * 200_000]
    assert frames[0].obj is not frames[1].obj  # the first was still held
    assert len(d._spares) == 2
    del frames
    spare = [id(b) for b in d._spares]
    firsts = []
    for i in range(0, len(data), 65_536):
        firsts += [bytes(f[:1]) for f in d.feed(data[i : i + 65_536])]  # no view outlives this line
    assert firsts == [b"a", b"b"]
    assert [id(b) for b in d._spares] == spare


def test_large_frames_are_read_only_and_kio_decodes_them():
    """kio's native reader refuses writable buffers: a large non-Produce request
    assembled in a pooled bytearray must still decode."""
    import io

    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
    from kio.schema.types import TopicName
    from kio.serial import entity_writer

    from minibroker_protocol import codec

    req = MetadataRequest(
        topics=tuple(MetadataRequestTopic(topic_id=None, name=TopicName(f"t{i}")) for i in range(10_000)),
        allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    out = io.BytesIO()
    entity_writer(MetadataRequest)(out, req)
    body = out.getvalue()
    assert len(body) > 65_536
    stream = frame(body)
    d = FrameDecoder()
    got = []
    for i in range(0, len(stream), 50_000):
        got.extend(d.feed(stream[i : i + 50_000]))
    (f,) = got
    assert f.readonly
    assert len(codec.decode_request(3, 12, f).topics) == 10_000
    d = FrameDecoder()
    pos, got = 0, []
    while pos < len(stream):
        buf = d.get_buffer(-1)
        n = min(len(buf), len(stream) - pos, 50_000)
        buf[:n] = stream[pos : pos + n]
        pos += n
        got.extend(d.buffer_updated(n))
    (f,) = got
    assert f.readonly
    assert codec.decode_request(3, 12, f).topics[-1].name == "t9999"
