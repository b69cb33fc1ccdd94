"""Share groups on bad days, with a real client (confluent-kafka 2.16's ShareConsumer).

``--brokers 3`` with the control plane: a share partition's leader moves while records are
acquired and not yet acknowledged, the group's coordinator moves or its broker stops, and fault
rules answer ShareFetch / ShareAcknowledge / ShareGroupHeartbeat with errors, delays and dropped
connections. In every case the end state is checked against the log: each record acknowledged
exactly once, none delivered past the delivery limit. The request log proves each fault fired.
Every loop is bounded in passes and time.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import AcknowledgeType, KafkaError, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

pytestmark = pytest.mark.integration

GROUP_LOCK_MS = "15000"  # the shortest lock the group bounds allow


def _group_configs(bs: str, group: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    res = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    admin.incremental_alter_configs([res])[res].result(timeout=15)


def _topic(bs: str, partitions: int, replication: int = 3) -> str:
    name = "sharef-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(name, partitions, replication)])[name].result(timeout=15)
    return name


def _produce(bs: str, topic: str, n: int, partitions: int, start: int = 0) -> None:
    p = Producer({"bootstrap.servers": bs})
    for i in range(start, start + n):
        p.produce(topic, value=b"v%d" % i, partition=i % partitions)
    assert p.flush(15) == 0


def _consumer(bs: str, group: str, topic: str, **extra: str) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bs, "group.id": group,
                       "share.acknowledgement.mode": "explicit", **extra})
    c.subscribe([topic])
    return c


class Ledger:
    """What one group's consumers received, and how each delivery was acknowledged."""

    def __init__(self) -> None:
        self.deliveries: dict[tuple[int, int], list[int]] = {}
        self.accepted: list[tuple[int, int]] = []
        self.held: list = []

    def accept(self, c: ShareConsumer, m) -> None:
        key = (m.partition(), m.offset())
        self.deliveries.setdefault(key, []).append(m.delivery_count())
        c.acknowledge(m, AcknowledgeType.ACCEPT)
        self.accepted.append(key)

    def hold(self, c: ShareConsumer, m) -> None:
        """Received, not acknowledged yet: the record stays acquired by this member."""
        self.deliveries.setdefault((m.partition(), m.offset()), []).append(m.delivery_count())
        self.held.append(m)


def _poll(consumers, until, timeout: float, on_message) -> None:
    deadline = time.monotonic() + timeout
    for _ in range(10_000):
        if until() or time.monotonic() > deadline:
            return
        for c in consumers:
            for m in c.poll(0.5):
                if m.error() is None:
                    on_message(c, m)


def _all_keys(n: int, partitions: int) -> set[tuple[int, int]]:
    return {(i % partitions, i // partitions) for i in range(n)}


def _leader(bs: str, topic: str, partition: int) -> int:
    md = AdminClient({"bootstrap.servers": bs}).list_topics(topic, timeout=15)
    return md.topics[topic].partitions[partition].leader


@pytest.fixture
def cluster(broker_factory):
    return broker_factory(["--brokers", "3"], control=True)


def _share_state(b, group: str, topic: str, partition: int) -> dict:
    return b.control._call("GET", f"/v1/share/{group}/{topic}/{partition}")


def _seq_of(b, topic: str, broker: int, error: str) -> int:
    return next(r["seq"] for r in b.control.requests(api="ShareFetch", topic=topic)
                if r["broker"] == broker and r["error"] == error)


def _assert_done(b, group: str, topic: str, partition: int, end: int) -> None:
    """The share partition as the broker holds it: everything below ``end`` done with, nothing
    in flight, nothing archived (no record reached the delivery limit)."""
    state = _share_state(b, group, topic, partition)["state"]
    assert state["start_offset"] == end, state
    assert state["archived"] == 0, state
    assert not any(state["in_flight"].values()), state


def test_leader_moves_mid_delivery(cluster):
    """Records acquired on the old leader and not acknowledged when it moves come back from
    the new leader; the consumer follows it (NOT_LEADER_OR_FOLLOWER, then Metadata) and in the
    end every record, old and new, is acknowledged exactly once."""
    b = cluster
    bs = ",".join(b.addresses)
    topic = _topic(bs, partitions=1)
    group = "g-leader-move"
    _group_configs(bs, group, share_auto_offset_reset="earliest",
                   share_record_lock_duration_ms=GROUP_LOCK_MS)
    _produce(bs, topic, 20, partitions=1)
    old = _leader(bs, topic, 0)
    c = _consumer(bs, group, topic)
    ledger = Ledger()
    try:
        _poll([c], lambda: bool(ledger.deliveries), 30, ledger.hold)
        held = set(ledger.deliveries)
        assert held, "nothing was delivered before the move"
        new = next(n for n in (1, 2, 3) if n != old)
        b.control.move_leader(topic, 0, new)
        _produce(bs, topic, 10, partitions=1, start=20)
        # acknowledged after the move: the new leader loaded the persisted state, where these
        # records were never acquired, and refuses the acknowledgement
        for m in ledger.held:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        want = _all_keys(30, 1)
        _poll([c], lambda: set(ledger.accepted) >= want, 60, ledger.accept)
        c.commit_sync(15)
    finally:
        c.close()
    _assert_done(b, group, topic, 0, 30)
    assert sorted(ledger.accepted) == sorted(want), "each record acknowledged exactly once"
    # share explain tells why the held records came twice
    story = _share_state(b, group, topic, 0)
    moved = [r for r in story["records"] if r["first_offset"] <= min(held)[1] <= r["last_offset"]]
    assert moved and moved[0]["redeliveries"] == {"leader_moved": 1}, story["text"]
    assert "leader moved" in moved[0]["diagnosis"], moved[0]["diagnosis"]
    # Kafka's new leader loads the persisted state, and acquisitions are not persisted: what
    # was held comes back as never delivered (delivery count 1 again; nothing was ever written)
    for key in held:
        assert ledger.deliveries[key] == [1, 1], (key, ledger.deliveries[key])
    for key in want - held:
        assert ledger.deliveries[key] == [1], (key, ledger.deliveries[key])
    fetches = [(r["broker"], r["error"]) for r in b.control.requests(api="ShareFetch", topic=topic)]
    assert (old, "NOT_LEADER_OR_FOLLOWER") in fetches, fetches
    assert fetches.index((old, "NOT_LEADER_OR_FOLLOWER")) < fetches.index((new, "NONE")), fetches
    assert any(r["api"] == "Metadata" for r in b.control.requests(topic=topic)
               if r["seq"] > _seq_of(b, topic, old, "NOT_LEADER_OR_FOLLOWER"))


def _coordinator(b, group: str) -> int:
    beats = [r for r in b.control.requests(api="ShareGroupHeartbeat", group=group) if r["error"] == "NONE"]
    assert beats, "no heartbeat answered yet"
    return int(beats[-1]["broker"])


def _run_through_coordinator_change(b, group: str, change, leaders_move: bool = False) -> tuple[Ledger, int]:
    """Two consumers of a 2-partition topic; ``change(old_coordinator)`` happens after some
    records were acknowledged, with more records still to come. Returns the ledger and the old
    coordinator's node id."""
    bs = ",".join(b.addresses)
    topic = _topic(bs, partitions=2)
    _group_configs(bs, group, share_auto_offset_reset="earliest",
                   share_heartbeat_interval_ms="5000")
    _produce(bs, topic, 40, partitions=2)
    consumers = [_consumer(bs, group, topic) for _ in range(2)]
    ledger = Ledger()
    want = _all_keys(80, 2)
    try:
        _poll(consumers, lambda: len(ledger.accepted) >= 10, 40, ledger.accept)
        assert len(ledger.accepted) >= 10, ledger.deliveries
        old = _coordinator(b, group)
        leaders_before = {p: _leader(bs, topic, p) for p in (0, 1)}
        change(old)
        _produce(bs, topic, 40, partitions=2, start=40)
        _poll(consumers, lambda: set(ledger.accepted) >= want, 60, ledger.accept)
        # heartbeats after the change reach the new coordinator
        deadline = time.monotonic() + 30
        for _ in range(100):
            if _coordinator(b, group) != old or time.monotonic() > deadline:
                break
            for c in consumers:
                c.poll(0.2)
        for c in consumers:
            c.commit_sync(15)
    finally:
        for c in consumers:
            c.close()
    for p in (0, 1):
        _assert_done(b, group, topic, p, 40)
    if not leaders_move:
        assert sorted(ledger.accepted) == sorted(want), "each record acknowledged exactly once"
        assert all(counts == [1] for counts in ledger.deliveries.values()), ledger.deliveries
    else:
        # records in flight on a partition whose leader went come back from the new leader
        # (reloaded state: acquisitions are not persisted); nothing else is delivered twice
        assert set(ledger.accepted) == want
        moved = {p for p in (0, 1) if leaders_before[p] == old}
        twice = {k for k, counts in ledger.deliveries.items() if len(counts) > 1}
        assert {p for p, _ in twice} <= moved, (moved, ledger.deliveries)
        assert all(len(c) <= 2 and max(c) <= 2 for c in ledger.deliveries.values()), ledger.deliveries
    return ledger, old


def test_coordinator_moves_mid_delivery(cluster):
    """The share group's coordinator moves (and loads for a while): the heartbeats to the old
    one get NOT_COORDINATOR, the consumers find the new one and carry on."""
    b = cluster
    group = "g-coord-move"
    moved_to: list[int] = []

    def move(old: int) -> None:
        moved_to.append(next(n for n in (1, 2, 3) if n != old))
        b.control.move_coordinator(moved_to[0], group=group, load_in_progress=2)

    _, old = _run_through_coordinator_change(b, group, move)
    beats = [(r["broker"], r["error"]) for r in b.control.requests(api="ShareGroupHeartbeat", group=group)]
    assert (old, "NOT_COORDINATOR") in beats, beats
    assert (moved_to[0], "COORDINATOR_LOAD_IN_PROGRESS") in beats, beats
    assert beats[-1] == (moved_to[0], "NONE"), beats
    after = _seq_after(b, "ShareGroupHeartbeat", group, old, "NOT_COORDINATOR")
    assert any(r["seq"] > after for r in b.control.requests(api="FindCoordinator")), "no FindCoordinator"


def _seq_after(b, api: str, group: str, broker: int, error: str) -> int:
    return next(r["seq"] for r in b.control.requests(api=api, group=group)
                if r["broker"] == broker and r["error"] == error)


def test_coordinator_broker_stops_mid_delivery(cluster):
    """The broker holding the group's coordinator stops (its partition leaders move too):
    the consumers find the new coordinator and the new leaders; nothing is lost or doubled."""
    b = cluster
    group = "g-coord-stop"
    _, old = _run_through_coordinator_change(b, group, lambda old: b.control.stop_broker(old),
                                             leaders_move=True)
    beats = [(r["broker"], r["error"]) for r in b.control.requests(api="ShareGroupHeartbeat", group=group)]
    assert beats[-1][0] != old and beats[-1][1] == "NONE", beats


@pytest.fixture
def single(broker_factory):
    return broker_factory(control=True)


def _fired(b, rule_id: int) -> int:
    return int(b.control.fault(rule_id)["fired"])


def test_share_fetch_delayed_and_heartbeat_errors(single):
    """Delayed ShareFetch answers and ShareGroupHeartbeat errors: the consumer waits, finds the
    coordinator again, and every record is delivered and acknowledged once."""
    b = single
    bs = b.bootstrap_servers
    topic = _topic(bs, partitions=2, replication=1)
    group = "g-fetch-hb-faults"
    _group_configs(bs, group, share_auto_offset_reset="earliest")
    _produce(bs, topic, 40, partitions=2)
    delay = b.control.add_fault(api="ShareFetch", action="delay", delay_ms=1500, group=group, count=3)
    beat = b.control.add_fault(api="ShareGroupHeartbeat", action="error", error="COORDINATOR_NOT_AVAILABLE",
                               group=group, nth=2)
    c = _consumer(bs, group, topic)
    ledger = Ledger()
    want = _all_keys(80, 2)
    try:
        # produced in three rounds, so that several ShareFetch answers carry records
        _poll([c], lambda: len(ledger.accepted) >= 10, 30, ledger.accept)
        _produce(bs, topic, 20, partitions=2, start=40)
        _poll([c], lambda: len(ledger.accepted) >= 50, 30, ledger.accept)
        _produce(bs, topic, 20, partitions=2, start=60)
        _poll([c], lambda: (set(ledger.accepted) >= want and _fired(b, beat["id"]) >= 1
                            and _fired(b, delay["id"]) >= 3), 60, ledger.accept)
        c.commit_sync(15)
    finally:
        c.close()
    assert sorted(ledger.accepted) == sorted(want)
    assert all(counts == [1] for counts in ledger.deliveries.values()), ledger.deliveries
    assert _fired(b, delay["id"]) == 3 and _fired(b, beat["id"]) == 1
    delayed = [r for r in b.control.requests(api="ShareFetch", group=group) if r["fault"]]
    assert len(delayed) == 3 and all(r["latency_ms"] >= 1400 for r in delayed), delayed
    beats = b.control.requests(api="ShareGroupHeartbeat", group=group)
    failed = next(r for r in beats if r["error"] == "COORDINATOR_NOT_AVAILABLE")
    assert any(r["seq"] > failed["seq"] for r in b.control.requests(api="FindCoordinator")), \
        "the client did not look the coordinator up again"
    assert beats[-1]["error"] == "NONE"
    for p in (0, 1):
        _assert_done(b, group, topic, p, 40)


@pytest.mark.parametrize("rule, again, client_error", [
    # refused, nothing applied: the records stay acquired until their lock expires
    ({"action": "error", "error": "UNKNOWN_SERVER_ERROR"}, True, KafkaError.UNKNOWN),
    # the connection closed before the broker read it: the share session goes with the
    # connection and releases the member's records at once (KIP-932's disconnect listener)
    ({"action": "disconnect", "when": "before"}, True, KafkaError._TRANSPORT),
    # applied, then answered with an error: the records are acknowledged, never seen again
    ({"action": "error-after-apply", "error": "UNKNOWN_SERVER_ERROR"}, False, KafkaError.UNKNOWN),
], ids=["error", "disconnect", "error-after-apply"])
def test_share_acknowledge_fault(single, rule, again, client_error):
    """One ShareAcknowledge (the explicit acknowledgements of a commit_sync) faulted: the client
    reports the partition's error, and the broker's state decides what comes again."""
    b = single
    bs = b.bootstrap_servers
    topic = _topic(bs, partitions=1, replication=1)
    group = "g-ack-" + rule["action"]
    _group_configs(bs, group, share_auto_offset_reset="earliest",
                   share_record_lock_duration_ms=GROUP_LOCK_MS)
    _produce(bs, topic, 10, partitions=1)
    fault = b.control.add_fault(api="ShareAcknowledge", group=group, count=1, **rule)
    c = _consumer(bs, group, topic)
    ledger = Ledger()
    want = _all_keys(10, 1)
    outcome = None
    try:
        _poll([c], lambda: set(ledger.accepted) >= want, 30, ledger.accept)
        try:
            outcome = c.commit_sync(15)  # explicit acknowledgements go in a ShareAcknowledge
        except Exception as e:  # what librdkafka reports is printed; the broker's state decides
            outcome = e
        assert _fired(b, fault["id"]) == 1, b.control.faults()
        _poll([c], lambda: all(len(v) >= 2 for v in ledger.deliveries.values()),
              45 if again else 8, ledger.accept)
        c.commit_sync(15)
    finally:
        c.close()
    # librdkafka reports the failed acknowledgement per partition
    assert isinstance(outcome, dict), outcome
    [(tp, err)] = outcome.items()
    assert (tp.topic, tp.partition) == (topic, 0) and err.args[0].code() == client_error, outcome
    expected = [1, 2] if again else [1]
    assert {k: v for k, v in ledger.deliveries.items()} == {k: expected for k in want}
    _assert_done(b, group, topic, 0, 10)
    [faulted] = [r for r in b.control.requests(api="ShareAcknowledge", group=group) if r["fault"]]
    assert faulted["fault"] == fault["id"], faulted


def test_one_share_session_per_leader(cluster):
    """A consumer fetching from three leaders holds a share session on each broker, as against
    a Kafka cluster: no ShareFetch or ShareAcknowledge is refused for its session, the final
    acknowledgements on close included."""
    b = cluster
    bs = ",".join(b.addresses)
    topic = _topic(bs, partitions=3)
    group = "g-sessions"
    _group_configs(bs, group, share_auto_offset_reset="earliest")
    _produce(bs, topic, 60, partitions=3)
    c = _consumer(bs, group, topic)
    ledger = Ledger()
    want = _all_keys(60, 3)
    try:
        _poll([c], lambda: set(ledger.accepted) >= want, 40, ledger.accept)
        _produce(bs, topic, 30, partitions=3, start=60)
        want = _all_keys(90, 3)
        _poll([c], lambda: set(ledger.accepted) >= want, 40, ledger.accept)
        c.commit_sync(15)
    finally:
        c.close()
    assert sorted(ledger.accepted) == sorted(want)
    seen = [(r["api"], r["broker"], r["error"]) for r in b.control.requests(group=group)
            if r["api"] in ("ShareFetch", "ShareAcknowledge")]
    assert len({broker for _, broker, _ in seen}) == 3, seen
    assert all(error == "NONE" for _, _, error in seen), seen
    for p in (0, 1, 2):
        _assert_done(b, group, topic, p, 30)


def test_closing_the_old_leaders_session_releases_nothing_on_the_new_one(cluster):
    """Raw requests: a member acquires on the old leader, the leader moves, the member acquires
    the same records again from the new leader (its state was reloaded), then its connection
    to the old leader closes. That session's end releases nothing: the old leader no longer
    holds the share partition (Kafka drops it on losing the lead)."""
    import datetime

    from tests.reference.client import Connection, part, req

    b = cluster
    bs = ",".join(b.addresses)
    topic = _topic(bs, partitions=1)
    group = "g-raw-move"
    _group_configs(bs, group, share_auto_offset_reset="earliest")
    _produce(bs, topic, 5, partitions=1)
    node_of = {}
    for n in (1, 2, 3):
        node_of[n] = b.addresses[n - 1].rsplit(":", 1)
    old = _leader(bs, topic, 0)
    new = next(n for n in (1, 2, 3) if n != old)

    def conn(n):
        host, port = node_of[n]
        return Connection(host, int(port))

    def fetch(c, topic_id):
        base = (78, 1)
        return c.call(req(78, 1, group_id=group, member_id="raw-m", share_session_epoch=0,
                          max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                          max_records=10, batch_size=10,
                          topics=(part(base, "FetchTopic", topic_id=topic_id, partitions=(
                              part(base, "FetchPartition", partition_index=0,
                                   acknowledgement_batches=()),)),),
                          forgotten_topics_data=()))

    def acquired(r) -> int:
        return sum(a.last_offset - a.first_offset + 1 for t in r.responses for p in t.partitions
                   for a in p.acquired_records)

    coordinator = None
    for n in (1, 2, 3):  # the coordinator answers the join, the others NOT_COORDINATOR
        with conn(n) as c:
            r = c.call(req(76, 1, group_id=group, member_id="raw-m", member_epoch=0, rack_id=None,
                           subscribed_topic_names=(topic,)))
        if r.error_code == 0:
            coordinator, epoch = n, r.member_epoch
            break
    assert coordinator is not None
    with conn(coordinator) as c:
        deadline = time.monotonic() + 20
        for _ in range(100):  # the assignment comes with a later heartbeat
            r = c.call(req(76, 1, group_id=group, member_id="raw-m", member_epoch=epoch, rack_id=None,
                           subscribed_topic_names=None))
            assert r.error_code == 0, r
            epoch = r.member_epoch
            if r.assignment is not None and r.assignment.topic_partitions:
                break
            assert time.monotonic() < deadline, r
            time.sleep(0.2)
        topic_id = r.assignment.topic_partitions[0].topic_id
    on_old = conn(old).__enter__()
    try:
        assert acquired(fetch(on_old, topic_id)) == 5
        b.control.move_leader(topic, 0, new)
        with conn(new) as on_new:
            assert acquired(fetch(on_new, topic_id)) == 5, "the new leader reloaded the state"
            on_old.__exit__(None, None, None)
            on_old = None
            deadline = time.monotonic() + 10
            for _ in range(100):  # the broker's loop handles the disconnect
                if "share.session_closed_by_disconnect" in b.log_text():
                    break
                assert time.monotonic() < deadline, "the old leader's session did not end"
                time.sleep(0.1)
            state = _share_state(b, group, topic, 0)["state"]["in_flight"]
            assert state["acquired"] == 5, state
    finally:
        if on_old is not None:
            on_old.__exit__(None, None, None)


# ---- the Java client 4.4's KafkaShareConsumer --------------------------------------------------

def test_java_share_consumer_through_leader_and_coordinator_moves(cluster):
    """The stock Java client (implicit acknowledgement) while both partitions' leaders and the
    group's coordinator move: it follows them and every record ends acknowledged."""
    import json

    from .java_client import compile_drivers, finish_driver, java_toolchain, start_driver

    tc = java_toolchain()
    classes = compile_drivers(tc)
    b = cluster
    bs = ",".join(b.addresses)
    topic = _topic(bs, partitions=2)
    group = "g-java-moves"
    _group_configs(bs, group, share_auto_offset_reset="earliest")
    _produce(bs, topic, 40, partitions=2)
    proc = start_driver(tc, classes, "ShareConsume",
                        [bs, "consume", group, topic, "implicit", 80, 50_000, "accept", "sync"])
    try:
        deadline = time.monotonic() + 40
        for _ in range(400):  # until the consumer is fetching
            if any(r["error"] == "NONE" for r in b.control.requests(api="ShareFetch", group=group)):
                break
            assert time.monotonic() < deadline and proc.poll() is None, "the Java consumer never fetched"
            time.sleep(0.1)
        old_coordinator = _coordinator(b, group)
        new_coordinator = next(n for n in (1, 2, 3) if n != old_coordinator)
        b.control.move_coordinator(new_coordinator, group=group)
        deadline = time.monotonic() + 30
        for _ in range(300):  # its next heartbeat (every 5 s) finds the new coordinator
            if _coordinator(b, group) == new_coordinator:
                break
            assert time.monotonic() < deadline and proc.poll() is None, "no heartbeat reached the new coordinator"
            time.sleep(0.1)
        leaders = {p: _leader(bs, topic, p) for p in (0, 1)}
        for p, old in leaders.items():
            b.control.move_leader(topic, p, next(n for n in (1, 2, 3) if n != old))
        _produce(bs, topic, 40, partitions=2, start=40)
    finally:
        r = finish_driver(proc, 90)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    got = [x for x in lines if "o" in x]
    assert {(x["p"], x["o"]) for x in got} == _all_keys(80, 2), r.stdout[-2000:]
    assert all(x["dc"] <= 2 for x in got), got
    for p in (0, 1):
        _assert_done(b, group, topic, p, 40)
    fetches = [(x["broker"], x["error"]) for x in b.control.requests(api="ShareFetch", group=group)]
    for p, old in leaders.items():
        assert (old, "NOT_LEADER_OR_FOLLOWER") in fetches, (p, old, fetches)
    assert fetches[-1][1] == "NONE", fetches
    beats = [(x["broker"], x["error"]) for x in b.control.requests(api="ShareGroupHeartbeat", group=group)]
    assert (old_coordinator, "NOT_COORDINATOR") in beats and (new_coordinator, "NONE") in beats, beats
