"""Deadlines a state machine sets for itself, run by whoever owns time.

The group coordinator's core never touches an event loop: it schedules callbacks at a
point of its clock's ``monotonic`` time here, and someone runs the due ones —
the asyncio adapter from one loop timer armed for :meth:`Deadlines.next_at`, a test
after ``ManualClock.advance``. Handles cancel like ``asyncio.TimerHandle``; cancelled
entries leave the heap lazily (and all at once when they outnumber the live ones,
since every heartbeat replaces its member's deadline).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from minibroker_storage.lazylog import get_logger

log = get_logger("minibroker.group")


class Deadline:
    __slots__ = ("at", "callback", "args", "cancelled", "_owner")

    def __init__(self, owner: Deadlines, at: float, callback: Callable, args: tuple) -> None:
        self.at, self.callback, self.args, self.cancelled = at, callback, args, False
        self._owner = owner

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            self._owner._cancelled += 1


class Deadlines:
    def __init__(self, monotonic: Callable[[], float]) -> None:
        self._monotonic = monotonic
        self._heap: list[tuple[float, int, Deadline]] = []
        self._seq = itertools.count()
        self._cancelled = 0

    def call_later(self, delay_ms: float, callback: Callable, *args) -> Deadline:
        d = Deadline(self, self._monotonic() + delay_ms / 1000, callback, args)
        heapq.heappush(self._heap, (d.at, next(self._seq), d))
        if self._cancelled > 64 and self._cancelled * 2 > len(self._heap):
            self._heap = [e for e in self._heap if not e[2].cancelled]
            heapq.heapify(self._heap)
            self._cancelled = 0
        return d

    def next_at(self) -> float | None:
        """The monotonic time of the earliest live deadline."""
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
            self._cancelled -= 1
        return heap[0][0] if heap else None

    def run_due(self) -> int:
        """Run every deadline that has come by now, earliest first; how many ran. One a
        callback schedules for later than now waits for the next call, as a loop timer
        set from a timer callback waits for the loop's next pass."""
        ran = 0
        now = self._monotonic()
        while (at := self.next_at()) is not None and at <= now:
            _, _, d = heapq.heappop(self._heap)
            d.cancelled = True  # spent: a later cancel() must not count it
            ran += 1
            try:
                d.callback(*d.args)
            except Exception:
                # as a loop timer's failure: reported, and the other deadlines still run
                log.exception("group.timer_failed", callback=getattr(d.callback, "__name__", "?"))
        return ran
