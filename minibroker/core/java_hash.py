"""Java's String.hashCode, which Kafka uses to place groups and transactional ids on the
partitions of its internal topics (and so on their coordinators)."""

from __future__ import annotations


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (UTF-16 code units), as Kafka hashes group ids."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h
