"""The transaction coordinator (Kafka's TransactionCoordinator, transaction.version 0/1).

State lives in memory and every transition is appended to the internal
``__transaction_state`` topic before it takes effect, so a restart replays
the topic and rolls forward what was prepared. Handlers run on the one event
loop and every step here is synchronous, so a transition is never observed
half-done by another request; markers are local appends.
"""

from __future__ import annotations

import os
import signal
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from minibroker_protocol import txn_log as tl
from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.records import build_batch, build_control_batch
from minibroker_protocol.topics import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
from minibroker_storage.errors import ProducerStateError, StorageError

from . import replay, snapshot

log = structlog.get_logger("minibroker.txn")

# Kafka: a producer epoch is exhausted one short of Short.MAX_VALUE, so that a
# fencing bump is always possible (TransactionMetadata.isEpochExhausted).
MAX_EPOCH = 32767
COORDINATOR_EPOCH = 0
_U16 = struct.Struct(">H")

_ALLOWED_FROM = {
    tl.EMPTY: {tl.EMPTY, tl.COMPLETE_COMMIT, tl.COMPLETE_ABORT},
    tl.ONGOING: {tl.ONGOING, tl.EMPTY, tl.COMPLETE_COMMIT, tl.COMPLETE_ABORT},
    tl.PREPARE_COMMIT: {tl.ONGOING},
    tl.PREPARE_ABORT: {tl.ONGOING, tl.PREPARE_EPOCH_FENCE},
    tl.COMPLETE_COMMIT: {tl.PREPARE_COMMIT},
    tl.COMPLETE_ABORT: {tl.PREPARE_ABORT},
    tl.DEAD: {tl.EMPTY, tl.COMPLETE_COMMIT, tl.COMPLETE_ABORT},
    tl.PREPARE_EPOCH_FENCE: {tl.ONGOING},
}


def now_ms() -> int:
    return int(time.time() * 1000)


# Fault injection for crash tests: MINIBROKER_CRASH_AT=txn.after_prepare (or
# txn.after_first_marker, txn.before_complete) makes the broker SIGKILL itself
# at that step of EndTxn, so tests can prove the roll-forward at start-up.
_CRASH_AT = os.environ.get("MINIBROKER_CRASH_AT", "")


def _crash_point(name: str) -> None:
    if _CRASH_AT == name:
        log.warning("fault_injection.crash", point=name)
        os.kill(os.getpid(), signal.SIGKILL)


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int = tl.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = 0
    # Before the last bump, so a retried InitProducerId gets the same answer; -1 after a
    # bump for a new instance or a fence (Kafka's lastProducerEpoch). In memory only, as
    # in Kafka's v0 log value.
    last_producer_epoch: int = -1
    last_producer_id: int = -1  # the id rotated away from (Kafka's lastProducerId)

    @property
    def state_name(self) -> str:
        return tl.STATE_NAMES[self.state]

    def value(self) -> tl.TxnLogValue:
        return tl.TxnLogValue(self.producer_id, self.producer_epoch, self.timeout_ms, self.state,
                              tuple(sorted(self.partitions)), self.last_update_ms, self.start_ms)


class TxnError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class TransactionCoordinator:
    def __init__(self, broker, *, max_timeout_ms: int, id_expiration_ms: int) -> None:
        self.broker = broker
        self.max_timeout_ms = max_timeout_ms
        self.id_expiration_ms = id_expiration_ms
        self.txns: dict[str, TxnMetadata] = {}
        self._by_pid: dict[int, str] = {}
        self.snapshots = snapshot.Schedule()
        self._applied_end = 0  # the log offset the in-memory state covers up to

    # -- persistence ---------------------------------------------------------------
    def _log(self):
        return self.broker.internal_log(TRANSACTION_STATE_TOPIC, 0)

    def _persist(self, meta: TxnMetadata, new_state: int, **changes) -> None:
        """Write the transition, then apply it; an illegal transition is a bug."""
        if meta.state not in _ALLOWED_FROM[new_state] and not (
            new_state == meta.state == tl.EMPTY
        ):
            raise AssertionError(
                f"illegal transaction transition {meta.state_name} -> {tl.STATE_NAMES[new_state]} "
                f"for {meta.transactional_id}")
        for k, v in changes.items():
            setattr(meta, k, v)
        meta.state = new_state
        meta.last_update_ms = now_ms()
        value = None if new_state == tl.DEAD else tl.encode_value(meta.value())
        batch = build_batch([{"key": tl.encode_key(meta.transactional_id), "value": value}])
        self._applied_end = self._log().append(batch, origin="coordinator").base_offset + 1
        self.snapshots.wrote()
        log.debug("txn.transition", transactional_id=meta.transactional_id,
                  producer_id=meta.producer_id, epoch=meta.producer_epoch, state=meta.state_name,
                  partitions=len(meta.partitions))

    def load(self) -> None:
        """Replay ``__transaction_state`` (after the snapshot, when one can be trusted);
        finish what was prepared before a crash."""
        plog = self.broker.existing_log(TRANSACTION_STATE_TOPIC, 0)
        if plog is None:
            return
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
                reason = self._replay(rec.key, rec.value)
                if reason is not None:
                    skipped += 1
                    log.warning("txn_log.record_skipped", topic=TRANSACTION_STATE_TOPIC,
                                partition=0, offset=rec.offset, reason=reason)
        self._applied_end = plog.log_end_offset
        if records:
            # what was replayed is history the next snapshot should cover
            self.snapshots.wrote(records)
        rolled = 0
        for meta in list(self.txns.values()):
            if meta.state in (tl.PREPARE_COMMIT, tl.PREPARE_ABORT):
                log.info("txn.roll_forward", transactional_id=meta.transactional_id,
                         producer_id=meta.producer_id, epoch=meta.producer_epoch,
                         state=meta.state_name, partitions=len(meta.partitions),
                         reason="prepared before the broker stopped")
                self._complete(meta)
                rolled += 1
            elif meta.state == tl.PREPARE_EPOCH_FENCE:
                self._abort(meta, reason="epoch fence interrupted by a restart", fenced=False)
                rolled += 1
        log.info("txn.coordinator_loaded", transactional_ids=len(self.txns), records=records,
                 replayed_from=start, skipped=skipped + skips.count, rolled_forward=rolled,
                 ms=round((time.perf_counter() - t0) * 1000, 1))

    # -- snapshots ---------------------------------------------------------------
    SNAPSHOT_FILE = "transaction-coordinator.snapshot"

    def snapshot_path(self) -> str:
        return os.path.join(self.broker.config.data_dir, self.SNAPSHOT_FILE)

    def _load_snapshot(self, plog) -> int:
        """Load the snapshot if it can be trusted; the offset the replay starts from."""
        info = self.broker.topic(TRANSACTION_STATE_TOPIC)
        path = self.snapshot_path()
        snap = snapshot.load(path, "txn", info.topic_id, {0: plog})
        if snap is None:
            return plog.log_start_offset
        bad = 0
        for entry in snap.entries:
            (n,) = _U16.unpack_from(entry, 0)
            if self._replay(entry[2:2 + n], entry[2 + n:]) is not None:
                bad += 1
        if bad:
            # The checksum held, so this is a broker bug, not damage: trust the log.
            log.error("txn.snapshot_ignored", path=path, reason=f"{bad} entries do not decode",
                      consequence="full replay")
            self.txns.clear()
            self._by_pid.clear()
            return plog.log_start_offset
        log.info("txn.snapshot_loaded", path=path, offset=snap.offsets[0],
                 transactional_ids=len(self.txns))
        return snap.offsets[0]

    def capture_snapshot(self) -> tuple[str, Callable[[], bytes], dict] | None:
        """The state now and the offset it covers, encoded; the schedule starts over.
        Synchronous on the loop, so no transition is half-applied in it."""
        info = self.broker.topic(TRANSACTION_STATE_TOPIC)
        if info is None:
            return None
        offset = self.broker.get_log(TRANSACTION_STATE_TOPIC, 0).log_end_offset
        if offset != self._applied_end:
            # Something other than this coordinator appended to its log: the state in
            # memory is not what a replay would build, so it must not claim that offset.
            log.warning("txn.snapshot_skipped", log_end_offset=offset,
                        applied_end=self._applied_end,
                        reason="records in the log this coordinator did not write")
            self.snapshots.taken()
            return None
        # Only the values are taken here (metadata objects change); encoding them is
        # left to the writer's thread, off the loop.
        values = [(tid, m.producer_id, m.producer_epoch, m.timeout_ms, m.state,
                   tuple(m.partitions) if m.partitions else (), m.last_update_ms, m.start_ms)
                  for tid, m in self.txns.items()]

        def encode() -> bytes:
            entries = []
            for tid, pid, epoch, timeout, state, parts, last_update, start in values:
                key = tl.encode_key(tid)
                value = tl.TxnLogValue(pid, epoch, timeout, state, tuple(sorted(parts)),
                                       last_update, start)
                entries.append(_U16.pack(len(key)) + key + tl.encode_value(value))
            return snapshot.encode(info.topic_id, {0: offset}, entries)

        self.snapshots.taken()
        return self.snapshot_path(), encode, {"offset": offset, "transactional_ids": len(values)}

    def _replay(self, key: bytes | None, value: bytes | None) -> str | None:
        """Apply one record of the log; the reason it cannot be applied, if so."""
        try:
            tid = tl.decode_key(key)
            v = tl.decode_value(value) if value is not None else None
        except tl.TxnLogFormatError as e:
            return str(e)
        if v is None:
            self._forget(tid)
            return None
        meta = TxnMetadata(tid, v.producer_id, v.producer_epoch, v.timeout_ms, v.state,
                           set(v.partitions), v.start_ms, v.last_update_ms)
        old = self.txns.get(tid)
        if old is not None and self._by_pid.get(old.producer_id) == tid:
            del self._by_pid[old.producer_id]
        self.txns[tid] = meta
        self._by_pid[meta.producer_id] = tid
        return None

    def _forget(self, tid: str) -> None:
        old = self.txns.pop(tid, None)
        if old is not None:
            self._by_pid.pop(old.producer_id, None)

    # -- InitProducerId ------------------------------------------------------------
    def init_producer_id(self, tid: str, timeout_ms: int, expected_pid: int = -1,
                         expected_epoch: int = -1) -> tuple[int, int]:
        if not tid:
            raise TxnError(ErrorCode.invalid_request, "transactional.id must not be empty")
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            raise TxnError(ErrorCode.invalid_transaction_timeout,
                           f"transaction.timeout.ms {timeout_ms} is outside (0, "
                           f"transaction.max.timeout.ms={self.max_timeout_ms}]")
        meta = self.txns.get(tid)
        if meta is None:
            pid = self.broker.producer_ids.next_id()
            meta = TxnMetadata(tid, pid, -1, timeout_ms)
            self.txns[tid] = meta
            self._by_pid[pid] = tid
            self._persist(meta, tl.EMPTY, producer_epoch=0, timeout_ms=timeout_ms, partitions=set())
            log.info("txn.producer_initialized", transactional_id=tid, producer_id=pid, epoch=0,
                     reason="new transactional id")
            return pid, 0
        expected = (expected_pid, expected_epoch) if expected_pid != -1 else None
        # Kafka's TransactionCoordinator.prepareInitProducerIdTransit (isValidProducerId):
        # a request naming a producer id must name the current one, or the one just
        # rotated away from with its exhausted epoch (a retry of that rotation).
        if expected is not None and not (
                expected_pid == meta.producer_id
                or (expected_pid == meta.last_producer_id and expected_epoch >= MAX_EPOCH - 1)):
            self._refuse_fenced(meta, expected_pid, expected_epoch)
        if meta.state in (tl.PREPARE_COMMIT, tl.PREPARE_ABORT, tl.PREPARE_EPOCH_FENCE):
            raise TxnError(ErrorCode.concurrent_transactions, "a transaction is completing")
        old_pid, old_epoch = meta.producer_id, meta.producer_epoch
        if meta.state == tl.ONGOING:
            # The previous instance left a transaction open: fence it and abort the
            # transaction with the fencing epoch. Kafka answers CONCURRENT_TRANSACTIONS
            # here and the client retries; we finish the abort now and go on as that
            # retry would. The fence forgets the last epoch (prepareFenceProducerEpoch),
            # so an instance holding an older epoch is fenced below.
            self._abort(meta, reason="a new instance called InitProducerId", fenced=True)
        exhausted = meta.producer_epoch >= MAX_EPOCH - 1
        if exhausted and (expected is None or expected_epoch == meta.producer_epoch):
            # prepareProducerIdRotation: the exhausted epoch is remembered only when the
            # client named it, so that its retry is recognised.
            pid, epoch = self.broker.producer_ids.next_id(), 0
            last_epoch = meta.producer_epoch if expected is not None else -1
            log.info("txn.producer_id_rotated", transactional_id=tid, old_producer_id=meta.producer_id,
                     new_producer_id=pid, reason="producer epoch exhausted")
        elif expected is None:
            # TransactionMetadata.prepareIncrementProducerEpoch: a new instance; the
            # previous epoch is forgotten, so its holder cannot pass for a retry.
            pid, epoch, last_epoch = meta.producer_id, meta.producer_epoch + 1, -1
        elif expected_pid == meta.producer_id and expected_epoch == meta.producer_epoch:
            pid, epoch, last_epoch = meta.producer_id, meta.producer_epoch + 1, meta.producer_epoch
        elif expected_epoch == meta.last_producer_epoch:
            # the bump (or rotation) was done but its answer lost: same answer again
            return meta.producer_id, meta.producer_epoch
        else:
            self._refuse_fenced(meta, expected_pid, expected_epoch)
        last_pid = meta.producer_id if pid != meta.producer_id else meta.last_producer_id
        self._rebind(meta, pid)
        self._persist(meta, tl.EMPTY, producer_id=pid, producer_epoch=epoch,
                      last_producer_epoch=last_epoch, last_producer_id=last_pid,
                      timeout_ms=timeout_ms, partitions=set(), start_ms=-1)
        log.info("txn.producer_initialized", transactional_id=tid, producer_id=pid, epoch=epoch,
                 previous_producer_id=old_pid, previous_epoch=old_epoch,
                 expected_producer_id=expected_pid, expected_epoch=expected_epoch,
                 reason="epoch bump fences the previous instance")
        return pid, epoch

    @staticmethod
    def _refuse_fenced(meta: TxnMetadata, expected_pid: int, expected_epoch: int):
        log.info("txn.request_fenced", api="InitProducerId", transactional_id=meta.transactional_id,
                 producer_id=expected_pid, epoch=expected_epoch,
                 current_producer_id=meta.producer_id, current_epoch=meta.producer_epoch,
                 last_epoch=meta.last_producer_epoch,
                 reason="neither the current epoch nor a retry of the last bump")
        raise TxnError(ErrorCode.producer_fenced,
                       f"producer {expected_pid} epoch {expected_epoch} is not the current "
                       f"instance of {meta.transactional_id} ({meta.producer_id}/{meta.producer_epoch})")

    def _rebind(self, meta: TxnMetadata, pid: int) -> None:
        if pid != meta.producer_id:
            self._by_pid.pop(meta.producer_id, None)
            self._by_pid[pid] = meta.transactional_id

    # -- checks shared by the transactional APIs ---------------------------------------
    def _current(self, tid: str, pid: int, epoch: int, api: str) -> TxnMetadata:
        meta = self.txns.get(tid)
        if meta is None or meta.state == tl.DEAD:
            raise TxnError(ErrorCode.invalid_producer_id_mapping,
                           f"no producer id is mapped to transactional id {tid}")
        if pid != meta.producer_id:
            raise TxnError(ErrorCode.invalid_producer_id_mapping,
                           f"producer id {pid} is not the one of {tid} ({meta.producer_id})")
        if epoch != meta.producer_epoch:
            log.info("txn.request_fenced", api=api, transactional_id=tid, producer_id=pid,
                     epoch=epoch, current_epoch=meta.producer_epoch,
                     reason="a newer epoch exists (new instance or timeout abort)")
            raise TxnError(ErrorCode.producer_fenced,
                           f"epoch {epoch} of {tid} is fenced by epoch {meta.producer_epoch}")
        return meta

    # -- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------
    def add_partitions(self, tid: str, pid: int, epoch: int,
                       partitions: list[tuple[str, int]]) -> None:
        meta = self._current(tid, pid, epoch, "AddPartitionsToTxn")
        if meta.state in (tl.PREPARE_COMMIT, tl.PREPARE_ABORT, tl.PREPARE_EPOCH_FENCE):
            raise TxnError(ErrorCode.concurrent_transactions, "the previous transaction is completing")
        new = set(partitions) - meta.partitions
        if meta.state == tl.ONGOING and not new:
            return
        start = meta.start_ms if meta.state == tl.ONGOING else now_ms()
        self._persist(meta, tl.ONGOING, partitions=meta.partitions | new, start_ms=start)

    # -- EndTxn ---------------------------------------------------------------------------
    def end_txn(self, tid: str, pid: int, epoch: int, commit: bool) -> None:
        meta = self._current(tid, pid, epoch, "EndTxn")
        want = "commit" if commit else "abort"
        if meta.state == tl.ONGOING:
            self._prepare_and_complete(meta, commit, reason=f"client {want}")
            return
        if meta.state == (tl.COMPLETE_COMMIT if commit else tl.COMPLETE_ABORT):
            return  # a retry of the EndTxn that already completed
        if meta.state == (tl.PREPARE_COMMIT if commit else tl.PREPARE_ABORT):
            raise TxnError(ErrorCode.concurrent_transactions, "the transaction is completing")
        raise TxnError(ErrorCode.invalid_txn_state,
                       f"cannot {want} transactional id {tid} in state {meta.state_name}")

    def _prepare_and_complete(self, meta: TxnMetadata, commit: bool, reason: str) -> None:
        self._persist(meta, tl.PREPARE_COMMIT if commit else tl.PREPARE_ABORT)
        _crash_point("txn.after_prepare")
        self._complete(meta, reason=reason)

    def _complete(self, meta: TxnMetadata, reason: str = "roll forward") -> None:
        commit = meta.state == tl.PREPARE_COMMIT
        errors = self.write_markers(meta.producer_id, meta.producer_epoch, commit,
                                    COORDINATOR_EPOCH, sorted(meta.partitions))
        _crash_point("txn.before_complete")
        failed = {tp: e for tp, e in errors.items() if e != ErrorCode.none}
        duration = now_ms() - meta.start_ms if meta.start_ms > 0 else -1
        count = len(meta.partitions)
        self._persist(meta, tl.COMPLETE_COMMIT if commit else tl.COMPLETE_ABORT,
                      partitions=set(), start_ms=-1)
        log.info("txn.committed" if commit else "txn.aborted", transactional_id=meta.transactional_id,
                 producer_id=meta.producer_id, epoch=meta.producer_epoch, partitions=count,
                 duration_ms=duration, reason=reason,
                 marker_errors={f"{t}-{p}": e.name for (t, p), e in failed.items()} or None)

    def _abort(self, meta: TxnMetadata, reason: str, fenced: bool) -> None:
        """Abort the open transaction with a bumped epoch (Kafka's PrepareEpochFence)."""
        old_epoch = meta.producer_epoch
        if meta.state == tl.ONGOING:
            # TransactionMetadata.prepareFenceProducerEpoch: always bump, up to and
            # including Short.MaxValue (epochs stop at 32766 for clients precisely so
            # that this bump is possible); the last epoch is forgotten.
            epoch = old_epoch + 1
            if epoch > MAX_EPOCH:
                # Never handed to a client, so unreachable; keep the epoch rather than
                # overflow, as Kafka refuses to (IllegalStateException).
                log.error("txn.fence_epoch_overflow", transactional_id=meta.transactional_id,
                          producer_id=meta.producer_id, epoch=old_epoch)
                epoch = old_epoch
            self._persist(meta, tl.PREPARE_EPOCH_FENCE, producer_epoch=epoch,
                          last_producer_epoch=-1)
        log.info("txn.fencing_abort", transactional_id=meta.transactional_id,
                 producer_id=meta.producer_id, old_epoch=old_epoch, new_epoch=meta.producer_epoch,
                 partitions=len(meta.partitions), reason=reason, fenced=fenced)
        self._persist(meta, tl.PREPARE_ABORT)
        self._complete(meta, reason=reason)

    # -- markers (also the WriteTxnMarkers API) ---------------------------------------------
    def write_markers(self, pid: int, epoch: int, commit: bool, coordinator_epoch: int,
                      partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        b = self.broker
        out: dict[tuple[str, int], ErrorCode] = {}
        for topic, partition in partitions:
            plog = b.get_log(topic, partition) if b.topic(topic) is not None else None
            if plog is None:
                out[(topic, partition)] = ErrorCode.unknown_topic_or_partition
                continue
            marker = build_control_batch(producer_id=pid, producer_epoch=epoch, commit=commit,
                                         coordinator_epoch=coordinator_epoch)
            try:
                plog.append(marker, origin="coordinator")
            except ProducerStateError as e:
                log.warning("txn.marker_rejected", topic=topic, **e.log_fields())
                out[(topic, partition)] = e.error_code
                continue
            except StorageError as e:
                log.error("txn.marker_failed", topic=topic, partition=partition, error=str(e))
                out[(topic, partition)] = e.error_code
                continue
            out[(topic, partition)] = ErrorCode.none
            if topic == GROUP_METADATA_TOPIC:
                b.group_coordinator.on_marker(partition, pid, commit)
            b.notify_append(topic, partition)
            _crash_point("txn.after_first_marker")
        return out

    # -- Produce verification ---------------------------------------------------------------
    def verify_produce(self, pid: int, epoch: int, topic: str, partition: int) -> ErrorCode | None:
        """A transactional batch may only go to a partition added to its open transaction."""
        tid = self._by_pid.get(pid)
        meta = self.txns.get(tid) if tid is not None else None
        if meta is None:
            return ErrorCode.invalid_producer_id_mapping
        if epoch != meta.producer_epoch:
            # TransactionCoordinator.handleVerifyPartitionsInTransaction requires the
            # epoch to be the coordinator's (PRODUCER_FENCED, which
            # AddPartitionsToTxnManager turns into INVALID_PRODUCER_EPOCH for Produce).
            # A higher epoch let through would be stored, its markers refused, and the
            # partition's LSO stuck for good.
            return ErrorCode.invalid_producer_epoch
        if meta.state != tl.ONGOING or (topic, partition) not in meta.partitions:
            return ErrorCode.invalid_txn_state
        return None

    # -- timers --------------------------------------------------------------------------
    def abort_timed_out(self, now: int | None = None) -> int:
        now = now_ms() if now is None else now
        count = 0
        for meta in list(self.txns.values()):
            if meta.state == tl.ONGOING and meta.start_ms > 0 and now - meta.start_ms > meta.timeout_ms:
                log.warning("txn.timed_out", transactional_id=meta.transactional_id,
                            producer_id=meta.producer_id, epoch=meta.producer_epoch,
                            age_ms=now - meta.start_ms, timeout_ms=meta.timeout_ms,
                            partitions=len(meta.partitions),
                            consequence="aborted with a bumped epoch; the producer's next call "
                                        "fails with PRODUCER_FENCED")
                self._abort(meta, reason="transaction.timeout.ms exceeded", fenced=True)
                count += 1
        return count

    def expire_ids(self, now: int | None = None) -> int:
        now = now_ms() if now is None else now
        count = 0
        for meta in list(self.txns.values()):
            if (meta.state in (tl.EMPTY, tl.COMPLETE_COMMIT, tl.COMPLETE_ABORT)
                    and now - meta.last_update_ms >= self.id_expiration_ms):
                log.info("txn.id_expired", transactional_id=meta.transactional_id,
                         producer_id=meta.producer_id, idle_ms=now - meta.last_update_ms,
                         expiration_ms=self.id_expiration_ms)
                self._persist(meta, tl.DEAD)
                self._forget(meta.transactional_id)
                count += 1
        return count
