"""``minibroker dump-log``: print a segment the way Kafka's kafka-dump-log.sh does."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from minibroker_protocol.batch import crc_ok
from minibroker_protocol.records import CONTROL_COMMIT, decode_batch, parse_control_record, parse_end_txn_marker
from minibroker_storage.segment import iter_file_batches

CODECS = {0: "NONE", 1: "GZIP", 2: "SNAPPY", 3: "LZ4", 4: "ZSTD"}


def _payload(b: bytes | None) -> str:
    return "" if b is None else b.decode("utf-8", errors="replace")


def dump(path: Path, print_data: bool, out=None) -> int:
    out = out or sys.stdout
    out.write(f"Dumping {path}\n")
    try:
        start = int(path.stem)
    except ValueError:
        start = 0
    out.write(f"Log starting offset: {start}\n")
    invalid = 0
    for header, view in iter_file_batches(path):
        valid = crc_ok(view, _at_zero(header))
        invalid += not valid
        ts_name = "LogAppendTime" if header.timestamp_type else "CreateTime"
        out.write(
            f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
            f"count: {header.record_count} baseSequence: {header.base_sequence} "
            f"lastSequence: {header.last_sequence} producerId: {header.producer_id} "
            f"producerEpoch: {header.producer_epoch} "
            f"partitionLeaderEpoch: {header.partition_leader_epoch} "
            f"isTransactional: {str(header.is_transactional).lower()} "
            f"isControl: {str(header.is_control).lower()} position: {header.position} "
            f"{ts_name}: {header.max_timestamp} size: {header.size} magic: {header.magic} "
            f"compresscodec: {CODECS.get(header.compression, header.compression)} "
            f"crc: {header.crc} isvalid: {str(valid).lower()}\n"
        )
        if not print_data:
            continue
        if not valid:
            out.write("| (records not printed: CRC mismatch)\n")
            continue
        for i, r in enumerate(decode_batch(view)):
            seq = -1 if header.base_sequence < 0 else (header.base_sequence + i) % 2**31
            keysize = -1 if r.key is None else len(r.key)
            valuesize = -1 if r.value is None else len(r.value)
            line = (f"| offset: {r.offset} {ts_name}: {r.timestamp} keysize: {keysize} "
                    f"valuesize: {valuesize} sequence: {seq} "
                    f"headerKeys: [{','.join(k for k, _ in r.headers)}]")
            if header.is_control and r.key is not None and len(r.key) >= 4:
                _version, ctype = parse_control_record(r.key)
                kind = "COMMIT" if ctype == CONTROL_COMMIT else "ABORT" if ctype == 0 else f"UNKNOWN({ctype})"
                _v, coordinator_epoch = parse_end_txn_marker(r.value)
                line += f" endTxnMarker: {kind} coordinatorEpoch: {coordinator_epoch}"
            else:
                if r.key is not None:
                    line += f" key: {_payload(r.key)}"
                line += f" payload: {_payload(r.value)}"
            out.write(line + "\n")
    return invalid


def _at_zero(header):
    from dataclasses import replace
    return replace(header, position=0)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="minibroker dump-log",
                                description="Print the batches (and records) of .log segment files.")
    p.add_argument("files", nargs="+", type=Path, metavar="FILE.log")
    p.add_argument("--print-data-log", action="store_true",
                   help="also print every record: offset, timestamp, sizes, key and payload")
    ns = p.parse_args(argv)
    from . import logs
    logs.configure("warning")  # stdout carries the dump; diagnostics go to stderr
    bad = 0
    try:
        for f in ns.files:
            if not f.exists():
                print(f"minibroker dump-log: {f}: no such file", file=sys.stderr)
                return 2
            bad += dump(f, ns.print_data_log)
    except BrokenPipeError:
        # `dump-log ... | head` closed the pipe: not an error of ours.
        sys.stderr.close()
        return 0
    return 1 if bad else 0
