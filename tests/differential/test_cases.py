"""The audit's divergences (issue 14), each as an explicit differential case (cases.py)."""

from __future__ import annotations

import pytest

from .cases import CASES, run_case


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_matches_kafka(differential_pair, name):
    run_case(name)
