"""codec.FLEXIBLE_REQUESTS, the table that spares the dispatcher kio's schema modules when it
reads a request header (issue 33), says what kio's schemas say for every version a broker serves."""

from __future__ import annotations

import subprocess
import sys

from minibroker.config.served_apis import SERVED, TELEMETRY
from minibroker_protocol import codec


def test_every_entry_agrees_with_kio():
    for key, (low, high, _first) in codec.FLEXIBLE_REQUESTS.items():
        for version in range(low, high + 1):
            cls = codec.request_type(key, version)
            assert cls is not None, (key, version)
            assert codec.is_flexible_request(key, version) == bool(cls.__flexible__), (key, version)


def test_every_served_version_is_read_as_kio_reads_it():
    # The table's ranges may lag served_apis.py (another key, a new version): kio answers those.
    for key, low, high in SERVED + TELEMETRY:
        for version in range(low, high + 1):
            assert codec.is_flexible_request(key, version) == bool(
                codec.request_type(key, version).__flexible__), (key, version)
    for key in (0, 1, 3, 18, 22, 24, 26):  # what a start's first clients and producers ask
        assert key in codec.FLEXIBLE_REQUESTS


def test_a_produce_request_header_is_read_without_kio_s_produce_schemas():
    code = ("import sys\n"
            "from minibroker_protocol import codec\n"
            "print(codec.is_flexible_request(0, 3), codec.is_flexible_request(0, 9),"
            " any(m.startswith('kio.schema.produce') for m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         check=True)
    assert out.stdout.split() == ["False", "True", "False"]
