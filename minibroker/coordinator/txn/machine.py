"""The transaction coordinator's core: the state of every transactional id and its moves.

Theory of operation
-------------------
Kafka's TransactionCoordinator for transaction.version 0–2, without I/O of its own.
Each transactional id has a :class:`TxnMetadata` whose ``state`` is a
:class:`~.state.TxnState`; every request (InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn) and every timer tick is one synchronous call here that either
refuses with a :class:`TxnError` (the error code the handler answers) or makes one or
more moves. A move is checked against the one transition table (``txn_state``), then
written to ``__transaction_state`` through the ``append`` collaborator, and only then is
it the state: a restart replays the log (:meth:`TransactionMachine.replay`) and finishes
what was prepared (:meth:`TransactionMachine.roll_forward`).

The happy path::

    (none) -InitProducerId-> Empty -AddPartitions-> Ongoing -EndTxn-> PrepareCommit|Abort
           -markers written-> CompleteCommit|Abort -AddPartitions-> Ongoing ...

Transactions v2 (KIP-890 part 2, a client sending EndTxn v5): the partitions join the
transaction implicitly (Produce v12, TxnOffsetCommit v5 call :meth:`verify_produce` with
``add``), and every EndTxn bumps the epoch as it prepares — the markers carry the new epoch, so
a late batch of the transaction just ended is fenced — and answers the ids the next
transaction uses; at the end of the epoch range the producer id rotates once the markers are
written (``next_producer_id``). A retried EndTxn is recognised by its epoch being one behind.

An open transaction that outlives its timeout, or whose transactional id is taken over
by a new instance, is fenced: Ongoing -> PrepareEpochFence (epoch bumped) ->
PrepareAbort -> CompleteAbort. An id idle in a resting state (``may_expire``) for
``transactional.id.expiration.ms`` becomes Dead and is forgotten (a tombstone).

Everything the core needs from outside comes in explicitly: a ``Clock`` (``now`` is
``clock.wall_ms()``; tests pass a ``ManualClock`` and ``advance`` it through timeouts),
the log appender, the producer-id allocator, the marker writer (which appends the
control batches and tells whoever cares that a marker was written) and the test-only
crash points. Markers are local appends and every call runs to the end on the event
loop, so no request ever sees a transition half-done. The asyncio side (start-up load,
snapshots, the periodic checks) is :mod:`.coordinator` and :mod:`minibroker.background.loops`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from minibroker_protocol import txn_log as tl
from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.records import build_keyed_batch
from minibroker_storage.lazylog import get_logger

from ...core.clock import Clock
from ...core.crash_points import NO_CRASH_POINTS, CrashPoints
from .. import snapshot
from .state import TxnState, check_transition
from .timeline import NO_TIMELINE, UNKNOWN_REQUESTER, Requester, Timeline

log = get_logger("minibroker.txn")

# Kafka: a producer epoch is exhausted one short of Short.MAX_VALUE, so that a
# fencing bump is always possible (TransactionMetadata.isEpochExhausted).
MAX_EPOCH = 32767
COORDINATOR_EPOCH = 0

# transaction.version from which an EndTxn bumps the epoch (TransactionVersion.supportsEpochBump)
TV_EPOCH_BUMP = 2

# Appends one batch to __transaction_state; its base offset.
TxnLogAppend = Callable[[bytes], int]
# (producer id, epoch, commit, coordinator epoch, partitions) -> error per partition
WriteMarkers = Callable[[int, int, bool, int, list[tuple[str, int]]],
                        dict[tuple[str, int], ErrorCode]]


class ProducerIds(Protocol):
    def next_id(self) -> int: ...


@dataclass
class TxnMetadata:
    """One transactional id's state in the transaction coordinator."""
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = 0
    # Before the last bump, so a retried InitProducerId gets the same answer; -1 after a
    # bump for a new instance or a fence (Kafka's lastProducerEpoch). In memory only, as
    # in Kafka's v0 log value.
    last_producer_epoch: int = -1
    last_producer_id: int = -1  # the id rotated away from (Kafka's previousProducerId)
    # Transactions v2: the id the producer moves to once this transaction's markers are written
    # (its epoch was exhausted), and the transaction.version of the client's last EndTxn or
    # implicit registration (Kafka's clientTransactionVersion), which decides how a retried
    # EndTxn is recognised. Both persisted in the log's value v1.
    next_producer_id: int = -1
    client_tv: int = 0

    @property
    def state_name(self) -> str:
        return self.state.kafka_name

    @property
    def bumps_epoch(self) -> bool:
        return self.client_tv >= TV_EPOCH_BUMP

    def value(self) -> tl.TxnLogValue:
        return tl.TxnLogValue(self.producer_id, self.producer_epoch, self.timeout_ms, self.state,
                              tuple(sorted(self.partitions)), self.last_update_ms, self.start_ms,
                              self.last_producer_id, self.next_producer_id, self.client_tv)


class TxnError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class TransactionMachine:
    def __init__(self, *, clock: Clock, append: TxnLogAppend, producer_ids: ProducerIds,
                 markers: WriteMarkers, max_timeout_ms: int, id_expiration_ms: int,
                 crash: CrashPoints = NO_CRASH_POINTS,
                 snapshots: snapshot.Schedule | None = None,
                 transaction_version: Callable[[], int] = lambda: 0,
                 timeline: Timeline = NO_TIMELINE) -> None:
        self.clock = clock
        # every decision, with who asked, for `minibroker txn explain` (timeline.py)
        self.timeline = timeline
        # The finalized transaction.version: the log value's version (v1 from level 1, as
        # TransactionVersion.transactionLogValueVersion) and the client version the
        # coordinator's own aborts (timeouts) act with.
        self.transaction_version = transaction_version
        self.append = append
        self.producer_ids = producer_ids
        self.markers = markers
        self.crash = crash
        self.max_timeout_ms = max_timeout_ms
        self.id_expiration_ms = id_expiration_ms
        self.txns: dict[str, TxnMetadata] = {}
        self._by_pid: dict[int, str] = {}
        self.snapshots = snapshots if snapshots is not None else snapshot.Schedule()
        # Since start: "committed", "aborted", "timed_out" (aborted by the coordinator after
        # transaction.timeout.ms), "fenced_by_new_instance" (an open transaction aborted by a new
        # instance's InitProducerId), "requests_fenced" (PRODUCER_FENCED answered). /metrics reads it.
        self.stats: Counter[str] = Counter()
        self.applied_end = 0  # the log offset the in-memory state covers up to

    # -- the one way state changes -----------------------------------------------------
    def _persist(self, meta: TxnMetadata, new_state: TxnState, **changes) -> None:
        """Write the transition, then apply it; an illegal transition is a bug."""
        if type(new_state) is not TxnState:
            new_state = TxnState(new_state)
        check_transition(meta.transactional_id, meta.state, new_state)
        for k, v in changes.items():
            setattr(meta, k, v)
        meta.state = new_state
        meta.last_update_ms = self.clock.wall_ms()
        value = (None if new_state == TxnState.DEAD
                 else tl.encode_value(meta.value(), 1 if self.transaction_version() >= 1 else 0))
        # three of these per transaction: the one-record builder, not build_batch's general one
        # (the batch's timestamp is the system's time, as build_batch gives it, not the clock's)
        batch = build_keyed_batch(tl.encode_key(meta.transactional_id), value)
        self.applied_end = self.append(batch) + 1
        self.snapshots.wrote()
        log.debug("txn.transition", transactional_id=meta.transactional_id,
                  producer_id=meta.producer_id, epoch=meta.producer_epoch, state=new_state.kafka_name,
                  partitions=len(meta.partitions))

    # -- replay (start-up) -------------------------------------------------------------
    def replay(self, key: bytes | None, value: bytes | None) -> str | None:
        return self._replay(key, value)

    def reset(self) -> None:
        self.txns.clear()
        self._by_pid.clear()

    def roll_forward(self) -> int:
        """Finish what a stopped broker left prepared; how many transactions."""
        rolled = 0
        for meta in list(self.txns.values()):
            if not meta.state.is_completing:
                continue
            self.timeline.record(meta.transactional_id, "roll_forward", state=meta.state_name,
                                 producer_id=meta.producer_id, epoch=meta.producer_epoch)
            if meta.state == TxnState.PREPARE_EPOCH_FENCE:
                self._abort(meta, reason="epoch fence interrupted by a restart", fenced=False)
            else:
                log.info("txn.roll_forward", transactional_id=meta.transactional_id,
                         producer_id=meta.producer_id, epoch=meta.producer_epoch,
                         state=meta.state_name, partitions=len(meta.partitions),
                         reason="prepared before the broker stopped")
                self._complete(meta)
            rolled += 1
        return rolled

    def snapshot_values(self) -> list[tuple]:
        """Plain values of every id (metadata objects change; these do not)."""
        return [(tid, m.producer_id, m.producer_epoch, m.timeout_ms, int(m.state),
                 tuple(m.partitions) if m.partitions else (), m.last_update_ms, m.start_ms,
                 m.last_producer_id, m.next_producer_id, m.client_tv)
                for tid, m in self.txns.items()]

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
        meta = TxnMetadata(tid, v.producer_id, v.producer_epoch, v.timeout_ms, TxnState(v.state),
                           set(v.partitions), v.start_ms, v.last_update_ms,
                           last_producer_id=v.previous_producer_id,
                           next_producer_id=v.next_producer_id,
                           client_tv=v.client_transaction_version)
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
                         expected_epoch: int = -1, who: Requester = UNKNOWN_REQUESTER) -> tuple[int, int]:
        if not tid:
            raise TxnError(ErrorCode.invalid_request, "transactional.id must not be empty")
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            raise TxnError(ErrorCode.invalid_transaction_timeout,
                           f"transaction.timeout.ms {timeout_ms} is outside (0, "
                           f"transaction.max.timeout.ms={self.max_timeout_ms}]")
        meta = self.txns.get(tid)
        if meta is None:
            pid = self.producer_ids.next_id()
            meta = TxnMetadata(tid, pid, -1, timeout_ms)
            self.txns[tid] = meta
            self._by_pid[pid] = tid
            self._persist(meta, TxnState.EMPTY, producer_epoch=0, timeout_ms=timeout_ms,
                          partitions=set())
            log.info("txn.producer_initialized", transactional_id=tid, producer_id=pid, epoch=0,
                     reason="new transactional id")
            self.timeline.record(tid, "init", producer_id=pid, epoch=0, timeout_ms=timeout_ms,
                                 reason="new transactional id", **who.fields())
            return pid, 0
        expected = (expected_pid, expected_epoch) if expected_pid != -1 else None
        # Kafka's TransactionCoordinator.prepareInitProducerIdTransit (isValidProducerId):
        # a request naming a producer id must name the current one, or the one just
        # rotated away from with its exhausted epoch (a retry of that rotation).
        if expected is not None and not (
                expected_pid == meta.producer_id
                or (expected_pid == meta.last_producer_id and expected_epoch >= MAX_EPOCH - 1)):
            self._refuse_fenced(meta, expected_pid, expected_epoch)
        if meta.state.is_completing:
            raise TxnError(ErrorCode.concurrent_transactions, "a transaction is completing")
        old_pid, old_epoch = meta.producer_id, meta.producer_epoch
        if meta.state == TxnState.ONGOING:
            # The previous instance left a transaction open: fence it and abort the
            # transaction with the fencing epoch. Kafka answers CONCURRENT_TRANSACTIONS
            # here and the client retries; we finish the abort now and go on as that
            # retry would. The fence forgets the last epoch (prepareFenceProducerEpoch),
            # so an instance holding an older epoch is fenced below.
            self.stats["fenced_by_new_instance"] += 1
            self.timeline.record(tid, "fenced", reason="new instance", producer_id=meta.producer_id,
                                 epoch=meta.producer_epoch, start_ms=meta.start_ms,
                                 partitions=sorted(meta.partitions), **who.fields("by_"))
            self._abort(meta, reason="a new instance called InitProducerId", fenced=True)
        exhausted = meta.producer_epoch >= MAX_EPOCH - 1
        if exhausted and (expected is None or expected_epoch == meta.producer_epoch):
            # prepareProducerIdRotation: the exhausted epoch is remembered only when the
            # client named it, so that its retry is recognised.
            pid, epoch = self.producer_ids.next_id(), 0
            last_epoch = meta.producer_epoch if expected is not None else -1
            log.info("txn.producer_id_rotated", transactional_id=tid, old_producer_id=meta.producer_id,
                     new_producer_id=pid, reason="producer epoch exhausted")
            why = "epoch exhausted: a new producer id"
        elif expected is None:
            # TransactionMetadata.prepareIncrementProducerEpoch: a new instance; the
            # previous epoch is forgotten, so its holder cannot pass for a retry.
            pid, epoch, last_epoch = meta.producer_id, meta.producer_epoch + 1, -1
            why = "new instance: the epoch is bumped, fencing any older one"
        elif expected_pid == meta.producer_id and expected_epoch == meta.producer_epoch:
            pid, epoch, last_epoch = meta.producer_id, meta.producer_epoch + 1, meta.producer_epoch
            why = "the producer bumped its own epoch after an error (KIP-360)"
        elif expected_epoch == meta.last_producer_epoch:
            # the bump (or rotation) was done but its answer lost: same answer again
            self.timeline.record(tid, "init", producer_id=meta.producer_id, epoch=meta.producer_epoch,
                                 reason="a retry of the last InitProducerId: the same answer",
                                 **who.fields())
            return meta.producer_id, meta.producer_epoch
        else:
            self._refuse_fenced(meta, expected_pid, expected_epoch)
        last_pid = meta.producer_id if pid != meta.producer_id else meta.last_producer_id
        self._rebind(meta, pid)
        self._persist(meta, TxnState.EMPTY, producer_id=pid, producer_epoch=epoch,
                      last_producer_epoch=last_epoch, last_producer_id=last_pid,
                      timeout_ms=timeout_ms, partitions=set(), start_ms=-1)
        log.info("txn.producer_initialized", transactional_id=tid, producer_id=pid, epoch=epoch,
                 previous_producer_id=old_pid, previous_epoch=old_epoch,
                 expected_producer_id=expected_pid, expected_epoch=expected_epoch,
                 reason="epoch bump fences the previous instance")
        self.timeline.record(tid, "init", producer_id=pid, epoch=epoch, previous_producer_id=old_pid,
                             previous_epoch=old_epoch, timeout_ms=timeout_ms, reason=why, **who.fields())
        return pid, epoch

    def _refuse_fenced(self, meta: TxnMetadata, expected_pid: int, expected_epoch: int):
        self.stats["requests_fenced"] += 1
        log.info("txn.request_fenced", api="InitProducerId", transactional_id=meta.transactional_id,
                 producer_id=expected_pid, epoch=expected_epoch,
                 current_producer_id=meta.producer_id, current_epoch=meta.producer_epoch,
                 last_epoch=meta.last_producer_epoch,
                 reason="neither the current epoch nor a retry of the last bump")
        raise TxnError(ErrorCode.producer_fenced,
                       f"producer {expected_pid} epoch {expected_epoch} is not the current "
                       f"instance of {meta.transactional_id} ({meta.producer_id}/{meta.producer_epoch})")

    def transactional_id_of(self, pid: int) -> str | None:
        return self._by_pid.get(pid)

    def _rebind(self, meta: TxnMetadata, pid: int) -> None:
        if pid != meta.producer_id:
            self._by_pid.pop(meta.producer_id, None)
            self._by_pid[pid] = meta.transactional_id

    # -- checks shared by the transactional APIs ---------------------------------------
    def _current(self, tid: str, pid: int, epoch: int, api: str) -> TxnMetadata:
        meta = self.txns.get(tid)
        if meta is None or meta.state == TxnState.DEAD:
            raise TxnError(ErrorCode.invalid_producer_id_mapping,
                           f"no producer id is mapped to transactional id {tid}")
        if pid != meta.producer_id:
            raise TxnError(ErrorCode.invalid_producer_id_mapping,
                           f"producer id {pid} is not the one of {tid} ({meta.producer_id})")
        if epoch != meta.producer_epoch:
            self.stats["requests_fenced"] += 1
            log.info("txn.request_fenced", api=api, transactional_id=tid, producer_id=pid,
                     epoch=epoch, current_epoch=meta.producer_epoch,
                     reason="a newer epoch exists (new instance or timeout abort)")
            raise TxnError(ErrorCode.producer_fenced,
                           f"epoch {epoch} of {tid} is fenced by epoch {meta.producer_epoch}")
        return meta

    # -- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------
    def add_partitions(self, tid: str, pid: int, epoch: int,
                       partitions: list[tuple[str, int]], who: Requester = UNKNOWN_REQUESTER,
                       group: str | None = None, client_tv: int | None = None) -> None:
        """``group``: the partitions are the offsets partition of that group (AddOffsetsToTxn).
        ``client_tv``: the transaction version the request implies (AddPartitionsToTxn v4+ is a
        broker adding for a transactions-v2 producer: TransactionVersion
        .transactionVersionForAddPartitionsToTxn); None keeps the transaction's own."""
        api = "AddOffsetsToTxn" if group is not None else "AddPartitionsToTxn"
        meta = self._current(tid, pid, epoch, api)
        self._add(meta, partitions, meta.client_tv if client_tv is None else client_tv, who, group=group)

    def verify_partitions(self, tid: str, pid: int, epoch: int,
                          partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn v4+ with verify_only: whether each partition is in the open
        transaction (TransactionCoordinator.handleVerifyPartitionsInTransaction): a producer id
        not the id's is INVALID_PRODUCER_ID_MAPPING, another epoch PRODUCER_FENCED, a partition
        outside the transaction TRANSACTION_ABORTABLE. Nothing changes."""
        meta = self.txns.get(tid)
        if meta is None or meta.state == TxnState.DEAD or meta.producer_id != pid:
            return dict.fromkeys(partitions, ErrorCode.invalid_producer_id_mapping)
        if meta.producer_epoch != epoch:
            return dict.fromkeys(partitions, ErrorCode.producer_fenced)
        ongoing = meta.state == TxnState.ONGOING
        return {tp: ErrorCode.none if ongoing and tp in meta.partitions else ErrorCode.transaction_abortable
                for tp in partitions}

    def _add(self, meta: TxnMetadata, partitions: list[tuple[str, int]], client_tv: int,
             who: Requester = UNKNOWN_REQUESTER, group: str | None = None, implicit: bool = False) -> None:
        if meta.state.is_completing:
            raise TxnError(ErrorCode.concurrent_transactions, "the previous transaction is completing")
        new = set(partitions) - meta.partitions
        if meta.state == TxnState.ONGOING and not new:
            return
        begins = meta.state != TxnState.ONGOING
        start = meta.start_ms if meta.state == TxnState.ONGOING else self.clock.wall_ms()
        self._persist(meta, TxnState.ONGOING, partitions=meta.partitions | new, start_ms=start,
                      client_tv=client_tv)
        self.timeline.record(meta.transactional_id, "add_offsets" if group is not None else "add_partitions",
                             partitions=sorted(new), group=group, begins=begins or None,
                             implicit=implicit or None, producer_id=meta.producer_id,
                             epoch=meta.producer_epoch, timeout_ms=meta.timeout_ms if begins else None,
                             **who.fields())

    # -- EndTxn ---------------------------------------------------------------------------
    def end_txn(self, tid: str, pid: int, epoch: int, commit: bool,
                client_tv: int = 0, who: Requester = UNKNOWN_REQUESTER) -> tuple[int, int]:
        """Commit or abort; the producer id and epoch the producer goes on with (EndTxn v5).

        ``client_tv`` is 2 for EndTxn v5 (KafkaApis.handleEndTxnRequest), else 0. Kafka's
        TransactionCoordinator.endTransaction: for a v2 client, an epoch one behind the
        coordinator's is a retry of the EndTxn that bumped it, answered with today's ids when it
        asked for what happened; an abort at the current epoch outside a transaction is an
        empty abort that bumps the epoch (the client aborts without knowing whether its
        partitions were registered).
        """
        meta = self.txns.get(tid)
        if meta is None or meta.state == TxnState.DEAD:
            raise TxnError(ErrorCode.invalid_producer_id_mapping,
                           f"no producer id is mapped to transactional id {tid}")
        # The request's version decides which rules judge its epoch: Kafka 4.4 fences an
        # EndTxn v4 one epoch behind a v2 commit (tests/differential/test_transactions_v2.py).
        v2 = client_tv >= TV_EPOCH_BUMP
        retry_on_overflow = (v2 and pid == meta.last_producer_id and epoch == MAX_EPOCH - 1
                             and meta.producer_epoch == 0)
        if pid != meta.producer_id and not retry_on_overflow:
            raise TxnError(ErrorCode.invalid_producer_id_mapping,
                           f"producer id {pid} is not the one of {tid} ({meta.producer_id})")
        retry = retry_on_overflow or (v2 and epoch + 1 == meta.producer_epoch)
        current = pid == meta.producer_id and epoch == meta.producer_epoch
        want = "commit" if commit else "abort"
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if meta.state == TxnState.ONGOING:
            if not current:
                self._fenced(meta, pid, epoch, "EndTxn")
            self.timeline.record(tid, "end_txn", commit=commit, producer_id=pid, epoch=epoch, **who.fields())
            self._prepare_and_complete(meta, commit, reason=f"client {want}", client_tv=client_tv)
            return meta.producer_id, meta.producer_epoch
        if meta.state.is_completing:
            # markers are written synchronously, so only a stale request finds one
            if not (current or retry):
                self._fenced(meta, pid, epoch, "EndTxn")
            raise TxnError(ErrorCode.concurrent_transactions, "the transaction is completing")
        # Empty, CompleteCommit, CompleteAbort
        if v2 and retry:
            if meta.state == done:
                self.timeline.record(tid, "end_txn", commit=commit, producer_id=pid, epoch=epoch,
                                     retry=True, **who.fields())
                return meta.producer_id, meta.producer_epoch  # the EndTxn already happened
            if meta.state == TxnState.EMPTY and not commit:
                self._fenced(meta, pid, epoch, "EndTxn")
            # A commit one epoch behind a completed abort — a commit the coordinator's own
            # abort (a timeout) overtook — falls through to INVALID_TXN_STATE, as Kafka 4.4
            # answers it (KAFKA-20785 makes it PRODUCER_FENCED in a later release).
        elif current and not v2 and meta.state == done:
            self.timeline.record(tid, "end_txn", commit=commit, producer_id=pid, epoch=epoch,
                                 retry=True, **who.fields())
            return meta.producer_id, meta.producer_epoch  # a retry of the EndTxn that completed
        elif current and not commit and client_tv >= TV_EPOCH_BUMP:
            # An empty abort: nothing to mark, but the epoch moves on as after any EndTxn v5.
            self.timeline.record(tid, "end_txn", commit=False, producer_id=pid, epoch=epoch, empty=True,
                                 **who.fields())
            self._prepare_and_complete(meta, False, reason="client abort of an empty transaction",
                                       client_tv=client_tv)
            return meta.producer_id, meta.producer_epoch
        elif not current:
            self._fenced(meta, pid, epoch, "EndTxn")
        raise TxnError(ErrorCode.invalid_txn_state,
                       f"cannot {want} transactional id {tid} in state {meta.state_name}")

    def _fenced(self, meta: TxnMetadata, pid: int, epoch: int, api: str):
        self.stats["requests_fenced"] += 1
        log.info("txn.request_fenced", api=api, transactional_id=meta.transactional_id,
                 producer_id=pid, epoch=epoch, current_producer_id=meta.producer_id,
                 current_epoch=meta.producer_epoch,
                 reason="a newer epoch exists (new instance, timeout abort or a later EndTxn)")
        raise TxnError(ErrorCode.producer_fenced,
                       f"epoch {epoch} of {meta.transactional_id} is fenced by epoch "
                       f"{meta.producer_epoch}")

    def _prepare_and_complete(self, meta: TxnMetadata, commit: bool, reason: str,
                              client_tv: int) -> None:
        changes: dict = {"client_tv": client_tv}
        if client_tv >= TV_EPOCH_BUMP:
            # TransactionMetadata.prepareAbortOrCommit: the markers carry the bumped epoch; an
            # exhausted epoch also gets the producer id the producer moves to afterwards.
            rotate = meta.producer_epoch >= MAX_EPOCH - 1
            changes.update(producer_epoch=meta.producer_epoch + 1,
                           last_producer_epoch=meta.producer_epoch,
                           next_producer_id=self.producer_ids.next_id() if rotate else -1)
        if meta.state != TxnState.ONGOING and meta.start_ms < 0:
            changes["start_ms"] = self.clock.wall_ms()  # an empty abort starts and ends now
        self._persist(meta, TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, **changes)
        self.timeline.record(meta.transactional_id, "prepare", commit=commit, producer_id=meta.producer_id,
                             epoch=meta.producer_epoch, reason=reason)
        self.crash.hit("txn.after_prepare", meta.transactional_id)
        self._complete(meta, reason=reason)

    def _complete(self, meta: TxnMetadata, reason: str = "roll forward") -> None:
        commit = meta.state == TxnState.PREPARE_COMMIT
        self.crash.current_txn = meta.transactional_id
        try:
            errors = self.markers(meta.producer_id, meta.producer_epoch, commit,
                                  COORDINATOR_EPOCH, sorted(meta.partitions))
        finally:
            self.crash.current_txn = None
        self.crash.hit("txn.before_complete", meta.transactional_id)
        failed = {tp: e for tp, e in errors.items() if e != ErrorCode.none}
        duration = self.clock.wall_ms() - meta.start_ms if meta.start_ms > 0 else -1
        count = len(meta.partitions)
        marker_pid, marker_epoch = meta.producer_id, meta.producer_epoch
        changes: dict = {"partitions": set(), "start_ms": -1}
        if meta.bumps_epoch and meta.next_producer_id != -1:
            # TransactionMetadata.prepareComplete: the markers went out with the exhausted
            # epoch; the producer goes on with the new id from epoch 0.
            changes.update(producer_id=meta.next_producer_id, producer_epoch=0,
                           last_producer_id=meta.producer_id,
                           last_producer_epoch=meta.producer_epoch, next_producer_id=-1)
            self._rebind(meta, meta.next_producer_id)
            log.info("txn.producer_id_rotated", transactional_id=meta.transactional_id,
                     old_producer_id=marker_pid, new_producer_id=meta.next_producer_id,
                     reason="producer epoch exhausted at the end of a transaction")
        self._persist(meta, TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
                      **changes)
        self.stats["committed" if commit else "aborted"] += 1
        self.timeline.record(meta.transactional_id, "complete", commit=commit, producer_id=marker_pid,
                             epoch=marker_epoch, partitions=count, duration_ms=duration, reason=reason,
                             next_producer_id=meta.producer_id, next_epoch=meta.producer_epoch,
                             marker_errors={f"{t}-{p}": e.name.upper()
                                            for (t, p), e in failed.items()} or None)
        log.info("txn.committed" if commit else "txn.aborted", transactional_id=meta.transactional_id,
                 producer_id=marker_pid, epoch=marker_epoch, partitions=count,
                 duration_ms=duration, reason=reason,
                 next_producer_id=meta.producer_id, next_epoch=meta.producer_epoch,
                 marker_errors={f"{t}-{p}": e.name for (t, p), e in failed.items()} or None)

    def _abort(self, meta: TxnMetadata, reason: str, fenced: bool) -> None:
        """Abort the open transaction with a bumped epoch (Kafka's PrepareEpochFence)."""
        old_epoch = meta.producer_epoch
        if meta.state == TxnState.ONGOING:
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
            self._persist(meta, TxnState.PREPARE_EPOCH_FENCE, producer_epoch=epoch,
                          last_producer_epoch=-1)
            self.timeline.record(meta.transactional_id, "epoch_fence", producer_id=meta.producer_id,
                                 old_epoch=old_epoch, new_epoch=epoch, reason=reason)
        log.info("txn.fencing_abort", transactional_id=meta.transactional_id,
                 producer_id=meta.producer_id, old_epoch=old_epoch, new_epoch=meta.producer_epoch,
                 partitions=len(meta.partitions), reason=reason, fenced=fenced)
        # The coordinator aborts with the cluster's transaction.version. At 2 the fence's bump
        # is the abort's one (KAFKA-19367: no second bump), and an exhausted epoch rotates the
        # producer id once the markers are written (KAFKA-20090).
        tv = self.transaction_version()
        changes: dict = {"client_tv": tv}
        if tv >= TV_EPOCH_BUMP and old_epoch >= MAX_EPOCH - 1:
            changes["next_producer_id"] = self.producer_ids.next_id()
        self._persist(meta, TxnState.PREPARE_ABORT, **changes)
        self.timeline.record(meta.transactional_id, "prepare", commit=False, producer_id=meta.producer_id,
                             epoch=meta.producer_epoch, reason=reason)
        self._complete(meta, reason=reason)

    # -- Produce verification ---------------------------------------------------------------
    def verify_produce(self, pid: int, epoch: int, topic: str, partition: int,
                       add: bool = False) -> ErrorCode | None:
        """A transactional batch may only go to a partition added to its open transaction.

        With ``add`` (Produce v12, TxnOffsetCommit v5: transactions v2), the partition is added
        to the transaction instead, as Kafka's partition leader does through AddPartitionsToTxn
        (AddPartitionsToTxnManager's ``addPartition``), opening one if none is.
        """
        tid = self._by_pid.get(pid)
        meta = self.txns.get(tid) if tid is not None else None
        if meta is None:
            return ErrorCode.invalid_producer_id_mapping
        if epoch != meta.producer_epoch:
            self.timeline.record(meta.transactional_id, "refused", api="Produce",
                                 error=ErrorCode.invalid_producer_epoch.name.upper(), producer_id=pid,
                                 epoch=epoch, current_epoch=meta.producer_epoch, topic=topic,
                                 partition=partition)
            # TransactionCoordinator.handleVerifyPartitionsInTransaction requires the
            # epoch to be the coordinator's (PRODUCER_FENCED, which
            # AddPartitionsToTxnManager turns into INVALID_PRODUCER_EPOCH for Produce).
            # A higher epoch let through would be stored, its markers refused, and the
            # partition's LSO stuck for good.
            return ErrorCode.invalid_producer_epoch
        if add:
            try:
                self._add(meta, [(topic, partition)], TV_EPOCH_BUMP, implicit=True)
            except TxnError as e:
                self.timeline.record(meta.transactional_id, "refused", api="Produce",
                                     error=e.code.name.upper(), message=str(e), producer_id=pid,
                                     epoch=epoch, topic=topic,
                                     partition=partition)
                return e.code
            return None
        if meta.state != TxnState.ONGOING or (topic, partition) not in meta.partitions:
            # What the coordinator's verification answers; errors.for_version turns it into
            # INVALID_TXN_STATE for request versions that predate KIP-890's abortable error.
            return ErrorCode.transaction_abortable
        return None

    # -- timers --------------------------------------------------------------------------
    def abort_timed_out(self, now: int | None = None) -> int:
        now = self.clock.wall_ms() if now is None else now
        count = 0
        for meta in list(self.txns.values()):
            if (meta.state == TxnState.ONGOING and meta.start_ms > 0
                    and now - meta.start_ms > meta.timeout_ms):
                log.warning("txn.timed_out", transactional_id=meta.transactional_id,
                            producer_id=meta.producer_id, epoch=meta.producer_epoch,
                            age_ms=now - meta.start_ms, timeout_ms=meta.timeout_ms,
                            partitions=len(meta.partitions),
                            consequence="aborted with a bumped epoch; the producer's next call "
                                        "fails with PRODUCER_FENCED")
                self.stats["timed_out"] += 1
                self.timeline.record(meta.transactional_id, "timeout_abort", producer_id=meta.producer_id,
                                     epoch=meta.producer_epoch, start_ms=meta.start_ms,
                                     last_update_ms=meta.last_update_ms, timeout_ms=meta.timeout_ms,
                                     deadline_ms=meta.start_ms + meta.timeout_ms,
                                     late_ms=now - meta.start_ms - meta.timeout_ms,
                                     partitions=sorted(meta.partitions))
                self._abort(meta, reason="transaction.timeout.ms exceeded", fenced=True)
                count += 1
        return count

    def expire_ids(self, now: int | None = None) -> int:
        now = self.clock.wall_ms() if now is None else now
        count = 0
        for meta in list(self.txns.values()):
            if (meta.state.may_expire
                    and now - meta.last_update_ms >= self.id_expiration_ms):
                log.info("txn.id_expired", transactional_id=meta.transactional_id,
                         producer_id=meta.producer_id, idle_ms=now - meta.last_update_ms,
                         expiration_ms=self.id_expiration_ms)
                self._persist(meta, TxnState.DEAD)
                self.timeline.record(meta.transactional_id, "expired", producer_id=meta.producer_id,
                                     idle_ms=now - meta.last_update_ms, expiration_ms=self.id_expiration_ms)
                self._forget(meta.transactional_id)
                count += 1
        return count
