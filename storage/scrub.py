"""Reading every byte of segment files to find the batches that fail their checks.

Used by ``minibroker scrub`` (a whole data directory, broker running or not)
and by the broker's background scrub (one sealed segment at a time, on a
worker thread). Files are read with ``pread`` in windows, never mapped and
never written: a running broker trims its active segment when it rolls, and a
mapped reader would die of SIGBUS. ``throttle`` is called with each window's
size before it is read, which is where a caller limits the rate or stops.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .offline import partition_dirs, read_offset_index, segments
from .verify import BadBatch, GoodBatch, verify_batches

_WINDOW = 4 << 20


class _Window:
    """``(position, length) -> bytes`` over a file, one large pread at a time."""

    __slots__ = ("fd", "chunk", "throttle", "start", "buf", "bytes_read")

    def __init__(self, fd: int, chunk: int, throttle: Callable[[int], None] | None) -> None:
        self.fd = fd
        self.chunk = chunk
        self.throttle = throttle
        self.start = 0
        self.buf = memoryview(b"")
        self.bytes_read = 0

    def __call__(self, pos: int, n: int):
        rel = pos - self.start
        if 0 <= rel and rel + n <= len(self.buf):
            return self.buf[rel : rel + n]
        want = max(self.chunk, n)
        if self.throttle is not None:
            self.throttle(want)
        self.buf = memoryview(os.pread(self.fd, want, pos))
        self.start = pos
        self.bytes_read += len(self.buf)
        return self.buf[:n]


@dataclass(slots=True)
class SegmentScrub:
    path: str
    base_offset: int
    size: int = 0
    batches: int = 0
    bad: list[BadBatch] = field(default_factory=list)
    note: str = ""  # e.g. preallocated space at the end of an active segment


def scrub_segment(
    path: str,
    base_offset: int,
    *,
    end_offset: int = -1,
    last: bool = False,
    throttle: Callable[[int], None] | None = None,
    chunk: int = _WINDOW,
) -> SegmentScrub:
    """Check every batch of one ``.log`` file (CRC-32C, structure, offsets).

    ``end_offset``: the next segment's base, when this is not the last one.
    Not reported as bad: bytes after a sealed segment's last offset (a roll
    that died before its trim; the next open cuts them) and zeros at the end of
    the last segment (preallocated space of a running or killed broker).
    """
    out = SegmentScrub(path, base_offset)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        out.note = "gone (deleted while scrubbing)"
        return out
    try:
        out.size = size = os.fstat(fd).st_size
        index = path[: -len(".log")] + ".index"
        resync = [pos for _, pos in read_offset_index(index, base_offset)]
        read = _Window(fd, chunk, throttle)
        for item in verify_batches(read, size, base_offset, resync=resync, end_offset=end_offset):
            if isinstance(item, GoodBatch):
                out.batches += 1
            elif item.tail and not last and item.first_offset == end_offset:
                out.note = f"{item.end - item.position} bytes after the last offset (cut at the next open)"
            elif item.tail and last and item.zeroed:
                out.note = f"{item.end - item.position} bytes of preallocated space"
            else:
                out.bad.append(item)
    finally:
        os.close(fd)
    return out


@dataclass(frozen=True, slots=True)
class Finding:
    topic: str
    partition: int
    segment: str
    bad: BadBatch


@dataclass(slots=True)
class ScrubReport:
    partitions: int = 0
    segments: int = 0
    bytes: int = 0
    batches: int = 0
    seconds: float = 0.0
    findings: list[Finding] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)  # (segment path, note)

    @property
    def mb_per_sec(self) -> float:
        return self.bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0


def scrub_data_dir(data_dir: str, topic: str | None = None,
                   throttle: Callable[[int], None] | None = None) -> ScrubReport:
    """Scrub every segment of every partition in ``data_dir`` (of ``topic`` only, if given)."""
    report = ScrubReport()
    started = time.perf_counter()
    for part in partition_dirs(data_dir):
        if topic is not None and part.topic != topic:
            continue
        report.partitions += 1
        segs = segments(part.path)
        for i, seg in enumerate(segs):
            last = i == len(segs) - 1
            end = -1 if last else segs[i + 1].base_offset
            result = scrub_segment(seg.log, seg.base_offset, end_offset=end, last=last, throttle=throttle)
            report.segments += 1
            report.bytes += result.size
            report.batches += result.batches
            report.findings.extend(Finding(part.topic, part.partition, seg.log, b) for b in result.bad)
            if result.note:
                report.notes.append((seg.log, result.note))
    report.seconds = time.perf_counter() - started
    return report
