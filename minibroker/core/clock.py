"""Time as a collaborator: what the coordinators and background loops ask instead of ``time``.

Kafka hands its coordinators a ``Time`` (``org.apache.kafka.common.utils.Time``) rather than
letting them read the system clock, so a test can move time on without waiting for it. The
same here: a state machine takes ``now_ms`` from a ``Clock`` it was given, and a test drives it
with a ``ManualClock`` it advances by hand. The fault-injection work (a virtual clock an
operator advances over the control plane) builds on this.

``wall_ms`` is milliseconds since the epoch (what Kafka stores in records and answers with:
transaction start times, commit timestamps); ``monotonic`` is seconds for measuring
durations and scheduling, never stored. ``wall_us`` is the same wall time in microseconds, for
what records when things happened finer than a millisecond apart (the transaction timeline).
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def wall_ms(self) -> int: ...

    def wall_us(self) -> int: ...

    def monotonic(self) -> float: ...


class SystemClock:
    """The real clock."""

    __slots__ = ()

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def wall_us(self) -> int:
        return time.time_ns() // 1_000

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that moves only when told to: for tests that drive a state machine
    through timeouts without sleeping."""

    __slots__ = ("_wall_ms", "_monotonic")

    def __init__(self, wall_ms: int = 1_700_000_000_000, monotonic: float = 1000.0) -> None:
        self._wall_ms = wall_ms
        self._monotonic = monotonic

    def wall_ms(self) -> int:
        return self._wall_ms

    def wall_us(self) -> int:
        return self._wall_ms * 1000

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, ms: float) -> None:
        if ms < 0:
            raise ValueError("a clock does not go back")
        self._wall_ms += int(ms)
        self._monotonic += ms / 1000.0


class ControlledClock:
    """The clock an operator moves over the control plane (``minibroker clock advance``).

    ``virtual``: time stands still from start-up and moves only when advanced, so what a test
    provokes happens exactly when it says. Otherwise the system clock plus every advance so
    far: time runs as usual and jumps on demand. Either way it never goes back.
    """

    __slots__ = ("virtual", "_offset_ms", "_wall0", "_mono0", "_base")

    def __init__(self, virtual: bool, base: Clock | None = None) -> None:
        self._base = base if base is not None else SystemClock()
        self.virtual = virtual
        self._offset_ms = 0.0
        self._wall0 = self._base.wall_ms()
        self._mono0 = self._base.monotonic()

    @property
    def offset_ms(self) -> float:
        """How far this clock is ahead of the real one."""
        if not self.virtual:
            return self._offset_ms
        return self.wall_ms() - self._base.wall_ms()

    def wall_ms(self) -> int:
        if self.virtual:
            return self._wall0 + int(self._offset_ms)
        return self._base.wall_ms() + int(self._offset_ms)

    def wall_us(self) -> int:
        if self.virtual:  # advances finer than a millisecond (0.01 ms) show here only
            return self._wall0 * 1000 + int(self._offset_ms * 1000)
        return self._base.wall_us() + int(self._offset_ms * 1000)

    def monotonic(self) -> float:
        if self.virtual:
            return self._mono0 + self._offset_ms / 1000.0
        return self._base.monotonic() + self._offset_ms / 1000.0

    def advance(self, ms: float) -> None:
        if ms < 0:
            raise ValueError("a clock does not go back")
        self._offset_ms += ms


SYSTEM_CLOCK = SystemClock()
