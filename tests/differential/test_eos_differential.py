"""The exactly-once protocol, request by request, against Apache Kafka (tests/differential/machine.py).

CI runs the hypothesis profile ``differential-ci``: MINIBROKER_DIFFERENTIAL_EXAMPLES examples
(default 25, about a minute here) of at most 25 steps; ``python -m tests.differential
--examples N`` runs more.
"""

from __future__ import annotations

import os

from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from .machine import DifferentialEOS
from .run import hypothesis_settings

settings.register_profile(
    "differential-ci", hypothesis_settings(int(os.environ.get("MINIBROKER_DIFFERENTIAL_EXAMPLES", "25"))))


def test_exactly_once_matches_kafka(differential_pair):
    run_state_machine_as_test(DifferentialEOS, settings=settings.get_profile("differential-ci"))
