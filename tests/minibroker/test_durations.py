"""Durations as the CLI reads and writes them (minibroker/control/durations.py): what it prints
reads back, and the control CLI stays standard library only at module level."""

from __future__ import annotations

import subprocess
import sys

import pytest

from minibroker.control.durations import DurationError, format_duration, parse_duration_ms


@pytest.mark.parametrize(("ms", "text"), [
    (0, "0 ms"), (0.25, "250 µs"), (0.0015, "1.5 µs"), (1.5, "1.5 ms"), (12.34, "12.3 ms"), (250, "250 ms"),
    (999.96, "1 s"), (1000, "1 s"), (1444, "1.444 s"), (5000, "5 s"), (59_999.9996, "1m"), (60_000, "1m"),
    (90_000, "1m 30s"), (61_500, "1m 1.5s"), (3_600_000, "1h"), (3_601_444, "1h 0m"),
    (5_400_000, "1h 30m"), (2 * 86_400_000 + 3_600_000, "2d 1h"), (119_999.9999, "2m"), (-1444, "-1.444 s"),
])
def test_format(ms, text):
    assert format_duration(ms) == text


@pytest.mark.parametrize(("text", "ms"), [
    ("90s", 90_000), ("1500ms", 1500), ("2m", 120_000), ("2min", 120_000), ("1h", 3_600_000),
    ("1d", 86_400_000), ("250", 250), ("1m 30s", 90_000), ("1m30s", 90_000), ("1h 0m", 3_600_000),
    ("250 µs", 0.25), ("250us", 0.25), ("1.5 s", 1500), ("-5s", -5000), (" 2 h ", 7_200_000),
])
def test_parse(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["soon", "", "-", "5x", "1m 30", "1 2", "--5s", "1" * 40 + "x"])
def test_not_a_duration(text):
    with pytest.raises(DurationError, match="is not a duration"):
        parse_duration_ms(text)


@pytest.mark.parametrize("ms", [0.25, 1.5, 250, 1444, 90_000, 61_500, 3_600_000, 5_400_000, 176_400_000])
def test_what_is_printed_reads_back(ms):
    assert parse_duration_ms(format_duration(ms)) == pytest.approx(ms)


def test_the_control_cli_imports_only_the_standard_library():
    """`minibroker faults list` and friends start without kio or aiohttp: what a command needs
    beyond the standard library is imported when it runs (faults add/load: the rule parser)."""
    code = ("import sys; import minibroker.cli.control, minibroker.control.durations; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('kio', 'aiohttp', 'structlog', 'minibroker_protocol', 'minibroker_storage')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout
