"""Exactly-once consume-transform-produce under kill -9, with librdkafka and with the Java client.

The pipeline runs as a separate process: ``examples/eos_pipeline.py`` (confluent-kafka) or
``java/EosPipeline.java`` (kafka-clients). Both read an input topic as a member of one consumer
group with read_committed, and per poll batch write the transformed records (key kept, value
upper-cased) to an output topic and the group's offsets in one transaction.

Each test:

1. writes 20,000 input records to a 4-partition topic: keys ``k00``..``k49`` drawn by a seeded RNG,
   values ``<key>|<per-key sequence>|<lower-case text>``;
2. starts the pipeline, and ``KILLS`` times: waits until the output topic has grown past a random
   point (seeded) and by more than one batch since the last start; then either waits a random
   0-50 ms or (for half the kills) until some output partition holds records of an open
   transaction (last stable offset < high watermark); then kill -9s the process (no clean close:
   a transaction may be open, the group still has the dead member) and at once starts a new one
   with the same transactional id and group;
3. once the group's committed offsets reach the end of the input and the output stops growing,
   stops the last instance with SIGTERM (it must exit cleanly);
4. reads the output with read_committed (assign, from the beginning, bounded): for every key, the
   values are exactly the upper-cased input values of that key, in input order — each once.

Restarts are fast: the new instance's initTransactions aborts the old one's open transaction,
and the dead member leaves the group when its session (6 s) times out. Each test takes ~30 s.
MINIBROKER_TEST_EOS_SEED=<n> replays the tests with other keys and kill points.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

from minibroker.testing import requests_seen

from . import java_client, wire
from .clients import create_topic, unique_topic
from .support import REPO_ROOT
from .test_txn_support import READ_COMMITTED, READ_UNCOMMITTED, TXN_BROKER_ARGS, read_all

N_RECORDS = 20_000
N_KEYS = 50
PARTS = 4
KILLS = 4
BATCH = 100
# MINIBROKER_TEST_EOS_SEED=<n> replays other kill points and keys.
SEED = int(os.environ.get("MINIBROKER_TEST_EOS_SEED", "20261122"))
SESSION_TIMEOUT_MS = 6000
EOS_BROKER_ARGS = TXN_BROKER_ARGS + ["--group-initial-rebalance-delay-ms", "0"]
EXAMPLE = REPO_ROOT / "examples" / "eos_pipeline.py"


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

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20,
                  "socket.timeout.ms": 10000, "message.timeout.ms": int(timeout * 1000)})
    errors: list[str] = []
    acked = [0]

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(f"{err.name()}: {err.str()}")
        else:
            acked[0] += 1

    for key, value in records:
        p.produce(topic, key=key, value=value, on_delivery=on_delivery)  # 20k: fits librdkafka's queue
    left = p.flush(timeout)
    assert left == 0 and not errors and acked[0] == len(records), (
        f"input: {left} undelivered, {acked[0]} acked, errors {errors[:5]}")


# -- the pipeline process ------------------------------------------------------------------------

def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class Instance:
    """One pipeline process; its stdout+stderr go to a file."""

    def __init__(self, cmd: list[str], log_path: Path) -> None:
        self.cmd = cmd
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                     cwd=str(REPO_ROOT), preexec_fn=_die_with_parent)
        self.started = time.monotonic()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def pause(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGCONT)

    def kill9(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)  # this process only, by its PID
        self.proc.wait(timeout=10)
        self._log.close()

    def terminate(self, timeout: float = 30.0) -> int:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise AssertionError(f"pipeline pid {self.proc.pid} ignored SIGTERM for {timeout} s\n{self.tail()}")
        self._log.close()
        return rc

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return f"--- {self.log_path} (pid {self.proc.pid}) ---\n" + "\n".join(text.splitlines()[-lines:])


class Run:
    """The pipeline's instances, their logs, and what the test did to them."""

    def __init__(self, broker, start_cmd, log_dir: Path, input_topic: str, output_topic: str, group: str) -> None:
        self.broker = broker
        self.start_cmd = start_cmd
        self.log_dir = log_dir
        self.input = input_topic
        self.output = output_topic
        self.group = group
        self.instances: list[Instance] = []
        self.events: list[str] = []
        self.final_rc: int | None = None
        self.open_txn_records = 0  # output records in open transactions of killed instances
        self.t0 = time.monotonic()

    def note(self, what: str) -> None:
        self.events.append(f"{time.monotonic() - self.t0:6.2f}s {what}")

    def start(self) -> Instance:
        n = len(self.instances)
        inst = Instance(self.start_cmd(), self.log_dir / f"pipeline-{n}.log")
        self.instances.append(inst)
        self.note(f"started instance {n} (pid {inst.proc.pid})")
        return inst

    def close(self) -> None:
        for inst in self.instances:
            if inst.alive():
                inst.kill9()

    def report(self) -> str:
        tails = "\n".join(i.tail(25) for i in self.instances[-3:])
        return "events:\n  " + "\n  ".join(self.events) + "\n" + tails

    def output_progress(self) -> int:
        return sum(wire.high_watermarks(self.broker.port, self.output, range(PARTS)).values())

    def open_transaction_data(self) -> int:
        """Records of transactions not yet ended in the output (sum of high watermark - LSO)."""
        lso = end_offsets(self.broker.port, self.output, 1)
        hw = end_offsets(self.broker.port, self.output, 0)
        return sum(max(0, hw[p] - lso[p]) for p in range(PARTS))

    def check_alive(self, inst: Instance) -> None:
        assert inst.alive(), (f"pipeline instance exited by itself with {inst.proc.returncode}\n"
                              f"{self.report()}")


def end_offsets(port: int, topic: str, isolation_level: int, timeout: float = 5.0) -> dict[int, int]:
    """ListOffsets v2 (latest) for every partition: the high watermarks (isolation_level 0) or the
    last stable offsets (1, read_committed)."""
    import kio.schema.list_offsets.v2.request as m

    req = wire._kio_request(wire.LIST_OFFSETS, 2)(
        replica_id=-1, isolation_level=isolation_level,
        topics=(m.ListOffsetsTopic(name=topic, partitions=tuple(
            m.ListOffsetsPartition(partition_index=p, timestamp=wire.LATEST) for p in range(PARTS))),))
    corr = 4343
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
    """The group's committed offsets (no member joins). read_uncommitted, so librdkafka does not ask
    for stable offsets: those would wait while a killed instance's transaction is still open."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": "read_uncommitted", "socket.timeout.ms": 10000})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(PARTS)], timeout=15)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in tps}


def run_with_kills(broker, start_cmd, tmp_path: Path, input_topic: str, output_topic: str, group: str,
                   rng: random.Random) -> Run:
    run = Run(broker, start_cmd, tmp_path, input_topic, output_topic, group)
    ends = wire.high_watermarks(broker.port, input_topic, range(PARTS))
    assert sum(ends.values()) == N_RECORDS, ends
    thresholds = sorted(int(rng.uniform(0.05, 0.8) * N_RECORDS) for _ in range(KILLS))
    # Half the kills come at a random moment after the kill point; the other half wait there until
    # the pipeline is caught (SIGSTOP) with a transaction that holds output records and stays open
    # while it is stopped, so that some kills surely leave one for the next instance to abort.
    modes = (["open-txn", "any"] * KILLS)[:KILLS]
    rng.shuffle(modes)
    run.note(f"kill points (output records): {list(zip(thresholds, modes))}")
    try:
        inst = run.start()
        for k, (threshold, mode) in enumerate(zip(thresholds, modes)):
            base = run.output_progress()
            target = max(threshold, base + BATCH + BATCH // 2)  # this instance must have written something
            deadline = time.monotonic() + 40
            for _ in range(4000):
                run.check_alive(inst)
                if run.output_progress() >= target or time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            got = run.output_progress()
            assert got >= target, f"kill {k}: output at {got}, not {target} within 40 s\n{run.report()}"
            delay = rng.uniform(0.0, 0.05)  # short: the pipelines process ~5-15k records/s
            how = f"after {delay * 1000:.0f} ms"
            if mode == "open-txn":
                how = "no open transaction caught within 5 s"
                deadline = time.monotonic() + 5
                for attempt in range(1, 1001):
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
                time.sleep(delay)
            run.check_alive(inst)
            inst.kill9()
            run.note(f"kill -9 instance {len(run.instances) - 1} at output {run.output_progress()} "
                     f"(target {target}, {mode}: {how})")
            inst = run.start()
            run.note(f"  committed offsets then: {committed_offsets(broker.bootstrap_servers, group, input_topic)}")

        # Wait for the input to be fully committed, then for the output to stop growing.
        deadline = time.monotonic() + 60
        committed: dict[int, int] = {}
        for _ in range(600):
            run.check_alive(inst)
            committed = committed_offsets(broker.bootstrap_servers, group, input_topic)
            if committed == ends or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert committed == ends, f"committed {committed}, input ends {ends} after 60 s\n{run.report()}"
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
        rc = inst.terminate()
        run.note(f"SIGTERM: exit {rc}")
        run.final_rc = rc
    except BaseException:
        run.close()
        raise
    return run


def check_output(broker, run: Run, records) -> None:
    expected: dict[bytes, list[bytes]] = defaultdict(list)
    for key, value in records:
        expected[key].append(value.upper())
    out = read_all(broker, run.output, range(PARTS), READ_COMMITTED, timeout=60)
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
    ru = read_all(broker, run.output, range(PARTS), READ_UNCOMMITTED, timeout=60)
    ru_total = sum(len(v) for v in ru.values())
    run.note(f"read_committed: {total} records; read_uncommitted: {ru_total}")
    assert not problems and not split and total == N_RECORDS, (
        f"output (read_committed) is not exactly one copy of each input record in per-key order: "
        f"{total} records for {N_RECORDS} inputs; keys in several partitions: {split}\n  "
        + "\n  ".join(problems[:10]) + f"\n{run.report()}")
    # The transactions the killed instances left open (caught while stopped) were aborted: their
    # records are in the log (read_uncommitted) but not in the read_committed output.
    assert ru_total - total >= run.open_txn_records, (
        f"read_uncommitted has {ru_total - total} records beyond read_committed's; the killed instances' "
        f"open transactions alone held {run.open_txn_records}\n{run.report()}")


def _pipeline_test(broker_factory, tmp_path, name: str, command) -> Run:
    b = broker_factory(EOS_BROKER_ARGS)
    rng = random.Random(SEED)
    input_topic, output_topic = unique_topic(f"{name}-in"), unique_topic(f"{name}-out")
    create_topic(b.bootstrap_servers, input_topic, PARTS)
    create_topic(b.bootstrap_servers, output_topic, PARTS)
    records = make_input(rng)
    produce_input(b.bootstrap_servers, input_topic, records)
    group, tid = f"{name}-group-{uuid.uuid4().hex[:6]}", f"{name}-txn-{uuid.uuid4().hex[:6]}"
    run = run_with_kills(b, lambda: command(b.bootstrap_servers, input_topic, output_topic, group, tid), tmp_path,
                         input_topic, output_topic, group, rng)
    check_output(b, run, records)
    print("\n".join(run.events))
    return run


def test_eos_pipeline_librdkafka(broker_factory, tmp_path):
    def command(bootstrap, input_topic, output_topic, group, tid):
        return [sys.executable, str(EXAMPLE), "--bootstrap", bootstrap, "--input", input_topic,
                "--output", output_topic, "--group", group, "--transactional-id", tid,
                "--batch-size", str(BATCH), "--poll-timeout", "0.2", "--timeout", "20",
                "--session-timeout-ms", str(SESSION_TIMEOUT_MS), "--transaction-timeout-ms", "10000",
                "--idle-exit-seconds", "60",  # a safety bound: the test stops it with SIGTERM
                "--consumer-opt", "max.poll.interval.ms=20000", "--consumer-opt", "fetch.wait.max.ms=100"]

    run = _pipeline_test(broker_factory, tmp_path, "eos-rdkafka", command)
    assert run.final_rc == 0, f"the example exited with {run.final_rc} on SIGTERM\n{run.report()}"


def test_eos_pipeline_java(broker_factory, tmp_path):
    tc = java_client.java_toolchain()
    classes = java_client.compile_drivers(tc)

    def command(bootstrap, input_topic, output_topic, group, tid):
        return java_client.driver_command(tc, classes, "EosPipeline",
                                          [bootstrap, input_topic, output_topic, group, tid, 60, BATCH])

    run = _pipeline_test(broker_factory, tmp_path, "eos-java", command)
    # SIGTERM runs the shutdown hook (clean close); the JVM then reports 143 = 128 + SIGTERM.
    assert run.final_rc in (0, 143), f"EosPipeline exited with {run.final_rc} on SIGTERM\n{run.report()}"
    assert "EXIT 0 stopped" in run.instances[-1].log_path.read_text(errors="replace"), run.report()
    # The Java client 4.x takes today's versions (issue 16 item 3), from the broker's request counts.
    used: dict[str, int] = {}
    for api, version, software in requests_seen(broker_factory.brokers[-1].log_text()):
        if software == "apache-kafka-java":
            used[api] = max(version, used.get(api, -1))
    # (OffsetFetch/OffsetCommit v10 name topics by id, which only the KIP-848 consumer sends.)
    assert used.get("Metadata") == 13 and used.get("Fetch", 0) >= 17 and used.get("OffsetFetch") == 9, used


def test_eos_pipeline_java_kip848_transactions_v2(broker_factory, tmp_path):
    """The same under kill -9 with today's protocols on both sides: the consumer in a KIP-848
    group (group.protocol=consumer; the dead instance's member is fenced by the broker's session
    timeout, 6 s here) and the producer on transactions v2 (the broker's default level), whose
    sendOffsetsToTransaction carries the consumer's member epoch as generation."""
    tc = java_client.java_toolchain()
    classes = java_client.compile_drivers(tc)

    def command(bootstrap, input_topic, output_topic, group, tid):
        return java_client.driver_command(tc, classes, "EosPipeline",
                                          [bootstrap, input_topic, output_topic, group, tid, 60, BATCH,
                                           "consumer"])

    factory = _KipBrokerFactory(broker_factory)
    run = _pipeline_test(factory, tmp_path, "eos-java-848", command)
    assert run.final_rc in (0, 143), f"EosPipeline exited with {run.final_rc} on SIGTERM\n{run.report()}"
    used: dict[str, set[int]] = defaultdict(set)
    for api, version, software in requests_seen(broker_factory.brokers[-1].log_text()):
        if software == "apache-kafka-java":
            used[api].add(version)
    assert "ConsumerGroupHeartbeat" in used and "JoinGroup" not in used, dict(used)
    assert max(used["EndTxn"]) == 5 and max(used["Produce"]) >= 12, dict(used)
    assert "AddPartitionsToTxn" not in used and "AddOffsetsToTxn" not in used, dict(used)
    assert max(used["TxnOffsetCommit"]) == 6, dict(used)  # KIP-1319's topic ids, as against Kafka 4.4


class _KipBrokerFactory:
    """broker_factory with the consumer group session and heartbeat shortened (the client may
    not set them under group.protocol=consumer)."""

    def __init__(self, factory) -> None:
        self.factory = factory

    def __call__(self, args):
        return self.factory(list(args) + ["--group-consumer-session-timeout-ms", str(SESSION_TIMEOUT_MS),
                                          "--group-consumer-heartbeat-interval-ms", "1000"])

    @property
    def brokers(self):
        return self.factory.brokers
