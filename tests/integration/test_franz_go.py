"""franz-go (twmb/franz-go v1.22.2, tests/go/mbgo) against minibroker: idempotent produce,
transactions read back with read_committed, and consume-transform-produce that stays exactly-once
across a kill -9 of the Go process.

Each transactional test runs at the broker's default transaction.version (1: franz-go adds
partitions with AddPartitionsToTxn and offsets with AddOffsetsToTxn, and pins EndTxn at v4) and at
level 2 (``--transaction-version 2``, KIP-890 part 2). franz-go switches to transactions v2 when the
ApiVersions response finalizes ``transaction.version`` >= 2 (FinalizedFeaturesEpoch != -1) and the
broker serves Produce v12, EndTxn v5 and TxnOffsetCommit v5: then it sends no AddPartitionsToTxn or
AddOffsetsToTxn, and every EndTxn v5 answer carries the producer epoch for the next transaction.
The level-2 cases are skipped only when the broker refuses to start with ``--transaction-version 2``
(before that option exists); any other failure fails them.

The request paths come from the broker's log (``request.first_seen``, read by
``minibroker.testing.requests_seen``); franz-go names itself ``kgo`` in ApiVersions.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from minibroker.testing import MiniBroker, requests_seen, topic_name

from . import franz_go, wire
from .franz_go import SOFTWARE_NAME as KGO

LEVELS = [1, 2]
SEED = int(os.environ.get("MINIBROKER_TEST_EOS_SEED", "20261124"))


@pytest.fixture(scope="module")
def mbgo():
    return franz_go.binary()


def start_broker(level: int, name: str) -> MiniBroker:
    """A started broker at transaction.version ``level`` (2 is the broker's default: no option).

    Level 2 is skipped only when the broker refuses the option (``franz_go.start_or_skip``)."""
    args = [] if level == 2 else ["--transaction-version", str(level)]
    # A short abort check: a killed pipeline's open transaction (5 s timeout) is aborted at once.
    b = MiniBroker(name=f"{name}-tv{level}", args=args, num_partitions=3,
                   transaction_abort_check_interval_ms=200)
    franz_go.start_or_skip(b)
    return b


@pytest.fixture
def brokers():
    started: list[MiniBroker] = []

    def make(level: int, name: str) -> MiniBroker:
        b = start_broker(level, name)
        started.append(b)
        return b

    yield make
    for b in started:
        b.close()


def kgo_requests(b: MiniBroker) -> dict[str, set[int]]:
    """API name -> the versions franz-go sent to ``b``."""
    out: dict[str, set[int]] = defaultdict(set)
    for api, version, software in requests_seen(b.log_text()):
        if software == KGO:
            out[api].add(version)
    return out


def assert_txn_path(b: MiniBroker, level: int, group: bool = False) -> None:
    seen = kgo_requests(b)
    assert seen.get("EndTxn") and seen.get("Produce"), f"no franz-go transaction seen: {dict(seen)}"
    if level < 2:
        assert seen.get("AddPartitionsToTxn") and max(seen["AddPartitionsToTxn"]) <= 3, dict(seen)
        assert max(seen["EndTxn"]) <= 4, dict(seen)
        assert max(seen["Produce"]) <= 11, dict(seen)
        if group:
            assert seen.get("AddOffsetsToTxn") and seen.get("TxnOffsetCommit"), dict(seen)
    else:
        assert seen["EndTxn"] == {5}, dict(seen)
        assert min(seen["Produce"]) >= 12, dict(seen)
        assert "AddPartitionsToTxn" not in seen, dict(seen)
        if group:
            assert "AddOffsetsToTxn" not in seen and min(seen["TxnOffsetCommit"]) >= 5, dict(seen)


def consume(b: MiniBroker, topic: str, isolation: str, count: int, settle: str = "1s") -> list[dict]:
    ev = franz_go.run("consume", "-brokers", b.bootstrap_servers, "-topic", topic, "-isolation", isolation,
                      "-count", count, "-settle", settle, "-timeout", "60s", timeout=90)
    return franz_go.events_of(ev, "record")


# -- idempotent produce --------------------------------------------------------------------------

def test_idempotent_produce(mbgo, brokers):
    b = brokers(1, "fg-idem")
    topic, parts, n = topic_name("fg-idem"), 3, 300
    b.create_topic(topic, parts)
    ev = franz_go.run("idempotent-produce", "-brokers", b.bootstrap_servers, "-topic", topic,
                      "-partitions", parts, "-n", n, "-timeout", "60s", timeout=90)
    produced = franz_go.events_of(ev, "produced")
    assert len(produced) == n
    assert {e["producer_id"] for e in produced} != {-1}, "franz-go did not produce idempotently"
    by_part = defaultdict(list)
    for e in produced:
        by_part[e["partition"]].append((e["offset"], e["value"]))
    # Record i went to partition i % parts; in each partition they are acknowledged at 0, 1, 2, ...
    for p in range(parts):
        assert sorted(by_part[p]) == [(k, f"r-{i}") for k, i in enumerate(range(p, n, parts))]
    got = consume(b, topic, "read_uncommitted", n)
    assert sorted((r["partition"], r["offset"], r["value"]) for r in got) == sorted(
        (e["partition"], e["offset"], e["value"]) for e in produced)
    seen = kgo_requests(b)
    assert seen.get("InitProducerId") and seen.get("Produce"), dict(seen)


# -- transactions --------------------------------------------------------------------------------

@pytest.mark.parametrize("level", LEVELS)
def test_transactions_commit_abort(mbgo, brokers, level):
    """commit, abort, commit, abort: read_committed sees transactions 0 and 2 only, in order, once."""
    b = brokers(level, "fg-txn")
    topic, parts, txns, per_txn = topic_name("fg-txn"), 2, 4, 6
    b.create_topic(topic, parts)
    ev = franz_go.run("txn-produce", "-brokers", b.bootstrap_servers, "-topic", topic, "-partitions", parts,
                      "-txn-id", topic, "-txns", txns, "-records", per_txn, "-outcome", "alternate",
                      "-timeout", "60s", timeout=90)
    done = franz_go.events_of(ev, "txn")
    assert [e["commit"] for e in done] == [True, False, True, False]
    # Each transaction's records take consecutive offsets per partition, then one for its marker.
    per_part = per_txn // parts
    for e in done:
        k = e["n"]
        assert sorted(e["offsets"]) == sorted([p, k * (per_part + 1) + j] for p in range(parts)
                                              for j in range(per_part)), e
    epochs = [e["producer_epoch"] for e in done]
    if level >= 2:
        # KIP-890: every EndTxn v5 bumps the epoch, the next transaction runs at the new one.
        assert all(b2 > a for a, b2 in zip(epochs, epochs[1:])), epochs
    else:
        assert len(set(epochs)) == 1, epochs

    def expected(ks):
        return sorted((i % parts, k * (per_part + 1) + i // parts, f"t{k}-{i}") for k in ks for i in range(per_txn))

    committed = consume(b, topic, "read_committed", len(expected([0, 2])))
    assert sorted((r["partition"], r["offset"], r["value"]) for r in committed) == expected([0, 2])
    for p in range(parts):  # in offset order within each partition, as fetched
        offs = [r["offset"] for r in committed if r["partition"] == p]
        assert offs == sorted(offs)
    everything = consume(b, topic, "read_uncommitted", len(expected(range(txns))))
    assert sorted((r["partition"], r["offset"], r["value"]) for r in everything) == expected(range(txns))
    assert wire.high_watermarks(b.port, topic, range(parts)) == {p: txns * (per_part + 1) for p in range(parts)}
    assert_txn_path(b, level)


# -- exactly-once consume-transform-produce across kill -9 ----------------------------------------

N_RECORDS, N_KEYS, PARTS = 4000, 20, 3
INPUT_BATCH = 20            # records per input batch; with 2 KiB fetches, ~1 batch per partition per txn
MAX_PARTITION_BYTES = 2048


def produce_input(bootstrap: str, topic: str, rng: random.Random) -> list[tuple[str, str]]:
    from confluent_kafka import Producer

    seq: Counter = Counter()
    records = []
    for i in range(N_RECORDS):
        key = f"k{rng.randrange(N_KEYS):02d}"
        records.append((key, f"{key}|{seq[key]:05d}|record {i} of the input"))
        seq[key] += 1
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                  "batch.num.messages": INPUT_BATCH})
    for key, value in records:
        p.produce(topic, key=key.encode(), value=value.encode())
    assert p.flush(60) == 0, "input not delivered within 60 s"
    return records


def end_offsets(port: int, topic: str, isolation_level: int) -> dict[int, int]:
    """ListOffsets v2 latest: high watermarks (isolation 0) or last stable offsets (1)."""
    import kio.schema.list_offsets.v2.request as m

    req = wire._kio_request(wire.LIST_OFFSETS, 2)(
        replica_id=-1, isolation_level=isolation_level,
        topics=(m.ListOffsetsTopic(name=topic, partitions=tuple(
            m.ListOffsetsPartition(partition_index=p, timestamp=wire.LATEST) for p in range(PARTS))),))
    with wire.connect(port) as sock:
        wire.send_frame(sock, wire.encode_request(req, 99))
        resp = wire._decode_response(wire.LIST_OFFSETS, 2, wire.recv_frame(sock), 99)
    return {p.partition_index: p.offset for t in resp.topics for p in t.partitions}


# Answers while a group's coordinator is elected or loads: the callers poll, so "not yet".
COORDINATOR_NOT_READY = (16, 14, 15)  # NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int] | None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    # read_uncommitted: no stable-offset wait behind a killed instance's open transaction.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": "read_uncommitted"})
    try:
        tps = c.committed(
            [TopicPartition(topic, p) for p in range(PARTS)], timeout=15)
    except KafkaException as e:
        if e.args and e.args[0].code() in COORDINATOR_NOT_READY:
            return None
        raise
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in tps}


class Pipeline:
    """``mbgo eos`` processes, one after another; stdout (JSON lines) and stderr (franz-go's log) to files."""

    def __init__(self, b: MiniBroker, tmp: Path, src: str, dst: str, group: str) -> None:
        self.b, self.tmp, self.src, self.dst, self.group = b, tmp, src, dst, group
        self.procs: list[subprocess.Popen] = []
        self.notes: list[str] = []
        self.t0 = time.monotonic()

    def note(self, what: str) -> None:
        self.notes.append(f"{time.monotonic() - self.t0:6.2f}s {what}")

    def start(self) -> subprocess.Popen:
        n = len(self.procs)
        with open(self.tmp / f"eos-{n}.out", "w") as out, open(self.tmp / f"eos-{n}.err", "w") as err:
            proc = franz_go.start("eos", "-brokers", self.b.bootstrap_servers, "-in", self.src, "-out", self.dst,
                                  "-group", self.group, "-txn-id", self.group, "-timeout", "150s",
                                  "-max-partition-bytes", MAX_PARTITION_BYTES, stdout=out, stderr=err)
        self.procs.append(proc)
        self.note(f"started instance {n} (pid {proc.pid})")
        return proc

    def output_hw(self) -> int:
        return sum(end_offsets(self.b.port, self.dst, 0).values())

    def open_txn(self) -> bool:
        hw, lso = end_offsets(self.b.port, self.dst, 0), end_offsets(self.b.port, self.dst, 1)
        return any(lso[p] < hw[p] for p in range(PARTS))

    def wait(self, proc: subprocess.Popen, what: str, cond, timeout: float, step: float = 0.005) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            assert proc.poll() is None, f"instance exited by itself ({proc.returncode}) before {what}\n{self.report()}"
            assert time.monotonic() < deadline, f"{what}: not within {timeout} s\n{self.report()}"
            time.sleep(step)
        self.note(what)

    def freeze_in_open_txn(self, proc: subprocess.Popen, rng: random.Random, attempts: int = 400) -> None:
        """SIGSTOP ``proc`` at a moment the output holds records of an open transaction.

        A transaction lasts milliseconds, so: freeze, look, and thaw to try again if none is open."""
        for n in range(attempts):
            assert proc.poll() is None, f"instance exited ({proc.returncode}) before an open transaction\n{self.report()}"
            proc.send_signal(signal.SIGSTOP)
            if self.open_txn():
                self.note(f"frozen with an open transaction in the output (attempt {n + 1})")
                return
            proc.send_signal(signal.SIGCONT)
            time.sleep(rng.uniform(0, 0.004))
        raise AssertionError(f"no open transaction seen in {attempts} freezes\n{self.report()}")

    def report(self) -> str:
        out = ["events:"] + self.notes
        for n in range(len(self.procs))[-2:]:
            for ext in ("out", "err"):
                lines = (self.tmp / f"eos-{n}.{ext}").read_text(errors="replace").splitlines()
                out += [f"--- instance {n} {ext} (last lines) ---"] + lines[-15:]
        return "\n".join(out)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()  # by PID, ours
                proc.wait(timeout=10)


@pytest.mark.parametrize("level", LEVELS)
def test_eos_pipeline_kill9(mbgo, brokers, tmp_path, level):
    """kill -9 twice mid-stream (the second time with records of an open transaction in the output),
    restart with the same transactional id and group: the output holds every input record once."""
    rng = random.Random(SEED + level)
    b = brokers(level, "fg-eos")
    src, dst, group = topic_name("fg-eos-in"), topic_name("fg-eos-out"), topic_name("fg-eos-group")
    b.create_topic(src, PARTS)
    b.create_topic(dst, PARTS)
    records = produce_input(b.bootstrap_servers, src, rng)
    input_end = wire.high_watermarks(b.port, src, range(PARTS))
    pipe = Pipeline(b, tmp_path, src, dst, group)
    try:
        # 1: a kill at a random point of the output's growth.
        first = pipe.start()
        point = rng.randrange(200, 1200)
        pipe.wait(first, f"output past {point}", lambda: pipe.output_hw() > point, 60)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        # 2: a kill while a transaction holds records in the output (frozen first, so it stays open).
        second = pipe.start()
        grown = pipe.output_hw() + 300
        pipe.wait(second, "output grew by 300", lambda: pipe.output_hw() > grown, 60)
        pipe.freeze_in_open_txn(second, rng)
        second.send_signal(signal.SIGKILL)
        second.wait(timeout=10)
        # 3: the last instance runs until the group's offsets reach the end of the input.
        last = pipe.start()
        pipe.wait(last, "group offsets at the end of the input",
                  lambda: committed_offsets(b.bootstrap_servers, group, src) == input_end, 90, step=0.5)
        last.send_signal(signal.SIGTERM)
        assert last.wait(timeout=30) == 0, pipe.report()
    finally:
        pipe.close()

    print("\n".join(pipe.notes))
    out = consume(b, dst, "read_committed", N_RECORDS, settle="2s")
    by_key = defaultdict(list)
    parts_of_key = defaultdict(set)
    for r in out:
        by_key[r["key"]].append(r["value"])
        parts_of_key[r["key"]].add(r["partition"])
    expected = defaultdict(list)
    for key, value in records:
        expected[key].append(value.upper())
    dupes = [v for v, c in Counter(r["value"] for r in out).items() if c > 1]
    assert not dupes, f"{len(dupes)} records twice in the output, e.g. {dupes[:3]}\n{pipe.report()}"
    assert len(out) == N_RECORDS, f"{len(out)} output records for {N_RECORDS} input records\n{pipe.report()}"
    assert dict(by_key) == dict(expected), "output differs from the input (order per key or content)"
    assert all(len(ps) == 1 for ps in parts_of_key.values()), dict(parts_of_key)
    # The killed open transaction's records are in the log, aborted: read_uncommitted sees more.
    everything = consume(b, dst, "read_uncommitted", N_RECORDS + 1, settle="1s")
    assert len(everything) > N_RECORDS
    assert_txn_path(b, level, group=True)
