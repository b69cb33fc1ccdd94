"""The plugin's control-plane fixtures, as a user's test would use them."""

from __future__ import annotations


def test_controlled_minibroker(controlled_minibroker):
    rule = controlled_minibroker.control.add_fault(api="EndTxn", action="error",
                                                   error="CONCURRENT_TRANSACTIONS", count=2)
    assert controlled_minibroker.control.faults()[0]["id"] == rule["id"]
    assert controlled_minibroker.control.clock()["mode"] == "system"


def test_virtual_minibroker(virtual_minibroker):
    before = virtual_minibroker.control.clock()
    assert before["mode"] == "virtual"
    after = virtual_minibroker.control.advance("2m")
    assert after["wall_ms"] - before["wall_ms"] == 120_000
