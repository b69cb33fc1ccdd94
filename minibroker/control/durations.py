"""Durations as people write them on a command line and read them back: ``90s``, ``1500ms``,
``2m``, ``1h``, ``1d``, ``1m 30s`` (a bare number is milliseconds), standard library only.

:func:`format_duration` writes what :func:`parse_duration_ms` reads, so a duration the CLI
prints can be pasted back into it.
"""

from __future__ import annotations

import re

_UNITS = {"us": 0.001, "µs": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0, "min": 60_000.0,
          "h": 3_600_000.0, "d": 86_400_000.0}
_NUMBER = r"\d+(?:\.\d+)?"
_UNIT = r"(?:us|µs|ms|s|min|m|h|d)"
# Each part of a compound duration has its unit, so digits cannot be split between parts
# (no backtracking blow-up); a bare number stands alone. "1m 30" is ambiguous: refused.
_DURATION = re.compile(rf"^\s*(-)?\s*(?:{_NUMBER}|(?:{_NUMBER}\s*{_UNIT}\s*)+)\s*$")
_PARTS = re.compile(rf"({_NUMBER})\s*({_UNIT})?")


class DurationError(ValueError):
    pass


def parse_duration_ms(text: str) -> float:
    """Milliseconds; negative when written with a minus (whether that is allowed is the
    caller's business: a clock does not go back, a max age is not negative)."""
    m = _DURATION.match(text)
    if m is None:
        raise DurationError(f"{text!r} is not a duration (write it as 90s, 1500ms, 2m, 1h, 1m 30s)")
    parts = _PARTS.findall(text)
    ms = sum(float(n) * _UNITS[unit or "ms"] for n, unit in parts)
    return -ms if m.group(1) else ms


_BIG = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000))


def _trim(x: float, places: int) -> str:
    text = f"{x:.{places}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _below_a_minute(ms: float) -> str | None:
    """One unit, or None when the value rounds up to the next one (999.96 ms is ``1 s``)."""
    for value, limit, unit in ((ms * 1000, 1000, "µs"), (ms, 1000, "ms"), (ms / 1000, 60, "s")):
        places = 3 if unit == "s" else 0 if value >= 100 else 1 if value >= 10 else 2
        text = _trim(value, places)
        if float(text) < limit:
            return f"{text} {unit}"
    return None


def format_duration(ms: float) -> str:
    """``250 µs``, ``250 ms``, ``1.444 s``, ``1m 30s``, ``1h``, ``2d 3h``: below a minute one
    unit with up to three decimals; from a minute on the two largest units, the smaller left
    out when nothing at all remains below the larger (``1h 0m`` is an hour and some seconds)."""
    if ms < 0:
        return "-" + format_duration(-ms)
    if ms == 0:
        return "0 ms"
    short = _below_a_minute(ms)
    if short is not None:
        return short
    ms = round(ms)  # from a minute on, a millisecond is the finest part shown
    for i, (unit, size) in enumerate(_BIG):
        if ms >= size:
            whole, rest = divmod(ms, size)
            if rest == 0:
                return f"{whole}{unit}"
            small_unit, small_size = _BIG[i + 1]
            small = _trim(rest / 1000, 3) if small_unit == "s" else str(rest // small_size)
            return f"{whole}{unit} {small}{small_unit}"
    raise AssertionError("unreachable: a duration of a minute or more has a unit")
