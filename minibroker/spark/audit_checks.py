"""The exactly-once invariants of one partition's log, checked from its files alone.

One pass over the batch headers (records are decoded only for control batches) finds:

- ``duplicate``: a (producer id, epoch, sequence) written twice - a retried batch the
  broker appended again instead of answering with the first copy's offset;
- ``sequence_gap``: a producer's sequence numbers skip within one epoch (lost batches);
- ``epoch_regression``: a batch from an epoch older than one already in the log (a
  fenced zombie got through);
- ``missing_marker``: transactional data whose transaction was decided (by the
  coordinator's ``__transaction_state``, or by a newer epoch of the same producer) but
  whose COMMIT/ABORT marker is not in this partition; also a decided transaction with no
  marker at all here;
- ``aborted_visible``: records of an aborted transaction that the transaction index does
  not cover, so a read_committed consumer (which filters through the index) would see them;
- ``committed_hidden``: an index entry that covers records not aborted;
- ``offset_gap`` / ``offset_out_of_order``: offsets that skip or go backwards;
- ``corrupt_batch``: bytes that are not a valid batch inside a sealed segment.

Warnings, not failures: ``open_transaction`` (undecided data at the tail, normal on a
live log), ``torn_tail`` (an incomplete last batch: the broker cuts it when it restarts),
``txn_index_missing``.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import asdict, dataclass, field

from minibroker_protocol.batch import BatchHeader
from minibroker_protocol.records import CONTROL_ABORT, CONTROL_COMMIT
from minibroker_storage.errors import InvalidRecord
from minibroker_storage.offline import control_type, iter_batches, read_txn_index, segments, walk_segment
from minibroker_storage.txn_index import OngoingTxns

from .coordinator_log import PartitionExpectations

FAILURE = "failure"
WARNING = "warning"
_SEQ_MOD = 2**31
_TAIL_PROBE = 4096
_SEQ_WINDOW = 64


@dataclass
class Finding:
    kind: str
    severity: str
    topic: str
    partition: int
    offset: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    sequence: int = -1
    detail: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class PartitionReport:
    topic: str
    partition: int
    segments: int = 0
    batches: int = 0
    records: int = 0
    data_records: int = 0
    control_batches: int = 0
    producers: int = 0
    committed_txns: int = 0
    aborted_txns: int = 0
    open_txns: int = 0
    log_start: int = -1
    log_end: int = 0
    last_stable: int = 0
    bytes: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(f.severity == FAILURE for f in self.findings)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ok"] = self.ok
        return d


@dataclass
class _Txn:
    first_offset: int
    epoch: int
    records: int = 0
    prev_data: int = -1  # last offset of the producer's data before this transaction, -1: none


@dataclass
class _Seq:
    last: int
    # base sequence -> offset of the last _SEQ_WINDOW batches: the ones a retry can repeat
    # (Kafka's broker keeps 5 per producer; older repeats are caught by the modular test).
    seen: dict[int, int] = field(default_factory=dict)


class _Auditor:
    def __init__(self, topic: str, partition: int, expect: PartitionExpectations,
                 coordinator_known: bool) -> None:
        self.r = PartitionReport(topic, partition)
        self.expect = expect
        self.coordinator_known = coordinator_known
        self.next_offset: int | None = None
        self.max_epoch: dict[int, int] = {}
        self.seqs: dict[tuple[int, int], _Seq] = {}
        self.open: dict[int, _Txn] = {}
        self.last_data: dict[int, int] = {}  # producer id -> last offset of its data batches
        self.markers: Counter = Counter()  # (producer id, epoch, commit) -> markers in the log
        # pid, epoch, first, marker, records, last offset of the pid's data before the txn
        self.aborted: list[tuple[int, int, int, int, int, int]] = []
        self.first_marker_timestamp = -1  # broker time of the first marker in the log

    def add(self, kind: str, severity: str = FAILURE, **kw) -> None:
        self.r.findings.append(Finding(kind, severity, self.r.topic, self.r.partition, **kw))

    # -- per batch ----------------------------------------------------------------------
    def batch(self, h: BatchHeader, batch) -> None:
        r = self.r
        if r.log_start < 0:
            r.log_start = h.base_offset
        self._offsets(h)
        r.batches += 1
        r.records += h.record_count
        r.bytes += h.size
        r.log_end = max(r.log_end, h.last_offset + 1)
        pid = h.producer_id
        if pid >= 0:
            top = self.max_epoch.get(pid, -1)
            if h.producer_epoch < top:
                self.add("epoch_regression", offset=h.base_offset, producer_id=pid,
                         producer_epoch=h.producer_epoch,
                         detail=f"epoch {h.producer_epoch} written after epoch {top} of the same producer")
            else:
                self.max_epoch[pid] = h.producer_epoch
        if h.is_control:
            r.control_batches += 1
            self._marker(h, batch)
            return
        r.data_records += h.record_count
        if pid >= 0 and h.base_sequence >= 0:
            self._sequence(h)
        if h.is_transactional:
            self._txn_data(h)

    def _offsets(self, h: BatchHeader) -> None:
        expected = self.next_offset
        if expected is not None:
            if h.base_offset < expected:
                self.add("offset_out_of_order", offset=h.base_offset,
                         detail=f"batch {h.base_offset}..{h.last_offset} starts below offset {expected}, "
                                f"the end of the batch before it")
            elif h.base_offset > expected:
                self.add("offset_gap", offset=expected,
                         detail=f"offsets {expected}..{h.base_offset - 1} are missing")
        if h.last_offset_delta + 1 != h.record_count:
            self.add("corrupt_batch", offset=h.base_offset,
                     detail=f"batch claims {h.record_count} records over {h.last_offset_delta + 1} offsets")
        self.next_offset = max(h.last_offset + 1, expected or 0)

    def _sequence(self, h: BatchHeader) -> None:
        key = (h.producer_id, h.producer_epoch)
        s = self.seqs.get(key)
        if s is None:
            if h.base_sequence != 0 and self.r.log_start == 0:
                self.add("sequence_gap", offset=h.base_offset, producer_id=h.producer_id,
                         producer_epoch=h.producer_epoch, sequence=h.base_sequence,
                         detail=f"epoch {h.producer_epoch} starts at sequence {h.base_sequence}, not 0")
            self.seqs[key] = _Seq(h.last_sequence, {h.base_sequence: h.base_offset})
            return
        if h.base_sequence in s.seen:
            self.add("duplicate", offset=h.base_offset, producer_id=h.producer_id,
                     producer_epoch=h.producer_epoch, sequence=h.base_sequence,
                     detail=f"sequences {h.base_sequence}..{h.last_sequence} at offset {h.base_offset} "
                            f"were already written at offset {s.seen[h.base_sequence]}")
            return
        want = (s.last + 1) % _SEQ_MOD
        if h.base_sequence != want:
            behind = (want - h.base_sequence) % _SEQ_MOD < _SEQ_MOD // 2
            self.add("duplicate" if behind else "sequence_gap", offset=h.base_offset,
                     producer_id=h.producer_id, producer_epoch=h.producer_epoch, sequence=h.base_sequence,
                     detail=(f"sequences {h.base_sequence}..{h.last_sequence} overlap ones already written "
                             f"(next expected {want})") if behind else
                            f"sequence {h.base_sequence} follows {s.last}: {want}.."
                            f"{(h.base_sequence - 1) % _SEQ_MOD} were never written")
            if behind:
                return
        s.seen[h.base_sequence] = h.base_offset
        if len(s.seen) > _SEQ_WINDOW:
            del s.seen[next(iter(s.seen))]  # the oldest (dicts keep insertion order)
        s.last = h.last_sequence

    def _txn_data(self, h: BatchHeader) -> None:
        pid = h.producer_id
        txn = self.open.get(pid)
        if txn is not None and h.producer_epoch > txn.epoch:
            self.add("missing_marker", offset=txn.first_offset, producer_id=pid, producer_epoch=txn.epoch,
                     detail=f"the transaction from offset {txn.first_offset} ({txn.records} records) "
                            f"has no marker, yet epoch {h.producer_epoch} writes at offset {h.base_offset}")
            txn = None
        if txn is None:
            txn = self.open[pid] = _Txn(h.base_offset, h.producer_epoch,
                                        prev_data=self.last_data.get(pid, -1))
        txn.records += h.record_count
        self.last_data[pid] = h.last_offset

    def _marker(self, h: BatchHeader, batch) -> None:
        pid = h.producer_id
        try:
            ctype = control_type(batch)
        except InvalidRecord as e:
            self.add("corrupt_batch", offset=h.base_offset, producer_id=pid, detail=str(e))
            return
        if ctype is None:
            return  # an empty control batch: what Kafka's cleaner leaves
        if self.first_marker_timestamp < 0:
            self.first_marker_timestamp = h.max_timestamp
        txn = self.open.pop(pid, None)
        if txn is not None and h.producer_epoch < txn.epoch:
            self.add("epoch_regression", offset=h.base_offset, producer_id=pid,
                     producer_epoch=h.producer_epoch,
                     detail=f"marker epoch {h.producer_epoch} ends a transaction of epoch {txn.epoch}")
        commit = ctype == CONTROL_COMMIT
        self.markers[(pid, h.producer_epoch, commit)] += 1
        if commit:
            self.r.committed_txns += 1
        elif ctype == CONTROL_ABORT:
            self.r.aborted_txns += 1
            first = txn.first_offset if txn is not None else h.base_offset
            prev = txn.prev_data if txn is not None else self.last_data.get(pid, -1)
            self.aborted.append((pid, h.producer_epoch, first, h.base_offset,
                                 txn.records if txn else 0, prev))

    # -- per segment ------------------------------------------------------------------------
    def segment_tail(self, path: str, stop: int, last_segment: bool) -> None:
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                probe = os.pread(f.fileno(), _TAIL_PROBE, stop)
        except FileNotFoundError:
            return  # deleted by retention meanwhile
        if not probe.strip(b"\0"):
            return  # preallocated space of the active segment
        if last_segment:
            self.add("torn_tail", WARNING, offset=self.next_offset or -1,
                     detail=f"{os.path.basename(path)}: {size - stop} bytes after position {stop} are not a "
                            f"complete valid batch (the broker cuts them when it recovers)")
        else:
            self.add("corrupt_batch", offset=self.next_offset or -1,
                     detail=f"{os.path.basename(path)}: invalid data at position {stop} of a sealed "
                            f"segment ({size - stop} bytes not read)")

    # -- at the end ---------------------------------------------------------------------------
    def finish(self, index_entries, index_complete: bool, recheck=None) -> PartitionReport:
        """``recheck(open)``: for the open transactions ``{pid: _Txn}`` the coordinator did
        not list as undecided, the pids that are undecided or decided with their marker
        written after all (asked after the walk; see audit_partition)."""
        r = self.r
        r.producers = len(self.max_epoch)
        r.open_txns = len(self.open)
        # The LSO as the broker computes it, from the transactions this walk left open.
        open_txns = OngoingTxns({pid: t.first_offset for pid, t in self.open.items()})
        r.last_stable = open_txns.last_stable(r.log_end, max(r.log_start, 0))
        suspects = {pid: t for pid, t in self.open.items() if pid not in self.expect.undecided}
        cleared = recheck(suspects) if recheck is not None and suspects and self.coordinator_known else set()
        for pid, txn in sorted(self.open.items()):
            if pid in self.expect.undecided or not self.coordinator_known or pid in cleared:
                self.add("open_transaction", WARNING, offset=txn.first_offset, producer_id=pid,
                         producer_epoch=txn.epoch,
                         detail=f"{txn.records} records from offset {txn.first_offset} await a marker "
                                f"(the LSO is {r.last_stable})")
            else:
                self.add("missing_marker", offset=txn.first_offset, producer_id=pid,
                         producer_epoch=txn.epoch,
                         detail=f"{txn.records} records from offset {txn.first_offset} have no marker and "
                                f"the coordinator has no open transaction for producer {pid} here")
        self._coordinator_markers()
        self._txn_index(index_entries, index_complete)
        return r

    def _coordinator_markers(self) -> None:
        # A log that lost its head to retention holds only the markers of the later decisions.
        # Which ones is told by broker time, never by the data's CreateTime (a producer's
        # clock or event time): a marker is stamped when the broker writes it, after the
        # coordinator prepared the decision (PrepareCommit/PrepareAbort's last_update_ms), so
        # a decision prepared after the first retained marker was written has its marker
        # after it, in the retained log. With no marker left, no decision can be required.
        if self.r.log_start > 0:
            if self.first_marker_timestamp < 0:
                return
            wanted = Counter((m.producer_id, m.epoch, m.commit) for m in self.expect.markers
                             if m.decided_ms > self.first_marker_timestamp)
        else:
            wanted = Counter((m.producer_id, m.epoch, m.commit) for m in self.expect.markers)
        have = self.markers
        # More markers than decisions are allowed: a roll-forward after a crash rewrites them.
        for (pid, epoch, commit), n in sorted(wanted.items()):
            if have[(pid, epoch, commit)] < n:
                kind = "COMMIT" if commit else "ABORT"
                self.add("missing_marker", producer_id=pid, producer_epoch=epoch,
                         detail=f"the coordinator completed {n} transaction(s) of producer {pid} epoch "
                                f"{epoch} with {kind} that include this partition, but the log holds "
                                f"{have[(pid, epoch, commit)]} such {kind} marker(s)")

    def _txn_index(self, entries, complete: bool) -> None:
        if not complete:
            self.add("txn_index_missing", WARNING,
                     detail="a segment's .txnindex is missing or malformed (the broker rebuilds it on "
                            "restart; until then read_committed fetches may return aborted records)")
        by_key = {(e.producer_id, e.last_offset): e for e in entries}
        for pid, epoch, first, marker, records, prev in self.aborted:
            e = by_key.pop((pid, marker), None)
            if e is None:
                if complete and records:
                    self.add("aborted_visible", offset=first, producer_id=pid, producer_epoch=epoch,
                             detail=f"{records} aborted records from offset {first} (ABORT marker at "
                                    f"{marker}) are not in the transaction index")
            elif e.first_offset > first:
                self.add("aborted_visible", offset=first, producer_id=pid, producer_epoch=epoch,
                         detail=f"the index entry of the transaction aborted at {marker} starts at "
                                f"{e.first_offset}, after its first record at {first}")
            elif e.first_offset <= prev:
                # An entry starting before the transaction's first record in the log is only
                # wrong when it reaches the producer's earlier records: when retention removed
                # the transaction's head, the entry rightly starts below the log start.
                self.add("committed_hidden", offset=e.first_offset, producer_id=pid, producer_epoch=epoch,
                         detail=f"the index entry of the transaction aborted at {marker} starts at "
                                f"{e.first_offset}, before its first record at {first}, and covers the "
                                f"producer's records up to offset {prev} that it did not abort")
        for (pid, marker), e in sorted(by_key.items()):
            if marker < self.r.log_end:
                self.add("committed_hidden", offset=e.first_offset, producer_id=pid,
                         detail=f"the transaction index lists an aborted transaction {e.first_offset}.."
                                f"{marker} but the log holds no ABORT marker of producer {pid} at {marker}")


def audit_partition(path: str, topic: str, partition: int,
                    expect: PartitionExpectations | None = None,
                    coordinator_known: bool = False, data_dir: str | None = None) -> PartitionReport:
    """Check one partition directory; never writes to it.

    ``expect`` was read from ``__transaction_state`` before the walk; on a live data dir a
    transaction may begin after that read. So an open transaction at the tail that
    ``expect`` does not list as undecided is checked again after the walk (``data_dir``
    given): ``__transaction_state`` is read again, and the partition is walked again from
    the transaction's first offset. It is a ``missing_marker`` only if the coordinator
    still does not list it as undecided and no marker of the producer followed it. The
    coordinator persists a decision before writing markers and the markers before
    completing, so a transaction decided by the time of the second read has its markers
    in the log by the time of the second walk."""
    a = _Auditor(topic, partition, expect or PartitionExpectations(), coordinator_known)
    segs = segments(path)
    a.r.segments = len(segs)
    entries = []
    index_complete = True
    for n, seg in enumerate(segs):
        stop = 0
        for header, batch in walk_segment(seg, position=0):
            if header.position == 0 and header.base_offset < seg.base_offset:
                a.add("offset_out_of_order", offset=header.base_offset,
                      detail=f"segment {os.path.basename(seg.log)} holds offset {header.base_offset}, "
                             f"below its base offset {seg.base_offset}")
            a.batch(header, batch)
            stop = header.end
        a.segment_tail(seg.log, stop, n == len(segs) - 1)
        found = read_txn_index(seg.txn_index)
        if found is None:
            index_complete = False
        else:
            entries.extend(found)
    recheck = None
    if data_dir is not None:
        def recheck(suspects: dict[int, _Txn]) -> set[int]:
            from .coordinator_log import read_coordinator_log

            undecided = read_coordinator_log(data_dir).for_partition((topic, partition)).undecided
            cleared = set(suspects) & undecided
            pending = {pid: t for pid, t in suspects.items() if pid not in cleared}
            if pending:
                for header, batch, _seg in iter_batches(path, min(t.first_offset for t in pending.values())):
                    t = pending.get(header.producer_id)
                    if (t is not None and header.is_control and header.base_offset > t.first_offset
                            and header.producer_epoch >= t.epoch):
                        try:
                            if control_type(batch) is not None:
                                cleared.add(header.producer_id)
                        except InvalidRecord:
                            pass
            return cleared
    return a.finish(entries, index_complete, recheck)
