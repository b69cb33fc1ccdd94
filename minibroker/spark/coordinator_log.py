"""What ``__transaction_state`` says each partition's log must hold: the audit's reference.

The transaction coordinator persists every transition before acting on it: a
``PrepareCommit``/``PrepareAbort`` record names the partitions of the transaction, then
the markers are written, then ``CompleteCommit``/``CompleteAbort``. So a completed
transaction obliges each of its partitions to hold one marker of that type with that
producer id and epoch; a prepared one may or may not have its markers yet (the broker
writes them when it restarts); an ``Ongoing`` one may have data without a marker.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minibroker_protocol import txn_log as tl
from minibroker_protocol.records import decode_batch
from minibroker_protocol.topics import TRANSACTION_STATE_TOPIC
from minibroker_storage.offline import iter_batches, partition_dirs

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class ExpectedMarker:
    producer_id: int
    epoch: int
    commit: bool
    decided_ms: int  # when the coordinator prepared it (the record's last_update_ms)


@dataclass
class PartitionExpectations:
    """The coordinator's view of one partition."""

    markers: list[ExpectedMarker] = field(default_factory=list)  # completed, in order
    undecided: set[int] = field(default_factory=set)  # producer ids Ongoing or Prepare* here


@dataclass
class CoordinatorView:
    available: bool  # a readable __transaction_state was found
    partitions: dict[TopicPartition, PartitionExpectations] = field(default_factory=dict)
    unreadable_records: int = 0  # records of another format (e.g. a Kafka broker's newer ones)

    def for_partition(self, tp: TopicPartition) -> PartitionExpectations:
        return self.partitions.get(tp) or PartitionExpectations()


def read_coordinator_log(data_dir: str) -> CoordinatorView:
    dirs = [p for p in partition_dirs(data_dir) if p.topic == TRANSACTION_STATE_TOPIC]
    view = CoordinatorView(available=bool(dirs))
    prepared: dict[str, tuple[tl.TxnLogValue, bool]] = {}  # transactional id -> prepare record
    last: dict[str, tl.TxnLogValue] = {}
    for pdir in dirs:
        for header, batch, _seg in iter_batches(pdir.path, 0):
            if header.is_control:
                continue
            for rec in decode_batch(batch):
                try:
                    tid = tl.decode_key(rec.key)
                    value = None if rec.value is None else tl.decode_value(rec.value)
                except (tl.TxnLogFormatError, UnicodeDecodeError, TypeError):
                    view.unreadable_records += 1
                    continue
                if value is None:
                    last.pop(tid, None)
                    prepared.pop(tid, None)
                    continue
                last[tid] = value
                if value.state in (tl.PREPARE_COMMIT, tl.PREPARE_ABORT):
                    prepared[tid] = (value, value.state == tl.PREPARE_COMMIT)
                elif value.state in (tl.COMPLETE_COMMIT, tl.COMPLETE_ABORT) and tid in prepared:
                    prep, commit = prepared.pop(tid)
                    marker = ExpectedMarker(prep.producer_id, prep.producer_epoch, commit,
                                            prep.last_update_ms)
                    for tp in prep.partitions:
                        view.partitions.setdefault(tp, PartitionExpectations()).markers.append(marker)
    for value in last.values():
        if value.state in (tl.ONGOING, tl.PREPARE_COMMIT, tl.PREPARE_ABORT, tl.PREPARE_EPOCH_FENCE):
            for tp in value.partitions:
                view.partitions.setdefault(tp, PartitionExpectations()).undecided.add(value.producer_id)
    return view
