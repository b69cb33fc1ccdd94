"""The pytest plugin and the ``MiniBroker`` context manager, used as a user would.

Each test writes a test file into a ``pytester`` directory that has no conftest
and runs pytest on it in a subprocess: the fixtures there come only from the
``pytest11`` entry point. The generated tests talk to the brokers with
confluent-kafka and record every broker's pid and temp dir, so the outer test
can check that all of them are gone afterwards, passing or failing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

pytest.importorskip("confluent_kafka")

RUN_TIMEOUT = 240  # seconds for one inner pytest run

# Shared by the generated test files: bounded produce/consume with confluent-kafka.
HELPERS = '''
import json, os, time
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

RECORD = {record!r}

def record(broker):
    with open(RECORD, "a") as f:
        f.write(json.dumps({{"name": broker.name, "pid": broker.pid, "work_dir": str(broker.work_dir)}}) + "\\n")

def producer(bootstrap):
    return Producer({{"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                     "message.timeout.ms": 30000}})

def produce(p, topic, values, partition=0):
    for v in values:
        p.produce(topic, value=str(v).encode(), partition=partition)
    assert p.flush(30) == 0, "not every record was acknowledged"

def consume(bootstrap, topic, count, timeout=30.0):
    c = Consumer({{"bootstrap.servers": bootstrap, "group.id": "plugin-test", "enable.auto.commit": False}})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got, deadline = [], time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(int(m.value()))
        return got
    finally:
        c.close()
'''

FIXTURE_TESTS = '''
import re
import pytest

def test_session_broker_produce_consume(minibroker_bootstrap, unique_topic):
    p = producer(minibroker_bootstrap)
    produce(p, unique_topic, range(50))
    assert consume(minibroker_bootstrap, unique_topic, 50) == list(range(50))

def test_session_handle(minibroker, minibroker_bootstrap, unique_topic):
    record(minibroker)
    assert minibroker.running
    assert minibroker.bootstrap_servers == minibroker_bootstrap == f"127.0.0.1:{minibroker.port}"
    # minibroker_args from the ini file reach the session broker.
    p = producer(minibroker_bootstrap)
    produce(p, unique_topic, [1])
    assert len(p.list_topics(unique_topic, timeout=10).topics[unique_topic].partitions) == 2

def test_factory_starts_several_brokers(minibroker_factory, unique_topic):
    a = minibroker_factory()
    b = minibroker_factory(num_partitions=3)
    record(a); record(b)
    assert a.port != b.port and a.pid != b.pid and a.data_dir != b.data_dir
    for broker in (a, b):
        produce(producer(broker.bootstrap_servers), unique_topic, range(5))
    topics = producer(b.bootstrap_servers).list_topics(unique_topic, timeout=10).topics
    assert len(topics[unique_topic].partitions) == 3

def test_restart_and_kill9_keep_acknowledged_data(minibroker_factory, unique_topic):
    # fsync="never": nothing is ever forced to disk, so what survives kill -9 is
    # what the mmap'd segments left in the page cache.
    b = minibroker_factory(fsync="never")
    record(b)
    port, pid = b.port, b.pid
    p = producer(b.bootstrap_servers)
    produce(p, unique_topic, range(0, 100))
    b.restart()
    assert b.port == port and b.pid != pid
    produce(p, unique_topic, range(100, 200))  # the same producer reconnects to the same address
    b.kill9()
    assert not b.running and b.returncodes[-1] == -9
    b.start()
    record(b)
    assert b.port == port
    assert consume(b.bootstrap_servers, unique_topic, 200) == list(range(200))
    assert "===== start #3" in b.log_text()

seen = []

@pytest.mark.parametrize("hint", ["a", "a", "weird/[] chars:*?", "x" * 400])
def test_unique_topic(unique_topic, hint):
    assert re.fullmatch(r"[a-zA-Z0-9._-]{1,249}", unique_topic), unique_topic
    assert unique_topic.startswith("test_unique_topic")
    seen.append(unique_topic)

def test_unique_topics_differ():
    assert len(seen) == 4 and len(set(seen)) == 4

def test_fails_on_purpose(minibroker_factory):
    b = minibroker_factory(name="doomed")
    record(b)
    assert False, "failing on purpose"
'''


def _write_tests(pytester: pytest.Pytester, body: str) -> Path:
    record = pytester.path / "brokers.jsonl"
    pytester.makepyfile(test_generated=HELPERS.format(record=str(record)) + body)
    assert not list(pytester.path.glob("conftest.py"))  # the fixtures come from the entry point alone
    return record


def _records(record: Path) -> list[dict]:
    return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"minibroker" in f.read()  # the pid may have been reused by now
    except OSError:
        return False


def _assert_cleaned_up(records: list[dict]) -> None:
    deadline = time.monotonic() + 10
    while any(_alive(r["pid"]) for r in records) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [r for r in records if _alive(r["pid"])] == []
    assert [r for r in records if Path(r["work_dir"]).exists()] == []


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("MINIBROKER_TEST_KEEP", raising=False)
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)


def test_fixtures_in_a_user_test_file(pytester: pytest.Pytester) -> None:
    record = _write_tests(pytester, FIXTURE_TESTS)
    pytester.makeini("[pytest]\nminibroker_args = --num-partitions 2\n")
    result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider", timeout=RUN_TIMEOUT)
    result.assert_outcomes(passed=9, failed=1)
    out = result.stdout.str()
    # The failing test's report carries its broker's log.
    assert "minibroker doomed log" in out
    assert "broker.started" in out
    records = _records(record)
    assert {r["name"] for r in records} >= {"session", "doomed"}
    assert len(records) == 6
    _assert_cleaned_up(records)


EXTERNAL_TESTS = '''
def test_uses_given_address(minibroker_bootstrap, unique_topic):
    assert minibroker_bootstrap == {bootstrap!r}
    produce(producer(minibroker_bootstrap), unique_topic, range(3))
    assert consume(minibroker_bootstrap, unique_topic, 3) == [0, 1, 2]

def test_needs_the_handle(minibroker):
    raise AssertionError("must be skipped")
'''


def test_bootstrap_option_points_at_a_running_broker(pytester: pytest.Pytester) -> None:
    from minibroker.testing import MiniBroker

    with MiniBroker(name="external") as broker:
        record = _write_tests(pytester, EXTERNAL_TESTS.format(bootstrap=broker.bootstrap_servers))
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "-rs", f"--minibroker-bootstrap={broker.bootstrap_servers}",
            timeout=RUN_TIMEOUT)
        result.assert_outcomes(passed=1, skipped=1)
        result.stdout.fnmatch_lines(["*--minibroker-bootstrap=127.0.0.1:*given*"])
        assert _records(record) == []
        assert broker.running


SCRIPT = '''
import json, sys
from minibroker.testing import MiniBroker, topic_name
{helpers}
topic = topic_name("script")
with MiniBroker(num_partitions=2, fsync="never") as b:
    record(b)
    port = b.port
    p = producer(b.bootstrap_servers)
    produce(p, topic, range(10))
    b.kill9()
    b.start()
    record(b)
    produce(p, topic, range(10, 20), partition=1)
    b.restart()
    record(b)
    b.create_topic(topic + "-created", partitions=5)
    meta = p.list_topics(timeout=10).topics
    c = Consumer({{"bootstrap.servers": b.bootstrap_servers, "group.id": "script"}})
    marks = [c.get_watermark_offsets(TopicPartition(topic, part), timeout=10) for part in (0, 1)]
    c.close()
    result = {{"same_port": b.port == port, "starts": b.starts,
               "partitions": len(meta[topic].partitions), "created": len(meta[topic + "-created"].partitions),
               "records": sum(high - low for low, high in marks)}}
print(json.dumps(result))
'''


def test_context_manager_outside_pytest(pytester: pytest.Pytester) -> None:
    record = pytester.path / "brokers.jsonl"
    script = pytester.path / "use_minibroker.py"
    script.write_text(SCRIPT.format(helpers=HELPERS.format(record=str(record))))
    env = {k: v for k, v in os.environ.items() if k != "MINIBROKER_TEST_KEEP"}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, cwd=pytester.path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"same_port": True, "starts": 3, "partitions": 2, "created": 5, "records": 20}
    records = _records(record)
    assert len(records) == 3 and len({r["pid"] for r in records}) == 3
    _assert_cleaned_up(records)


def test_readme_example(pytester: pytest.Pytester) -> None:
    readme = (Path(__file__).resolve().parents[2] / "minibroker" / "testing" / "README.md").read_text()
    blocks = re.findall(r"```python\n(# test_orders\.py.*?)```", readme, re.S)
    assert len(blocks) == 1
    pytester.makepyfile(test_orders=blocks[0])
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=RUN_TIMEOUT)
    result.assert_outcomes(passed=2)


def test_plugin_import_is_cheap() -> None:
    code = ("import sys, minibroker.testing.pytest_plugin\n"
            "heavy = ('kio', 'minibroker_storage', 'minibroker_protocol', 'structlog', 'uvloop', 'confluent_kafka',"
            " 'minibroker.app', 'minibroker.cli.main')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m in heavy))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


REGISTRY_TESTS = '''
import json

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

SCHEMA = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})


def test_avro_orders(registry_minibroker, schema_registry_url, unique_topic):
    assert schema_registry_url == registry_minibroker.schema_registry_url
    client = SchemaRegistryClient({"url": schema_registry_url})
    ser = AvroSerializer(client, SCHEMA)
    p = Producer({"bootstrap.servers": registry_minibroker.bootstrap_servers})
    p.produce(unique_topic, value=ser({"id": 1}, SerializationContext(unique_topic, MessageField.VALUE)))
    assert p.flush(30) == 0
    assert client.get_subjects() == [unique_topic + "-value"]
'''


def test_schema_registry_fixtures_in_a_user_test_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_registry=REGISTRY_TESTS)
    result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider", timeout=RUN_TIMEOUT)
    result.assert_outcomes(passed=1)
