"""A Kafka Streams 4.4 application with processing.guarantee=exactly_once_v2 on minibroker and
on Apache Kafka 4.4, the same input on both (streams/EosStreamsApp.java: a join with a
GlobalKTable, a repartition, a windowed sum in a state store with its changelog).

Events are produced while the app runs; on minibroker it is killed with SIGKILL twice
mid-stream and restarted and the broker is killed and restarted too (on Kafka, run at the same
time, the app is killed once). The last tenth of the events is held back until the last kill
(and restart) is over, so the last instance has offsets of its own to purge from the
repartition topic; the events are stamped from just before the run, so no broker's retention
deletes the changelog a restarted instance restores from. Each event makes exactly
one update of its window's running sum, so the output read with read_committed must hold, per
key, the running sums of exactly that key's events, each once: a lost or a repeated update
shows. The totals must equal a reference computed here, and Kafka's.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from . import streams_app

EVENTS = 8_000
USERS = 40
STEP_MS = 10                     # event timestamps: 80 s, 8 windows
RATE = 4000                      # events per second while the app runs


def base_timestamp() -> int:
    """The first event's timestamp: ten minutes ago, aligned to the 10 s windows.

    Not a fixed date: brokers apply time-based retention against the wall clock, and on Kafka
    a segment whose newest record is older than retention.ms goes, the active one too. The
    window store's changelog is compact,delete with retention.ms = window + grace + 1 day, so
    Kafka's log cleaner thread, which applies retention to compact,delete logs on each round
    (log.cleaner.backoff.ms, 100 ms in tests/reference/settings.py), deleted the head of a
    changelog of events from 2023 mid-run (log start 567, 2114, ... seen within 15 s). An
    instance started after a kill on an empty state dir then restored only the changelog's
    tail, and a window's running sum fell back (r2@...: -711): Kafka kept its word on
    retention, the test lost its own data. (The 5-minute retention task would delete the
    input and the GlobalKTable's topic the same way.) Within retention, every record stays."""
    now = int(time.time() * 1000) - 600_000
    return now - now % 10_000


def event(i: int, t0: int) -> tuple[str, str, int]:
    user = i % USERS
    return f"e{i}", f"u{user},{(i * 7) % 13 + 1}", t0 + i * STEP_MS


def region(user: int) -> str:
    return f"r{user % 5}"


def reference(t0: int) -> dict[str, list[int]]:
    """Per output key, the amounts of its events in event order."""
    out: dict[str, list[int]] = defaultdict(list)
    for i in range(EVENTS):
        _k, v, ts = event(i, t0)
        user, amount = v.split(",")
        out[f"{region(int(user[1:]))}@{ts - ts % 10_000}"].append(int(amount))
    return out


class Totals:
    """A read_committed reader of the output that keeps everything it saw."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"totals-{uuid.uuid4().hex[:6]}",
                           "isolation.level": "read_committed", "enable.auto.commit": False})
        self.c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.records: list[tuple[int, int, str, int]] = []

    def poll(self, seconds: float) -> int:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for m in self.c.consume(num_messages=5000, timeout=0.1):
                if m.error() is None:
                    self.records.append((m.partition(), m.offset(), m.key().decode(), int(m.value())))
        return len(self.records)

    def wait_for(self, count: int, timeout: float, what: str, app=None, log=None) -> None:
        deadline = time.monotonic() + timeout
        while len(self.records) < count and time.monotonic() < deadline:
            self.poll(0.3)
            if app is not None and app.poll() is not None:
                raise AssertionError(f"{what}: the app exited ({app.returncode}):\n{log.read_text()[-3000:]}")
        assert len(self.records) >= count, f"{what}: {len(self.records)} of {count} updates within {timeout} s"


def repartition_starts(bootstrap: str, topic: str, within: float) -> list[int]:
    """The repartition topic's log start offsets, as soon as Streams has purged any of it
    (DeleteRecords up to what its tasks consumed), or as they are after ``within`` seconds.

    Asked while the app still runs: each instance purges only what its own tasks consumed,
    at most every repartition.purge.interval.ms and one request at a time, so at the moment
    the last update is read a partition's purge may still be to come (seen on both brokers:
    [0, 0, 0, 2680], [4808, 0, 0, 0]); read at that instant, both at 0 would fail the test."""
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex[:6]}"})
    try:
        deadline = time.monotonic() + within
        while True:
            starts = [probe.get_watermark_offsets(TopicPartition(topic, i), timeout=10)[0] for i in range(4)]
            if sum(starts) > 0 or time.monotonic() > deadline:
                return starts
            time.sleep(0.5)
    finally:
        probe.close()


def run_pipeline(bootstrap: str, tmp, t0: int, restart_broker=None,
                 kills=(0.25, 0.5), protocol: str = "classic") -> dict[str, list[int]]:
    """Run the app over the events with a SIGKILL at each fraction of ``kills`` (and a broker
    restart when given); the committed output as {key: [running sums in output order]}.
    ``protocol``: the app's group.protocol, ``classic`` or ``streams`` (KIP-1071)."""
    tc, classes = streams_app.toolchain()
    app = f"eos-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(f"{app}-users", 1, 1), NewTopic(f"{app}-events", 4, 1), NewTopic(f"{app}-totals", 3, 1)]
    for f in admin.create_topics(topics).values():
        f.result(20)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for u in range(USERS):
        p.produce(f"{app}-users", key=f"u{u}", value=region(u), timestamp=t0 - 1000)
    assert p.flush(20) == 0

    # The last tenth of the events waits for the last kill (and broker restart): the instance
    # that runs to the end then consumes and commits repartition records of its own, and
    # Streams purges only offsets its running tasks committed. Without it, instances killed
    # before their first DeleteRecords landed could leave a last one with nothing to purge.
    tail = threading.Event()

    def produce_events():
        for i in range(EVENTS):
            if i == EVENTS * 9 // 10:
                p.flush(60)
                assert tail.wait(240), "the tail of the events was never released"
            k, v, ts = event(i, t0)
            while True:
                try:
                    p.produce(f"{app}-events", key=k, value=v, timestamp=ts)
                    break
                except BufferError:
                    p.poll(0.05)
            if i % 300 == 299:
                p.poll(0)
                time.sleep(300 / RATE)
        assert p.flush(60) == 0

    totals = Totals(bootstrap, f"{app}-totals", 3)
    log = tmp / f"{app}.log"

    def start():
        # Each start on an empty state dir, as a container restarted without a volume: the
        # window store is restored from its changelog topic (and RocksDB never reopens files a
        # SIGKILL left mid-write).
        return streams_app.start(tc, classes, bootstrap, app, tmp / f"{app}-state-{len(procs)}", "eos-app", log,
                                 protocol)
    procs: list = []
    procs.append(start())
    feeder = threading.Thread(target=produce_events, daemon=True)
    try:
        feeder.start()
        for fraction in kills:
            totals.wait_for(int(EVENTS * fraction), 120, f"before kill at {fraction:.0%}", procs[-1], log)
            procs[-1].kill()  # SIGKILL, this JVM only: no commit, no close
            procs[-1].wait(30)
            procs.append(start())
        if restart_broker is not None:
            totals.wait_for(int(EVENTS * 0.7), 120, "before the broker restart", procs[-1], log)
            restart_broker()
        tail.set()
        feeder.join(120)
        assert not feeder.is_alive(), "the producer did not finish"
        # with the streams protocol a killed (dynamic) member's tasks move only when its
        # 45 s session expires
        totals.wait_for(EVENTS, 240, "all updates", procs[-1], log)
        totals.poll(1.5)  # a repeated update, if any, would arrive now
        starts = repartition_starts(bootstrap, f"{app}-by-region-repartition", 30)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except Exception:
                    proc.kill()
        totals.c.close()
    assert sum(starts) > 0, f"{bootstrap} ({len(procs)} app starts): repartition topic purged up to {starts}"
    by_key: dict[str, list[int]] = defaultdict(list)
    for _p, _o, key, value in sorted(totals.records):
        by_key[key].append(value)
    print(f"{bootstrap}: {len(totals.records)} updates, {len(by_key)} keys, {len(procs)} app starts, "
          f"repartition topic purged up to {starts}; app log {log}")
    return by_key


def check_exactly_once(by_key: dict[str, list[int]], t0: int) -> None:
    expected = reference(t0)
    assert sorted(by_key) == sorted(expected)
    for key, sums in by_key.items():
        increments = [b - a for a, b in zip([0] + sums, sums)]
        # each event's amount once: nothing lost, nothing repeated
        assert sorted(increments) == sorted(expected[key]), key
        assert sums[-1] == sum(expected[key])


@pytest.mark.timeout(900)
def test_streams_exactly_once_v2_on_minibroker_and_kafka(broker_factory, kafka_reference, tmp_path):
    b = broker_factory(["--transaction-abort-check-interval-ms", "200", "--group-initial-rebalance-delay-ms", "0"])

    def restart_broker():
        b.kill9()
        b.start()

    # Kafka's run (the same app and input, one kill) alongside minibroker's: the test's wall time
    # is the longer of the two
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        # one t0 for both: the keys name the windows, and the two runs' totals are compared
        t0 = base_timestamp()
        kafka_run = pool.submit(run_pipeline, kafka_reference.bootstrap_servers, tmp_path, t0, None, (0.4,))
        mini = run_pipeline(b.bootstrap_servers, tmp_path, t0, restart_broker)
        kafka = kafka_run.result(timeout=600)
    check_exactly_once(mini, t0)
    check_exactly_once(kafka, t0)
    assert {k: v[-1] for k, v in mini.items()} == {k: v[-1] for k, v in kafka.items()}


@pytest.mark.timeout(900)
def test_streams_protocol_exactly_once_on_minibroker_and_kafka(broker_factory, kafka_reference, tmp_path):
    """The same application with group.protocol=streams (KIP-1071): the broker creates the
    repartition and changelog topics and assigns the tasks (StreamsGroupHeartbeat). On
    minibroker the app is killed with SIGKILL once and the broker killed and restarted (its
    streams group membership is not persisted: the members rejoin); on Kafka the app is killed
    once. The app runs without static membership there (see EosStreamsApp.java), so each kill
    costs a 45 s session timeout before the killed instance's tasks move."""
    b = broker_factory(["--transaction-abort-check-interval-ms", "200"])

    def restart_broker():
        b.kill9()
        b.start()

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        t0 = base_timestamp()
        kafka_run = pool.submit(run_pipeline, kafka_reference.bootstrap_servers, tmp_path, t0, None, (0.4,),
                                "streams")
        mini = run_pipeline(b.bootstrap_servers, tmp_path, t0, restart_broker, (0.4,), "streams")
        kafka = kafka_run.result(timeout=600)
    check_exactly_once(mini, t0)
    check_exactly_once(kafka, t0)
    assert {k: v[-1] for k, v in mini.items()} == {k: v[-1] for k, v in kafka.items()}
    # the group is a streams group on both (ListGroups v5, raw: librdkafka's admin lists only
    # classic and consumer groups), with the topology's internal topics
    from tests.reference.client import Connection, req

    for bootstrap in (b.bootstrap_servers, kafka_reference.bootstrap_servers):
        host, port = bootstrap.rsplit(":", 1)
        with Connection(host, int(port)) as conn:
            listed = conn.call(req(16, 5, states_filter=(), types_filter=("streams",)))
        apps = {g.group_id for g in listed.groups
                if g.group_id.startswith("eos-") and g.protocol_type == "streams"}
        assert apps, (bootstrap, listed)
        names = set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20).topics)
        for app in apps:
            assert {f"{app}-by-region-repartition", f"{app}-sums-changelog"} <= names, (bootstrap, app)


@pytest.mark.timeout(300)
def test_streams_protocol_two_instances_share_the_tasks(broker_factory, tmp_path):
    """Two instances of the app (two threads each: four members of two processes) with
    group.protocol=streams, the second started while the first already runs: the coordinator moves
    half the tasks to it (revoked first by their owners), both process events, and the output is
    still every update once."""
    b = broker_factory([])
    bootstrap = b.bootstrap_servers
    tc, classes = streams_app.toolchain()
    app = f"two-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(f"{app}-users", 1, 1), NewTopic(f"{app}-events", 4, 1),
                                  NewTopic(f"{app}-totals", 3, 1)]).values():
        f.result(20)
    t0 = base_timestamp()
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for u in range(USERS):
        p.produce(f"{app}-users", key=f"u{u}", value=region(u), timestamp=t0 - 1000)
    assert p.flush(20) == 0
    log = tmp_path / f"{app}.log"
    first = streams_app.start(tc, classes, bootstrap, app, tmp_path / "s1", "i1", log, "streams")
    procs = [first]
    totals = Totals(bootstrap, f"{app}-totals", 3)
    try:
        half = EVENTS // 2
        for i in range(EVENTS):
            if i == half:
                assert p.flush(60) == 0
                totals.wait_for(half, 120, "the first half, one instance", first, log)
                procs.append(streams_app.start(tc, classes, bootstrap, app, tmp_path / "s2", "i2", log,
                                               "streams"))
            k, v, ts = event(i, t0)
            p.produce(f"{app}-events", key=k, value=v, timestamp=ts)
            if i % 300 == 299:
                p.poll(0)
                time.sleep(300 / RATE)
        assert p.flush(60) == 0
        totals.wait_for(EVENTS, 180, "all updates, two instances", first, log)
        totals.poll(1.5)
        # both processes hold active tasks (StreamsGroupDescribe, raw)
        from tests.reference.client import Connection, req
        host, port = bootstrap.rsplit(":", 1)
        deadline = time.monotonic() + 60
        while True:
            with Connection(host, int(port)) as conn:
                g = conn.call(req(89, 0, group_ids=(app,), include_authorized_operations=False)).groups[0]
            holders = {m.process_id for m in g.members if m.assignment.active_tasks}
            if len(holders) == 2 or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert len(holders) == 2 and len(g.members) == 4, g
        assert all(proc.poll() is None for proc in procs), log.read_text()[-3000:]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except Exception:
                proc.kill()
        totals.c.close()
    by_key: dict[str, list[int]] = defaultdict(list)
    for _p, _o, key, value in sorted(totals.records):
        by_key[key].append(value)
    check_exactly_once(by_key, t0)
