"""``minibroker dump-log``: print segment files the way Kafka's kafka-dump-log.sh does.

Every kind of file a partition directory holds per segment is understood: ``.log``,
``.index``, ``.timeindex``, ``.txnindex`` and producer-state ``.snapshot`` files, read
through storage's parsers (the ones the broker and the offline readers use). Like
Kafka's DumpLogSegments (apache/kafka tools/src/main/java/org/apache/kafka/tools/
DumpLogSegments.java) the contents go to stdout, "Found N invalid bytes at the end of
FILE" too, and the index checks go to stderr in its wording. Every problem is on stderr as
well, one line each (a batch whose CRC does not match, records that cannot be read, invalid
bytes at a file's end), so ``dump-log ... >/dev/null`` shows just what is wrong.

Unlike Kafka's tool, which exits 0 whatever it finds, the exit status says what was
found, so a script can tell a sound segment from a damaged one: 0 all valid, 1 some
file holds invalid data (a CRC mismatch, invalid bytes at the end, an index entry the
log contradicts, a corrupt snapshot), 2 a file could not be read or is of no known
kind (nothing is dumped when an argument is wrong).
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crc32c import crc32c

from minibroker_protocol.batch import CRC_START, InvalidBatch
from minibroker_protocol.records import (
    CONTROL_COMMIT,
    decode_batch,
    parse_control_record,
    parse_end_txn_marker,
)
from minibroker_storage.index_format import IndexContents, parse_offset_index, parse_time_index
from minibroker_storage.offline import (
    SEGMENT_FILE_KINDS,
    SegmentFiles,
    base_offset_of,
    log_tail,
    segment_file_kind,
    segment_file_list,
    walk_segment,
)
from minibroker_storage.producer_state import CorruptSnapshot, decode_snapshot
from minibroker_storage.segment_checks import (
    SegmentReader,
    check_offset_index,
    check_time_index,
    check_txn_index,
)
from minibroker_storage.segment_files import INDEX_SUFFIX, LOG_SUFFIX
from minibroker_storage.txn_index import parse_txn_index

CODECS = {0: "NONE", 1: "GZIP", 2: "SNAPPY", 3: "LZ4", 4: "ZSTD"}
PROG = "minibroker dump-log"


def _payload(b: bytes | None) -> str:
    return "" if b is None else b.decode("utf-8", errors="replace")


def _sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name.partition(".")[0] + suffix)


# (offset, key, value) -> (key text, payload text or None, problem or None)
Decoder = Callable[[int, bytes | None, bytes | None], tuple[str, str | None, str | None]]


def dump(path: Path, print_data: bool, out=None, err=None, decoder: Decoder | None = None) -> int:
    """Print a ``.log`` file; returns how many invalid things it holds. ``decoder`` prints each
    record's key and value as Kafka's decoder flags do (it implies ``print_data``)."""
    out, err = out or sys.stdout, err or sys.stderr
    out.write(f"Dumping {path}\n")
    start = base_offset_of(str(path)) or 0
    out.write(f"Log starting offset: {start}\n")
    invalid = 0
    valid_end = 0
    gaps: list[tuple[int, int]] = []
    prev_last = None
    for header, view in walk_segment(SegmentFiles(start, str(path)), check_crc=False, position=0):
        # ``view`` holds just this batch: the CRC covers it from attributes on.
        computed = crc32c(view[CRC_START:])
        valid = computed == header.crc
        if not valid:
            invalid += 1
            err.write(f"Invalid batch in {path} at position {header.position} (baseOffset "
                      f"{header.base_offset} lastOffset {header.last_offset}): crc {header.crc}, "
                      f"the data's is {computed}\n")
        valid_end = header.end
        if prev_last is not None and header.base_offset != prev_last + 1:
            gaps.append((prev_last, header.base_offset))
        prev_last = header.last_offset
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
        if not print_data and decoder is None:
            continue
        if not valid:
            out.write("| (records not printed: CRC mismatch)\n")
            continue
        try:
            invalid += _print_records(header, view, ts_name, out, err, path, decoder)
        except (InvalidBatch, ValueError, IndexError, struct.error) as exc:
            invalid += 1
            out.write(f"| (records not printed: {exc})\n")
            err.write(f"Unreadable records in {path} at position {header.position} (baseOffset "
                      f"{header.base_offset}): {exc}\n")
    tail, zeroed = log_tail(str(path), valid_end)
    if tail and zeroed:
        # The active segment, or one a crash left untrimmed: reserved space, not data.
        out.write(f"Found {tail} zero bytes (space preallocated for appends) at the end of {path.name}\n")
    elif tail:
        invalid += 1
        out.write(f"Found {tail} invalid bytes at the end of {path.name}\n")
        _invalid_tail(path, tail, valid_end, err)
    if gaps:
        # Not counted as invalid: a compacted Kafka log has gaps by design.
        err.write(f"Non-consecutive offsets in {path}\n")
        for before, after in gaps:
            err.write(f"  {before} is followed by {after}\n")
    return invalid


def _invalid_tail(path: Path, size: int, start: int, err) -> None:
    # stdout has Kafka's line; this one is for whoever reads only the problems.
    err.write(f"Invalid bytes at the end of {path}: {size} from position {start}\n")


def _print_records(header, view, ts_name: str, out, err=None, path=None,
                   decoder: Decoder | None = None) -> int:
    """Print a batch's records; returns how many the decoder could not read."""
    undecodable = 0
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
        elif decoder is not None:
            key, payload, problem = decoder(r.offset, r.key, r.value)
            line += f" key: {key}" + ("" if payload is None else f" payload: {payload}")
            if problem is not None:
                undecodable += 1
                err.write(f"Undecodable record in {path}: {problem}\n")
        else:
            if r.key is not None:
                line += f" key: {_payload(r.key)}"
            line += f" payload: {_payload(r.value)}"
        out.write(line + "\n")
    return undecodable


# ---------------------------------------------------------------- index files


def _index_shape(path: Path, contents: IndexContents, out, err) -> int:
    """The parts of an index dump common to both kinds; returns the problems counted."""
    if contents.zero_entries:
        out.write(f"Found {contents.zero_entries} zero entries (preallocated space) "
                  f"at the end of {path.name}\n")
    return _tail_and_problems(path, contents.trailing_bytes, contents.problems, out, err)


def _tail_and_problems(path: Path, trailing_bytes: int, problems: list[tuple[int, str]], out, err) -> int:
    """An index file's bytes after its last whole entry and its entries the broker would not
    trust (every index kind, .txnindex too); returns the problems counted."""
    invalid = 0
    if trailing_bytes:
        invalid += 1
        out.write(f"Found {trailing_bytes} invalid bytes at the end of {path.name}\n")
        _invalid_tail(path, trailing_bytes, path.stat().st_size - trailing_bytes, err)
    if problems:
        invalid += len(problems)
        err.write(f"Sanity check failed for {path} (the broker rebuilds such an index from the log):\n")
        for n, what in problems:
            err.write(f"  entry {n}: {what}\n")
    return invalid


def _open_log(path: Path, err) -> SegmentReader | None:
    log = _sibling(path, LOG_SUFFIX)
    try:
        return SegmentReader(str(log), base_offset_of(str(path)) or 0, str(_sibling(path, INDEX_SUFFIX)))
    except FileNotFoundError:
        err.write(f"No {log.name} beside {path}: entries not checked against the log\n")
        return None


def dump_index(path: Path, out, err) -> int:
    out.write(f"Dumping {path}\n")
    contents = parse_offset_index(path.read_bytes(), base_offset_of(str(path)) or 0)
    entries = contents.entries
    if not entries and not contents.trailing_bytes:
        out.write(f"{path} is empty.\n")
        return 0
    for offset, pos in entries:
        out.write(f"offset: {offset} position: {pos}\n")
    invalid = _index_shape(path, contents, out, err)
    reader = _open_log(path, err)
    if reader is not None:
        with reader:
            mismatches = check_offset_index(reader, entries)
        if mismatches:
            invalid += len(mismatches)
            err.write(f"Mismatches in :{path}\n")  # sic: Kafka's wording
            for m in mismatches:
                err.write(f"  Index offset: {m.indexed}, log offset: {m.found}\n")
    return invalid


def dump_time_index(path: Path, out, err) -> int:
    out.write(f"Dumping {path}\n")
    contents = parse_time_index(path.read_bytes(), base_offset_of(str(path)) or 0)
    entries = contents.entries
    if not entries and not contents.trailing_bytes:
        out.write(f"{path} is empty.\n")
        return 0
    for ts, offset in entries:
        out.write(f"timestamp: {ts} offset: {offset}\n")
    invalid = _index_shape(path, contents, out, err)
    reader = _open_log(path, err)
    if reader is not None:
        with reader:
            errors = check_time_index(reader, entries)
        if errors.timestamps:
            err.write(f"Found timestamp mismatch in :{path}\n")
            for m in errors.timestamps:
                err.write(f"  Index timestamp: {m.indexed}, log timestamp: {m.found}\n")
        if errors.offsets:
            err.write("The following indexed offsets are not found in the log.\n")
            for m in errors.offsets:
                err.write(f"Indexed offset: {m.indexed}, found log offset: {m.found}\n")
        invalid += len(errors.timestamps) + len(errors.offsets)
    return invalid


def dump_txn_index(path: Path, out, err) -> int:
    out.write(f"Dumping {path}\n")
    contents = parse_txn_index(path.read_bytes(), base_offset_of(str(path)) or 0)
    if not contents.entries and not contents.trailing_bytes:
        out.write(f"{path} is empty.\n")
        return 0
    for version, t in contents.entries:
        out.write(f"version: {version} producerId: {t.producer_id} firstOffset: {t.first_offset} "
                  f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}\n")
    invalid = _tail_and_problems(path, contents.trailing_bytes, contents.problems, out, err)
    reader = _open_log(path, err)
    if reader is not None:
        with reader:
            mismatches = check_txn_index(reader, [t for _, t in contents.entries])
        if mismatches:
            invalid += len(mismatches)
            err.write(f"Aborted transactions with no ABORT marker at their lastOffset in :{path}\n")
            for m in mismatches:
                err.write(f"  producerId: {m.txn.producer_id} lastOffset: {m.txn.last_offset}, "
                          f"log holds: {m.found}\n")
    return invalid


def dump_snapshot(path: Path, out, err) -> int:
    out.write(f"Dumping {path}\n")
    try:
        entries = decode_snapshot(path.read_bytes(), base_offset_of(str(path)))
    except CorruptSnapshot as exc:
        err.write(f"Corrupt producer snapshot {path}: {exc}\n")
        return 1
    for e in entries:
        line = (f"producerId: {e.producer_id} producerEpoch: {e.epoch} "
                f"coordinatorEpoch: {e.coordinator_epoch} "
                f"currentTxnFirstOffset: {e.current_txn_first_offset} lastTimestamp: {e.last_timestamp}")
        if e.batches:
            # Kafka's snapshot keeps one batch per producer, the newest: print that one
            # in its format, and ours (up to 5 retained) below it.
            line += _batch_fields(e.batches[-1])
        out.write(line + "\n")
        if len(e.batches) > 1:
            for b in e.batches:
                out.write("|" + _batch_fields(b) + "\n")
    return 0


def _batch_fields(b) -> str:
    return (f" firstSequence: {b.first_seq} lastSequence: {b.last_seq} lastOffset: {b.last_offset} "
            f"offsetDelta: {b.last_offset - b.first_offset} timestamp: {b.timestamp}")


# ------------------------------------------------------------------------ CLI


def dump_file(path: Path, print_data: bool, out=None, err=None, decoder: Decoder | None = None) -> int:
    """Dump one file of a known kind; returns how many invalid things it holds."""
    out, err = out or sys.stdout, err or sys.stderr
    os.close(os.open(path, os.O_RDONLY))  # unreadable: one line from main, before any output
    kind = segment_file_kind(str(path))
    if kind == LOG_SUFFIX:
        return dump(path, print_data, out, err, decoder)
    # A kind that is None (not a segment file) is a KeyError, as for any unknown kind.
    dumpers: dict[str | None, Callable[[Path, Any, Any], int]] = {
        ".index": dump_index, ".timeindex": dump_time_index,
        ".txnindex": dump_txn_index, ".snapshot": dump_snapshot}
    dumper = dumpers[kind]
    return dumper(path, out, err)


class ArgumentProblem(Exception):
    pass


def resolve(arg: Path) -> list[Path]:
    """The files one argument names: itself, or a directory's segment files in offset order."""
    try:
        is_dir = arg.is_dir()
        if not is_dir and not arg.exists():
            raise ArgumentProblem(f"{arg}: no such file or directory")
        if is_dir:
            files = segment_file_list(str(arg))
            if not files:
                has_subdirs = any(p.is_dir() for p in arg.iterdir())
                hint = (f"; give a partition directory such as {arg}/<topic>-<partition>" if has_subdirs
                        else "")
                raise ArgumentProblem(f"{arg}: a directory with no segment files{hint}")
            return [Path(f) for f in files]
    except OSError as exc:
        raise ArgumentProblem(f"{arg}: {exc.strerror or exc}") from None
    if segment_file_kind(str(arg)) is None:
        raise ArgumentProblem(f"{arg}: not a segment file (expected {', '.join(SEGMENT_FILE_KINDS)} "
                              f"or a partition directory)")
    return [arg]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Print segment files (.log, .index, .timeindex, .txnindex, .snapshot) as Kafka's "
                    "kafka-dump-log.sh does; a directory dumps each of its segment files in offset order. "
                    "Exit status: 0 all valid, 1 invalid data found, 2 a file could not be read.")
    p.add_argument("files", nargs="*", type=Path, metavar="FILE|DIR")
    p.add_argument("--files", dest="file_list", default="", metavar="FILE1,FILE2",
                   help="comma-separated files, as kafka-dump-log.sh takes them")
    p.add_argument("--print-data-log", action="store_true",
                   help="also print every record: offset, timestamp, sizes, key and payload")
    p.add_argument("--share-group-state-decoder", action="store_true",
                   help="print the records of __share_group_state (ShareSnapshot, ShareUpdate) "
                        "as Kafka's decoder does: key and value as JSON; implies --print-data-log")
    ns = p.parse_args(argv)
    args = list(ns.files) + [Path(f) for f in ns.file_list.split(",") if f]
    if not args:
        p.error("give at least one FILE or DIR (or --files)")
    from ..core import logs
    logs.configure("warning")  # stdout carries the dump; diagnostics go to stderr
    try:
        paths = [f for arg in args for f in resolve(arg)]
    except ArgumentProblem as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    decoder: Decoder | None = None
    if ns.share_group_state_decoder:
        from .coordinator_json import share_group_state_record
        decoder = share_group_state_record
    bad = unreadable = 0
    try:
        for f in paths:
            try:
                bad += dump_file(f, ns.print_data_log, decoder=decoder)
            except BrokenPipeError:
                raise
            except FileNotFoundError:
                # A running broker deletes segments (retention) and old snapshots: a race
                # with the listing, not damage.
                print(f"{PROG}: {f}: deleted since it was listed", file=sys.stderr)
            except OSError as exc:
                # Vanished (retention) or unreadable since it was listed: say so, go on.
                unreadable += 1
                print(f"{PROG}: {f}: {exc.strerror or exc}", file=sys.stderr)
            sys.stdout.flush()
    except BrokenPipeError:
        # `dump-log ... | head` closed the pipe: not an error of ours.
        _silence_stdout()
        return 0
    return 2 if unreadable else 1 if bad else 0


def _silence_stdout() -> None:
    # Python would report the broken pipe again when it flushes stdout at exit.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
