"""A segment's files on disk: their names, and reading them without changing them.

The one place that knows how a partition directory names its files
(``<base:020d>.log`` and the ``.index``, ``.timeindex``, ``.txnindex`` and
``.snapshot`` beside it) and that walks a ``.log`` file with ``pread``. The live
segment (``segment.py``) maps its file instead, but names it here; the offline
readers (``offline.py``: dump-log, the Spark source, the audit, the scrub) read
through this module. Batches are judged by ``minibroker_protocol.batch.check_batch``,
the indexes parsed by ``index_format`` and ``txn_index.parse_txn_index``.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

from minibroker_protocol.batch import HEADER_SIZE, LOG_OVERHEAD, MIN_BATCH_LENGTH, BatchHeader, iter_headers

from .index import IndexCorrupt
from .index_format import parse_offset_index
from .producer_state import SNAPSHOT_SUFFIX
from .txn_index import TXN_INDEX_SUFFIX, AbortedTxn, parse_txn_index

__all__ = [
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "SEGMENT_FILE_KINDS",
    "SegmentFiles",
    "TIME_INDEX_SUFFIX",
    "base_offset_of",
    "file_stem",
    "log_tail",
    "read_offset_index",
    "read_txn_index",
    "segment_file_kind",
    "segment_file_list",
    "segments",
    "topic_partition",
    "walk_segment",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SEGMENT_FILE_KINDS = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX)


def topic_partition(directory: str) -> tuple[str, int]:
    """``(topic, partition)`` from a ``<topic>-<partition>`` directory (-1 if not one)."""
    topic, _, number = os.path.basename(directory.rstrip(os.sep)).rpartition("-")
    return (topic, int(number)) if topic and number.isdigit() else (os.path.basename(directory), -1)


def file_stem(directory: str, base_offset: int) -> str:
    return os.path.join(directory, f"{base_offset:020d}")


@dataclass(frozen=True, slots=True)
class SegmentFiles:
    """One segment's base offset and log path, and the paths of its index files."""
    base_offset: int
    log: str

    @property
    def index(self) -> str:
        return self.log[: -len(LOG_SUFFIX)] + INDEX_SUFFIX

    @property
    def txn_index(self) -> str:
        return self.log[: -len(LOG_SUFFIX)] + TXN_INDEX_SUFFIX


def segments(partition_path: str) -> list[SegmentFiles]:
    """The partition's ``.log`` files, by base offset."""
    out = []
    for name in os.listdir(partition_path):
        stem, dot, suffix = name.partition(".")
        if dot and "." + suffix == LOG_SUFFIX and stem.isdigit():
            out.append(SegmentFiles(int(stem), os.path.join(partition_path, name)))
    out.sort(key=lambda s: s.base_offset)
    return out


def segment_file_kind(path: str) -> str | None:
    """The suffix of a file a partition directory holds per segment (``.log``,
    ``.index``, ...), None for any other file (``*.deleted``, ``*.tmp``, checkpoints)."""
    name = os.path.basename(path)
    dot = name.rfind(".")
    return name[dot:] if dot > 0 and name[dot:] in SEGMENT_FILE_KINDS else None


def segment_file_list(directory: str) -> list[str]:
    """Every ``<offset>.<kind>`` file of ``directory``: by offset, then in
    SEGMENT_FILE_KINDS order (a segment's log before its indexes)."""
    found = []
    for name in os.listdir(directory):
        kind = segment_file_kind(name)
        offset = base_offset_of(name)
        if kind is not None and offset is not None and name == name.partition(".")[0] + kind:
            found.append((offset, SEGMENT_FILE_KINDS.index(kind), os.path.join(directory, name)))
    found.sort()
    return [path for _, _, path in found]


def read_offset_index(path: str, base_offset: int) -> list[tuple[int, int]]:
    """``(absolute offset, position)`` entries of a ``.index`` file, up to the first one
    the broker would refuse; [] when missing (a tool then walks the segment from its start)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    contents = parse_offset_index(data, base_offset)
    return contents.entries[: contents.usable]


def read_txn_index(path: str) -> list[AbortedTxn] | None:
    """The aborted transactions in a ``.txnindex`` file, None when it is missing or
    malformed (the broker would rebuild it from the log; tools use the markers)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    contents = parse_txn_index(data, base_offset_of(path) or 0)
    if not contents.usable:
        return None
    return [txn for _, txn in contents.entries]


def base_offset_of(path: str) -> int | None:
    """The base offset a segment file's name gives (``<20 digits>.<kind>``), None if none."""
    stem = os.path.basename(path).partition(".")[0]
    return int(stem) if stem.isdigit() else None


def log_tail(path: str, valid_end: int) -> tuple[int, bool]:
    """``(bytes, all_zero)`` of what follows the last readable batch, which ends at
    ``valid_end``. Zeros are space reserved for appends (the active segment, or one a
    crash left untrimmed); anything else is a torn or corrupt batch. Holes of a sparse
    file are skipped, not read."""
    with open(path, "rb") as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        pos = valid_end
        while pos < size:
            try:
                pos = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:
                break  # only holes from here on (ENXIO), or no SEEK_DATA: read on
            chunk = os.pread(fd, min(_CHUNK, size - pos), pos)
            if not chunk:
                break
            if chunk.count(0) != len(chunk):
                return size - valid_end, False
            pos += len(chunk)
    return max(size - valid_end, 0), True


_CHUNK = 1 << 20
_SEEK = struct.Struct(">qi11xi")  # baseOffset, batchLength, lastOffsetDelta
_LENGTH = struct.Struct(">i")  # batchLength, at byte 8


def _start_position(seg: SegmentFiles, offset: int, fd: int) -> int:
    """Where to start walking ``seg`` for ``offset``: the last indexed batch ending
    below it, if the log confirms that entry; else the segment start."""
    if offset <= seg.base_offset:
        return 0
    try:
        entries = read_offset_index(seg.index, seg.base_offset)
    except (OSError, IndexCorrupt):
        return 0
    i = bisect_right(entries, (offset - 1, 1 << 62))
    while i > 0:
        last, pos = entries[i - 1]
        head = os.pread(fd, _SEEK.size, pos)
        if len(head) == _SEEK.size:
            base, length, delta = _SEEK.unpack(head)
            if base + delta == last and length >= MIN_BATCH_LENGTH:
                return pos
        i -= 1  # an entry the log does not confirm (a torn tail): try an older one
    return 0


def walk_segment(seg: SegmentFiles, start_offset: int = 0, check_crc: bool = True,
                 position: int | None = None) -> Iterator[tuple[BatchHeader, memoryview]]:
    """``(header, batch)`` of the segment's valid batches from byte ``position``, or from
    the indexed batch nearest below ``start_offset``. ``header.position`` is the file
    position and ``batch`` the batch's bytes. It stops at the first batch that is
    incomplete, zeroed or (with ``check_crc``) corrupt - a batch the broker is still
    copying in must not be taken for data; ``header.end`` of the last one is where the
    walk stopped."""
    try:
        fd = os.open(seg.log, os.O_RDONLY)
    except FileNotFoundError:
        return  # deleted by retention while we walked
    try:
        file_size = os.fstat(fd).st_size
        pos = _start_position(seg, start_offset, fd) if position is None else position
        want = _CHUNK
        while True:
            buf = os.pread(fd, want, pos)
            view = memoryview(buf)
            stop = 0
            for header in iter_headers(buf, 0, min(len(buf), file_size - pos), check_crc, origin=pos):
                stop = header.end - pos
                yield header, view[header.position - pos: stop]
            # iter_headers stopped at ``stop``: the end of what was written (incomplete,
            # zeroed or corrupt: a batch the broker is still copying in is no data), or
            # only the end of this chunk, when the batch there lies whole in the file.
            if stop + HEADER_SIZE > len(buf):
                if stop == 0 or pos + stop + HEADER_SIZE > file_size:
                    return
                pos, want = pos + stop, _CHUNK
                continue
            size = _LENGTH.unpack_from(buf, stop + 8)[0] + LOG_OVERHEAD
            if size < HEADER_SIZE or stop + size <= len(buf) or pos + stop + size > file_size:
                return
            if stop == 0 and want >= size:
                return  # a short read: the file shrank under us
            pos, want = pos + stop, max(_CHUNK, size)
    finally:
        os.close(fd)
