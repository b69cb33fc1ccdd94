"""Offline reads: a minibroker (or Kafka) data directory instead of a broker.

The planner side lists partitions and computes their watermarks (earliest, the high
watermark, and for read_committed the LSO) from the segment files; the reader side
decodes one offset range. Both go through ``storage.offline``, which never writes to,
locks or repairs the directory, so a broker may be running on it.

read_committed follows Kafka's fetch path: nothing at or past the LSO is planned, control
batches are skipped, and a transactional batch of producer P at offset o is dropped when
an aborted transaction of P spans it (first <= o <= last) in the transaction index. The
planner also passes the aborted transactions it saw in the log's ABORT markers for the
range, so a ``.txnindex`` entry the broker is still writing (or one lost in a crash,
which the broker rebuilds only when it restarts) cannot let aborted records through.
"""

from __future__ import annotations

import os
import re

from minibroker_protocol.records import decode_batch
from minibroker_protocol.topics import INTERNAL_TOPICS
from minibroker_storage.lazylog import get_logger
from minibroker_storage.offline import (
    AbortedIndex,
    PartitionScan,
    iter_batches,
    partition_dirs,
    txn_index_entries,
)
from minibroker_storage.txn_index import AbortedTxn

from .offsets import DataLoss, OffsetRange, TopicPartition, Watermarks
from .schema import CREATE_TIME, LOG_APPEND_TIME, ROWS_PER_BATCH, RowBuffer

log = get_logger(__name__)


class LogDirPlanner:
    """Driver side: which partitions a query reads and where they start and end."""

    def __init__(self, data_dir: str, read_committed: bool, subscribe=(), pattern: str | None = None,
                 assign=()) -> None:
        if not os.path.isdir(data_dir):
            raise FileNotFoundError(f"path {data_dir!r} is not a directory")
        self.data_dir = data_dir
        self.read_committed = read_committed
        self._subscribe, self._pattern, self._assign = tuple(subscribe), pattern, tuple(assign)
        self._scans: dict[TopicPartition, PartitionScan] = {}

    @classmethod
    def for_options(cls, options) -> LogDirPlanner:
        return cls(options.path, options.read_committed, options.subscribe, options.pattern,
                   options.assign)

    def close(self) -> None:
        self._scans.clear()

    def partitions(self) -> list[TopicPartition]:
        found = [(p.topic, p.partition) for p in partition_dirs(self.data_dir)]
        if self._assign:
            missing = sorted(set(self._assign) - set(found))
            if missing:
                raise ValueError(f"assigned partitions not in {self.data_dir}: {missing}")
            return sorted(self._assign)
        if self._pattern is not None:
            rx = re.compile(self._pattern)
            # Internal topics only when named, like Spark's subscribePattern: it lists topics
            # with the admin client's default ListTopicsOptions (listInternal=false), which
            # leaves out Kafka's internal topics only, not every name starting with "__".
            return [tp for tp in found if rx.fullmatch(tp[0]) and tp[0] not in INTERNAL_TOPICS]
        return [tp for tp in found if tp[0] in self._subscribe]

    def scan(self, tp: TopicPartition):
        scan = self._scans.get(tp)
        if scan is None:
            scan = self._scans[tp] = PartitionScan(partition_path(self.data_dir, tp))
        return scan.advance()

    def watermarks(self, tps) -> dict[TopicPartition, Watermarks]:
        out = {}
        for tp in tps:
            s = self.scan(tp)
            out[tp] = Watermarks(s.earliest, s.last_stable if self.read_committed else s.log_end)
        return out

    def aborted_for(self, r: OffsetRange) -> tuple[AbortedTxn, ...]:
        if not self.read_committed:
            return ()
        return tuple(self.scan((r.topic, r.partition)).aborted_between(r.start, r.end))


def partition_path(data_dir: str, tp: TopicPartition) -> str:
    return os.path.join(data_dir, f"{tp[0]}-{tp[1]}")


def read_range(data_dir: str, r: OffsetRange, *, read_committed: bool, include_headers: bool,
               fail_on_data_loss: bool = True, aborted_seen: tuple[AbortedTxn, ...] = ()):
    """Yield the records of ``r`` as Arrow batches: data records only, in offset order."""
    path = partition_path(data_dir, (r.topic, r.partition))
    aborted = None
    if read_committed:
        entries = txn_index_entries(path)
        if entries is None:
            log.warning("spark.offline.txn_index_unusable", partition_dir=path,
                        reason="a .txnindex file is missing or malformed; using the ABORT markers")
            entries = []
        aborted = AbortedIndex(list(entries) + list(aborted_seen))
    rows = RowBuffer(r.topic, r.partition, include_headers)
    reached = r.start
    for header, batch, _seg in iter_batches(path, r.start):
        if header.base_offset >= r.end:
            reached = r.end
            break
        if header.base_offset > reached:
            _lost(f"offsets {reached}..{header.base_offset - 1} of {r.topic}-{r.partition} are "
                  f"missing from the log", fail_on_data_loss)
        reached = header.last_offset + 1
        if header.is_control:
            continue
        if aborted is not None and header.is_transactional and \
                aborted.is_aborted(header.producer_id, header.base_offset):
            continue
        ts_type = LOG_APPEND_TIME if header.timestamp_type else CREATE_TIME
        for rec in decode_batch(batch):
            if r.start <= rec.offset < r.end:
                rows.add(rec.key, rec.value, rec.offset, rec.timestamp, ts_type, rec.headers)
        if len(rows) >= ROWS_PER_BATCH:
            yield rows.flush()
    if reached < r.end:
        _lost(f"{r.topic}-{r.partition} ends at offset {reached}, before the planned end {r.end}",
              fail_on_data_loss)
    batch = rows.flush()
    if batch is not None:
        yield batch


def _lost(message: str, fail: bool) -> None:
    if fail:
        raise DataLoss(message + " (set failOnDataLoss=false to read on)")
    log.warning("spark.offline.data_loss", detail=message)
