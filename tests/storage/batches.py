"""Build RecordBatch v2 blobs for storage tests without protocol.records."""

from __future__ import annotations

import struct

from crc32c import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")
TS0 = 1_700_000_000_000


def _varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def make_batch(
    count: int = 1,
    value_size: int = 10,
    *,
    base_offset: int = 0,
    timestamps: list[int] | None = None,
    timestamp: int = TS0,
    fill: int = 0x61,
) -> bytes:
    """A valid batch of ``count`` records with ``value_size``-byte values."""
    if timestamps is None:
        timestamps = [timestamp] * count
    assert len(timestamps) == count
    base_ts = timestamps[0]
    records = bytearray()
    for i, ts in enumerate(timestamps):
        value = bytes([(fill + i) % 256]) * value_size
        body = (
            b"\x00"
            + _varint(ts - base_ts)
            + _varint(i)
            + _varint(-1)
            + _varint(len(value))
            + value
            + _varint(0)
        )
        records += _varint(len(body)) + body
    buf = bytearray(HEADER.size) + records
    HEADER.pack_into(
        buf, 0, base_offset, HEADER.size - 12 + len(records), 0, 2, 0, 0,
        count - 1, base_ts, max(timestamps), -1, -1, -1, count,
    )
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


def batch_size(count: int, value_size: int) -> int:
    return len(make_batch(count, value_size))


def split_batches(view) -> list[bytes]:
    """Cut a read result into whole batches."""
    data = bytes(view)
    out, pos = [], 0
    while pos < len(data):
        length = struct.unpack_from(">i", data, pos + 8)[0]
        out.append(data[pos : pos + 12 + length])
        pos += 12 + length
    assert pos == len(data), "read returned a partial batch"
    return out


def base_offset_of(batch: bytes) -> int:
    return struct.unpack_from(">q", batch, 0)[0]


def same_apart_from_offset(stored: bytes, sent: bytes) -> bool:
    """Equal but for what the log assigns: the base offset and the partition leader epoch."""
    return stored[8:12] == sent[8:12] and stored[16:] == sent[16:]


def crash(log) -> None:
    """What kill -9 leaves behind: no trim, no index write, no clean-shutdown marker."""
    log.release()
