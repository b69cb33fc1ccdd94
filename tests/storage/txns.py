"""Transactional traffic for storage tests: data batches with the right
sequence numbers, and markers written as the coordinator writes them."""

from __future__ import annotations

from collections import defaultdict

from minibroker_protocol.batch import iter_headers
from minibroker_protocol.records import build_batch, build_control_batch

from .batches import TS0


class Writer:
    """Appends to ``log`` (reassign it after a reopen), one sequence per producer."""

    def __init__(self, log, size: int = 40) -> None:
        self.log = log
        self.size = size
        self.seq: dict[int, int] = defaultdict(int)

    def batch(self, pid: int, n: int = 1, *, txn: bool = True, epoch: int = 0, size: int | None = None) -> bytes:
        size = self.size if size is None else size
        records = [{"key": None, "value": bytes([65 + i % 26]) * size, "timestamp": TS0} for i in range(n)]
        if pid < 0:
            return build_batch(records)
        batch = build_batch(
            records, producer_id=pid, producer_epoch=epoch, base_sequence=self.seq[pid], transactional=txn
        )
        self.seq[pid] += n
        return batch

    def data(self, pid: int, n: int = 1, **kw):
        """A transactional batch of ``pid`` (begins its transaction if none is open)."""
        return self.log.append(self.batch(pid, n, **kw))

    def plain(self, pid: int = -1, n: int = 1, **kw):
        """A non-transactional batch: idempotent for ``pid >= 0``, plain for -1."""
        return self.log.append(self.batch(pid, n, txn=False, **kw))

    def end(self, pid: int, *, commit: bool, epoch: int = 0, coordinator_epoch: int = 0):
        marker = build_control_batch(
            producer_id=pid,
            producer_epoch=epoch,
            commit=commit,
            coordinator_epoch=coordinator_epoch,
            timestamp_ms=TS0,
        )
        return self.log.append(marker, origin="coordinator")

    def commit(self, pid: int, **kw):
        return self.end(pid, commit=True, **kw)

    def abort(self, pid: int, **kw):
        return self.end(pid, commit=False, **kw)


def read_headers(log, start: int | None = None, upper_bound: int | None = None):
    """Headers of every batch a reader gets from ``start`` up to ``upper_bound``."""
    out = []
    offset = log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        view = log.read(offset, 1 << 20, upper_bound=upper_bound)
        headers = list(iter_headers(view))
        if not headers:
            break
        out.extend(headers)
        offset = headers[-1].next_offset
    return out
