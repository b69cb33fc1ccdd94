"""One local Spark (``local[2]``) for the whole session, and brokers for the Spark tests.

Spark's JVM must be Java 17 (Spark 4 runs on 17 or 21; the newer JDK on the test
machines is not supported), its Python workers this interpreter, and everything binds to
loopback. Everything Spark writes (warehouse, checkpoints, parquet) goes under tmp dirs.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the [spark] extra is not installed")

from minibroker.testing import MiniBroker  # noqa: E402
from tests.integration.support import project_broker  # noqa: E402

JAVA17 = "/usr/lib/jvm/java-17-openjdk-amd64"


def spark_env() -> dict[str, str]:
    """Environment for Spark in this process and in the query processes tests start."""
    env = {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    if os.path.isdir(JAVA17):
        env["JAVA_HOME"] = JAVA17
    return env


os.environ.update(spark_env())


@pytest.fixture(scope="session")
def spark_tmp():
    d = Path(tempfile.mkdtemp(prefix="minibroker-spark-"))
    yield d
    if not os.environ.get("MINIBROKER_TEST_KEEP"):
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def spark(spark_tmp):
    from pyspark.sql import SparkSession

    from minibroker.spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("minibroker-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(spark_tmp / "warehouse"))
        .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={spark_tmp}")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def broker(request):
    b = project_broker(["--num-partitions", "2", "--group-initial-rebalance-delay-ms", "0"],
                       name=request.module.__name__.rsplit(".", 1)[-1])
    try:
        b.start()
        yield b
    finally:
        b.close()


@pytest.fixture
def broker_factory(request):
    made: list[MiniBroker] = []

    def make(extra=(), **kw) -> MiniBroker:
        b = project_broker(["--num-partitions", "2", *extra], name=request.node.name[:40], **kw)
        made.append(b)
        return b.start()

    try:
        yield make
    finally:
        for b in made:
            b.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, MiniBroker):
            report.sections.append((f"broker log {value.name}", value.log_tail(40)))
