"""Reading an internal topic's partition back at start-up, whatever it holds.

A coordinator's replay must never stop the broker: a batch that does not
decode is skipped and reported (``<event>`` with topic, partition, offset and
reason), and the replay goes on at the next batch. What a client wrote, or a
disk damaged, is data to report, not a reason to refuse to start.
"""

from __future__ import annotations

from collections.abc import Iterator

from minibroker_protocol.batch import BatchHeader, iter_headers
from minibroker_protocol.records import Record, decode_batch
from minibroker_storage.lazylog import get_logger
from minibroker_storage.verify import CorruptBatch

log = get_logger("minibroker.coordinator")

READ_BYTES = 1 << 20


class Skips:
    """How many batches a replay left out (the coordinators' load summary reports it)."""

    def __init__(self) -> None:
        self.count = 0


def batches(plog, topic: str, partition: int, start: int, skipped_event: str,
            skips: Skips | None = None) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """(header, records) of every batch of ``plog`` from ``start`` to its end; a batch
    whose records do not decode is logged as ``skipped_event``, counted in ``skips`` and
    left out."""
    skips = skips if skips is not None else Skips()
    offset = max(start, plog.log_start_offset)
    # Every pass moves ``offset`` forward or ends the loop; the bound is a backstop.
    for _ in range(1 << 40):
        if offset >= plog.log_end_offset:
            return
        try:
            view = plog.read(offset, READ_BYTES)
        except CorruptBatch as e:
            # storage knows this batch is bad (checksum, length or offsets): skip just it
            skips.count += 1
            log.warning(skipped_event, topic=topic, partition=partition, offset=offset,
                        position=e.bad.position, reason=f"corrupt batch: {e.bad.reason}",
                        resumed_at=e.next_offset)
            if e.next_offset <= offset:
                return
            offset = e.next_offset
            continue
        except Exception as e:  # a read error ends this partition's replay, not the broker
            log.error(skipped_event, topic=topic, partition=partition, offset=offset,
                      reason=f"cannot read the log: {e}",
                      consequence="rest of the partition not replayed")
            skips.count += 1
            return
        if not len(view):
            return
        moved = offset
        for header in iter_headers(view):
            try:
                records = decode_batch(view, header.position)
            except Exception as e:
                log.warning(skipped_event, topic=topic, partition=partition,
                            offset=header.base_offset, last_offset=header.last_offset,
                            reason=f"batch does not decode: {e}")
                records = None
                skips.count += 1
            if records is not None:
                yield header, records
            moved = max(moved, header.next_offset)
        if moved <= offset:
            # Bytes storage served that hold no whole batch: nothing further is readable.
            log.warning(skipped_event, topic=topic, partition=partition, offset=offset,
                        reason="no complete batch at this offset",
                        consequence="rest of the partition not replayed")
            skips.count += 1
            return
        offset = moved
