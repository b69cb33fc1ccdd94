"""franz-go's own integration test suite (pkg/kgo's ``*_test.go``, unchanged, at the version
tests/go/mbgo pins) against ``--brokers 3``: the suite is written for a three-broker cluster —
every topic it creates has replication factor 3 (``KGO_TEST_RF``) — and runs its group and
transactional ETL chains (classic eager/cooperative balancers and KIP-848), static members,
regex subscriptions, purges and produce edge cases against it.

Every test must pass except the ones listed in ``EXPECTED_SKIPS``, which franz-go skips by itself
after asking the broker (ApiVersions) or its environment, each for the reason given there.
"""

from __future__ import annotations

import os
import subprocess
import threading

import pytest

from . import franz_go_suite
from .conftest import MODULE_BROKER_ARGS
from .franz_go import find_go

# franz-go skips these on its own; the reason is what minibroker lacks.
EXPECTED_SKIPS = {
    # SASL/SCRAM needs KGO_TEST_SCRAM and a SASL listener (issue 20)
    "TestSCRAMAuth": "KGO_TEST_SCRAM",
    "TestSCRAMAuthBadCredentials": "KGO_TEST_SCRAM",
}
SERVED_APIS = ("Produce", "Fetch", "EndTxn", "ConsumerGroupHeartbeat", "ShareFetch")
RECORDS = 5_000  # per ETL chain (franz-go's default is 500,000: minutes, not seconds, here; 5,000
# still spreads every chain over all partitions and rebalances, and keeps the suite under 30 min)


@pytest.mark.timeout(900)
def test_franz_go_kgo_suite_against_three_virtual_brokers(broker_factory):
    test_binary = franz_go_suite.binary()
    go = find_go()
    b = broker_factory([*MODULE_BROKER_ARGS, "--brokers", "3"], control=True)
    env = {**os.environ, "KGO_SEEDS": ",".join(b.addresses), "KGO_TEST_RF": "3",
           "KGO_TEST_RECORDS": str(RECORDS), "KGO_LOG_LEVEL": "none"}
    for var in ("KGO_TEST_TLS", "KGO_TEST_SCRAM", "KGO_TEST_SCRAM_SEEDS", "KGO_TEST_CHAOS",
                "KGO_TEST_MAX_TOPIC_PARTS", "KGO_TEST_UNSAFE"):
        env.pop(var, None)
    # Which broker served what, read while the suite runs: the request log keeps the last 100,000
    # requests, and the share-group tests alone send more than that after the transactional ones.
    served: dict[str, set[int]] = {api: set() for api in SERVED_APIS}
    done = threading.Event()

    def watch() -> None:
        since = dict.fromkeys(SERVED_APIS, 0)
        while True:
            last = done.wait(2.0)  # bounded: the suite's own timeout ends it, then one last read
            for api in SERVED_APIS:
                for rec in b.control.requests(api=api, since=since[api]):
                    served[api].add(rec["broker"])
                    since[api] = max(since[api], rec["seq"])
            if last:
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        r = subprocess.run(franz_go_suite.command(go, test_binary, "-test.timeout", "780s"), env=env,
                           capture_output=True, text=True, timeout=840, cwd=franz_go_suite.package_dir(go))
    finally:
        done.set()
        watcher.join(60)
    tests = franz_go_suite.outcomes(r.stdout)
    failed = {n: t["log"][-15:] for n, t in tests.items() if t["action"] != "pass" and n not in EXPECTED_SKIPS
              and t["action"] != "skip"}
    unexpected_skips = {n: t["log"] for n, t in tests.items() if t["action"] == "skip" and n not in EXPECTED_SKIPS}
    passed = sorted(n for n, t in tests.items() if t["action"] == "pass")
    slowest = sorted(((t["elapsed"], n) for n, t in tests.items()), reverse=True)[:5]
    print(f"franz-go {franz_go_suite.pinned_version()} pkg/kgo: {len(passed)} passed, "
          f"{sum(t['action'] == 'skip' for t in tests.values())} skipped; slowest {slowest}")
    assert not failed, f"franz-go tests failed against --brokers 3: {failed}\n{r.stderr[-3000:]}"
    assert not unexpected_skips, unexpected_skips
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    for name, reason in EXPECTED_SKIPS.items():
        if name in tests:
            assert tests[name]["action"] == "skip", (name, tests[name])
            assert reason.split()[0].lower() in " ".join(tests[name]["log"]).lower(), (name, tests[name]["log"])
    # the ETL chains, the transactional one included, ran (not skipped) on all three brokers
    # ... and so did its share-group tests (KIP-932), the share ETL chain among them
    for name in ("TestGroupETL", "TestTxnEtl", "Test848RegexBrokerResolves", "TestIssue434",
                 "TestShareGroup", "TestShareGroupETL", "TestShareGroupAckOnClose",
                 "TestShareGroupOffsetsAdmin", "TestConsumeRegexShareSkipsInternal"):
        assert tests.get(name, {}).get("action") == "pass", (name, tests.get(name))
    assert len(passed) >= 140, len(passed)
    assert not watcher.is_alive()
    assert served["Produce"] == served["Fetch"] == {1, 2, 3}, served
    assert served["EndTxn"] and served["ConsumerGroupHeartbeat"] and served["ShareFetch"], served
