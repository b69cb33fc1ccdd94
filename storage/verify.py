"""Checking a segment's batches end to end: structure, offsets and CRC-32C.

One walker serves the broker (a segment opened without a valid "verified"
mark), the background scrub and ``minibroker scrub``. Each batch is judged by
``minibroker_protocol.batch.check_batch``, as every walker's are; unlike
``iter_headers``, which stops at the first bad batch (right for a torn tail), it reports each
bad region and carries on from the next batch it can trust, so one flipped
byte in a closed segment costs one batch, not the rest of the segment.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from minibroker_protocol.batch import HEADER_SIZE, LOG_OVERHEAD, MIN_BATCH_LENGTH, check_batch
from minibroker_protocol.errors import ErrorCode

from .errors import StorageError

_LENGTH = struct.Struct(">i")  # batchLength, at byte 8

Reader = Callable[[int, int], "bytes | memoryview"]  # (position, length) -> at most length bytes


class GoodBatch(NamedTuple):
    position: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    end: int


@dataclass(frozen=True, slots=True)
class BadBatch:
    """Bytes ``[position, end)`` of a segment file that hold no trustworthy batch.

    ``first_offset`` is the offset the damaged bytes should start at (one past
    the last good batch), ``next_offset`` that of the next good batch after
    them, or the segment's end offset, or -1 when unknown. ``tail``: no good
    batch follows in the file; ``zeroed``: the region reads as zeros
    (preallocated space a crash left behind, not data).
    """

    position: int
    end: int
    first_offset: int
    next_offset: int
    reason: str
    tail: bool = False
    zeroed: bool = False

    def holds(self, offset: int) -> bool:
        return offset >= self.first_offset and (self.next_offset < 0 or offset < self.next_offset)


class CorruptBatch(StorageError):
    """A read reached a batch known to fail its checks: Kafka's read path throws
    CorruptRecordException there, which ReplicaManager.readFromLocalLog turns
    into CORRUPT_MESSAGE for that partition (core/.../ReplicaManager.scala)."""

    error_code = ErrorCode.corrupt_message

    def __init__(self, path: str, bad: BadBatch) -> None:
        super().__init__(
            f"{path}: batch at position {bad.position} (offsets from {bad.first_offset}) "
            f"is corrupt: {bad.reason}"
        )
        self.path = path
        self.bad = bad
        # Where a reader that chooses to skip the damage goes on (-1: nowhere known).
        self.next_offset = bad.next_offset


def _check(read: Reader, pos: int, size: int, expect: int | None, end_offset: int = -1) -> GoodBatch | str:
    """The batch at ``pos`` if it is sound, else why not (``check_batch``'s reason)."""
    if pos + HEADER_SIZE > size:
        return f"{size - pos} bytes left, fewer than a batch header"
    head = read(pos, HEADER_SIZE)
    length = _LENGTH.unpack_from(head, 8)[0]
    whole = length + LOG_OVERHEAD
    if MIN_BATCH_LENGTH <= length and pos + whole <= size:
        head = read(pos, whole)  # all of it, for the CRC
    found = check_batch(head, 0, size - pos, check_crc=True, sequential=True, expect_base=expect,
                        end_offset=end_offset, origin=pos)
    if isinstance(found, str):
        return found
    return GoodBatch(pos, found.base_offset, found.last_offset, found.max_timestamp, found.end)


def _resync(read: Reader, pos: int, size: int, expect: int, end_offset: int,
            candidates: Iterable[int]) -> GoodBatch | None:
    """The first sound batch after ``pos`` among ``candidates`` (the position
    the bad batch's own length points at, then offset index entries) whose
    offsets can follow ``expect``."""
    for q in sorted({c for c in candidates if pos < c < size}):
        found = _check(read, q, size, None)
        if isinstance(found, GoodBatch) and found.base_offset >= expect and (
            end_offset < 0 or found.last_offset < end_offset
        ):
            return found
    return None


def _all_zero(read: Reader, pos: int, end: int) -> bool:
    probe = bytes(read(pos, min(end - pos, 1 << 20)))
    return probe.count(0) == len(probe)


def verify_batches(
    read: Reader,
    size: int,
    base_offset: int,
    *,
    start: int = 0,
    resync: Iterable[int] = (),
    end_offset: int = -1,
) -> Iterator[GoodBatch | BadBatch]:
    """Walk ``size`` bytes of a segment from ``start``: every sound batch, and
    every region that is not one (with the reason), in file order.

    ``resync`` are positions where batches are known to have started (the
    offset index), used to find the next good batch when a bad one's length
    cannot be trusted. ``end_offset``: the segment's end (the next segment's
    base offset) when known.
    """
    resync = sorted(resync)
    pos, expect = start, base_offset
    while pos < size:
        found = _check(read, pos, size, expect, end_offset)
        if isinstance(found, GoodBatch):
            yield found
            pos, expect = found.end, found.last_offset + 1
            continue
        candidates = list(resync)
        if pos + HEADER_SIZE <= size:
            length = _LENGTH.unpack_from(read(pos + 8, 4), 0)[0]
            if length >= MIN_BATCH_LENGTH:
                candidates.append(pos + length + LOG_OVERHEAD)
        nxt = _resync(read, pos, size, expect, end_offset, candidates)
        if nxt is None:
            yield BadBatch(pos, size, expect, end_offset, found, tail=True, zeroed=_all_zero(read, pos, size))
            return
        yield BadBatch(pos, nxt.position, expect, nxt.base_offset, found)
        pos = nxt.position
        expect = nxt.base_offset
