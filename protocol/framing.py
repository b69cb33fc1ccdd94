"""Kafka framing: a 4-byte big-endian size, then that many bytes.

``FrameDecoder`` is fed whatever the transport delivers and hands back whole
frames. A frame that arrives in one piece is returned as a memoryview of the
delivered bytes (no copy); a frame split across deliveries is joined once.

It also serves an ``asyncio.BufferedProtocol`` (``get_buffer`` /
``buffer_updated``): the transport then reads straight into the decoder's
buffers, and a large frame (a Produce request of up to 1 MiB) is received into
a buffer of exactly its size, so its bytes are copied once from the socket
instead of three times (into uvloop's read buffer, into a ``bytes`` per
delivery, and by the join of the deliveries).
"""

from __future__ import annotations

import struct
import sys

_SIZE = struct.Struct(">i")

# Kafka's socket.request.max.bytes default.
DEFAULT_MAX_FRAME = 104_857_600


class InvalidFrame(Exception):
    """A size prefix Kafka would refuse (InvalidReceiveException): disconnect."""


# Frames up to this size are read into a shared scratch buffer and copied out
# whole; a larger one gets a buffer of its own as soon as its size is known.
SCRATCH_SIZE = 64 * 1024
_SPARES = 4


class FrameDecoder:
    __slots__ = ("max_size", "_chunks", "_have", "_need", "_scratch", "_sview", "_slen",
                 "_big", "_bview", "_bfill", "_spares")

    def __init__(self, max_size: int = DEFAULT_MAX_FRAME) -> None:
        self.max_size = max_size
        self._chunks: list[bytes] = []
        self._have = 0
        self._need = 0  # total bytes (prefix included) of the pending frame; 0 = unknown
        # BufferedProtocol state, allocated on first use.
        self._scratch: bytearray | None = None
        self._sview: memoryview | None = None
        self._slen = 0
        self._big: bytearray | None = None  # body of a large frame being received
        self._bview: memoryview | None = None
        self._bfill = 0
        # Large-frame buffers, each reused once nothing refers to it any more:
        # a fresh 1 MiB bytearray per request cost more than the socket read
        # itself (zero-filling memory the allocator had just given back to
        # the kernel). Several, because a pipelining client's next frame
        # starts before the previous one has been handled.
        self._spares: list[bytearray] = []

    def _size_at(self, buf, pos: int) -> int:
        (size,) = _SIZE.unpack_from(buf, pos)
        if size < 0:
            raise InvalidFrame(f"invalid frame size {size}")
        if size > self.max_size:
            raise InvalidFrame(
                f"frame of {size} bytes is larger than the maximum {self.max_size} "
                "(socket.request.max.bytes)"
            )
        return size

    @property
    def buffered(self) -> int:
        return self._have + self._slen + (self._bfill + 4 if self._big is not None else 0)

    # -- asyncio.BufferedProtocol ----------------------------------------------------------

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the transport should read next (never past the end of a large frame)."""
        if self._big is not None:
            return self._bview[self._bfill:]
        if self._scratch is None:
            self._scratch = bytearray(SCRATCH_SIZE)
            self._sview = memoryview(self._scratch)
        return self._sview[self._slen:]

    def buffer_updated(self, nbytes: int) -> list[memoryview]:
        """``nbytes`` were read into the last ``get_buffer``; the frames now complete.

        Frames are memoryviews the caller may keep: a large frame is its own
        buffer, a small one is copied out of the scratch buffer. All are
        read-only, like views of delivered bytes: kio's decoder refuses a
        writable buffer.
        """
        if self._big is not None:
            self._bfill += nbytes
            if self._bfill < len(self._bview):
                return []
            frame_ = self._bview.toreadonly()
            self._big = self._bview = None
            self._bfill = 0
            return [frame_]
        self._slen += nbytes
        view = self._sview
        end = self._slen
        pos = 0
        frames: list[memoryview] = []
        while end - pos >= 4:
            size = self._size_at(view, pos)
            start = pos + 4
            if end - start >= size:
                frames.append(memoryview(bytes(view[start : start + size])))
                pos = start + size
                continue
            if 4 + size > SCRATCH_SIZE:
                # Too large to finish in the scratch buffer: the rest is read
                # straight into a buffer of the frame's own size.
                self._start_big(size, view[start:end])
                pos = end
            break
        rest = end - pos
        if rest and pos:
            view[:rest] = view[pos:end]
        self._slen = rest
        return frames

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def feed(self, data: bytes) -> list[memoryview]:
        frames: list[memoryview] = []
        if self._big is not None:
            data = self._fill_big(data, frames)
            if data is None:
                return frames
        if self._chunks:
            self._chunks.append(data)
            self._have += len(data)
            if self._need == 0 and self._have < 4:
                return frames
            if self._need and self._have < self._need:
                return frames
            data = b"".join(self._chunks)
            self._chunks = []
            self._have = 0
            self._need = 0
        view = memoryview(data)
        end = len(data)
        pos = 0
        while end - pos >= 4:
            size = self._size_at(data, pos)
            if end - pos - 4 < size:
                if size + 4 > SCRATCH_SIZE:
                    # A large frame split across deliveries (uvloop hands
                    # over at most 256 KiB at a time) is assembled in a
                    # reused buffer rather than joined into a new bytes.
                    self._start_big(size, view[pos + 4 : end])
                    pos = end
                else:
                    self._need = size + 4
                break
            frames.append(view[pos + 4 : pos + 4 + size])
            pos += 4 + size
        if pos < end:
            rest = bytes(view[pos:])
            self._chunks = [rest]
            self._have = len(rest)
        return frames

    def _start_big(self, size: int, first) -> None:
        spares = self._spares
        for big in spares:
            # Free when only the list, ``big`` and the call's own argument refer
            # to it: every memoryview of a bytearray holds a reference to it.
            if len(big) >= size and sys.getrefcount(big) <= 3:
                break
        else:
            # Rounded up to a power of two: request sizes vary from one to the
            # next, and a buffer only a little too small would be a miss.
            big = bytearray(1 << (size - 1).bit_length())
            if len(spares) >= _SPARES:
                spares.pop(0)
            spares.append(big)
        have = len(first)
        bview = memoryview(big)[:size]
        bview[:have] = first
        self._big, self._bview, self._bfill = big, bview, have

    def _fill_big(self, data, frames: list[memoryview]):
        """Copy ``data`` into the large frame being assembled; what is left of
        ``data`` after the frame is complete, or None."""
        bview = self._bview
        need = len(bview) - self._bfill
        n = len(data)
        if n < need:
            bview[self._bfill : self._bfill + n] = data
            self._bfill += n
            return None
        bview[self._bfill :] = memoryview(data)[:need]
        frames.append(bview.toreadonly())
        self._big = self._bview = None
        self._bfill = 0
        return memoryview(data)[need:] if n > need else None


def frame(body: bytes) -> bytes:
    return _SIZE.pack(len(body)) + body


def size_prefix(size: int) -> bytes:
    return _SIZE.pack(size)
