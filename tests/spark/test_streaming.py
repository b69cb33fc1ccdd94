"""Structured Streaming into parquet, exactly once across two kill -9s of the query process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Producer

from tests.integration.clients import create_topic, unique_topic
from tests.integration.support import REPO_ROOT

from .producers import txn_producer

RECORDS = 10_000
TXN_SIZE = 250
_TIMEOUT = 30.0


def _produce(bootstrap: str, topic: str) -> tuple[dict, Producer]:
    """10,000 committed records in transactions over 2 partitions, aborted transactions in
    between, and a last transaction left open; returns ({(partition, offset): value}, open)."""
    committed: dict[tuple[int, int], str] = {}
    errors: list[str] = []

    def keep(err, msg):
        if err is not None:
            errors.append(err.str())
        elif msg.value().startswith(b"c"):
            committed[(msg.partition(), msg.offset())] = msg.value().decode()

    p = txn_producer(bootstrap, f"{topic}-w")
    n = 0
    for txn in range(RECORDS // TXN_SIZE):
        if txn % 10 == 3:
            p.begin_transaction()
            for i in range(100):
                p.produce(topic, value=f"a{txn}-{i}".encode(), partition=i % 2, on_delivery=keep)
            assert p.flush(_TIMEOUT) == 0
            p.abort_transaction(_TIMEOUT)
        p.begin_transaction()
        for _ in range(TXN_SIZE):
            p.produce(topic, value=f"c{n}".encode(), partition=n % 2, on_delivery=keep)
            n += 1
        p.commit_transaction(_TIMEOUT)
    # Left open while the query runs: everything from here on waits behind the LSO.
    o = txn_producer(bootstrap, f"{topic}-late")
    o.begin_transaction()
    for i in range(50):
        o.produce(topic, value=f"c-late-{i}".encode(), partition=i % 2, on_delivery=keep)
    assert o.flush(_TIMEOUT) == 0 and not errors, errors[:3]
    return committed, o


def _start(args, log: Path) -> subprocess.Popen:
    with open(log, "ab") as f:
        return subprocess.Popen([sys.executable, "-m", "tests.spark.stream_job", *args], cwd=str(REPO_ROOT),
                                stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _kill9(proc: subprocess.Popen) -> None:
    """SIGKILL the job's whole process group (its JVM and Python workers too)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"process group {proc.pid} still alive 30 s after SIGKILL")


def _batches(checkpoint: Path, what: str) -> list[int]:
    d = checkpoint / what
    if not d.is_dir():
        return []
    return sorted(int(f.name) for f in d.iterdir() if f.name.isdigit())


def _wait_for(proc, log: Path, cond, what: str, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        if proc.poll() is not None:
            raise AssertionError(f"the query exited ({proc.returncode}) before {what}:\n"
                                 f"{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}:\n{log.read_text(errors='replace')[-3000:]}")


def test_streaming_to_parquet_exactly_once_across_two_kill9(spark, broker, tmp_path):
    topic = unique_topic("stream")
    create_topic(broker.bootstrap_servers, topic, 2)
    committed, late = _produce(broker.bootstrap_servers, topic)
    assert len(committed) == RECORDS + 50
    cp, out, log = tmp_path / "checkpoint", tmp_path / "out", tmp_path / "job.log"
    args = [broker.bootstrap_servers, topic, str(cp), str(out), "--max-offsets", "1500"]
    kills = []
    try:
        # Kill 1: as soon as batch 2 is planned (written to the offset log), mid-batch.
        proc = _start(args, log)
        _wait_for(proc, log, lambda: 2 in _batches(cp, "offsets"), "batch 2 was planned")
        _kill9(proc)
        kills.append((_batches(cp, "offsets")[-1], _batches(cp, "commits")[-1:]))
        # Kill 2: after the restart has committed two more batches and planned another.
        done = len(_batches(cp, "commits"))
        proc = _start(args, log)
        _wait_for(proc, log, lambda: len(_batches(cp, "commits")) >= done + 2
                  and _batches(cp, "offsets")[-1] > _batches(cp, "commits")[-1], "two more batches")
        _kill9(proc)
        kills.append((_batches(cp, "offsets")[-1], _batches(cp, "commits")[-1:]))
    finally:
        if proc.poll() is None:
            _kill9(proc)
    # The open transaction commits; a last run drains everything committed and stops.
    late.commit_transaction(_TIMEOUT)
    final = _start(args + ["--available-now"], log)
    try:
        assert final.wait(timeout=300) == 0, log.read_text(errors="replace")[-3000:]
    finally:
        if final.poll() is None:
            _kill9(final)

    rows = spark.read.parquet(str(out)).collect()
    got = [(r.partition, r.offset) for r in rows]
    assert len(got) == len(set(got)), f"{len(got) - len(set(got))} records written twice"
    values = {(r.partition, r.offset): r.value for r in rows}
    want = dict(committed)
    assert values == want, (f"missing {len(set(want) - set(values))}, unexpected "
                            f"{len(set(values) - set(want))}")
    assert not any(v.startswith("a") for v in values.values())
    batches = _batches(cp, "commits")
    assert len(batches) >= 7, f"only {len(batches)} micro-batches; kills at {kills}"
