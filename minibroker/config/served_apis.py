"""The ApiVersions table a broker started with the default API options advertises, as data.

The early listener (minibroker/net/early.py) answers ApiVersions before the handler modules, which
register these ranges with the Dispatcher, are imported. ``tests/minibroker/test_early.py``
checks this table against the registrations of a real Dispatcher, and the broker compares the
two again when the early listener hands over (``early.table_differs``), so a handler whose range
changes without this table fails a test before it reaches a client.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SERVED", "TELEMETRY", "served"]

# (api key, min version, max version), ordered by key as ApiVersions lists them.
SERVED: tuple[tuple[int, int, int], ...] = (
    (0, 3, 13), (1, 4, 18), (2, 1, 11), (3, 0, 13), (8, 2, 10), (9, 1, 10), (10, 0, 6),
    (11, 0, 9), (12, 0, 4), (13, 0, 5), (14, 0, 5), (15, 0, 6), (16, 0, 5), (17, 0, 1),
    (18, 0, 5), (19, 2, 7), (20, 1, 6), (21, 0, 2), (22, 0, 5), (23, 2, 4), (24, 0, 5),
    (25, 0, 4), (26, 0, 5), (27, 1, 2), (28, 0, 6), (29, 1, 3), (30, 1, 3), (31, 1, 3),
    (32, 1, 4), (33, 0, 2), (34, 1, 2), (35, 1, 5), (36, 0, 2), (37, 0, 3),
    (38, 1, 3), (39, 1, 2), (40, 1, 2), (41, 1, 3),
    (42, 0, 3), (43, 0, 2), (44, 0, 1), (45, 0, 1), (46, 0, 0),
    (47, 0, 0), (48, 0, 1), (49, 0, 1), (50, 0, 0), (51, 0, 0), (55, 0, 2), (57, 0, 2), (60, 0, 2),
    (61, 0, 0), (64, 0, 0),
    (65, 0, 0),
    (66, 0, 2), (68, 0, 1), (69, 0, 1), (74, 0, 1), (75, 0, 0), (76, 1, 1), (77, 1, 1),
    (78, 1, 2), (79, 1, 2), (88, 0, 1), (89, 0, 1), (90, 0, 1), (91, 0, 0), (92, 0, 0), (93, 0, 0),
)
# GetTelemetrySubscriptions and PushTelemetry, with client telemetry on (KIP-714)
TELEMETRY: tuple[tuple[int, int, int], ...] = ((71, 0, 0), (72, 0, 0))


def served(config: Any) -> tuple[tuple[int, int, int], ...] | None:
    """The table ``config``'s broker advertises; None when options reshape it
    (``--as-version``, ``--max-api-versions``), which only the full broker applies."""
    if config.as_version is not None or config.max_api_versions:
        return None
    if config.telemetry_enabled:
        return tuple(sorted(SERVED + TELEMETRY))
    return SERVED
