"""How much writing into memory costs on this machine, fresh vs recycled.

    python bench/fresh_memory.py [DIR] [MiB]

Appends 1 MiB blocks with pwritev to a new file in DIR (default: a temp dir) and prints the
CPU-time throughput of each 256 MiB, then does it again right away. On a VM that hands free
memory back to its host (Firecracker with free page reporting: see /proc/cmdline), the first
pass slows down once it runs out of pages the kernel freed moments ago, while the second pass,
reusing the pages the first one freed, does not. bench/RESULTS.md uses it to explain where
minibroker's CPU per GB produced goes (every acknowledged byte lands in the page cache).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

BLOCK = 1 << 20


def one_pass(directory: str, mib: int) -> list[float]:
    data = os.urandom(BLOCK)
    path = os.path.join(directory, "fresh-memory.bin")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    rates = []
    try:
        c = time.process_time()
        for i in range(mib):
            os.pwritev(fd, (data[:8], memoryview(data)[8:]), i * BLOCK)
            if i % 256 == 255:
                now = time.process_time()
                rates.append(256 * BLOCK / max(now - c, 1e-9) / 1e9)
                c = now
    finally:
        os.close(fd)
        os.unlink(path)
    return rates


def main() -> None:
    directory = sys.argv[1] if len(sys.argv) > 1 else tempfile.gettempdir()
    mib = int(sys.argv[2]) if len(sys.argv) > 2 else 2048
    for name in ("first pass", "again at once"):
        print(f"{name:14s} GB/s (CPU) per 256 MiB: " + " ".join(f"{r:.2f}" for r in one_pass(directory, mib)))


if __name__ == "__main__":
    main()
