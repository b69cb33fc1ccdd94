"""Exactly-once consume-transform-produce with KafkaJS under kill -9 (tests/js/eos_pipeline.js).

The pipeline is a KafkaJS consumer (group member, readUncommitted: false, autoCommit: false,
eachBatch) and a transactional KafkaJS producer (idempotent, maxInFlightRequests 1). For every batch
it runs ``producer.transaction()``, sends the transformed records (key kept, value upper-cased),
``txn.sendOffsets()`` the group's next offset for the batch's partition (AddOffsetsToTxn +
TxnOffsetCommit) and ``txn.commit()``.

The test:

1. writes 5,000 input records to a 3-partition topic with confluent-kafka: keys ``k00``..``k19``
   drawn by a seeded RNG, values ``<key>|<per-key sequence>|<lower-case text>``, in record batches
   of at most 50 records. The pipeline fetches at most 4 KiB per partition, so it runs ~100
   transactions rather than a few large ones;
2. starts the pipeline as a node process, and ``KILLS`` (2) times: waits until the output topic has
   grown past a seeded random point and by more than one batch since the last start, then kill -9s
   the process and at once starts a new one with the same transactional id and group. The first
   kill comes 0-50 ms after that point. The second waits until some output partition holds records
   of an open transaction (LSO < high watermark) and SIGSTOPs the process there, so the next
   instance must abort a transaction that holds output records;
3. once the group's committed offsets (OffsetFetch with a read_uncommitted confluent-kafka
   consumer) reach the end of the input and the output stops growing, stops the last instance
   with SIGTERM. It must exit 0 after a clean disconnect;
4. reads the output with read_committed (confluent-kafka, assign from the beginning, bounded): for
   every key, the values must be exactly the upper-cased input values of that key, in input order,
   each once, all in one partition. The aborted open transaction's records are in the log
   (read_uncommitted) but not in that output.

Each restart waits for the killed member's 6 s session to expire (KafkaJS has no static
membership), so the test takes ~20-25 s. MINIBROKER_TEST_EOS_SEED=<n> replays other keys and kill
points. See tests/js/eos_pipeline.js for why the script opens and aborts an empty transaction before
its consumer joins the group.
"""

from __future__ import annotations

import os
import random
import re
import sys
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

from . import wire
from .clients import JS_DIR, create_topic, require_kafkajs, unique_topic
from .test_eos_pipeline import Instance
from .test_txn_support import READ_COMMITTED, READ_UNCOMMITTED, TXN_BROKER_ARGS, read_all

SCRIPT = JS_DIR / "eos_pipeline.js"
N_RECORDS = 5_000
N_KEYS = 20
PARTS = 3
KILLS = 2
INPUT_BATCH = 50           # records per input record batch (librdkafka batch.num.messages)
MAX_BYTES_PER_PARTITION = 4096  # KafkaJS fetch limit: about one input record batch per eachBatch
SESSION_TIMEOUT_MS = 6000  # minibroker's minimum
SEED = int(os.environ.get("MINIBROKER_TEST_EOS_SEED", "20261122"))
EOS_BROKER_ARGS = TXN_BROKER_ARGS + ["--group-initial-rebalance-delay-ms", "0"]


# -- input -----------------------------------------------------------------------------------

def make_input(rng: random.Random) -> list[tuple[bytes, bytes]]:
    seq: Counter = Counter()
    out = []
    for i in range(N_RECORDS):
        key = f"k{rng.randrange(N_KEYS):02d}"
        out.append((key.encode(), f"{key}|{seq[key]:05d}|record {i} of the input, lower case".encode()))
        seq[key] += 1
    return out


def produce_input(bootstrap: str, topic: str, records, timeout: float = 60.0) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                  "batch.num.messages": INPUT_BATCH, "socket.timeout.ms": 10000,
                  "message.timeout.ms": int(timeout * 1000)})
    errors: list[str] = []
    acked = [0]

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(f"{err.name()}: {err.str()}")
        else:
            acked[0] += 1

    for key, value in records:
        p.produce(topic, key=key, value=value, on_delivery=on_delivery)  # 5k: fits librdkafka's queue
    left = p.flush(timeout)
    assert left == 0 and not errors and acked[0] == len(records), (
        f"input: {left} undelivered, {acked[0]} acked, errors {errors[:5]}")


# -- broker state ------------------------------------------------------------------------------

def end_offsets(port: int, topic: str, isolation_level: int, timeout: float = 5.0) -> dict[int, int]:
    """ListOffsets v2 (latest): high watermarks (isolation_level 0) or last stable offsets (1)."""
    import kio.schema.list_offsets.v2.request as m

    req = wire._kio_request(wire.LIST_OFFSETS, 2)(
        replica_id=-1, isolation_level=isolation_level,
        topics=(m.ListOffsetsTopic(name=topic, partitions=tuple(
            m.ListOffsetsPartition(partition_index=p, timestamp=wire.LATEST) for p in range(PARTS))),))
    corr = 4747
    with wire.connect(port, timeout=timeout) as sock:
        wire.send_frame(sock, wire.encode_request(req, corr))
        resp = wire._decode_response(wire.LIST_OFFSETS, 2, wire.recv_frame(sock), corr)
    out = {}
    for t in resp.topics:
        for p in t.partitions:
            assert p.error_code == 0, f"ListOffsets v2 {topic}[{p.partition_index}] error {p.error_code}"
            out[p.partition_index] = p.offset
    return out


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets, read without joining the group. The consumer is
    read_uncommitted, so librdkafka does not ask for stable offsets, which would wait for a killed
    instance's open transaction."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": "read_uncommitted", "socket.timeout.ms": 10000})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(PARTS)], timeout=15)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in tps}


# -- the pipeline run --------------------------------------------------------------------------

class Run:
    def __init__(self, broker, cmd, log_dir: Path, input_topic: str, output_topic: str, group: str) -> None:
        self.broker = broker
        self.cmd = cmd
        self.log_dir = log_dir
        self.input = input_topic
        self.output = output_topic
        self.group = group
        self.instances: list[Instance] = []
        self.events: list[str] = []
        self.open_txn_records = 0
        self.final_rc: int | None = None
        self.t0 = time.monotonic()

    def note(self, what: str) -> None:
        self.events.append(f"{time.monotonic() - self.t0:6.2f}s {what}")

    def start(self) -> Instance:
        n = len(self.instances)
        inst = Instance(self.cmd, self.log_dir / f"kafkajs-pipeline-{n}.log")
        self.instances.append(inst)
        self.note(f"started instance {n} (pid {inst.proc.pid})")
        return inst

    def close(self) -> None:
        for inst in self.instances:
            if inst.alive():
                inst.kill9()

    def output_progress(self) -> int:
        return sum(wire.high_watermarks(self.broker.port, self.output, range(PARTS)).values())

    def open_transaction_data(self) -> int:
        lso = end_offsets(self.broker.port, self.output, 1)
        hw = end_offsets(self.broker.port, self.output, 0)
        return sum(max(0, hw[p] - lso[p]) for p in range(PARTS))

    def check_alive(self, inst: Instance) -> None:
        assert inst.alive(), f"pipeline instance exited by itself with {inst.proc.returncode}\n{self.report()}"

    def logs(self) -> list[str]:
        out = []
        for inst in self.instances:
            try:
                out.append(inst.log_path.read_text(errors="replace"))
            except OSError:
                out.append("")
        return out

    def report(self) -> str:
        return ("events:\n  " + "\n  ".join(self.events) + "\n"
                + "\n".join(i.tail(25) for i in self.instances[-3:]))


def wait_for(run: Run, inst: Instance, what: str, cond, timeout: float, step: float = 0.01):
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / step) + 1):
        run.check_alive(inst)
        if cond() or time.monotonic() > deadline:
            break
        time.sleep(step)
    assert cond(), f"{what}: not within {timeout} s\n{run.report()}"


def run_with_kills(broker, cmd, tmp_path: Path, input_topic: str, output_topic: str, group: str,
                   rng: random.Random) -> Run:
    run = Run(broker, cmd, tmp_path, input_topic, output_topic, group)
    ends = wire.high_watermarks(broker.port, input_topic, range(PARTS))
    assert sum(ends.values()) == N_RECORDS, ends
    thresholds = [int(rng.uniform(0.10, 0.35) * N_RECORDS), int(rng.uniform(0.45, 0.75) * N_RECORDS)]
    modes = ["any", "open-txn"]
    run.note(f"kill points (output high watermarks): {list(zip(thresholds, modes))}")
    try:
        inst = run.start()
        for k, (threshold, mode) in enumerate(zip(thresholds, modes)):
            # This instance must have written more than one batch (it got past its start-up).
            target = max(threshold, run.output_progress() + INPUT_BATCH * 3 // 2)
            wait_for(run, inst, f"kill {k}: output at {target}", lambda: run.output_progress() >= target, 40)
            how = ""
            if mode == "open-txn":
                how = "no open transaction caught within 5 s"
                deadline = time.monotonic() + 5
                for attempt in range(1, 2001):
                    run.check_alive(inst)
                    if time.monotonic() > deadline:
                        break
                    if not run.open_transaction_data():
                        continue
                    inst.pause()
                    time.sleep(0.1)  # let the broker finish an EndTxn that was already sent
                    open_records = run.open_transaction_data()
                    if open_records:
                        run.open_txn_records += open_records
                        how = f"stopped with {open_records} output records in an open transaction (try {attempt})"
                        break
                    inst.resume()
            else:
                delay = rng.uniform(0.0, 0.05)
                time.sleep(delay)
                how = f"after {delay * 1000:.0f} ms"
            run.check_alive(inst)
            inst.kill9()
            run.note(f"kill -9 instance {len(run.instances) - 1} at output {run.output_progress()} "
                     f"(target {target}, {mode}: {how})")
            inst = run.start()
            run.note(f"  committed offsets then: {committed_offsets(broker.bootstrap_servers, group, input_topic)}")

        deadline = time.monotonic() + 40
        committed: dict[int, int] = {}
        for _ in range(400):
            run.check_alive(inst)
            committed = committed_offsets(broker.bootstrap_servers, group, input_topic)
            if committed == ends or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert committed == ends, f"committed {committed}, input ends {ends} after 40 s\n{run.report()}"
        run.note(f"input fully committed: {committed}")
        last, stable_since = run.output_progress(), time.monotonic()
        for _ in range(200):
            if time.monotonic() - stable_since >= 1.0:
                break
            time.sleep(0.1)
            now = run.output_progress()
            if now != last:
                last, stable_since = now, time.monotonic()
        run.note(f"output stable at {last} (high watermarks incl. markers and aborted records)")
        run.final_rc = inst.terminate()
        run.note(f"SIGTERM: exit {run.final_rc}")
    except BaseException:
        run.close()
        raise
    return run


def check_output(broker, run: Run, records) -> None:
    expected: dict[bytes, list[bytes]] = defaultdict(list)
    for key, value in records:
        expected[key].append(value.upper())
    out = read_all(broker, run.output, range(PARTS), READ_COMMITTED, timeout=30)
    got: dict[bytes, list[bytes]] = defaultdict(list)
    parts_of: dict[bytes, set[int]] = defaultdict(set)
    for p in sorted(out):
        for _, key, value in out[p]:  # offset order within the partition
            got[key].append(value)
            parts_of[key].add(p)
    total = sum(len(v) for v in got.values())
    problems = []
    for key in sorted(set(expected) | set(got)):
        exp, have = expected.get(key, []), got.get(key, [])
        if have == exp:
            continue
        c_exp, c_have = Counter(exp), Counter(have)
        dups = sorted(v for v, n in c_have.items() if n > 1)
        missing = sorted(set(c_exp) - set(c_have))
        extra = sorted(set(c_have) - set(c_exp))
        first_diff = next((i for i, (a, b) in enumerate(zip(exp, have)) if a != b), min(len(exp), len(have)))
        problems.append(f"{key!r}: {len(have)} read, {len(exp)} expected; {len(dups)} duplicated "
                        f"{dups[:3]}, {len(missing)} missing {missing[:3]}, {len(extra)} unexpected "
                        f"{extra[:3]}; first difference at #{first_diff}")
    split = {k: sorted(v) for k, v in parts_of.items() if len(v) > 1}
    ru = read_all(broker, run.output, range(PARTS), READ_UNCOMMITTED, timeout=30)
    ru_total = sum(len(v) for v in ru.values())
    run.note(f"read_committed: {total} records; read_uncommitted: {ru_total}")
    assert not problems and not split and total == N_RECORDS, (
        f"output (read_committed) is not exactly one copy of each input record in per-key order: "
        f"{total} records for {N_RECORDS} inputs; keys in several partitions: {split}\n  "
        + "\n  ".join(problems[:10]) + f"\n{run.report()}")
    assert ru_total - total >= run.open_txn_records, (
        f"read_uncommitted has {ru_total - total} records beyond read_committed's; the killed instance's "
        f"open transaction alone held {run.open_txn_records}\n{run.report()}")


def test_eos_pipeline_kafkajs(broker_factory, tmp_path):
    node = require_kafkajs()
    b = broker_factory(EOS_BROKER_ARGS)
    rng = random.Random(SEED)
    input_topic, output_topic = unique_topic("eos-kafkajs-in"), unique_topic("eos-kafkajs-out")
    create_topic(b.bootstrap_servers, input_topic, PARTS)
    create_topic(b.bootstrap_servers, output_topic, PARTS)
    records = make_input(rng)
    t_input = time.monotonic()
    produce_input(b.bootstrap_servers, input_topic, records)
    t_input = time.monotonic() - t_input
    group, tid = f"eos-kafkajs-group-{uuid.uuid4().hex[:6]}", f"eos-kafkajs-txn-{uuid.uuid4().hex[:6]}"
    cmd = [node, str(SCRIPT), "--broker", b.bootstrap_servers, "--input", input_topic, "--output", output_topic,
           "--group", group, "--transactional-id", tid,
           "--max-bytes-per-partition", str(MAX_BYTES_PER_PARTITION),
           "--session-timeout-ms", str(SESSION_TIMEOUT_MS), "--transaction-timeout-ms", "10000",
           "--idle-exit-seconds", "60",  # a safety bound: the test stops it with SIGTERM
           "--timeout-ms", "120000"]
    run = run_with_kills(b, cmd, tmp_path, input_topic, output_topic, group, rng)
    check_output(b, run, records)

    logs = run.logs()
    assert run.final_rc == 0 and re.search(r"^EXIT 0 stopped", logs[-1], re.M), (
        f"the last instance exited with {run.final_rc} on SIGTERM\n{run.report()}")
    assert len(run.instances) == KILLS + 1
    commits = [len(re.findall(r"^COMMIT ", text, re.M)) for text in logs]
    assert all(n > 0 for n in commits), f"an instance committed no transaction: {commits}\n{run.report()}"
    # Not expected here: one instance at a time, so no fencing and no concurrent transactions.
    failures = [line for text in logs for line in text.splitlines()
                if "failed, aborting" in line or "consumer crash" in line]
    assert not failures, f"transactions failed in the pipeline: {failures[:5]}\n{run.report()}"
    run.note(f"input produced in {t_input:.2f} s; committed transactions per instance: {commits}")
    print("\n" + "\n".join(run.events), file=sys.stderr)
