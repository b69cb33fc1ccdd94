"""Durations as people write them on a command line: ``90s``, ``1500ms``, ``2m``, ``1h``, ``1d``
(a bare number is milliseconds)."""

from __future__ import annotations

import re

_UNITS = {"ms": 1.0, "s": 1000.0, "m": 60_000.0, "min": 60_000.0, "h": 3_600_000.0, "d": 86_400_000.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|min|m|h|d)?\s*$")


class DurationError(ValueError):
    pass


def parse_duration_ms(text: str) -> float:
    m = _DURATION.match(text)
    if m is None:
        raise DurationError(f"{text!r} is not a duration (write it as 90s, 1500ms, 2m, 1h)")
    return float(m.group(1)) * _UNITS[m.group(2) or "ms"]
