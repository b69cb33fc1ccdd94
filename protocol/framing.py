"""Kafka framing: a 4-byte big-endian size, then that many bytes.

``FrameDecoder`` is fed whatever the transport delivers and hands back whole
frames. A frame that arrives in one piece is returned as a memoryview of the
delivered bytes (no copy); a frame split across deliveries is joined once.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")

# Kafka's socket.request.max.bytes default.
DEFAULT_MAX_FRAME = 104_857_600


class InvalidFrame(Exception):
    """A size prefix Kafka would refuse (InvalidReceiveException): disconnect."""


class FrameDecoder:
    __slots__ = ("max_size", "_chunks", "_have", "_need")

    def __init__(self, max_size: int = DEFAULT_MAX_FRAME) -> None:
        self.max_size = max_size
        self._chunks: list[bytes] = []
        self._have = 0
        self._need = 0  # total bytes (prefix included) of the pending frame; 0 = unknown

    @property
    def buffered(self) -> int:
        return self._have

    def feed(self, data: bytes) -> list[memoryview]:
        if self._chunks:
            self._chunks.append(data)
            self._have += len(data)
            if self._need == 0 and self._have < 4:
                return []
            if self._need and self._have < self._need:
                return []
            data = b"".join(self._chunks)
            self._chunks = []
            self._have = 0
            self._need = 0
        frames: list[memoryview] = []
        view = memoryview(data)
        end = len(data)
        pos = 0
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(data, pos)
            if size < 0:
                raise InvalidFrame(f"invalid frame size {size}")
            if size > self.max_size:
                raise InvalidFrame(
                    f"frame of {size} bytes is larger than the maximum {self.max_size} "
                    "(socket.request.max.bytes)"
                )
            if end - pos - 4 < size:
                self._need = size + 4
                break
            frames.append(view[pos + 4 : pos + 4 + size])
            pos += 4 + size
        if pos < end:
            rest = bytes(view[pos:])
            self._chunks = [rest]
            self._have = len(rest)
        return frames


def frame(body: bytes) -> bytes:
    return _SIZE.pack(len(body)) + body


def size_prefix(size: int) -> bytes:
    return _SIZE.pack(size)
