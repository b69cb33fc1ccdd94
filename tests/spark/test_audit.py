"""The exactly-once audit: passes on a clean log, fails naming the defect on logs the
test corrupts on purpose (a duplicated batch, a missing marker)."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys

import pytest

from minibroker.spark.audit import audit_with_spark, main, summarize
from minibroker_storage.offline import iter_batches, segments
from tests.integration.clients import create_topic, unique_topic
from tests.integration.support import REPO_ROOT

from .producers import write_txn_mix


@pytest.fixture(scope="module")
def stopped_log(broker, tmp_path_factory):
    """A data dir with committed, aborted and fenced-zombie transactions, from a broker
    stopped cleanly; tests corrupt copies of it."""
    topic = unique_topic("audit")
    create_topic(broker.bootstrap_servers, topic, 2)
    write_txn_mix(broker.bootstrap_servers, topic, 2, leave_open=False)
    assert broker.stop() == 0
    copy = tmp_path_factory.mktemp("audit") / "clean"
    shutil.copytree(broker.data_dir, copy)
    return copy, topic


def _copy(stopped_log, tmp_path, name):
    src, topic = stopped_log
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst, dst / f"{topic}-0", topic


def _batches(part):
    """(header, bytes) of every batch in the partition's single segment."""
    (seg,) = segments(str(part))
    return seg.log, [(h, bytes(b)) for h, b, _ in iter_batches(str(part), 0)]


def _failures(reports):
    return {(f["kind"], r["topic"], r["partition"]) for r in reports for f in r["findings"]
            if f["severity"] == "failure"}


def test_clean_log_passes(spark, stopped_log, capsys):
    data_dir, topic = stopped_log
    reports = audit_with_spark(spark, str(data_dir))
    totals = summarize(reports)
    assert totals["ok"], _failures(reports)
    mine = [r for r in reports if r["topic"] == topic]
    assert len(mine) == 2
    for r in mine:
        # 5 commits by the writer, the zombie's successor's commit; one abort each by
        # the writer and by the fencing coordinator.
        assert (r["committed_txns"], r["aborted_txns"], r["open_txns"]) == (6, 2, 0)
        assert r["last_stable"] == r["log_end"]
    assert main([str(data_dir)]) == 0
    assert "result: OK" in capsys.readouterr().out


def test_duplicated_batch_fails_naming_it(spark, stopped_log, tmp_path):
    data_dir, part, topic = _copy(stopped_log, tmp_path, "dup")
    log_path, batches = _batches(part)
    # An idempotent producer's batch appended again at the end of the log, with the next
    # offset: what a broker that failed to recognise a retry would have written.
    header, blob = next((h, b) for h, b in batches
                        if h.producer_id >= 0 and not h.is_transactional and h.base_sequence >= 0)
    end = batches[-1][0].end
    copy = bytearray(blob)
    struct.pack_into(">q", copy, 0, batches[-1][0].last_offset + 1)
    with open(log_path, "r+b") as f:
        f.seek(end)
        f.write(copy)
        f.truncate()
    reports = audit_with_spark(spark, str(data_dir))
    assert _failures(reports) == {("duplicate", topic, 0)}
    (finding,) = [f for r in reports for f in r["findings"] if f["kind"] == "duplicate"]
    assert (finding["producer_id"], finding["sequence"]) == (header.producer_id, header.base_sequence)
    assert f"already written at offset {header.base_offset}" in finding["detail"]


def test_missing_marker_fails_naming_it(spark, stopped_log, tmp_path):
    data_dir, part, topic = _copy(stopped_log, tmp_path, "nomarker")
    log_path, batches = _batches(part)
    # The last batch is the final transaction's COMMIT marker: cut it off.
    last, _ = batches[-1]
    assert last.is_control
    with open(log_path, "r+b") as f:
        f.truncate(last.position)
    reports = audit_with_spark(spark, str(data_dir))
    assert _failures(reports) == {("missing_marker", topic, 0)}
    assert main([str(data_dir)]) == 1


def test_missing_marker_mid_log_and_cli_exit_status(stopped_log, tmp_path):
    data_dir, part, topic = _copy(stopped_log, tmp_path, "midlog")
    log_path, batches = _batches(part)
    # The first COMMIT marker removed and every later batch moved down one offset, so the
    # offsets stay contiguous and only the marker is gone.
    i = next(n for n, (h, _) in enumerate(batches) if h.is_control)
    out = bytearray()
    for n, (h, blob) in enumerate(batches):
        if n == i:
            continue
        b = bytearray(blob)
        if n > i:
            struct.pack_into(">q", b, 0, h.base_offset - 1)
        out += b
    with open(log_path, "wb") as f:
        f.write(out)
    proc = subprocess.run([sys.executable, "-m", "minibroker.cli.main", "audit", str(data_dir), "--local",
                           "--json", "--topic", topic], cwd=str(REPO_ROOT), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert not doc["ok"] and "missing_marker" in doc["failure_kinds"]
    assert {r["partition"]: r["ok"] for r in doc["reports"]} == {0: False, 1: True}


def test_live_log_with_retention_and_a_transaction_begun_during_the_audit(broker_factory):
    """Legal logs the audit once failed:
    - retention deleted the head of an aborted transaction (its index entry then starts
      below the log start);
    - retention deleted committed transactions whose records carry event-time (old)
      CreateTimes, markers included;
    - a transaction began after the audit read __transaction_state (a live data dir)."""
    import time

    from minibroker.spark.audit import plan, run_task

    from .producers import txn_producer

    b = broker_factory(["--segment-bytes", "4096", "--retention-bytes", "9000",
                        "--retention-check-interval-ms", "200"])
    aborted, old, live = unique_topic("ab"), unique_topic("old"), unique_topic("live")
    for t in (aborted, old, live):
        create_topic(b.bootstrap_servers, t, 1)
    p = txn_producer(b.bootstrap_servers, f"{aborted}-x", **{"linger.ms": 0, "batch.num.messages": 1})
    p.begin_transaction()
    for _ in range(100):
        p.produce(aborted, value=b"." * 100, partition=0)
        p.poll(0)
    assert p.flush(30) == 0
    p.abort_transaction(30)
    q = txn_producer(b.bootstrap_servers, f"{old}-x", **{"linger.ms": 0})
    an_hour_ago = int(time.time() * 1000) - 3_600_000
    for n in range(60):
        q.begin_transaction()
        for _ in range(3):
            q.produce(old, value=b"." * 100, partition=0, timestamp=an_hour_ago + n)
        q.commit_transaction(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(segments(str(b.data_dir / f"{t}-0"))[0].base_offset == 0
                                              for t in (aborted, old)):
        time.sleep(0.2)
    tasks = {t.topic: t for t in plan(str(b.data_dir), [aborted, old, live])}
    # Begun after the coordinator's log was read for the plan.
    w = txn_producer(b.bootstrap_servers, f"{live}-x")
    w.begin_transaction()
    for _ in range(5):
        w.produce(live, value=b"v", partition=0)
    assert w.flush(30) == 0
    reports = {t: run_task(task) for t, task in tasks.items()}
    assert reports[aborted]["log_start"] > 0 and reports[old]["log_start"] > 0, "retention did not run"
    assert {t: [f["kind"] for f in r["findings"] if f["severity"] == "failure"] for t, r in reports.items()} \
        == {aborted: [], old: [], live: []}
    assert [f["kind"] for f in reports[live]["findings"]] == ["open_transaction"]
    w.abort_transaction(30)


def test_sequence_wrap_is_not_a_duplicate():
    """Sequences wrap at 2^31 (Kafka DefaultRecordBatch.incrementSequence); after a wrap a
    producer reuses sequence 0 legally. A repeat within the recent batches still fails."""
    from minibroker.spark.audit_checks import _Auditor
    from minibroker.spark.coordinator_log import PartitionExpectations
    from minibroker_protocol.batch import BatchHeader

    def header(offset, seq, count):
        return BatchHeader(0, offset, 100, 0, 2, 0, 0, count - 1, 0, 0, 7, 0, seq, count)

    def run(batches):
        a = _Auditor("t", 0, PartitionExpectations(), False)
        for h in batches:
            a.batch(h, None)
        return [f.kind for f in a.finish([], True).findings]

    batches = [header(n, n, 1) for n in range(100)]
    big = 2**31 - 100
    batches.append(header(100, 100, big))
    batches += [header(100 + big + n, n, 1) for n in range(3)]  # 0, 1, 2 again: legal
    assert run(batches) == []
    assert run(batches + [header(103 + big, 1, 1)]) == ["duplicate"]
