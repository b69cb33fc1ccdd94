"""``--brokers 3``: three virtual brokers in one process, driven over the control plane — topics
with replication factor 3, a coordinator that moves in the middle of a commit, a partition
leader that fails over while an idempotent producer has batches in flight (librdkafka)."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer

from .clients import create_topic
from .test_txn_support import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TXN_BROKER_ARGS,
    consumer,
    open_transaction,
    produce_sync,
    txn_id,
)

ARGS = [*TXN_BROKER_ARGS, "--brokers", "3"]


def _boot(b) -> str:
    """Every virtual broker's address: the first one may be the broker a test stops."""
    return ",".join(b.addresses)


def _metadata(bootstrap: str, topic: str):
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return md, {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in md.topics[topic].partitions.values()}


def read_all(b, topic: str, partitions, isolation: str, timeout: float = 30.0):
    """Every record up to the end, each partition read from its leader (the test helper of the
    single-broker tests asks the bootstrap broker, which is not every partition's leader here)."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition
    c = consumer(_boot(b), isolation)
    out = {p: [] for p in partitions}
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        deadline = time.monotonic() + timeout
        done = {p for p in partitions if ends[p] == 0}
        while len(done) < len(partitions) and time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.2):
                if m.error() is not None:
                    if m.offset() is not None and m.offset() >= ends[m.partition()]:
                        done.add(m.partition())
                    continue
                out[m.partition()].append((m.offset(), m.key(), m.value()))
                if m.offset() + 1 >= ends[m.partition()]:
                    done.add(m.partition())
    finally:
        c.close()
    assert len(done) == len(partitions), (ends, {p: len(v) for p, v in out.items()})
    return out


def _wait(predicate, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} not reached within {timeout} s")


def test_three_brokers_replication_factor_3(broker_factory, topic):
    b = broker_factory(ARGS, control=True)
    assert len(b.addresses) == 3
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": _boot(b)})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])[topic].result(15)
    too_many = admin.create_topics([NewTopic(topic + "-4", 1, 4)])[topic + "-4"]
    try:
        too_many.result(15)
        raise AssertionError("replication factor 4 on 3 brokers was accepted")
    except Exception as e:  # noqa: BLE001 - the client's KafkaException
        assert "only 3 broker(s) are registered" in str(e), e
    md, parts = _metadata(_boot(b), topic)
    assert sorted(md.brokers) == [1, 2, 3]
    assert {leader for leader, _r, _i in parts.values()} == {1, 2, 3}, parts  # spread
    assert all(sorted(r) == [1, 2, 3] and sorted(i) == [1, 2, 3] for _l, r, i in parts.values())
    acked = produce_sync(Producer({"bootstrap.servers": _boot(b), "acks": "all"}), topic,
                         [(p, b"rf3|%d|%d" % (p, i)) for p in range(3) for i in range(5)])
    assert len(acked) == 15
    got = read_all(b, topic, range(3), READ_UNCOMMITTED)
    assert all(len(got[p]) == 5 for p in range(3))
    # Each partition's records were served by its own leader's listener.
    brokers = {r["broker"] for r in b.control.requests(api="Produce", topic=topic)}
    assert brokers == {1, 2, 3}, brokers


def test_coordinator_moves_mid_commit(broker_factory, topic):
    """EndTxn is applied by the coordinator and its answer lost; meanwhile the coordinator moves
    to another broker. The client times out, asks FindCoordinator again, sends EndTxn to the new
    coordinator, which answers the retry of the completed commit with success."""
    b = broker_factory(ARGS, control=True)
    tid = txn_id("moving")
    p = open_transaction(_boot(b), tid, topic, [(0, b"mv|1"), (0, b"mv|2")], **{"socket.timeout.ms": 1500})
    first = b.control.requests(api="InitProducerId", transactional_id=tid)[-1]["broker"]
    b.control.add_fault(api="EndTxn", action="drop-response", transactional_id=tid)
    done = threading.Event()
    errors: list[str] = []

    def commit():
        try:
            p.commit_transaction(30)
        except Exception as e:  # noqa: BLE001 - recorded for the assertion below
            errors.append(repr(e))
        done.set()

    threading.Thread(target=commit, daemon=True).start()
    _wait(lambda: b.control.requests(api="EndTxn", transactional_id=tid), what="EndTxn sent")
    other = next(n for n in (1, 2, 3) if n != first)
    moved = b.control.move_coordinator(other, transactional_id=tid)
    assert moved["coordinator"] == other
    assert done.wait(40) and not errors, errors
    end_txns = b.control.requests(api="EndTxn", transactional_id=tid)
    assert end_txns[0]["broker"] == first and end_txns[0]["outcome"] == "no_answer", end_txns
    assert end_txns[-1]["broker"] == other and end_txns[-1]["error_code"] == 0, end_txns
    finds = [r for r in b.control.requests(api="FindCoordinator", transactional_id=tid)]
    assert len(finds) >= 2, finds  # found again after the move
    got = read_all(b, topic, [0], READ_COMMITTED)
    assert [v for _o, _k, v in got[0]] == [b"mv|1", b"mv|2"]


def test_coordinator_moved_before_commit_answers_not_coordinator(broker_factory, topic):
    b = broker_factory(ARGS, control=True)
    tid = txn_id("moved")
    p = open_transaction(_boot(b), tid, topic, [(0, b"nc|1")])
    first = b.control.requests(api="InitProducerId", transactional_id=tid)[-1]["broker"]
    other = next(n for n in (1, 2, 3) if n != first)
    b.control.move_coordinator(other, transactional_id=tid)
    p.commit_transaction(30)
    end_txns = b.control.requests(api="EndTxn", transactional_id=tid)
    assert end_txns[0]["broker"] == first and end_txns[0]["error_code"] == 16, end_txns  # NOT_COORDINATOR
    assert end_txns[-1]["broker"] == other and end_txns[-1]["error_code"] == 0, end_txns


def _idempotent_stream(b, topic: str, n: int, fail_over) -> list[bytes]:
    p = Producer({"bootstrap.servers": _boot(b), "enable.idempotence": True, "linger.ms": 2,
                  "batch.num.messages": 20, "max.in.flight.requests.per.connection": 5,
                  "socket.timeout.ms": 3000, "message.timeout.ms": 60000, "retry.backoff.ms": 20,
                  "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200,
                  "topic.metadata.refresh.interval.ms": 1000})
    acked: list[bytes] = []
    errors: list[str] = []

    def on_delivery(err, msg):
        (errors.append(err.str()) if err else acked.append(msg.value()))

    for i in range(n):
        p.produce(topic, value=b"seq|%05d" % i, partition=0, on_delivery=on_delivery)
        if i == n // 3:
            p.flush(30)  # the first third acknowledged by the first leader
        if i == n // 2:
            p.poll(0.01)  # batches on the wire, some acknowledged, some not: then the failover
            fail_over()
        if i % 50 == 0:
            p.poll(0)
    assert p.flush(60) == 0 and not errors, errors[:5]
    return acked


def test_leader_fails_over_during_idempotent_producing(broker_factory, topic):
    b = broker_factory(ARGS, control=True)
    create_topic(_boot(b), topic, 1)
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": _boot(b)})
    rf3 = topic + "-rf3"
    admin.create_topics([NewTopic(rf3, num_partitions=1, replication_factor=3)])[rf3].result(15)
    leader = _metadata(_boot(b), rf3)[1][0][0]
    n = 3000
    acked = _idempotent_stream(b, rf3, n, lambda: b.control.stop_broker(leader))
    assert len(acked) == n
    new_leader = _metadata(_boot(b), rf3)[1][0][0]
    assert new_leader != leader
    values = [v for _o, _k, v in read_all(b, rf3, [0], READ_UNCOMMITTED)[0]]
    assert values == [b"seq|%05d" % i for i in range(n)]  # no duplicate, no gap, in order
    brokers = {r["broker"] for r in b.control.requests(api="Produce", topic=rf3)}
    assert {leader, new_leader} <= brokers, brokers
    b.control.start_broker(leader)
    assert _metadata(_boot(b), rf3)[1][0][0] == new_leader  # no move back by itself


def test_leader_moved_during_idempotent_producing(broker_factory, topic):
    """A moved leader (a preferred-leader election): the old one answers NOT_LEADER_OR_FOLLOWER,
    the client refreshes its metadata and goes on with the new one, same sequence numbers."""
    b = broker_factory(ARGS, control=True)
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": _boot(b)})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])[topic].result(15)
    leader = _metadata(_boot(b), topic)[1][0][0]
    target = next(x for x in (1, 2, 3) if x != leader)
    n = 2000
    acked = _idempotent_stream(b, topic, n, lambda: b.control.move_leader(topic, 0, target))
    assert len(acked) == n
    values = [v for _o, _k, v in read_all(b, topic, [0], READ_UNCOMMITTED)[0]]
    assert values == [b"seq|%05d" % i for i in range(n)]
    produces = b.control.requests(api="Produce", topic=topic)
    assert any(r["error_code"] == 6 and r["broker"] == leader for r in produces) or \
        {r["broker"] for r in produces} == {leader, target}, produces


def test_java_client_follows_a_coordinator_moved_mid_commit(broker_factory, topic):
    """The Java client 4.4 (transactions v2): the first commit's answer is lost and the
    coordinator moves meanwhile; after request.timeout.ms it finds the new coordinator and the
    three transactions (commit, abort, commit) end as planned."""
    from .test_txn_support import finish_java_txn, start_java_txn

    b = broker_factory(ARGS, control=True)
    create_topic(_boot(b), topic, 2)
    tid = txn_id("java-moving")
    b.control.add_fault(api="EndTxn", action="drop-response", transactional_id=tid)
    proc = start_java_txn("commit-abort", _boot(b), topic, 2, 4, tid)
    try:
        _wait(lambda: b.control.requests(api="EndTxn", transactional_id=tid), timeout=60, what="EndTxn")
        first = b.control.requests(api="EndTxn", transactional_id=tid)[0]["broker"]
        other = next(n for n in (1, 2, 3) if n != first)
        b.control.move_coordinator(other, transactional_id=tid)
    finally:
        res = finish_java_txn(proc, timeout=120)
    assert not res["errors"], res["errors"]
    end_txns = b.control.requests(api="EndTxn", transactional_id=tid)
    assert end_txns[0]["outcome"] == "no_answer" and {r["broker"] for r in end_txns[1:]} == {other}, end_txns
    got = read_all(b, topic, [0, 1], READ_COMMITTED)
    assert [len(got[p]) for p in (0, 1)] == [8, 8]  # transactions 0 and 2, four records each


def test_new_coordinator_loading_after_a_move(broker_factory, topic):
    """Moved with load_in_progress=2: the old coordinator answers NOT_COORDINATOR, the new one
    COORDINATOR_LOAD_IN_PROGRESS twice (as while Kafka loads the partition), then the commit."""
    b = broker_factory(ARGS, control=True)
    tid = txn_id("loading")
    p = open_transaction(_boot(b), tid, topic, [(0, b"ld|1")])
    first = b.control.requests(api="InitProducerId", transactional_id=tid)[-1]["broker"]
    other = next(n for n in (1, 2, 3) if n != first)
    out = b.control.move_coordinator(other, transactional_id=tid, load_in_progress=2)
    assert len(out["fault_rules"]) == 4
    p.commit_transaction(30)
    codes = [(r["broker"], r["error_code"]) for r in b.control.requests(api="EndTxn", transactional_id=tid)]
    assert codes == [(first, 16), (other, 14), (other, 14), (other, 0)], codes


def test_java_leader_fails_over_during_idempotent_producing(broker_factory, topic):
    """The Java client 4.4 (java/IdempotentProduce.java, five requests in flight): every Produce
    is held back 100 ms so batches are on the wire when the leader's broker stops; the client
    refreshes its metadata, sends the unacknowledged batches again to the new leader with their
    sequence numbers, and every record lands once, in order, at the offset it was acknowledged at."""
    import json

    from . import java_client

    tc = java_client.java_toolchain()
    classes = java_client.compile_drivers(tc)
    b = broker_factory(ARGS, control=True)
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": _boot(b)})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])[topic].result(15)
    leader = _metadata(_boot(b), topic)[1][0][0]
    b.control.add_fault(api="Produce", action="delay", delay_ms=100, count=-1, topic=topic)
    n = 6000  # 200-byte values, 16 KiB batches: about 75 Produce requests
    proc = java_client.start_driver(tc, classes, "IdempotentProduce", [_boot(b), topic, 1, n, 200, "none", 5000])
    try:
        _wait(lambda: len(b.control.requests(api="Produce", topic=topic)) >= 10, timeout=60,
              what="ten Produce requests")
        b.control.stop_broker(leader)
    finally:
        r = java_client.finish_driver(proc, timeout=170)
    lines = r.stdout.strip().splitlines()
    assert r.returncode == 0 and lines and lines[-1].startswith("{"), r.stdout[-3000:] + r.stderr[-3000:]
    summary = json.loads(lines[-1])
    assert summary["acked"] == n and summary["failed"] == 0 and summary["offset_mismatches"] == 0, summary
    new_leader = _metadata(_boot(b), topic)[1][0][0]
    assert new_leader != leader
    keys = [k for _o, k, _v in read_all(b, topic, [0], READ_UNCOMMITTED)[0]]
    assert keys == [b"p0-%d" % s for s in range(n)]  # no duplicate, no gap, in order
    produces = b.control.requests(api="Produce", topic=topic)
    brokers = [r["broker"] for r in produces]
    cut = [r for r in produces if r["broker"] == leader and r["outcome"] != "answered"]
    print(f"java failover: {summary}; Produce requests: {len(produces)}, "
          f"{sum(r['broker'] == leader for r in produces)} to the old leader of which {len(cut)} "
          f"cut off in flight ({sorted({r['outcome'] for r in cut})}), the rest to broker {new_leader}")
    assert brokers[0] == leader and brokers[-1] == new_leader, brokers
    assert cut, produces  # batches were in flight at the stop: cut off, then sent again


def test_auto_created_topic_fails_over_with_default_replication_factor(broker_factory, topic):
    """--default-replication-factor 3: a topic auto-created by a plain produce has three replicas,
    so stopping its leader's broker over the control plane moves the leader and librdkafka goes on
    producing and consuming without an error (issue 30: with the factor 1 its leader was None)."""
    b = broker_factory([*ARGS, "--default-replication-factor", "3"], control=True)
    producer = Producer({"bootstrap.servers": _boot(b), "acks": "all", "enable.idempotence": True})
    first = produce_sync(producer, topic, [(0, b"drf|%d" % i) for i in range(5)])
    assert len(first) == 5
    _md, parts = _metadata(_boot(b), topic)
    leader, replicas, isr = parts[0]
    assert sorted(replicas) == [1, 2, 3] and sorted(isr) == [1, 2, 3], parts
    moved = b.control.stop_broker(leader)
    assert moved, moved
    second = produce_sync(producer, topic, [(0, b"drf|%d" % i) for i in range(5, 10)])
    assert len(second) == 5
    producer.flush(10)
    _md, parts = _metadata(_boot(b), topic)
    assert parts[0][0] not in (leader, -1) and leader not in parts[0][2], parts
    got = read_all(b, topic, [0], READ_UNCOMMITTED)
    assert [v for _o, _k, v in got[0]] == [b"drf|%d" % i for i in range(10)]
    # Produced to the stopped broker's listener before the stop, to the new leader's after it.
    brokers = [r["broker"] for r in b.control.requests(api="Produce", topic=topic) if r["error_code"] == 0]
    assert brokers[0] == leader and brokers[-1] == parts[0][0], brokers
