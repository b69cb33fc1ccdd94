"""Per-partition producer state: epochs, sequence numbers, duplicates, open transactions.

Kafka's ProducerStateEntry / ProducerAppendInfo / ProducerStateManager
(apache/kafka storage/src/main/java/org/apache/kafka/storage/internals/log/),
reduced to one batch per append and one replica. ``check`` validates a batch
against the state before a byte is written; ``update`` applies a batch that is
in the log (after the write, and when the log is replayed at start-up).

Snapshots (``<offset:020d>.snapshot`` in the partition directory) hold the
state as it was after every batch below ``offset``; at start-up the newest
usable one is loaded and the log after it replayed, reading batch headers only.
Our own format, which unlike Kafka's keeps every retained batch of a producer
(so a retry of any of the last 5 is still a duplicate after a restart)::

    version int16 | crc32c uint32 (over everything after it) | offset int64 | count int32
    count x (producer_id int64, epoch int16, coordinator_epoch int32,
             current_txn_first_offset int64, last_timestamp int64, batches int8,
             batches x (first_seq int32, last_seq int32, first_offset int64,
                        last_offset int64, timestamp int64))
"""

from __future__ import annotations

import os
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, NamedTuple, Protocol

from minibroker_protocol import checksum
from minibroker_protocol.batch import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    HEADER_SIZE,
    NO_SEQUENCE,
    TRANSACTIONAL_BIT,
    BatchHeader,
    InvalidBatch,
    iter_headers,
)
from minibroker_protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    decode_batch,
    decode_varint,
    decode_varlong,
    parse_control_record,
    parse_end_txn_marker,
)

from .atomic_file import write_atomically
from .config import INT32_MAX
from .errors import (
    InvalidProducerEpoch,
    InvalidRecord,
    InvalidTxnState,
    OutOfOrderSequence,
    ProducerStateError,
    TransactionCoordinatorFenced,
    UnknownProducerId,
)
from .lazylog import get_logger
from .txn_index import OngoingTxns


class Segment(Protocol):
    """What the replay reads of a log segment (segment.Segment); a protocol, not an import,
    as segment.py imports this module (through segment_files) for its snapshots."""

    @property
    def base_offset(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def size(self) -> int: ...
    def find(self, offset: int) -> int: ...
    def view(self, start: int, end: int) -> memoryview: ...
    def good_spans(self, start: int = 0) -> list[tuple[int, int]]: ...

__all__ = [
    "AppendOrigin",
    "BatchMetadata",
    "CompletedTxn",
    "ControlMarker",
    "InvalidProducerEpoch",
    "InvalidTxnState",
    "NUM_BATCHES_TO_RETAIN",
    "OutOfOrderSequence",
    "ProducerStateEntry",
    "ProducerStateError",
    "ProducerStateManager",
    "SNAPSHOT_SUFFIX",
    "TransactionCoordinatorFenced",
    "UnknownProducerId",
    "read_control_marker",
]

_log = get_logger(__name__)

NUM_BATCHES_TO_RETAIN = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
MAX_EPOCH = 32767  # Short.MAX_VALUE: an epoch that cannot be bumped
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOTS_TO_KEEP = 2
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86400000

# "client": a Produce request, fully validated. "coordinator": written by the
# broker itself (transaction markers, __consumer_offsets records): epochs are
# checked, sequence numbers are not (Kafka's AppendOrigin.COORDINATOR).
AppendOrigin = Literal["client", "coordinator"]
ORIGINS = ("client", "coordinator")

_SNAPSHOT_VERSION = 1
_SNAP_HEAD = struct.Struct(">hI")  # version, crc
_SNAP_BODY_HEAD = struct.Struct(">qi")  # offset, entry count
_SNAP_ENTRY = struct.Struct(">qhiqqb")
_SNAP_BATCH = struct.Struct(">iiqqq")


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


_new_batch = tuple.__new__  # BatchMetadata without NamedTuple's Python-level __new__
_SEQ_WRAP = 2**31  # sequences wrap at Int32.MAX (Kafka DefaultRecordBatch.incrementSequence)


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker: what the .txnindex and the LSO need."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


class ControlMarker(NamedTuple):
    """The one record of an end-transaction control batch."""

    control_type: int  # CONTROL_ABORT (0) or CONTROL_COMMIT (1)
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.control_type == CONTROL_ABORT


def _batch_deque() -> deque[BatchMetadata]:
    return deque(maxlen=NUM_BATCHES_TO_RETAIN)


@dataclass(slots=True)
class ProducerStateEntry:
    """One producer's state in a partition: epoch, its last batches, open transaction."""
    producer_id: int
    epoch: int = -1
    # Oldest first; the deque drops the oldest when a sixth batch arrives.
    batches: deque[BatchMetadata] = field(default_factory=_batch_deque)
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1  # -1: no open transaction
    last_timestamp: int = -1

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def first_data_offset(self) -> int:
        return self.batches[0].first_offset if self.batches else -1

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def has_open_transaction(self) -> bool:
        return self.current_txn_first_offset >= 0

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        # Kafka ProducerStateEntry.findDuplicateBatch: same epoch and exactly
        # the same sequence range as one of the retained batches.
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def _set_epoch(self, epoch: int) -> None:
        # Kafka ProducerStateEntry.maybeUpdateProducerEpoch: a new epoch
        # forgets the previous epoch's batches.
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.epoch,
            deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
            self.coordinator_epoch,
            self.current_txn_first_offset,
            self.last_timestamp,
        )


def _next_seq(last_seq: int) -> int:
    # Kafka ProducerAppendInfo.inSequence: 0 follows Int32.MAX.
    return 0 if last_seq == INT32_MAX else last_seq + 1


def read_control_marker(buf, header: BatchHeader) -> ControlMarker | None:
    """The end-transaction marker in the control batch ``header`` describes
    (at ``header.position`` in ``buf``), without decoding more than its one
    record's key and value; None for an empty control batch."""
    if header.record_count <= 0:
        # Kafka: an empty control batch is a transaction the cleaner removed.
        return None
    try:
        if header.attributes & COMPRESSION_MASK:
            record = decode_batch(buf, header.position)[0]
            key, value = record.key, record.value
        else:
            pos = header.position + HEADER_SIZE
            _, pos = decode_varint(buf, pos)  # record length
            pos += 1  # record attributes
            _, pos = decode_varlong(buf, pos)  # timestamp delta
            _, pos = decode_varint(buf, pos)  # offset delta
            n, pos = decode_varint(buf, pos)
            key = bytes(buf[pos : pos + n]) if n >= 0 else None
            pos += max(n, 0)
            n, pos = decode_varint(buf, pos)
            value = bytes(buf[pos : pos + n]) if n >= 0 else None
            if pos + max(n, 0) > header.end:
                raise ValueError("control record overruns its batch")
        _, control_type = parse_control_record(key)
        if control_type not in (CONTROL_ABORT, CONTROL_COMMIT):
            raise ValueError(f"control type {control_type} is not an end-transaction marker")
        _, coordinator_epoch = parse_end_txn_marker(value)
    except (ValueError, IndexError, struct.error) as exc:
        raise InvalidRecord(f"malformed end-transaction marker: {exc}") from exc
    except InvalidBatch as exc:  # from decode_batch
        raise InvalidRecord(f"malformed control batch: {exc}") from exc
    return ControlMarker(control_type, coordinator_epoch)


class CorruptSnapshot(Exception):
    pass


def snapshot_path(directory: str, offset: int) -> str:
    return os.path.join(directory, f"{offset:020d}{SNAPSHOT_SUFFIX}")


def list_snapshots(directory: str) -> list[int]:
    """Offsets of the snapshot files in ``directory``, ascending."""
    out = []
    for name in os.listdir(directory):
        stem, _, suffix = name.partition(".")
        if "." + suffix == SNAPSHOT_SUFFIX and len(stem) == 20 and stem.isdigit():
            out.append(int(stem))
    out.sort()
    return out


def encode_snapshot(offset: int, entries: Iterable[ProducerStateEntry]) -> bytes:
    entries = list(entries)
    body = bytearray(_SNAP_BODY_HEAD.pack(offset, len(entries)))
    for e in entries:
        body += _SNAP_ENTRY.pack(
            e.producer_id,
            e.epoch,
            e.coordinator_epoch,
            e.current_txn_first_offset,
            e.last_timestamp,
            len(e.batches),
        )
        for b in e.batches:
            body += _SNAP_BATCH.pack(*b)
    return _SNAP_HEAD.pack(_SNAPSHOT_VERSION, checksum.crc32c(body)) + body


def decode_snapshot(data: bytes, expect_offset: int | None = None) -> list[ProducerStateEntry]:
    if len(data) < _SNAP_HEAD.size + _SNAP_BODY_HEAD.size:
        raise CorruptSnapshot(f"{len(data)} bytes are too short for a snapshot")
    version, crc = _SNAP_HEAD.unpack_from(data, 0)
    if version != _SNAPSHOT_VERSION:
        raise CorruptSnapshot(f"unknown snapshot version {version}")
    body = memoryview(data)[_SNAP_HEAD.size :]
    if checksum.crc32c(body) != crc:
        raise CorruptSnapshot("CRC-32C mismatch")
    offset, count = _SNAP_BODY_HEAD.unpack_from(body, 0)
    if expect_offset is not None and offset != expect_offset:
        raise CorruptSnapshot(f"holds offset {offset}, its name says {expect_offset}")
    pos = _SNAP_BODY_HEAD.size
    entries = []
    try:
        for _ in range(count):
            pid, epoch, coord, txn_first, last_ts, nbatches = _SNAP_ENTRY.unpack_from(body, pos)
            pos += _SNAP_ENTRY.size
            if not 0 <= nbatches <= NUM_BATCHES_TO_RETAIN:
                raise CorruptSnapshot(f"producer {pid} has {nbatches} batches")
            batches = _batch_deque()
            for _ in range(nbatches):
                batches.append(BatchMetadata(*_SNAP_BATCH.unpack_from(body, pos)))
                pos += _SNAP_BATCH.size
            entries.append(ProducerStateEntry(pid, epoch, batches, coord, txn_first, last_ts))
    except struct.error as exc:
        raise CorruptSnapshot(f"truncated: {exc}") from None
    if pos != len(body):
        raise CorruptSnapshot(f"{len(body) - pos} bytes after the last entry")
    return entries


class ProducerStateManager:
    """The producers of one partition. Not thread-safe, like the log."""

    def __init__(
        self,
        directory: str,
        partition: str = "",
        expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.directory = directory
        self.partition = partition or os.path.basename(directory)
        self.expiration_ms = expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        # Producers with an open transaction → its first offset (Kafka's
        # ongoingTxns), so the first unstable offset costs O(open transactions).
        self._ongoing = OngoingTxns()
        self._snapshots: list[int] = []  # offsets of the snapshot files, ascending
        self._logger = _log.bind(log=self.partition)

    # ---------------------------------------------------------------- views

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        """Read-only view, producer id → entry (DescribeProducers)."""
        return MappingProxyType(self._producers)

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def __len__(self) -> int:
        return len(self._producers)

    @property
    def snapshot_offsets(self) -> list[int]:
        return list(self._snapshots)

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction, None when none is open
        (with one replica, a decided transaction is stable at once)."""
        return self._ongoing.first_unstable()

    @property
    def open_transactions(self) -> OngoingTxns:
        """The open transactions, from which the LSO and the .txnindex entries follow."""
        return self._ongoing

    @property
    def ongoing_transactions(self) -> Mapping[int, int]:
        """Read-only view, producer id → first offset of its open transaction."""
        return MappingProxyType(self._ongoing.firsts)

    def _sync_ongoing(self) -> None:
        """Recompute ``_ongoing`` from the entries, oldest transaction first."""
        open_txns = [(e.current_txn_first_offset, pid) for pid, e in self._producers.items()
                     if e.current_txn_first_offset >= 0]
        open_txns.sort()
        self._ongoing.firsts = {pid: first for first, pid in open_txns}

    # ----------------------------------------------------------- validation

    def check(
        self,
        header: BatchHeader,
        marker: ControlMarker | None = None,
        origin: AppendOrigin = "client",
        transaction_version: int = 0,
    ) -> BatchMetadata | None:
        """Validate a batch with ``header.producer_id >= 0`` before it is written.

        Returns the original batch's metadata when the batch is a duplicate of
        one of the producer's last 5 (the caller must not append it), None when
        it may be appended; raises a ``ProducerStateError`` otherwise. Nothing
        changes here: ``update`` applies the batch once it is written.
        """
        pid = header.producer_id
        epoch = header.producer_epoch
        entry = self._producers.get(pid)
        if header.attributes & CONTROL_BIT:
            if entry is not None:
                if transaction_version >= 2:
                    self._check_marker_epoch_v2(entry, header, transaction_version)
                else:
                    self._check_epoch(entry, header, offset_kind="marker")
                if marker is not None and entry.coordinator_epoch > marker.coordinator_epoch:
                    raise TransactionCoordinatorFenced(
                        f"end-transaction marker of producer {pid} from coordinator epoch "
                        f"{marker.coordinator_epoch}, older than the last seen {entry.coordinator_epoch}",
                        producer_id=pid,
                        epoch=epoch,
                        current_epoch=entry.epoch,
                        partition=self.partition,
                        coordinator_epoch=marker.coordinator_epoch,
                        current_coordinator_epoch=entry.coordinator_epoch,
                    )
            return None

        first_seq = header.base_sequence
        if entry is None:
            # Rule 5: a producer we hold no state for (new, or its state expired
            # after producer.id.expiration.ms, or retention removed its batches) may
            # start at any sequence, as Kafka >= 2.5 accepts it (KIP-360; apache/kafka
            # storage/.../ProducerAppendInfo.checkSequence: a new epoch with a non-zero
            # sequence is refused only when a current epoch is known). Refusing it with
            # UNKNOWN_PRODUCER_ID made a transactional client abort for nothing.
            return None

        if origin == "client":
            # Kafka UnifiedLog.analyzeAndValidateProducerState: a duplicate is
            # recognised before any other check.
            dup = entry.find_duplicate(epoch, first_seq, header.last_sequence)
            if dup is not None:
                return dup
        self._check_epoch(entry, header, offset_kind="batch")
        if origin == "client":
            if epoch != entry.epoch:
                expected = 0  # rule 3: a bumped epoch starts over
            else:
                expected = _next_seq(entry.last_seq)  # rule 4 (-1 + 1 = 0 when empty)
            if first_seq != expected:
                what = "new epoch" if epoch != entry.epoch else "epoch"
                raise OutOfOrderSequence(
                    f"out of order sequence for producer {pid} {what} {epoch}: "
                    f"expected {expected}, got {first_seq}",
                    producer_id=pid,
                    epoch=epoch,
                    current_epoch=entry.epoch,
                    expected_sequence=expected,
                    received_sequence=first_seq,
                    partition=self.partition,
                )
        if entry.current_txn_first_offset >= 0 and not header.is_transactional:
            raise InvalidTxnState(
                f"producer {pid} sent a non-transactional batch while its transaction "
                f"from offset {entry.current_txn_first_offset} is open",
                producer_id=pid,
                epoch=epoch,
                current_epoch=entry.epoch,
                received_sequence=first_seq,
                partition=self.partition,
            )
        return None

    def _check_marker_epoch_v2(self, entry: ProducerStateEntry, header: BatchHeader, version: int) -> None:
        """A transactions-v2 marker (KIP-1228): the coordinator bumped the epoch when the
        transaction ended, so the marker's is above the producer's. The same epoch is a retry of
        a marker already written, allowed once no transaction is open (or at the last epoch,
        which cannot be bumped): apache/kafka ProducerAppendInfo.checkProducerEpoch."""
        epoch = header.producer_epoch
        if epoch > entry.epoch:
            return
        if epoch == entry.epoch and (entry.current_txn_first_offset < 0 or epoch == MAX_EPOCH):
            return
        relation = "below" if epoch < entry.epoch else "the same as"
        raise InvalidProducerEpoch(
            f"marker of producer {header.producer_id} has epoch {epoch}, {relation} the current "
            f"{entry.epoch} (transaction version {version})",
            producer_id=header.producer_id,
            epoch=epoch,
            current_epoch=entry.epoch,
            received_sequence=header.base_sequence,
            partition=self.partition,
        )

    def _check_epoch(self, entry: ProducerStateEntry, header: BatchHeader, offset_kind: str) -> None:
        if header.producer_epoch < entry.epoch:
            raise InvalidProducerEpoch(
                f"{offset_kind} of producer {header.producer_id} has epoch {header.producer_epoch}, "
                f"older than the current {entry.epoch}",
                producer_id=header.producer_id,
                epoch=header.producer_epoch,
                current_epoch=entry.epoch,
                received_sequence=header.base_sequence,
                partition=self.partition,
            )

    # --------------------------------------------------------------- update

    def update(
        self, header: BatchHeader, first_offset: int, marker: ControlMarker | None = None
    ) -> CompletedTxn | None:
        """Apply a batch that is in the log at ``first_offset`` (no checks:
        also the replay path). Returns the transaction a marker ended."""
        pid = header.producer_id
        control = header.attributes & CONTROL_BIT
        if control and marker is None:
            return None  # an empty control batch changes nothing
        entry = self._producers.get(pid)
        if entry is None:
            entry = self._producers[pid] = ProducerStateEntry(pid)
        if control:
            # Kafka ProducerAppendInfo.appendEndTxnMarker: only a marker that
            # ends an open transaction is a CompletedTxn (the .txnindex and the
            # LSO care about no other).
            assert marker is not None  # an empty control batch returned above
            completed = None
            if entry.current_txn_first_offset >= 0:
                completed = CompletedTxn(
                    pid, entry.current_txn_first_offset, first_offset, marker.is_abort
                )
                self._ongoing.end(pid)
            entry._set_epoch(header.producer_epoch)
            entry.coordinator_epoch = marker.coordinator_epoch
            entry.current_txn_first_offset = -1
            entry.last_timestamp = header.max_timestamp
            return completed
        epoch = header.producer_epoch
        if epoch != entry.epoch:
            entry._set_epoch(epoch)
        delta = header.last_offset_delta
        first_seq = header.base_sequence
        # header.last_sequence, inline: this runs once per appended batch
        last_seq = NO_SEQUENCE if first_seq == NO_SEQUENCE else (first_seq + delta) % _SEQ_WRAP
        entry.batches.append(
            _new_batch(BatchMetadata, (first_seq, last_seq, first_offset, first_offset + delta,
                                       header.max_timestamp))
        )
        # Kafka keeps the batch's max timestamp, not the broker's clock, as
        # the time expiry counts from (ProducerStateEntry.addBatch).
        entry.last_timestamp = header.max_timestamp
        if header.attributes & TRANSACTIONAL_BIT and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self._ongoing.begin(pid, first_offset)
        return None

    # ------------------------------------------------------ expiry, retention

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int, expiration_ms: int) -> bool:
        # Kafka ProducerStateManager.isProducerExpired: never while a
        # transaction is open.
        return entry.current_txn_first_offset < 0 and now_ms - entry.last_timestamp >= expiration_ms

    def expire(self, now_ms: int, expiration_ms: int | None = None) -> list[int]:
        """Forget producers idle for ``expiration_ms``; returns their ids."""
        limit = self.expiration_ms if expiration_ms is None else expiration_ms
        gone = [pid for pid, e in self._producers.items() if self._is_expired(e, now_ms, limit)]
        for pid in gone:
            e = self._producers.pop(pid)
            self._ongoing.end(pid)  # never there: open transactions do not expire
            self._logger.info(
                "producer.expired",
                producer_id=pid,
                epoch=e.epoch,
                last_sequence=e.last_seq,
                last_timestamp=e.last_timestamp,
                idle_ms=now_ms - e.last_timestamp,
                expiration_ms=limit,
            )
        return gone

    def truncate_head(self, log_start_offset: int) -> list[int]:
        """The log now starts at ``log_start_offset``: forget producers none
        of whose batches remain, and snapshots below it. Returns their ids."""
        # Kafka 2.x ProducerStateManager.truncateHead / isProducerRetained: a
        # producer stays only while its last data batch is still in the log
        # (an entry left without batches, by a marker that bumped its epoch,
        # goes too).
        gone = [
            pid
            for pid, e in self._producers.items()
            if not e.batches or e.batches[-1].last_offset < log_start_offset
        ]
        for pid in gone:
            del self._producers[pid]
            self._ongoing.end(pid)
        if gone:
            self._logger.info(
                "producer.removed_by_retention",
                producer_ids=gone[:20],
                count=len(gone),
                log_start_offset=log_start_offset,
            )
        self.delete_snapshots_below(log_start_offset)
        return gone

    # ------------------------------------------------------------ snapshots

    def take_snapshot(self, offset: int) -> str:
        """Write the state (after every batch below ``offset``) atomically;
        keeps the newest ``SNAPSHOTS_TO_KEEP``. The caller fsyncs the directory."""
        started = time.perf_counter()
        path = snapshot_path(self.directory, offset)
        write_atomically(path, encode_snapshot(offset, self._producers.values()))
        if offset not in self._snapshots:
            self._snapshots.append(offset)
            self._snapshots.sort()
        while len(self._snapshots) > SNAPSHOTS_TO_KEEP:
            self._delete_snapshot(self._snapshots[0])
        self._logger.info(
            "producer_snapshot.written",
            offset=offset,
            producers=len(self._producers),
            ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return path

    def delete_snapshots_below(self, offset: int) -> None:
        for s in [s for s in self._snapshots if s < offset]:
            self._delete_snapshot(s)

    def _delete_snapshot(self, offset: int) -> None:
        try:
            self._snapshots.remove(offset)
        except ValueError:
            pass
        try:
            os.unlink(snapshot_path(self.directory, offset))
        except FileNotFoundError:
            pass

    # ----------------------------------------------------------------- load

    def load(
        self,
        segments: Sequence[Segment],
        log_start_offset: int,
        log_end_offset: int,
        now_ms: int,
        *,
        max_snapshot_offset: int | None = None,
        on_completed: Callable[[CompletedTxn], None] | None = None,
    ) -> int:
        """Rebuild the state: newest usable snapshot, then replay of the log
        after it (headers only, plus each marker's record). Returns the offset
        the replay started from.

        ``max_snapshot_offset``: use no snapshot above it (kept on disk), so the
        replay covers the log from there on. ``on_completed`` is called with
        each transaction a replayed marker ends, right after the state has
        applied it (the partition log rebuilds its .txnindex from these).
        """
        started = time.perf_counter()
        self._producers.clear()
        self._ongoing.clear()
        self._snapshots = list_snapshots(self.directory)
        loaded_from = None
        for offset in reversed(list(self._snapshots)):
            if max_snapshot_offset is not None and offset > max_snapshot_offset:
                continue
            if offset > log_end_offset or offset < log_start_offset:
                # Above the end: written before the log lost its tail; using it
                # would resurrect batches that are gone. Below the start: stale.
                self._logger.info(
                    "producer_snapshot.out_of_range_deleted",
                    offset=offset,
                    log_start_offset=log_start_offset,
                    log_end_offset=log_end_offset,
                )
                self._delete_snapshot(offset)
                continue
            try:
                with open(snapshot_path(self.directory, offset), "rb") as f:
                    entries = decode_snapshot(f.read(), offset)
            except (CorruptSnapshot, OSError) as exc:
                self._logger.warning(
                    "producer_snapshot.corrupt_deleted", offset=offset, reason=str(exc)
                )
                self._delete_snapshot(offset)
                continue
            for e in entries:
                self._producers[e.producer_id] = e
            loaded_from = offset
            break
        start = log_start_offset if loaded_from is None else loaded_from
        self._sync_ongoing()
        replayed = self._replay(segments, start, on_completed)
        # The rules that would have removed producers while running apply to
        # what was loaded as well (Kafka filters expired snapshot entries).
        removed = [
            pid
            for pid, e in self._producers.items()
            if not e.batches or e.batches[-1].last_offset < log_start_offset
        ]
        for pid in removed:
            del self._producers[pid]
        expired = [
            pid
            for pid, e in self._producers.items()
            if self._is_expired(e, now_ms, self.expiration_ms)
        ]
        for pid in expired:
            del self._producers[pid]
        self._sync_ongoing()
        self._logger.info(
            "producer_state.loaded",
            snapshot_offset=loaded_from,
            replayed_from=start,
            batches_replayed=replayed,
            producers=len(self._producers),
            removed_below_log_start=len(removed),
            expired=len(expired),
            ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return start

    def _replay(
        self,
        segments: Sequence[Segment],
        start: int,
        on_completed: Callable[[CompletedTxn], None] | None = None,
    ) -> int:
        replayed = 0
        for seg in segments:
            if seg.next_offset <= start or seg.size == 0:
                continue
            pos = 0 if start <= seg.base_offset else seg.find(start)
            if pos < 0:
                continue
            view = seg.view(0, seg.size)
            try:
                # Walk around regions storage knows to be bad, so a corrupt header never
                # reaches producer state.
                for header in (h for a, b in seg.good_spans(pos) for h in iter_headers(view, a, b)):
                    replayed += 1
                    if header.producer_id < 0 or header.last_offset < start:
                        continue
                    marker = None
                    if header.is_control:
                        try:
                            marker = read_control_marker(view, header)
                        except InvalidRecord as exc:
                            self._logger.warning(
                                "producer_state.marker_unreadable",
                                offset=header.base_offset,
                                producer_id=header.producer_id,
                                reason=str(exc),
                            )
                            continue
                    completed = self.update(header, header.base_offset, marker)
                    if completed is not None and on_completed is not None:
                        on_completed(completed)
            finally:
                view.release()
        return replayed
