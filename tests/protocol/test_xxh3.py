"""XXH3-64 and Kafka's group metadata hash (protocol/xxh3.py) against hash4j 0.22's own values
(xxh3_golden/Xxh3Golden.java, output in golden.txt) and a hash seen in a Kafka 4.4 record."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

import pytest

from minibroker_protocol import xxh3

GOLDEN = [line.split() for line in
          (Path(__file__).parent / "xxh3_golden" / "golden.txt").read_text().splitlines()]


def _signed(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


@pytest.mark.parametrize("n, want", [(int(g[1]), int(g[2])) for g in GOLDEN if g[0] == "raw"])
def test_every_length_class(n, want):
    # 0, 1-3, 4-8, 9-16, 17-128, 129-240 bytes, and the striped path over one and more blocks.
    assert _signed(xxh3.xxh3_64(bytes((i * 7 + 3) & 0xFF for i in range(n)))) == want


def test_stream_encoding_as_hash4j():
    want = {g[0]: int(g[1]) for g in GOLDEN if g[0] != "raw"}
    s = xxh3._string
    assert _signed(xxh3.xxh3_64(s("t"))) == want["str"]
    mixed = (b"\x00" + struct.pack("<qq", 0x0123456789ABCDEF, -2) + s("héllo")
             + struct.pack("<iiii", 3, 0, 1, 2))
    assert _signed(xxh3.xxh3_64(mixed)) == want["mix"]
    assert xxh3.group_hash({"x": 3352353673255890915}) == want["long"]


def test_the_metadata_hash_kafka_wrote():
    # ShareGroupMetadataValue of a group subscribed to topic t (3 partitions, no racks), read
    # from a Kafka 4.4 reference's __consumer_offsets.
    tid = uuid.UUID("5d8a2f99-c5a5-4601-a509-a9b87351a5d4")
    assert xxh3.group_hash({"t": xxh3.topic_hash(tid, "t", 3)}) == 3352353673255890915
    assert xxh3.group_hash({}) == 0
