"""The transaction coordinator as the broker sees it: the core plus its I/O.

:class:`~.machine.TransactionMachine` holds the state and makes every move; this
adapter gives it its collaborators (the ``__transaction_state`` appender, the marker
writer, the clock, the crash points), loads it at start-up from the topic (after a
snapshot, when one can be trusted) and captures its snapshots. The periodic timeout
and expiry checks are scheduled by :mod:`minibroker.background.loops`; the requests come
from ``handlers/txn.py``, which call the methods below.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Iterator

from minibroker_protocol import txn_log as tl
from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.topics import TRANSACTION_STATE_TOPIC
from minibroker_storage.lazylog import get_logger
from minibroker_storage.manager import LogManager

from ...core.clock import SYSTEM_CLOCK, Clock
from ...core.crash_points import NO_CRASH_POINTS, CrashPoints
from .. import replay, snapshot
from .machine import MAX_EPOCH, ProducerIds, TransactionMachine, TxnError, TxnMetadata
from .markers import MarkerWriter, MarkerWritten
from .state import TxnState
from .timeline import NO_TIMELINE, UNKNOWN_REQUESTER, Requester, Timeline

__all__ = ["MAX_EPOCH", "TransactionCoordinator", "TxnError", "TxnMetadata", "TxnState"]

log = get_logger("minibroker.txn")

_U16 = struct.Struct(">H")

# Creates __transaction_state on first use; the partition's log.
InternalLog = Callable[[str, int], object]


class TransactionCoordinator:
    def __init__(self, *, logs: LogManager, internal_log: InternalLog,
                 producer_ids: ProducerIds, data_dir: str | os.PathLike,
                 marker_written: MarkerWritten, max_timeout_ms: int, id_expiration_ms: int,
                 clock: Clock = SYSTEM_CLOCK, crash: CrashPoints = NO_CRASH_POINTS,
                 transaction_version: Callable[[], int] = lambda: 0,
                 timeline: Timeline = NO_TIMELINE) -> None:
        self.logs = logs
        self.timeline = timeline
        self.internal_log = internal_log
        self.data_dir = data_dir
        self.clock = clock
        self.write_markers = MarkerWriter(logs, marker_written, crash)
        self.machine = TransactionMachine(
            clock=clock, append=self._append, producer_ids=producer_ids,
            markers=self.write_markers_told, crash=crash, max_timeout_ms=max_timeout_ms,
            id_expiration_ms=id_expiration_ms,
            snapshots=snapshot.Schedule(crash.snapshot_records),
            transaction_version=transaction_version, timeline=timeline)

    def write_markers_told(self, pid: int, epoch: int, commit: bool, coordinator_epoch: int,
                           partitions: list[tuple[str, int]], by: str | None = None
                           ) -> dict[tuple[str, int], ErrorCode]:
        """Write markers, each told to the timeline with its offsets: under the transactional
        id ``pid`` belongs to, and for an operator's abort (``by``) under the producer id too."""
        errors = self.write_markers(pid, epoch, commit, coordinator_epoch, partitions)
        tid = self.machine.transactional_id_of(pid)
        for topic, partition, first, offset in self.write_markers.written:
            fields = dict(topic=topic, partition=partition, offset=offset, first_offset=first,
                          commit=commit, producer_id=pid, epoch=epoch, by=by)
            if tid is not None:
                self.timeline.record(tid, "marker", **fields)
            if by is not None:
                self.timeline.record_producer(pid, "marker", **fields)
        return errors

    def _log(self):
        return self.internal_log(TRANSACTION_STATE_TOPIC, 0)

    def _append(self, batch: bytes) -> int:
        return self._log().append(batch, origin="coordinator").base_offset

    # -- what handlers and the broker read ----------------------------------------------
    @property
    def txns(self) -> dict[str, TxnMetadata]:
        return self.machine.txns

    @property
    def snapshots(self) -> snapshot.Schedule:
        return self.machine.snapshots

    def describe(self, tid: str) -> TxnMetadata | None:
        """The live metadata of ``tid``; None when unknown or expired."""
        meta = self.machine.txns.get(tid)
        return None if meta is None or meta.state == TxnState.DEAD else meta

    def live(self) -> Iterator[tuple[str, TxnMetadata]]:
        """Every known transactional id, by id."""
        for tid, meta in sorted(self.machine.txns.items()):
            if meta.state != TxnState.DEAD:
                yield tid, meta

    # -- requests -----------------------------------------------------------------------
    def init_producer_id(self, tid: str, timeout_ms: int, expected_pid: int = -1,
                         expected_epoch: int = -1, who: Requester = UNKNOWN_REQUESTER) -> tuple[int, int]:
        return self.machine.init_producer_id(tid, timeout_ms, expected_pid, expected_epoch, who)

    def add_partitions(self, tid: str, pid: int, epoch: int, partitions: list[tuple[str, int]],
                       who: Requester = UNKNOWN_REQUESTER, group: str | None = None,
                       client_tv: int | None = None) -> None:
        self.machine.add_partitions(tid, pid, epoch, partitions, who, group, client_tv)

    def verify_partitions(self, tid: str, pid: int, epoch: int,
                          partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        return self.machine.verify_partitions(tid, pid, epoch, partitions)

    def end_txn(self, tid: str, pid: int, epoch: int, commit: bool,
                client_tv: int = 0, who: Requester = UNKNOWN_REQUESTER) -> tuple[int, int]:
        return self.machine.end_txn(tid, pid, epoch, commit, client_tv, who)

    def verify_produce(self, pid: int, epoch: int, topic: str, partition: int,
                       add: bool = False) -> ErrorCode | None:
        return self.machine.verify_produce(pid, epoch, topic, partition, add)

    # -- timers (scheduled by minibroker.background.loops) ----------------------------------------
    def abort_timed_out(self, now: int | None = None) -> int:
        return self.machine.abort_timed_out(now)

    def expire_ids(self, now: int | None = None) -> int:
        return self.machine.expire_ids(now)

    # -- start-up -----------------------------------------------------------------------
    def load(self) -> None:
        """Replay ``__transaction_state`` (after the snapshot, when one can be trusted);
        finish what was prepared before a crash."""
        plog = (self.logs.get_log(TRANSACTION_STATE_TOPIC, 0)
                if self.logs.topic(TRANSACTION_STATE_TOPIC) is not None else None)
        if plog is None:
            return
        m = self.machine
        t0 = time.perf_counter()
        start = self._load_snapshot(plog)
        records = skipped = 0
        skips = replay.Skips()
        for header, recs in replay.batches(plog, TRANSACTION_STATE_TOPIC, 0, start,
                                           "txn_log.record_skipped", skips):
            if header.is_control:
                # A marker has no business here (an AddPartitionsToTxn of this topic used to
                # put one here); it carries no coordinator state.
                log.warning("txn_log.record_skipped", topic=TRANSACTION_STATE_TOPIC, partition=0,
                            offset=header.base_offset, reason="control batch in the transaction log")
                skipped += 1
                continue
            for rec in recs:
                records += 1
                reason = m.replay(rec.key, rec.value)
                if reason is not None:
                    skipped += 1
                    log.warning("txn_log.record_skipped", topic=TRANSACTION_STATE_TOPIC,
                                partition=0, offset=rec.offset, reason=reason)
        m.applied_end = plog.log_end_offset
        if records:
            # what was replayed is history the next snapshot should cover
            m.snapshots.wrote(records)
        rolled = m.roll_forward()
        log.info("txn.coordinator_loaded", transactional_ids=len(self.txns), records=records,
                 replayed_from=start, skipped=skipped + skips.count, rolled_forward=rolled,
                 ms=round((time.perf_counter() - t0) * 1000, 1))

    # -- snapshots ---------------------------------------------------------------
    SNAPSHOT_FILE = "transaction-coordinator.snapshot"

    def snapshot_path(self) -> str:
        return os.path.join(self.data_dir, self.SNAPSHOT_FILE)

    def _load_snapshot(self, plog) -> int:
        """Load the snapshot if it can be trusted; the offset the replay starts from."""
        info = self.logs.topic(TRANSACTION_STATE_TOPIC)
        assert info is not None  # the caller holds its log
        path = self.snapshot_path()
        snap = snapshot.load(path, "txn", info.topic_id, {0: plog})
        if snap is None:
            return plog.log_start_offset
        bad = 0
        for entry in snap.entries:
            (n,) = _U16.unpack_from(entry, 0)
            if self.machine.replay(entry[2:2 + n], entry[2 + n:]) is not None:
                bad += 1
        if bad:
            # The checksum held, so this is a broker bug, not damage: trust the log.
            log.error("txn.snapshot_ignored", path=path, reason=f"{bad} entries do not decode",
                      consequence="full replay")
            self.machine.reset()
            return plog.log_start_offset
        log.info("txn.snapshot_loaded", path=path, offset=snap.offsets[0],
                 transactional_ids=len(self.txns))
        return snap.offsets[0]

    def capture_snapshot(self) -> tuple[str, Callable[[], bytes], dict] | None:
        """The state now and the offset it covers, encoded; the schedule starts over.
        Synchronous on the loop, so no transition is half-applied in it."""
        info = self.logs.topic(TRANSACTION_STATE_TOPIC)
        plog = self.logs.get_log(TRANSACTION_STATE_TOPIC, 0) if info is not None else None
        if info is None or plog is None:
            return None
        offset = plog.log_end_offset
        if offset != self.machine.applied_end:
            # Something other than this coordinator appended to its log: the state in
            # memory is not what a replay would build, so it must not claim that offset.
            log.warning("txn.snapshot_skipped", log_end_offset=offset,
                        applied_end=self.machine.applied_end,
                        reason="records in the log this coordinator did not write")
            self.machine.snapshots.taken()
            return None
        # Only the values are taken here (metadata objects change); encoding them is
        # left to the writer's thread, off the loop.
        values = self.machine.snapshot_values()

        def encode() -> bytes:
            entries = []
            for (tid, pid, epoch, timeout, state, parts, last_update, start, previous_pid,
                 next_pid, client_tv) in values:
                key = tl.encode_key(tid)
                value = tl.TxnLogValue(pid, epoch, timeout, state, tuple(sorted(parts)),
                                       last_update, start, previous_pid, next_pid, client_tv)
                # v1 always: the snapshot is minibroker's own file and must keep every field
                entries.append(_U16.pack(len(key)) + key + tl.encode_value(value, version=1))
            return snapshot.encode(info.topic_id, {0: offset}, entries)

        self.machine.snapshots.taken()
        return self.snapshot_path(), encode, {"offset": offset, "transactional_ids": len(values)}
