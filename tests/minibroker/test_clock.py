import time

import pytest

from minibroker.core.clock import SYSTEM_CLOCK, ManualClock


def test_manual_clock_moves_only_when_told():
    c = ManualClock(wall_ms=1000, monotonic=5.0)
    assert (c.wall_ms(), c.monotonic()) == (1000, 5.0)
    c.advance(1500)
    assert (c.wall_ms(), c.monotonic()) == (2500, 6.5)
    with pytest.raises(ValueError):
        c.advance(-1)


def test_system_clock_is_the_real_time():
    assert abs(SYSTEM_CLOCK.wall_ms() - time.time() * 1000) < 1000
    a = SYSTEM_CLOCK.monotonic()
    assert SYSTEM_CLOCK.monotonic() >= a
