"""The exactly-once protocol, request by request, against Apache Kafka (tests/differential/machine.py).

The number of examples comes from MINIBROKER_DIFFERENTIAL_EXAMPLES (default 12: a couple of
minutes here); ``python -m tests.differential --examples N`` runs more.
"""

from __future__ import annotations

import os

from hypothesis.stateful import run_state_machine_as_test

from .machine import DifferentialEOS
from .run import hypothesis_settings

EXAMPLES = int(os.environ.get("MINIBROKER_DIFFERENTIAL_EXAMPLES", "12"))


def test_exactly_once_matches_kafka(differential_pair):
    run_state_machine_as_test(DifferentialEOS, settings=hypothesis_settings(EXAMPLES))
