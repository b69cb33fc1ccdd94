"""Fixtures shared by every test folder: ONE Apache Kafka per test session (it takes seconds to
start), the reference of the differential tests and of the application tests that run the same
thing against Kafka and minibroker (tests/integration/test_streams_eos.py).

Without java or the Kafka jars the tests skip, or fail under MINIBROKER_TEST_REQUIRE_TOOLS=1
(set by tests/run.sh, which fetches the jars).

Also the quick tier (``bash tests/run.sh --quick``, or ``pytest --quick``): which tests it holds
is decided here and only here, see QUICK_DIRS, NOT_QUICK and QUICK_SMOKE below.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.reference import settings
from tests.reference.kafka import KafkaReference, KafkaUnavailable


@pytest.fixture(scope="session")
def kafka_reference():
    kafka = KafkaReference(settings.kafka_properties(), classpath=settings.kafka_classpath(),
                           sasl_users=settings.SASL_USERS)
    try:
        kafka.java()
    except KafkaUnavailable as e:
        if os.environ.get("MINIBROKER_TEST_REQUIRE_TOOLS"):
            pytest.fail(str(e))
        pytest.skip(str(e))
    with kafka:
        yield kafka


# -- the quick tier ------------------------------------------------------------------------------
# The inner loop's tier: the sans-io, storage and broker unit tests plus a handful of real-client
# smoke tests, under 3 minutes on 2 cores with lint and types (tests/run.sh --quick). Every test
# it selects gets the `quick` marker, so `pytest -m quick` and `-m "not quick"` work as well.
# Chosen by measurement (pytest --durations=0 and CPU time per test on the unit folders, at a
# load of 4 to 7 on 2 cores): the unit folders together are ~2,900 tests in ~2 minutes; the smoke
# tests ~25 s. pytest-xdist does not help here: with -n 2 the tier took as long (188 s vs 180 s,
# both at a load of ~6), the tests being CPU-bound once the machine is busy.

TESTS_DIR = Path(__file__).resolve().parent

# Every test in these folders (under tests/) and every tests/test_*.py is in the tier...
QUICK_DIRS = ("protocol", "storage", "minibroker", "plugin")

# ...except these, each slow for what the rest of the tier already catches (seconds measured
# alone; an entry without "[...]" takes every parameter of the test).
NOT_QUICK = {
    # Half the tier's CPU time was tests/protocol/test_codec.py (~920 hypothesis tests, 28 of 54
    # CPU-seconds). The tier keeps every version's request round trip, garbage and trailing
    # bytes (the input side); the response round trips (180 tests, ~15 s) and the truncations
    # (180 tests, ~8 s) of every version stay in the full suite.
    "tests/protocol/test_codec.py::test_response_round_trip",
    "tests/protocol/test_codec.py::test_truncated_body_raises_decode_error",
    # 9 s: an inner pytest run of the plugin's fixtures with restarts and kill -9;
    # test_readme_example keeps the plugin in the tier.
    "tests/plugin/test_pytest_plugin.py::test_fixtures_in_a_user_test_file",
    # 2.6 s and 2.0 s: inner pytest runs for the context manager and --minibroker-bootstrap.
    "tests/plugin/test_pytest_plugin.py::test_context_manager_outside_pytest",
    "tests/plugin/test_pytest_plugin.py::test_bootstrap_option_points_at_a_running_broker",
    # Collects the tree twice to check this selection: the full suite runs it (a tier that lost
    # its tests would have lost this check with them).
    "tests/test_quick_tier.py::test_the_quick_tier_is_what_conftest_lists",
    # 1.5 s: waits out a port held by another socket.
    "tests/plugin/test_minibroker_handle.py::test_port_taken_for_good_moves_to_a_new_port_with_a_warning",
    # 5 s: a broker restart; the replay it checks is covered by test_coordinator_replay.
    "tests/minibroker/test_groups.py::test_offsets_generation_and_txn_outcomes_survive_a_restart",
    # 2.2 s of wall-clock rebalance delays whose bounds (0.95 s..1.5 s) a busy machine breaks.
    "tests/minibroker/test_groups.py::test_initial_rebalance_delay_is_capped_by_the_rebalance_timeout",
}

# The real-client smoke tests: one broker process each module, real clients over TCP.
QUICK_SMOKE = (
    # confluent-kafka: idempotent produce, a consumer group, `minibroker health`, SIGTERM.
    "tests/integration/test_ci_target.py::test_ephemeral_broker_serves_then_leaves_nothing_behind",
    # Transactions with librdkafka: commit/abort/commit read back read_committed and
    # read_uncommitted, the LSO holding a read_committed consumer, a zombie fenced.
    "tests/integration/test_txn_librdkafka.py::test_commit_abort_commit[none]",
    "tests/integration/test_txn_librdkafka.py::test_lso_blocks_read_committed[abort]",
    "tests/integration/test_txn_librdkafka.py::test_zombie_fencing[commit]",
    # Offsets committed inside a transaction (require_stable, abort keeps the old ones).
    "tests/integration/test_groups_txn.py::test_require_stable_during_open_transaction_and_abort_keeps_old_offsets",
    # A second client library, and kcat (skipped where kcat is not installed).
    "tests/integration/test_kafka_python.py::test_kafka_python_default_config",
    "tests/integration/test_kcat.py::test_kcat_produce_consume[zstd]",
    "tests/integration/test_kcat.py::test_kcat_metadata",
    # The control plane through the CLI: faults, the clock, request counts.
    "tests/integration/test_control_plane.py::test_the_cli",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--quick", action="store_true", default=False,
                     help="run only the quick tier (tests/conftest.py: QUICK_DIRS, NOT_QUICK, QUICK_SMOKE)")


def _matches(nodeid: str, entry: str) -> bool:
    return nodeid == entry or ("[" not in entry and nodeid.startswith(entry + "["))


def _in_quick_dirs(path: Path) -> bool:
    rel = path.relative_to(TESTS_DIR)
    return (len(rel.parts) == 1 and rel.name.startswith("test_")) or rel.parts[0] in QUICK_DIRS


def _smoke_files() -> set[Path]:
    return {TESTS_DIR.parent / entry.split("::")[0] for entry in QUICK_SMOKE}


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    # Under --quick, folders and files that hold no quick test are not even imported: collecting
    # the whole tree costs ~8 s, the tier's files ~4 s.
    if not config.getoption("quick"):
        return None
    path = Path(collection_path)
    if path == TESTS_DIR or TESTS_DIR not in path.parents:
        return None
    if path.is_dir():
        keep = _in_quick_dirs(path) or any(path in f.parents for f in _smoke_files())
    else:
        keep = _in_quick_dirs(path) or path in _smoke_files() or not path.name.startswith("test_")
    return None if keep else True


@pytest.hookimpl(tryfirst=True)  # before -m deselects: `-m quick` sees the marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    quick, rest = [], []
    for item in items:
        in_dirs = TESTS_DIR in item.path.parents and _in_quick_dirs(item.path)
        if (in_dirs and not any(_matches(item.nodeid, e) for e in NOT_QUICK)) or any(
                _matches(item.nodeid, e) for e in QUICK_SMOKE):
            item.add_marker(pytest.mark.quick)
            quick.append(item)
        else:
            rest.append(item)
    if config.getoption("quick"):
        # The tier as tests/run.sh --quick runs it: a smoke test renamed away is an error, not a
        # smaller tier (tests/test_quick_tier.py checks the rest, in the full suite).
        whole = [config.invocation_params.dir / a for a in config.args] == [TESTS_DIR]
        missing = [e for e in QUICK_SMOKE if not any(_matches(i.nodeid, e) for i in quick)]
        if whole and missing:
            raise pytest.UsageError("tests/conftest.py: QUICK_SMOKE entries that match no test: "
                                    + ", ".join(missing))
        if rest:
            config.hook.pytest_deselected(items=rest)
        items[:] = quick


# -- the full run on two workers (pytest-xdist; tests/run.sh: -n 2 --dist loadfile) --------------
# The full suite waits far more than it computes (load average < 1 on 2 cores alone), so two
# workers nearly halve it. Work is handed out one file at a time: a file's module fixtures (one
# broker for its tests) are set up once and its tests keep their order. A few folders share
# something between their files and go to one worker as a whole: tests/spark one SparkSession
# (session fixture, a JVM), tests/packaging the wheelhouse it downloads into. tests/docker (fixed
# container names and images) and tests/bench are single files already. Each worker has its own
# session fixtures, so its own reference Kafka and differential pair (free ports, temp dirs).
WHOLE_FOLDERS = ("tests/spark/", "tests/packaging/")

try:
    from xdist.scheduler import LoadFileScheduling
except ImportError:  # pytest-xdist is a [test] dependency, but the tree also runs without it
    LoadFileScheduling = None

if LoadFileScheduling is not None:
    class _FileOrFolderScheduling(LoadFileScheduling):
        def __init__(self, config: pytest.Config, log=None) -> None:
            # Files go out in collection order, not xdist's default of most tests first: each
            # worker then runs a subsequence of the one-process order, so a test that passes after
            # what precedes it there still does. (With the default, test_group_configs ran after
            # test_share_clients had left group configs on the session Kafka, and the coordinator
            # snapshot tests after something that left structlog capturing elsewhere.) The slow
            # folders (differential, docker, integration) also come first that way, the many short
            # unit tests last, which keeps the two workers' finishing times close.
            config.option.loadscopereorder = False
            super().__init__(config, log)

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return next((f for f in WHOLE_FOLDERS if path.startswith(f)), path)

    @pytest.hookimpl(tryfirst=True)  # before xdist's own, which would return its LoadFileScheduling
    def pytest_xdist_make_scheduler(config: pytest.Config, log):
        if config.getvalue("dist") == "loadfile":
            return _FileOrFolderScheduling(config, log)
        return None
