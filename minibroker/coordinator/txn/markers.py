"""Writing transaction markers: the control batches that end a transaction in each
of its partitions (also the WriteTxnMarkers API).

The appends are local and synchronous. Whoever cares that a marker landed (fetch
waiters, the group coordinator for ``__consumer_offsets``) is told through the
``marker_written`` callback the wiring passes in, so this module knows neither.
"""

from __future__ import annotations

from collections.abc import Callable

from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.records import build_control_batch
from minibroker_storage.errors import ProducerStateError, StorageError
from minibroker_storage.lazylog import get_logger
from minibroker_storage.manager import LogManager

from ...core.crash_points import NO_CRASH_POINTS, CrashPoints

log = get_logger("minibroker.txn")

# (topic, partition, producer id, commit): a marker is in that partition's log
MarkerWritten = Callable[[str, int, int, bool], None]


class MarkerWriter:
    def __init__(self, logs: LogManager, marker_written: MarkerWritten,
                 crash: CrashPoints = NO_CRASH_POINTS) -> None:
        self.logs = logs
        self.marker_written = marker_written
        self.crash = crash
        # (topic, partition, first offset of the transaction there or None, marker offset) of
        # the last call's markers, for the timeline: how long each partition's LSO was held.
        self.written: list[tuple[str, int, int | None, int]] = []

    def __call__(self, pid: int, epoch: int, commit: bool, coordinator_epoch: int,
                 partitions: list[tuple[str, int]], transaction_version: int = 0
                 ) -> dict[tuple[str, int], ErrorCode]:
        out: dict[tuple[str, int], ErrorCode] = {}
        self.written = []
        for topic, partition in partitions:
            plog = (self.logs.get_log(topic, partition)
                    if self.logs.topic(topic) is not None else None)
            if plog is None:
                out[(topic, partition)] = ErrorCode.unknown_topic_or_partition
                continue
            marker = build_control_batch(producer_id=pid, producer_epoch=epoch, commit=commit,
                                         coordinator_epoch=coordinator_epoch)
            try:
                info = plog.append(marker, origin="coordinator", transaction_version=transaction_version)
            except ProducerStateError as e:
                log.warning("txn.marker_rejected", topic=topic, **e.log_fields())
                out[(topic, partition)] = e.error_code
                continue
            except StorageError as e:
                log.error("txn.marker_failed", topic=topic, partition=partition, error=str(e))
                out[(topic, partition)] = e.error_code
                continue
            out[(topic, partition)] = ErrorCode.none
            done = info.completed_txn
            self.written.append((topic, partition, done.first_offset if done is not None else None,
                                 info.base_offset))
            self.marker_written(topic, partition, pid, commit)
            self.crash.hit("txn.after_first_marker", topic=topic, partition=partition)
        return out
