"""XXH3-64 (seed 0, default secret) and the hash4j stream encoding Kafka's group hashes use.

Kafka 4.4 stores a modern group's ``MetadataHash`` (ShareGroupMetadataValue,
ConsumerGroupMetadataValue): group-coordinator/…/Utils.computeTopicHash hashes one topic with
hash4j's ``Hashing.xxh3_64().hashStream()`` — byte 0, the topic id's two longs, the name, the
partition count, then each partition index and its sorted racks — and computeGroupHash hashes
the topic hashes in topic-name order. hash4j's stream is XXH3 over a byte string where longs
and ints are little-endian and a string is its UTF-16LE chars followed by its int length.
tests/protocol/test_xxh3.py compares with values hash4j 0.22 (Kafka 4.4's) computed.

The algorithm is XXH3 as its specification describes it (Yann Collet's xxHash, BSD-2): inputs
up to 240 bytes by length class, longer ones by 64-byte stripes over 1 KiB blocks.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping, Sequence

_M64 = (1 << 64) - 1
_P32_1, _P32_2, _P32_3 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D
_P64_1, _P64_2, _P64_3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P64_4, _P64_5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
_PMX1, _PMX2 = 0x165667919E3779F9, 0x9FB21C651E98DF25
_SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
    "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364"
    "eac5ac8334d3ebc3c581a0fffa1363eb170ddd51b7f0da49d316552629d4689e"
    "2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e")
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


def _r64(b: bytes, i: int) -> int:
    return _U64.unpack_from(b, i)[0]


def _r32(b: bytes, i: int) -> int:
    return _U32.unpack_from(b, i)[0]


def _mul_fold(a: int, b: int) -> int:
    p = a * b
    return (p & _M64) ^ (p >> 64)


def _avalanche(h: int) -> int:
    h ^= h >> 37
    h = (h * _PMX1) & _M64
    return h ^ (h >> 32)


def _xxh64_avalanche(h: int) -> int:
    h ^= h >> 33
    h = (h * _P64_2) & _M64
    h ^= h >> 29
    h = (h * _P64_3) & _M64
    return h ^ (h >> 32)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _mix16(b: bytes, i: int, s: int) -> int:
    return _mul_fold(_r64(b, i) ^ _r64(_SECRET, s), _r64(b, i + 8) ^ _r64(_SECRET, s + 8))


def xxh3_64(b: bytes) -> int:
    """The unsigned 64-bit XXH3 of ``b``."""
    n = len(b)
    if n == 0:
        return _xxh64_avalanche(_r64(_SECRET, 56) ^ _r64(_SECRET, 64))
    if n <= 3:
        combined = (b[0] << 16) | (b[n >> 1] << 24) | b[n - 1] | (n << 8)
        return _xxh64_avalanche(combined ^ (_r32(_SECRET, 0) ^ _r32(_SECRET, 4)))
    if n <= 8:
        keyed = ((_r32(b, n - 4) + (_r32(b, 0) << 32)) & _M64) ^ (_r64(_SECRET, 8) ^ _r64(_SECRET, 16))
        h = keyed ^ _rotl(keyed, 49) ^ _rotl(keyed, 24)
        h = (h * _PMX2) & _M64
        h ^= (h >> 35) + n
        h = (h * _PMX2) & _M64
        return h ^ (h >> 28)
    if n <= 16:
        lo = _r64(b, 0) ^ (_r64(_SECRET, 24) ^ _r64(_SECRET, 32))
        hi = _r64(b, n - 8) ^ (_r64(_SECRET, 40) ^ _r64(_SECRET, 48))
        swapped = int.from_bytes(lo.to_bytes(8, "little"), "big")
        return _avalanche((n + swapped + hi + _mul_fold(lo, hi)) & _M64)
    if n <= 128:
        acc = n * _P64_1
        if n > 32:
            if n > 64:
                if n > 96:
                    acc += _mix16(b, 48, 96) + _mix16(b, n - 64, 112)
                acc += _mix16(b, 32, 64) + _mix16(b, n - 48, 80)
            acc += _mix16(b, 16, 32) + _mix16(b, n - 32, 48)
        acc += _mix16(b, 0, 0) + _mix16(b, n - 16, 16)
        return _avalanche(acc & _M64)
    if n <= 240:
        acc = n * _P64_1
        for i in range(8):
            acc += _mix16(b, 16 * i, 16 * i)
        acc = _avalanche(acc & _M64)
        for i in range(8, n // 16):
            acc += _mix16(b, 16 * i, 16 * (i - 8) + 3)
        acc += _mix16(b, n - 16, 119)
        return _avalanche(acc & _M64)
    return _long(b)


def _long(b: bytes) -> int:
    n = len(b)
    acc = [_P32_3, _P64_1, _P64_2, _P64_3, _P64_4, _P32_2, _P64_5, _P32_1]
    stripes_per_block = (len(_SECRET) - 64) // 8
    block = 64 * stripes_per_block

    def accumulate(off: int, s: int) -> None:
        for i in range(8):
            v = _r64(b, off + 8 * i)
            k = v ^ _r64(_SECRET, s + 8 * i)
            acc[i ^ 1] = (acc[i ^ 1] + v) & _M64
            acc[i] = (acc[i] + (k & 0xFFFFFFFF) * (k >> 32)) & _M64

    blocks = (n - 1) // block
    for bl in range(blocks):
        for s in range(stripes_per_block):
            accumulate(bl * block + 64 * s, 8 * s)
        for i in range(8):
            a = acc[i] ^ (acc[i] >> 47) ^ _r64(_SECRET, len(_SECRET) - 64 + 8 * i)
            acc[i] = (a * _P32_1) & _M64
    for s in range(((n - 1) - block * blocks) // 64):
        accumulate(blocks * block + 64 * s, 8 * s)
    accumulate(n - 64, len(_SECRET) - 64 - 7)
    result = n * _P64_1
    for i in range(4):
        result += _mul_fold(acc[2 * i] ^ _r64(_SECRET, 11 + 16 * i),
                            acc[2 * i + 1] ^ _r64(_SECRET, 19 + 16 * i))
    return _avalanche(result & _M64)


def _signed(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


def _string(s: str) -> bytes:
    # hash4j's putString: the UTF-16 chars, then the char count.
    units = s.encode("utf-16-le")
    return units + struct.pack("<i", len(units) // 2)


def _java_order(s: str) -> bytes:
    # String.compareTo compares UTF-16 units.
    return s.encode("utf-16-be")


def topic_hash(topic_id: uuid.UUID, name: str, partitions: int,
               racks: Sequence[Iterable[str]] = ()) -> int:
    """Utils.computeTopicHash: a signed long. ``racks[i]`` are partition i's replicas' racks
    (none when brokers have no broker.rack)."""
    out = bytearray(b"\x00")
    out += struct.pack("<QQ", topic_id.int >> 64, topic_id.int & _M64)
    out += _string(name) + struct.pack("<i", partitions)
    for i in range(partitions):
        out += struct.pack("<i", i)
        for rack in sorted(racks[i], key=_java_order) if i < len(racks) else ():
            out += struct.pack("<i", len(rack.encode("utf-16-le")) // 2) + _string(rack)
    return _signed(xxh3_64(bytes(out)))


def group_hash(topic_hashes: Mapping[str, int]) -> int:
    """Utils.computeGroupHash: 0 for no topics, else XXH3 of the topic hashes by name."""
    if not topic_hashes:
        return 0
    return _signed(xxh3_64(b"".join(struct.pack("<q", topic_hashes[n])
                                    for n in sorted(topic_hashes, key=_java_order))))
