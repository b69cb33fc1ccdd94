"""How the explain stories (``txn/explain``, ``share/explain``) write a moment and a duration,
so both read alike: ``12:00:01.250`` (UTC) and ``3.0 s`` / ``45 s`` / ``250 ms``."""

from __future__ import annotations

import datetime


def clock_time(ms: int | None) -> str:
    if ms is None or ms < 0:
        return "?"
    t = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return t.strftime("%H:%M:%S.") + f"{t.microsecond // 1000:03d}"


def seconds(ms: float | None) -> str:
    if ms is None:
        return "?"
    s = ms / 1000
    if s >= 10 and abs(s - round(s)) < 0.05:
        return f"{s:.0f} s"
    return f"{s:.1f} s" if s >= 1 else f"{ms:.0f} ms"
