"""Kafka framing: a 4-byte big-endian size, then that many bytes.

``FrameDecoder`` is fed whatever the transport delivers and hands back whole
frames. A frame that arrives in one piece is returned as a memoryview of the
delivered bytes (no copy); a frame split across deliveries is joined once.

It also serves an ``asyncio.BufferedProtocol`` (``get_buffer`` /
``buffer_updated``): the transport then reads straight into the decoder's
buffers, so a large frame (a Produce request of up to 1 MiB) is copied once
from the socket instead of three times (into uvloop's read buffer, into a
``bytes`` per delivery, and by the join of the deliveries).

A large frame's buffer grows with the bytes that actually arrive, never to the
size the prefix announces: four bytes claiming 100 MB must not cost 100 MB.
Every growth is asked of a ``budget`` shared by all connections (Kafka's
``queued.max.request.bytes``); when it says no the decoder is ``blocked`` and
its owner stops reading the socket until ``resume()`` succeeds.
"""

from __future__ import annotations

import struct
import sys

_SIZE = struct.Struct(">i")

# Kafka's socket.request.max.bytes default.
DEFAULT_MAX_FRAME = 104_857_600


class InvalidFrame(Exception):
    """A size prefix Kafka would refuse (InvalidReceiveException): disconnect."""


# Frames up to this size are read into a per-connection scratch buffer and
# copied out whole; a larger one moves to a buffer of its own.
SCRATCH_SIZE = 64 * 1024
# A large frame's first buffer: one full uvloop read (256 KiB). It then doubles
# as bytes arrive, so a frame is copied at most once more in total.
FIRST_BUFFER = 256 * 1024
# Capacities are rounded up to this, so the next request of about the same
# size fits a kept buffer instead of missing it by a few bytes.
_ROUND = 64 * 1024
_SPARES = 4
# Buffers larger than this are given back once their frame is done with: reuse
# pays for a stream of 1 MiB Produce requests, a rare 100 MiB one would just
# sit there.
SPARE_MAX = 8 * 1024 * 1024


class Unbounded:
    """The budget of a decoder no one limits (tools, tests): every growth is granted."""

    def take(self, decoder: FrameDecoder, n: int, force: bool = False) -> bool:
        return True

    def give(self, decoder: FrameDecoder, n: int) -> None:
        pass


UNBOUNDED = Unbounded()


def _rounded(n: int) -> int:
    return -(-n // _ROUND) * _ROUND


class FrameDecoder:
    __slots__ = ("max_size", "budget", "tag", "held", "blocked", "frame_seq",
                 "_chunks", "_have", "_need", "_scratch", "_sview", "_slen",
                 "_bsize", "_big", "_bview", "_bfill", "_spares")

    def __init__(self, max_size: int = DEFAULT_MAX_FRAME, budget=UNBOUNDED, tag=None) -> None:
        self.max_size = max_size
        self.budget = budget
        self.tag = tag  # the owner's id, for the budget's log lines
        self.held = 0  # bytes of large-frame buffers this decoder owns (in use or kept)
        # True while a large frame waits for the budget: its newest bytes wait in
        # the scratch buffer and the owner must not read the socket.
        self.blocked = False
        self.frame_seq = 0  # large frames started, so the budget can tell one frame from the next
        self._chunks: list[bytes] = []
        self._have = 0
        self._need = 0  # total bytes (prefix included) of the pending frame; 0 = unknown
        # BufferedProtocol state, allocated on first use.
        self._scratch: bytearray | None = None
        self._sview: memoryview | None = None
        self._slen = 0
        # The large frame being received: its announced size (0 = none), its buffer
        # (None until the budget grants one) and how much of it is filled.
        self._bsize = 0
        self._big: bytearray | None = None
        self._bview: memoryview | None = None
        self._bfill = 0
        # Every large-frame buffer this decoder owns, each reused once nothing refers
        # to it any more: a fresh 1 MiB bytearray per request cost more than the socket
        # read itself (zero-filling memory the allocator had just given back to the
        # kernel). Several, because a pipelining client's next frame starts before
        # the previous one has been handled; a buffer still referred to is a request
        # not yet answered, and stays on the budget.
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
        return self._have + self._slen + (self._bfill + 4 if self._bsize else 0)

    @property
    def pending_size(self) -> int:
        """The announced size of the large frame being received (0: none)."""
        return self._bsize

    @property
    def missing(self) -> int:
        """Bytes of the large frame being received that have not arrived yet (0: no
        large frame, or it waits for the budget). A transport may sleep until that
        many are there instead of waking for every segment (SO_RCVLOWAT)."""
        if not self._bsize or self.blocked:
            return 0
        return self._bsize - self._bfill

    # -- asyncio.BufferedProtocol ----------------------------------------------------------

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the transport should read next (never past the end of a large frame)."""
        if self._bsize and not self.blocked:
            # A large frame not blocked has been granted its buffer (_move_spilled).
            assert self._bview is not None
            return self._bview[self._bfill : self._bsize]
        sview = self._sview
        if sview is None:
            self._scratch = bytearray(SCRATCH_SIZE)
            self._sview = sview = memoryview(self._scratch)
        # Blocked: the owner has paused reading, but a read already under way may
        # still land here; it waits in scratch for the frame's buffer to grow.
        return sview[self._slen :]

    def buffer_updated(self, nbytes: int) -> list[memoryview]:
        """``nbytes`` were read into the last ``get_buffer``; the frames now complete.

        Frames are memoryviews the caller may keep: a large frame is its own
        buffer, a small one is copied out of the scratch buffer. All are
        read-only, like views of delivered bytes: kio's decoder refuses a
        writable buffer.
        """
        frames: list[memoryview] = []
        if self._bsize:
            if self.blocked:
                self._slen += nbytes
                return frames
            self._bfill += nbytes
            if self._bfill == self._bsize:
                frames.append(self._finish_big())
            else:
                assert self._big is not None  # not blocked: _move_spilled granted it
                if self._bfill == len(self._big):
                    self._move_spilled(frames)  # full: grow now, or block before the next read
            return frames
        self._slen += nbytes
        return self._parse_scratch(frames)

    def resume(self) -> list[memoryview]:
        """Ask the budget again for a blocked frame's buffer; the frames that completes.

        ``blocked`` says whether it is still waiting."""
        frames: list[memoryview] = []
        if self.blocked:
            self._move_spilled(frames)
        return frames

    def _parse_scratch(self, frames: list[memoryview]) -> list[memoryview]:
        view = self._sview
        # Only called once bytes were read into scratch, so get_buffer made it.
        assert view is not None
        end = self._slen
        pos = 0
        while end - pos >= 4:
            size = self._size_at(view, pos)
            start = pos + 4
            if end - start >= size:
                frames.append(memoryview(bytes(view[start : start + size])))
                pos = start + size
                continue
            if 4 + size > SCRATCH_SIZE:
                # Too large to finish in scratch: its bytes so far wait there until
                # the budget grants a buffer, then the rest is read straight into it.
                pos = start
                self._bsize, self._bfill = size, 0
                self.frame_seq += 1
                self._compact(pos, end)
                self._move_spilled(frames)
                return frames
            break
        self._compact(pos, end)
        return frames

    def _compact(self, pos: int, end: int) -> None:
        rest = end - pos
        if rest and pos:
            sview = self._sview
            assert sview is not None  # rest > 0: bytes are waiting in scratch
            sview[:rest] = sview[pos:end]
        self._slen = rest

    def _move_spilled(self, frames: list[memoryview]) -> None:
        """Grow the large frame's buffer and move the frame's bytes waiting in
        scratch into it; blocked if the budget refuses."""
        want = min(self._bsize, self._bfill + self._slen + 1)
        if not self._reserve(want):
            self.blocked = True
            return
        self.blocked = False
        k = min(self._slen, self._bsize - self._bfill)
        if k:
            # _reserve granted the buffer; k > 0 means bytes wait in scratch.
            assert self._bview is not None and self._sview is not None
            self._bview[self._bfill : self._bfill + k] = self._sview[:k]
            self._bfill += k
            self._compact(k, self._slen)
        if self._bfill == self._bsize:
            frames.append(self._finish_big())
            self._parse_scratch(frames)

    def _finish_big(self) -> memoryview:
        assert self._bview is not None  # the frame is complete, so its buffer exists
        frame_ = self._bview[: self._bsize].toreadonly()
        self._big = self._bview = None
        self._bsize = self._bfill = 0
        return frame_

    def _reserve(self, want: int, force: bool = False) -> bool:
        """Make the large frame's buffer hold at least ``want`` bytes."""
        cap = len(self._big) if self._big is not None else 0
        if self._big is not None and want <= cap:
            return True
        if self._big is None:
            spare = self._free_spare(want)
            if spare is not None:
                self._big, self._bview = spare, memoryview(spare)
                if len(spare) >= want:
                    return True
                cap = len(spare)
        new_cap = min(_rounded(self._bsize), max(_rounded(want), 2 * cap, FIRST_BUFFER))
        if not self.budget.take(self, new_cap, force):
            return False
        new = bytearray(new_cap)
        self.held += new_cap
        old = self._big
        if old is not None:
            if self._bfill:
                assert self._bview is not None  # always set together with _big
                new[: self._bfill] = self._bview[: self._bfill]
            self._bview = None
            self._spares.remove(old)
            self.held -= len(old)
            self.budget.give(self, len(old))
            del old
        self._big, self._bview = new, memoryview(new)
        self._spares.append(new)
        self.release_idle(_SPARES)
        return True

    def _free_spare(self, want: int) -> bytearray | None:
        """A kept buffer nothing refers to: the smallest that holds the whole
        frame, else the largest (the frame starts in it and grows)."""
        best = None
        for big in self._spares:
            # Free when only the list, ``big`` and the call's own argument refer
            # to it: every memoryview of a bytearray holds a reference to it.
            if sys.getrefcount(big) > 3:
                continue
            if len(big) >= self._bsize:
                if best is None or len(best) < self._bsize or len(big) < len(best):
                    best = big
            elif best is None or len(best) < len(big) < self._bsize:
                best = big
        return best

    def release_idle(self, keep: int = _SPARES) -> int:
        """Give back kept buffers nothing refers to, beyond the newest ``keep`` of
        at most ``SPARE_MAX`` bytes each (0: all of them); the bytes given back."""
        freed = 0
        kept = 0
        spares = self._spares
        for i in range(len(spares) - 1, -1, -1):
            big = spares[i]
            # Free: only the list, ``big`` and the call's argument refer to it.
            if big is self._big or sys.getrefcount(big) > 3:
                continue
            if kept < keep and len(big) <= SPARE_MAX:
                kept += 1
                continue
            del spares[i]
            self.held -= len(big)
            freed += len(big)
        if freed:
            self.budget.give(self, freed)
        return freed

    def close(self) -> None:
        """The connection is gone: every buffer goes back to the budget, used or not."""
        held, self.held = self.held, 0
        self._spares = []
        self._big = self._bview = None
        self._bsize = self._bfill = 0
        self.blocked = False
        if held:
            self.budget.give(self, held)

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def feed(self, data: bytes) -> list[memoryview]:
        frames: list[memoryview] = []
        if self._bsize:
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
                    # A large frame split across deliveries (uvloop hands over at
                    # most 256 KiB at a time) is assembled in a reused buffer
                    # rather than joined into a new bytes.
                    self._bsize, self._bfill = size, 0
                    self.frame_seq += 1
                    self._fill_big(view[pos + 4 : end], frames)
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

    def _fill_big(self, data, frames: list[memoryview]):
        """Copy ``data`` into the large frame being assembled; what is left of
        ``data`` after the frame is complete, or None."""
        n = len(data)
        need = self._bsize - self._bfill
        take = min(n, need)
        # Delivered bytes are already in memory: the buffer grows whatever the budget
        # says (it is still told, so what it counts stays true).
        self._reserve(self._bfill + take, force=True)
        assert self._bview is not None  # a forced _reserve is always granted
        self._bview[self._bfill : self._bfill + take] = memoryview(data)[:take]
        self._bfill += take
        if take < need:
            return None
        frames.append(self._finish_big())
        return memoryview(data)[need:] if n > need else None


def frame(body: bytes) -> bytes:
    return _SIZE.pack(len(body)) + body


def size_prefix(size: int) -> bytes:
    return _SIZE.pack(size)
