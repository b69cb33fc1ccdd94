"""Fetch requests waiting for data (Kafka's DelayedFetch purgatory, keyed by partition).

A long-polling Fetch parks one future under every partition it watches; an append,
a marker or a topic deletion wakes every future parked on that partition.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict


class FetchWaiters:
    def __init__(self) -> None:
        self._waiters: dict[tuple[str, int], set[asyncio.Future]] = defaultdict(set)

    def notify(self, topic: str, partition: int) -> None:
        futs = self._waiters.get((topic, partition))
        if futs:
            _wake(futs)

    def notify_topic(self, name: str) -> None:
        for (topic, _p), futs in list(self._waiters.items()):
            if topic == name:
                _wake(futs)

    async def wait(self, partitions: list[tuple[str, int]], timeout: float) -> None:
        """Return when any of ``partitions`` gets data, or after ``timeout`` seconds."""
        fut = asyncio.get_running_loop().create_future()
        for tp in partitions:
            self._waiters[tp].add(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            pass
        finally:
            for tp in partitions:
                s = self._waiters.get(tp)
                if s is not None:
                    s.discard(fut)
                    if not s:
                        del self._waiters[tp]


def _wake(futs: set[asyncio.Future]) -> None:
    for fut in futs:
        if not fut.done():
            fut.set_result(None)
