"""CRC-32C (Castagnoli), the checksum of record batches and of minibroker's own snapshot files.

The ``crc32c`` package computes it in C, but importing it reads its own version through
importlib.metadata, which costs more than the rest of a broker's start-up path to its first
answer (issue 21). So it is imported on the first checksum: call ``checksum.crc32c(data)``
through this module; after the first call that name is the C function itself.
"""

from __future__ import annotations


def crc32c(data, /) -> int:  # replaced by the crc32c package's own on first use
    import importlib

    fast = importlib.import_module("crc32c").crc32c
    globals()["crc32c"] = fast
    return fast(data)
