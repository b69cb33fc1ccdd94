"""The bytes of Kafka's ``.index`` and ``.timeindex`` files, decoded and judged, never repaired.

``.index``: 8-byte entries (int32 offset relative to the segment's base, int32 byte
position of a batch in the ``.log``), keyed by the batch's last offset. ``.timeindex``:
12-byte entries (int64 timestamp, int32 relative offset). Both big-endian, like Kafka's.

The offline readers (dump-log, the Spark source, the audit) read the files through this
module; ``index.py`` keeps the broker's in-memory indexes and applies the same rules when
it loads one. Kafka preallocates index files, so an index a Kafka broker did not close
ends in zero entries: those are counted apart (``zero_entries``), not taken for data and
not called corrupt — the dump tool in Kafka stops at them too (DumpLogSegments.dumpIndex).
"""

from __future__ import annotations

import struct
import sys
from array import array
from typing import NamedTuple

__all__ = ["IndexContents", "OFFSET_ENTRY", "TIME_ENTRY", "parse_offset_index", "parse_time_index"]

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")


class IndexContents(NamedTuple):
    """An index file as stored. ``keys``/``values`` are the entries' two fields as the
    broker keeps them in memory: .index (relative offset, position), .timeindex
    (timestamp, relative offset)."""

    kind: str  # "offset" or "time"
    base_offset: int
    keys: array
    values: array
    zero_entries: int  # all-zero entries after the first: a preallocated tail
    trailing_bytes: int  # bytes after the last whole entry
    problems: list[tuple[int, str]]  # (entry number, what is wrong), in file order

    @property
    def entries(self) -> list[tuple[int, int]]:
        """.index: (offset, position); .timeindex: (timestamp, offset); offsets absolute."""
        base = self.base_offset
        if self.kind == "offset":
            return [(base + rel, pos) for rel, pos in zip(self.keys, self.values)]
        return [(ts, base + rel) for ts, rel in zip(self.keys, self.values)]

    @property
    def usable(self) -> int:
        """How many entries, from the first, a reader may rely on."""
        return self.problems[0][0] if self.problems else len(self.keys)

    @property
    def sound(self) -> bool:
        """True when the broker may load the file as it is and append to it."""
        return not (self.problems or self.zero_entries or self.trailing_bytes)


def _zero_tail(data: bytes, size: int) -> int:
    """Whole zero entries at the end, after the first entry."""
    n = len(data) // size
    zero = bytes(size)
    count = 0
    while n - count > 1 and data[(n - count - 1) * size:(n - count) * size] == zero:
        count += 1
    return count


def parse_offset_index(data: bytes, base_offset: int, log_size: int | None = None) -> IndexContents:
    """Entries of a ``.index`` file, and every entry ``OffsetIndex.load`` would refuse
    (``log_size``, when known, also catches positions past the end of the log)."""
    size = OFFSET_ENTRY.size
    whole = len(data) - len(data) % size
    zeros = _zero_tail(data[:whole], size)
    flat = array("i")
    flat.frombytes(data[: whole - zeros * size])
    if sys.byteorder == "little":
        flat.byteswap()
    rels, positions = flat[0::2], flat[1::2]
    problems: list[tuple[int, str]] = []
    prev_offset = prev_pos = None
    for n, (rel, pos) in enumerate(zip(rels, positions)):
        offset = base_offset + rel
        if rel < 0:
            problems.append((n, f"Index offset {offset} is below the segment's base offset {base_offset}"))
        elif prev_offset is not None and offset <= prev_offset:
            problems.append((n, f"Index offset {offset} is not larger than the previous, {prev_offset}"))
        elif pos < 0 or (prev_pos is not None and pos <= prev_pos):
            problems.append((n, f"Index position {pos} (offset {offset}) is not larger than the previous, "
                                f"{prev_pos if prev_pos is not None else 0}"))
        elif log_size is not None and pos >= log_size:
            problems.append((n, f"Index position {pos} (offset {offset}) is past the end of the "
                                f"{log_size}-byte log"))
        prev_offset, prev_pos = offset, pos
    return IndexContents("offset", base_offset, rels, positions, zeros, len(data) - whole, problems)


def parse_time_index(data: bytes, base_offset: int, next_offset: int | None = None) -> IndexContents:
    """Entries of a ``.timeindex`` file, and every entry ``TimeIndex.load`` would refuse
    (``next_offset``, when known, also catches offsets past the end of the segment)."""
    size = TIME_ENTRY.size
    whole = len(data) - len(data) % size
    zeros = _zero_tail(data[:whole], size)
    problems: list[tuple[int, str]] = []
    timestamps, rels = array("q"), array("i")
    prev_ts = prev_offset = None
    for n, (ts, rel) in enumerate(TIME_ENTRY.iter_unpack(data[: whole - zeros * size])):
        offset = base_offset + rel
        timestamps.append(ts)
        rels.append(rel)
        if rel < 0:
            problems.append((n, f"Indexed offset {offset} is below the segment's base offset {base_offset}"))
        elif prev_ts is not None and ts <= prev_ts:
            # Kafka's wording (DumpLogSegments.TimeIndexDumpErrors).
            problems.append((n, f"Index timestamp: {ts}, Previously indexed timestamp: {prev_ts}"))
        elif prev_offset is not None and offset < prev_offset:
            problems.append((n, f"Indexed offset {offset} is smaller than the previous, {prev_offset}"))
        elif next_offset is not None and offset >= next_offset:
            problems.append(
                (n, f"Indexed offset {offset} is past the segment's last offset {next_offset - 1}"))
        prev_ts, prev_offset = ts, offset
    return IndexContents("time", base_offset, timestamps, rels, zeros, len(data) - whole, problems)
