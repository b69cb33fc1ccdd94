"""`minibroker txn explain|list|hanging` on real incidents made by librdkafka (confluent-kafka):
the seeds' incident — a broker outage that outlives transaction.timeout.ms, an abort by timeout
with an epoch bump, and the producer fenced on its next request — and a zombie fenced by a
second instance. Each story is read live (--control) and from the data dir (--data-dir)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from .test_txn_support import TXN_BROKER_ARGS, open_transaction, txn_id, txn_producer


def txn_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "minibroker", "txn", *args], capture_output=True, text=True,
                       timeout=60)
    assert not check or r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def _control(b) -> str:
    return f"{b.host}:{b.control_port}"


def test_the_seeds_incident_is_explained(broker_factory, topic):
    """Producer mid-transaction (timeout 2 s), broker stopped 3 s, restarted: the coordinator
    aborts the transaction by timeout (epoch bump) and the producer's commit is fenced."""
    b = broker_factory(TXN_BROKER_ARGS, control=True)
    tid = txn_id("incident")
    p = open_transaction(b.bootstrap_servers, tid, topic, [(0, b"inc|1"), (1, b"inc|2")],
                         **{"transaction.timeout.ms": 2000, "client.id": "payments-1",
                            "socket.timeout.ms": 2000})
    t0 = time.monotonic()
    b.stop()
    time.sleep(3.0)
    b.start()
    # The outage the story tells is at least the 3 s slept, at most all of stop/sleep/start
    # (a loaded machine stops and starts the broker slower: more than "3." seconds down).
    outage_limit = time.monotonic() - t0
    deadline = time.monotonic() + 20
    while "txn.timed_out" not in b.log_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    with pytest.raises(KafkaException) as info:
        p.commit_transaction(20)
    err = info.value.args[0]
    assert err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH), err
    live = txn_cli("explain", tid, "--control", _control(b))
    print(live.stdout)
    data = json.loads(txn_cli("explain", tid, "--control", _control(b), "--json").stdout)
    kinds = [e["kind"] for e in data["events"]]
    assert kinds[:2] == ["init", "add_partitions"] and "timeout_abort" in kinds, kinds
    assert kinds.index("timeout_abort") < kinds.index("refused"), kinds
    assert [e["partition"] for e in data["events"] if e["kind"] == "marker"] == [0, 1]
    diagnosis = data["diagnosis"]
    assert diagnosis.startswith("Fenced:") and "after the transaction began, timeout 2.0 s" in diagnosis, diagnosis
    assert "TIMED OUT" in live.stdout and "client `payments-1`" in live.stdout
    import re
    assert "BROKER STOPPED" in live.stdout, live.stdout
    started = re.search(r"BROKER STARTED after (\d+\.\d) s down", live.stdout)
    assert started is not None and 3.0 <= float(started.group(1)) <= outage_limit + 0.05, live.stdout
    down = re.search(r"; the broker was down (\d+\.\d) s of it", diagnosis)
    assert down is not None and down.group(1) == started.group(1), diagnosis
    assert f"Diagnosis: {diagnosis}" in live.stdout
    b.stop()
    offline = txn_cli("explain", tid, "--data-dir", str(b.data_dir))
    assert f"Diagnosis: {diagnosis}" in offline.stdout, offline.stdout  # the same story after a stop
    listed = txn_cli("list", "--data-dir", str(b.data_dir)).stdout
    assert tid in listed and "CompleteAbort" in listed, listed


def test_a_zombie_is_told_which_instance_fenced_it(broker_factory, topic):
    b = broker_factory(TXN_BROKER_ARGS, control=True)
    tid = txn_id("zombie")
    zombie = open_transaction(b.bootstrap_servers, tid, topic, [(0, b"z|1")], **{"client.id": "orders-1"})
    successor = txn_producer(b.bootstrap_servers, tid, **{"client.id": "orders-7"})
    successor.init_transactions(30)  # aborts the zombie's open transaction, bumps the epoch
    with pytest.raises(KafkaException):
        zombie.commit_transaction(20)
    out = txn_cli("explain", tid, "--control", _control(b)).stdout
    print(out)
    diagnosis = out.strip().splitlines()[-1]
    assert diagnosis.startswith("Diagnosis: Fenced:"), out
    assert "client `orders-7`" in diagnosis and "127.0.0.1" in diagnosis, diagnosis
    assert "while this one was in a transaction" in diagnosis
    listed = txn_cli("list", "--control", _control(b)).stdout
    assert tid in listed, listed
    assert txn_cli("hanging", "--control", _control(b)).stdout.strip() == "no hanging transactions"
    # kill -9: the history is still there
    b.kill9()
    again = txn_cli("explain", tid, "--data-dir", str(b.data_dir)).stdout
    assert diagnosis in again, again


def test_open_transaction_and_bad_arguments(broker_factory, topic):
    b = broker_factory(TXN_BROKER_ARGS, control=True)
    tid = txn_id("open")
    open_transaction(b.bootstrap_servers, tid, topic, [(2, b"o|1")], **{"transaction.timeout.ms": 60000})
    out = txn_cli("explain", tid, "--control", _control(b)).stdout
    assert "Diagnosis: Open for" in out and "of its 60 s timeout" in out and f"{topic}-2" in out, out
    data = json.loads(txn_cli("list", "--control", _control(b), "--json").stdout)
    mine = next(t for t in data["transactions"] if t["transactional_id"] == tid)
    assert mine["state"] == "Ongoing" and mine["partitions"] == [[topic, 2]] and mine["age_ms"] >= 0
    bad = txn_cli("explain", tid, check=False)
    assert bad.returncode == 2 and "--control HOST:PORT" in bad.stderr and "Traceback" not in bad.stderr
    nodir = txn_cli("list", "--data-dir", "/nonexistent/dir", check=False)
    assert nodir.returncode == 1 and nodir.stderr.count("\n") == 1, nodir.stderr
    noabort = txn_cli("abort", "--topic", topic, "--partition", "2", "--start-offset", "99",
                      "--control", _control(b), check=False)
    assert noabort.returncode == 1 and "no open transaction starts at offset 99" in noabort.stderr, noabort.stderr
    # An id the broker never saw: exit 1, one line, live and offline, with and without --json.
    for where in (["--control", _control(b)], ["--data-dir", str(b.data_dir)]):
        said = f"the broker at {_control(b)}" if where[0] == "--control" else f"data directory {b.data_dir}"
        for args, what in ((["never-used"], "transactional id 'never-used'"),
                           (["--producer-id", "987654"], "producer id 987654")):
            for json_flag in ([], ["--json"]):
                r = txn_cli("explain", *args, *where, *json_flag, check=False)
                assert r.returncode == 1 and r.stdout == "", r
                assert r.stderr == (f"minibroker: error: no {what} in {said}: never used there, or expired "
                                    "and gone from the history\n"), r.stderr
    # The id that is there is still told (exit 0), offline too: it is known by its history.
    assert txn_cli("explain", tid, "--data-dir", str(b.data_dir)).stdout.startswith(f"Transactional id {tid}")


def test_an_idempotent_producers_retry_is_in_its_story(broker_factory, topic):
    """An idempotent producer's lost Produce answer: the retry is recognised as a duplicate,
    and `txn explain --producer-id` tells it (with the InitProducerId that gave the id)."""
    import re

    from confluent_kafka import Producer

    from .test_txn_support import produce_sync

    b = broker_factory(TXN_BROKER_ARGS, control=True)
    b.control.add_fault(api="Produce", action="drop-response", topic=topic)
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "enable.idempotence": True,
                  "client.id": "idem-1", "socket.timeout.ms": 1500, "request.timeout.ms": 1500,
                  "message.timeout.ms": 60000, "retry.backoff.ms": 50})
    produce_sync(p, topic, [(0, b"idem|%d" % i) for i in range(5)], timeout=60)
    pid = int(re.search(r"init_producer_id.assigned\s.*?producer_id=(\d+)", b.log_text()).group(1))
    live = txn_cli("explain", "--producer-id", str(pid), "--control", _control(b)).stdout
    print(live)
    assert live.startswith(f"Producer id {pid}") and "client `idem-1`" in live, live
    assert f"duplicate batch in {topic}-0 (sequence 0, epoch 0): a retry, answered with its offset 0" in live
    assert "idempotent producer: a new producer id" in live
    assert "Diagnosis: 1 duplicate batch recognised" in live, live
    b.stop()
    assert "duplicate batch" in txn_cli("explain", "--producer-id", str(pid), "--data-dir", str(b.data_dir)).stdout


def test_a_fence_then_a_commit_reads_committed_in_the_cli_and_the_console(broker_factory, topic, tmp_path):
    """A zombie (orders-1) fenced by a second instance (orders-7), which then commits: the id is
    CompleteCommit, so the headline says Committed — in the CLI, offline, and in the web
    console, which renders the same story — while the fence and the refusal stay in the story."""
    from playwright.sync_api import expect

    from .test_console import WAIT_MS, chromium, console_page
    from .test_txn_support import produce_sync

    chromium()  # skips (or fails under MINIBROKER_TEST_REQUIRE_TOOLS) without a browser
    b = broker_factory(TXN_BROKER_ARGS, control=True)
    tid = txn_id("fence-commit")
    problems: list[str] = []
    with console_page(problems) as page:
        zombie = open_transaction(b.bootstrap_servers, tid, topic, [(0, b"z|1")], **{"client.id": "orders-1"})
        page.goto(f"http://{_control(b)}/", timeout=WAIT_MS)
        held = page.locator(f'#partitions tr[data-topic="{topic}"][data-partition="0"] td.held')
        expect(held).to_contain_text("(1 record from offset 0)")  # one record: singular
        successor = txn_producer(b.bootstrap_servers, tid, **{"client.id": "orders-7"})
        successor.init_transactions(30)
        with pytest.raises(KafkaException):
            zombie.commit_transaction(20)
        successor.begin_transaction()
        produce_sync(successor, topic, [(1, b"s|1")])
        successor.commit_transaction(30)

        data = json.loads(txn_cli("explain", tid, "--control", _control(b), "--json").stdout)
        assert data["state"] == "CompleteCommit" and data["known"] is True
        diagnosis = data["diagnosis"]
        assert diagnosis.startswith("Committed at ") and "nothing is pending" in diagnosis, diagnosis
        assert "An older instance's EndTxn with epoch 0 was refused at" in diagnosis, diagnosis
        story = "\n".join(data["story"])
        assert "FENCED: a new instance (client `orders-7`" in story
        assert "REFUSED EndTxn from client `orders-1`" in story
        assert f"{topic}-0 joins the transaction" in story and f"{topic}-1 joins the transaction" in story, story
        text = txn_cli("explain", tid, "--control", _control(b)).stdout
        assert text.rstrip().splitlines()[-1] == f"Diagnosis: {diagnosis}"

        page.goto(f"http://{_control(b)}/#/txn/{tid}", timeout=WAIT_MS)
        page.wait_for_selector("body[data-loaded=timeline]")
        expect(page.locator("#tl-diagnosis")).to_have_text(diagnosis)
        expect(page.locator("#tl-diagnosis")).not_to_have_class("bad")
        expect(page.locator("#tl-story li").filter(has_text="FENCED: a new instance")).to_have_count(1)
        expect(page.locator("#tl-summary")).to_contain_text(f"{len(data['events'])} events")
        page.screenshot(path=str(tmp_path / "fence-then-commit.png"), full_page=True)
    assert problems == []
    b.stop()
    offline = txn_cli("explain", tid, "--data-dir", str(b.data_dir)).stdout
    assert f"Diagnosis: {diagnosis}" in offline, offline
