"""The PySpark data source ``minibroker``: batch and streaming readers.

Spark calls ``partitions`` / ``initialOffset`` / ``latestOffset`` on the driver (in a
Python planner process) and ``read`` in Python workers, on a pickled copy of the reader,
so readers hold options only and open Kafka clients or maps lazily, never in state that
gets pickled.

Streaming offsets are Spark's Kafka offset JSON (``{"topic": {"0": 42}}``) and live in
the query's checkpoint. A range ``[start, end)`` reads the same records whenever it is
read: ends are never planned past the LSO (read_committed) or the high watermark, and
data below those never changes. That is what makes a restarted query write every
committed record once with Spark's file sink.

The first micro-batch needs care: Spark takes its start from ``initialOffset()`` again
whenever it re-runs that batch after a crash (MicroBatchExecution: the committed offsets
or else ``initialOffset``), and the Python API gives a source no checkpoint directory of
its own to pin "latest" or "earliest" in (Spark's Kafka source writes one). So
``initialOffset`` returns them unresolved (-1/-2), the first ``latestOffset`` resolves
them and records the concrete start under ``@start`` in the end offset it returns -
which Spark writes to its offset log before running the batch - and ``partitions``
takes the start from there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from minibroker_storage.lazylog import get_logger

from .offsets import (
    EARLIEST,
    START_KEY,
    DataLoss,
    OffsetRange,
    TopicPartition,
    from_json_dict,
    plan_ranges,
    rate_limit,
    resolve,
    split_ranges,
    symbolic,
    to_json_dict,
)
from .options import SOURCE_NAME, SourceOptions, parse_options
from .schema import spark_schema

log = get_logger(__name__)


@dataclass
class RangePartition(InputPartition):
    """One Spark task: offsets ``[start, end)`` of one Kafka partition."""

    range: OffsetRange
    # Offline read_committed: the aborted transactions the planner found in the log's
    # markers for this range (see logdir.read_range).
    aborted: tuple = ()


class MinibrokerDataSource(DataSource):
    """``format("minibroker")``; see the package documentation for the options."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self):
        # Only includeHeaders shapes the schema; the readers validate everything else.
        return spark_schema(str(self.options.get("includeHeaders", "false")).strip().lower() == "true")

    def reader(self, schema) -> DataSourceReader:
        return BatchReader(parse_options(self.options, streaming=False))

    def streamReader(self, schema) -> DataSourceStreamReader:
        return StreamReader(parse_options(self.options, streaming=True))


def _planner(options: SourceOptions):
    """A LogDirPlanner or a KafkaPlanner: partitions(), watermarks(tps), aborted_for(range),
    close()."""
    if options.offline:
        from .logdir import LogDirPlanner

        return LogDirPlanner.for_options(options)
    from .kafka import KafkaPlanner

    return KafkaPlanner(options)


def _read(options: SourceOptions, partition: InputPartition):
    if not isinstance(partition, RangePartition):
        return iter(())  # Spark's stand-in when there is nothing to read
    if options.offline:
        from .logdir import read_range as read_files

        assert options.path is not None  # offline means path is set
        return read_files(options.path, partition.range, read_committed=options.read_committed,
                          include_headers=options.include_headers,
                          fail_on_data_loss=options.fail_on_data_loss, aborted_seen=partition.aborted)
    from .kafka import read_range as read_broker

    return read_broker(options, partition.range)


def _input_partitions(planner, options: SourceOptions, start, end) -> list[RangePartition]:
    ranges = split_ranges(plan_ranges(start, end), max_records=options.max_records_per_partition,
                          min_partitions=options.min_partitions)
    return [RangePartition(r, planner.aborted_for(r)) for r in ranges]


class BatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        o = self.options
        planner = _planner(o)
        try:
            tps = planner.partitions()
            marks = planner.watermarks(tps)
            earliest = {tp: w.earliest for tp, w in marks.items()}
            latest = {tp: w.latest for tp, w in marks.items()}
            start = resolve(o.starting, tps, earliest, latest, "startingOffsets")
            end = resolve(o.ending, tps, earliest, latest, "endingOffsets")
            # Never past what this isolation level may see: the LSO for read_committed.
            end = {tp: min(e, latest[tp]) for tp, e in end.items()}
            parts = _input_partitions(planner, o, start, end)
        finally:
            planner.close()
        log.info("spark.batch_planned", partitions=len(tps), tasks=len(parts),
                 offsets=sum(p.range.size for p in parts), isolation=o.isolation_level,
                 source=o.path or o.bootstrap)
        return parts

    def read(self, partition):
        return _read(self.options, partition)


def _concrete(offset: int, marks) -> int:
    """An offset of the start with -2/-1 replaced by the partition's earliest/latest now."""
    if offset >= 0:
        return offset
    if marks is None:
        return 0  # the partition is gone; nothing will be planned for it
    return marks.earliest if offset == EARLIEST else marks.latest


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._planner = None
        self._target: dict[TopicPartition, int] | None = None

    # The planner holds a Kafka client or open scans: it stays in the driver's process.
    def __getstate__(self):
        state = dict(self.__dict__)
        state["_planner"] = None
        return state

    def _get_planner(self):
        if self._planner is None:
            self._planner = _planner(self.options)
        return self._planner

    def _watermarks(self):
        planner = self._get_planner()
        return planner.watermarks(planner.partitions())

    def initialOffset(self) -> dict:
        planner = self._get_planner()
        start = symbolic(self.options.starting, planner.partitions())
        return to_json_dict(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: w.latest for tp, w in self._watermarks().items()}
        log.info("spark.stream_available_now", target=to_json_dict(self._target))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        marks = self._watermarks()
        begin = from_json_dict(start)
        unresolved = any(o < 0 for o in begin.values())
        if unresolved:
            begin = {tp: _concrete(o, marks.get(tp)) for tp, o in begin.items()}
            log.info("spark.stream_start_resolved", offsets=to_json_dict(begin),
                     spec=self.options.starting.kind)
        latest = {}
        for tp, w in marks.items():
            if tp not in begin:
                # A new partition joins at its earliest offset with an empty range, so
                # that every range ever planned has a start taken from the checkpoint.
                begin[tp] = w.earliest
                latest[tp] = w.earliest
                continue
            end = w.latest
            if self._target is not None:
                end = min(end, self._target.get(tp, begin[tp]))
            # An end below the start (the topic was recreated, its tail lost) is kept as it
            # is, as Spark's Kafka source does: partitions() reports the data loss and the
            # next batch goes on from there.
            latest[tp] = end
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        # A partition gone from metadata is left out of the end offset; partitions()
        # reports it as data loss (Spark: "... are gone").
        if not unresolved and latest == from_json_dict(start):
            return start  # nothing new: the very same offset tells Spark so
        doc: dict[str, Any] = to_json_dict(latest)
        if unresolved:
            doc[START_KEY] = to_json_dict(begin)
        return doc

    def reportLatestOffset(self):
        return to_json_dict({tp: w.latest for tp, w in self._watermarks().items()})

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin = from_json_dict(start)
        until = from_json_dict(end)
        if any(o < 0 for o in begin.values()):
            pinned = from_json_dict(end.get(START_KEY, {}))
            # Only partitions this batch reads need the start the first latestOffset pinned:
            # a partition that appeared since (initialOffset() is asked again when the batch
            # is replayed) is not in the end offset and joins in the next batch.
            missing = sorted(tp for tp, o in begin.items() if o < 0 and tp in until and tp not in pinned)
            if missing:
                raise ValueError(f"no recorded start offset for {missing} in the end offset {end}")
            begin = {tp: pinned.get(tp, o) for tp, o in begin.items() if o >= 0 or tp in pinned}
        self._check_data_loss(begin, until)
        return _input_partitions(self._get_planner(), self.options, begin, until)

    def _check_data_loss(self, begin: dict, until: dict) -> None:
        """Spark's checks in KafkaOffsetReaderAdmin.getOffsetRangesFromResolvedOffsets: a
        partition gone, a new partition not starting at 0, an offset that went backwards.
        Each fails the query under failOnDataLoss (the default), else is logged; the
        next batch then starts from the end offset this one recorded."""
        problems = []
        gone = sorted(tp for tp in begin if tp not in until)
        if gone:
            problems.append(f"partitions {gone} are gone (deleted, or the topic was recreated with "
                            f"fewer partitions); some data may have been missed")
        for tp, o in sorted(until.items()):
            s = begin.get(tp)
            if s is None:
                if o != 0:
                    problems.append(f"added partition {tp[0]}-{tp[1]} starts from {o} instead of 0; "
                                    f"some data may have been missed")
            elif o < s:
                problems.append(f"partition {tp[0]}-{tp[1]}'s offset was changed from {s} to {o} (the "
                                f"topic was recreated or its tail was lost); some data may have been missed")
        for p in problems:
            if self.options.fail_on_data_loss:
                raise DataLoss(p + ". Set failOnDataLoss=false to go on from the current offsets "
                                   "(records may then be missed).")
            log.warning("spark.stream_data_loss", detail=p)

    def read(self, partition):
        return _read(self.options, partition)

    def commit(self, end: dict) -> None:
        pass  # the offsets live in Spark's checkpoint; nothing on the broker to commit

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()
            self._planner = None
