"""``minibroker scrub``: read every segment of a data directory and report every bad batch.

Exit status: 0 every batch checked out, 1 bad batches were found, 2 usage error
(or a data directory that cannot be read). Reads only, takes no lock: it can
run beside a broker (the broker's own background scrub is --scrub-bytes-per-sec).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

PROG = "minibroker scrub"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=PROG,
        description="Verify the CRC-32C, length and offsets of every record batch in every segment "
                    "of a data directory, and report each bad batch with its topic, partition, "
                    "offset and file position. Exit status: 0 clean, 1 bad batches found, 2 usage error.")
    p.add_argument("--data-dir", default=os.environ.get("MINIBROKER_DATA_DIR", "minibroker-data"),
                   help="the broker's data directory (default: $MINIBROKER_DATA_DIR or ./minibroker-data)")
    p.add_argument("--topic", help="scrub only this topic")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    return p


def main(argv: list[str]) -> int:
    p = _parser()
    try:
        ns = p.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    from minibroker_storage.scrub import scrub_data_dir

    if not os.path.isdir(ns.data_dir):
        print(f"{PROG}: error: {ns.data_dir} is not a directory", file=sys.stderr)
        return 2
    try:
        report = scrub_data_dir(ns.data_dir, ns.topic)
    except OSError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    if ns.topic is not None and report.partitions == 0:
        print(f"{PROG}: error: no partition of topic {ns.topic!r} in {ns.data_dir}", file=sys.stderr)
        return 2
    bad = [
        {
            "topic": f.topic,
            "partition": f.partition,
            "offset": f.bad.first_offset,
            "next_offset": f.bad.next_offset,
            "position": f.bad.position,
            "bytes": f.bad.end - f.bad.position,
            "segment": f.segment,
            "reason": f.bad.reason,
        }
        for f in report.findings
    ]
    summary = {
        "data_dir": ns.data_dir,
        "partitions": report.partitions,
        "segments": report.segments,
        "bytes": report.bytes,
        "batches": report.batches,
        "seconds": round(report.seconds, 3),
        "mb_per_sec": round(report.mb_per_sec, 1),
        "bad_batches": bad,
        "notes": [{"segment": s, "note": n} for s, n in report.notes],
    }
    if ns.json:
        print(json.dumps(summary, indent=1))
    else:
        for b in bad:
            print(f"BAD {b['topic']}-{b['partition']} offset {b['offset']} position {b['position']} "
                  f"({b['bytes']} bytes, next good offset {b['next_offset']}) in {b['segment']}: "
                  f"{b['reason']}")
        print(f"scrubbed {report.partitions} partitions, {report.segments} segments, "
              f"{report.batches} batches, {report.bytes} bytes in {report.seconds:.2f} s "
              f"({report.mb_per_sec:.0f} MB/s): "
              + (f"{len(bad)} bad batches" if bad else "no bad batches"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
