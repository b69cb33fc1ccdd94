"""A Kafka Connect exactly-once source (KIP-618: exactly.once.source.support=enabled, the
FileStreamSource connector with exactly.once.support=required) copies a growing file into a
topic; the worker (distributed mode, its config/offset/status topics compacted) is killed with
SIGKILL mid-copy while a fault rule holds its commit (the EndTxn never arrives), and started
again: the zombie's transaction is aborted (its records never become visible) and the new task
sends those lines again. Read with read_committed, the topic holds every line of the
file exactly once, in order."""

from __future__ import annotations

import socket
import time
import uuid

import pytest

from .connect_worker import Worker
from .test_txn_support import READ_COMMITTED, consumer

LINES = 4000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _committed(seen: list[bytes], c) -> None:
    for m in c.consume(num_messages=5000, timeout=0.2):
        if m.error() is None:
            seen.append(m.value())


@pytest.mark.timeout(600)
def test_exactly_once_file_source_survives_a_worker_kill(broker_factory, tmp_path):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource

    b = broker_factory(["--group-initial-rebalance-delay-ms", "0", "--transaction-abort-check-interval-ms", "200"],
                       control=True)
    group = f"connect-{uuid.uuid4().hex[:6]}"
    topic = f"{group}-lines"
    source = tmp_path / "input.txt"
    source.write_text("")
    # The zombie's open transaction holds the offsets topic's LSO, and the restarted worker reads
    # that topic read_committed before it starts the task that would fence the zombie: it waits
    # for transaction.timeout.ms (60 s by default), so the task producers get 10 s.
    worker = Worker(b.bootstrap_servers, tmp_path, group, _free_port(),
                    **{"exactly.once.source.support": "enabled", "producer.transaction.timeout.ms": "10000"})
    c = consumer(b.bootstrap_servers, READ_COMMITTED)
    c.assign([TopicPartition(topic, 0, 0)])
    seen: list[bytes] = []
    written = 0

    def append(n: int) -> None:
        nonlocal written
        with open(source, "a") as f:
            f.write("".join(f"line-{i:05d}\n" for i in range(written, written + n)))
        written += n

    try:
        worker.start()
        worker.wait_ready()
        worker.rest("POST", "/connectors", {"name": "file-source", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "file": str(source), "topic": topic, "tasks.max": "1", "batch.size": "200",
            "exactly.once.support": "required", "transaction.boundary": "poll"}})
        killed_at = None
        deadline = time.monotonic() + 120
        while written < LINES and time.monotonic() < deadline:
            append(300)
            _committed(seen, c)
            if killed_at is None and len(seen) >= LINES // 3:
                # hold the next commit (EndTxn), so the kill finds a transaction open (its records
                # written, its offsets not committed): the restarted task fences it and sends again
                rule = b.control.add_fault(api="EndTxn", action="hold", count=1)
                held = time.monotonic() + 30
                while b.control.fault(rule["id"])["fired"] == 0 and time.monotonic() < held:
                    append(50)
                    time.sleep(0.05)
                assert b.control.fault(rule["id"])["fired"] == 1
                killed_at = len(seen)
                print("T kill", time.monotonic(), len(seen), flush=True)
                worker.kill9()
                worker.start()
                worker.wait_ready()
                b.control.release(rule["id"])  # the dead worker's commit, now from a fenced epoch
                print("T ready again", time.monotonic(), len(seen), flush=True)
            time.sleep(0.1)
        assert killed_at is not None, f"the copy never reached {LINES // 3} lines: {len(seen)}"
        print("T all written", time.monotonic(), len(seen), flush=True)
        deadline = time.monotonic() + 120
        progress_at, progress = time.monotonic(), len(seen)
        while len(seen) < written and time.monotonic() < deadline:
            _committed(seen, c)
            if len(seen) != progress:
                progress_at, progress = time.monotonic(), len(seen)
            elif time.monotonic() - progress_at > 3:
                # FileStreamSourceTask returns a full batch and keeps the lines it read past it in
                # its buffer, and reads that buffer again only when the file has more to read
                # (BufferedReader.ready()): a copy that ends with such lines sits still until
                # the file grows. One more line lets it go on (seen twice in CI, 50 lines short).
                append(1)
                progress_at = time.monotonic()
        _committed(seen, c)  # a repeated line, if any, arrives now
        status = worker.rest("GET", "/connectors/file-source/status")
    finally:
        c.close()
        worker.stop()
    print(f"connect: killed after {killed_at} committed lines, {len(seen)} at the end; broker: "
          f"{b.log_text().count('txn.fencing_abort')} transaction(s) aborted")
    assert "txn.fencing_abort" in b.log_text()  # the zombie's transaction was aborted, not committed
    expected = [b"line-%05d" % i for i in range(written)]
    assert seen == expected, (len(seen), [v for v in seen if v not in set(expected)][:5], status, worker.tail())

    # the worker's own topics are compacted, as Connect requires of them
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    res = [ConfigResource("topic", f"{group}-{t}") for t in ("configs", "offsets", "status")]
    for f in admin.describe_configs(res).values():
        assert f.result(10)["cleanup.policy"].value == "compact"
