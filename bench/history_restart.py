"""Restart time after a long transaction history, before and after log compaction (issue 19).

    python -m bench.history_restart [--transactions 1000000] [--runs 3] [--work DIR]

Writes ``--transactions`` committed transactions of 100 transactional ids into
``__transaction_state`` as the coordinator writes them (tests/integration/txn_history.py;
a million client transactions would take hours), then copies that data dir and compacts the
copy with the broker's own cleaner. Each is started ``--runs`` times (median reported): with
the transaction coordinator's snapshot (what a clean stop leaves), and without it (a full
replay: what a lost or untrusted snapshot falls back to, and what Kafka always does). The
uncompacted dir is started with the cleaner off, as the broker was before compaction existed.
Prints a table of milliseconds from process start to ``--ready-file``.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

SNAPSHOT = "transaction-coordinator.snapshot"


def _quiet() -> None:
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def compact(data_dir: Path) -> tuple[float, int, int]:
    """Roll and clean ``__transaction_state``; (seconds, bytes before, bytes after)."""
    from minibroker_storage.config import LogConfig
    from minibroker_storage.manager import LogManager

    with LogManager(data_dir, LogConfig()) as logs:
        plog = logs.get_log("__transaction_state", 0)
        before = plog.size_bytes
        plog.roll()  # what the broker's next segment.bytes roll would do: all history cleanable
        started = time.perf_counter()
        logs.cleaner.clean()
        return time.perf_counter() - started, before, plog.size_bytes


def start_ms(data_dir: Path, snapshot: bool, cleaner: bool) -> float:
    from minibroker.testing.broker import MiniBroker

    if not snapshot:
        (data_dir / SNAPSHOT).unlink(missing_ok=True)
    with MiniBroker(data_dir, name="history-restart", log_cleaner_enable=cleaner,
                    startup_timeout=600) as mb:
        ms = (mb.ready_seconds or 0) * 1000
    return ms


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--transactions", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--work", type=Path, default=None, help="keep the data dirs here (reused if present)")
    a = p.parse_args()
    _quiet()
    from tests.integration.txn_history import generate

    work = a.work or Path(tempfile.mkdtemp(prefix="history-restart-"))
    raw, compacted = work / "uncompacted", work / "compacted"
    if not raw.exists():
        t0 = time.perf_counter()
        generate(raw, a.transactions)
        print(f"wrote {a.transactions:,} transactions in {time.perf_counter() - t0:.0f} s")
    if not compacted.exists():
        shutil.copytree(raw, compacted)
        seconds, before, after = compact(compacted)
        print(f"compacted __transaction_state: {before / 2**20:.1f} MiB -> {after / 2**10:.1f} KiB "
              f"in {seconds:.0f} s (the cleaner's thread, off the event loop in a broker)")
    rows = []
    for label, snapshot in (("with the coordinator snapshot", True), ("without it (full replay)", False)):
        times: dict[str, list[float]] = {"uncompacted": [], "compacted": []}
        for _ in range(a.runs):  # interleaved: this machine's speed drifts
            times["uncompacted"].append(start_ms(raw, snapshot, cleaner=False))
            times["compacted"].append(start_ms(compacted, snapshot, cleaner=True))
        rows.append((label, statistics.median(times["uncompacted"]), statistics.median(times["compacted"])))
    size = {d.name: sum(f.stat().st_size for f in d.rglob("*") if f.is_file()) for d in (raw, compacted)}
    print(f"\nrestart after {a.transactions:,} committed transactions, ms to --ready-file "
          f"(median of {a.runs}; data dir {size['uncompacted'] / 2**20:.0f} MiB / "
          f"{size['compacted'] / 2**10:.0f} KiB)\n")
    print("| start | before compaction | after compaction |")
    print("|---|---:|---:|")
    for label, before, after in rows:
        print(f"| {label} | {before:,.0f} | {after:,.0f} |")
    if a.work is None:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n(cpus: {os.cpu_count()})")


if __name__ == "__main__":
    main()
