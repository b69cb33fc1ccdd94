"""Share groups (KIP-932) with a real client: confluent-kafka 2.16's ShareConsumer (librdkafka).

Each test runs a real broker process; every loop is bounded in passes and time. The group's
``share.auto.offset.reset`` is set to ``earliest`` through IncrementalAlterConfigs (GROUP
resource) before the consumers join, so records produced first are delivered.
"""

from __future__ import annotations

import datetime
import time
import uuid

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from minibroker.testing import MiniBroker

pytestmark = pytest.mark.integration


def _group_configs(bs: str, group: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    res = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    admin.incremental_alter_configs([res])[res].result(timeout=15)


def _topic(bs: str, partitions: int = 2) -> str:
    name = "share-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bs})  # kept alive until the answer
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=15)
    return name


def _produce(bs: str, topic: str, n: int, partitions: int = 2, start: int = 0) -> None:
    p = Producer({"bootstrap.servers": bs})
    for i in range(start, start + n):
        p.produce(topic, value=b"v%d" % i, partition=i % partitions)
    assert p.flush(15) == 0


def _consumer(bs: str, group: str, topic: str, explicit: bool = False) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bs, "group.id": group,
                       "share.acknowledgement.mode": "explicit" if explicit else "implicit"})
    c.subscribe([topic])
    return c


def _poll_until(consumers, want: int, timeout: float, on_message=None) -> list:
    """Poll the consumers in turn until ``want`` records came or ``timeout`` passed."""
    got: list = []
    deadline = time.monotonic() + timeout
    for _ in range(10_000):
        if len(got) >= want or time.monotonic() > deadline:
            break
        for c in consumers:
            for m in c.poll(0.5):
                if m.error() is not None:
                    continue
                got.append((c, m))
                if on_message is not None:
                    on_message(c, m)
    return got


def _key(m) -> tuple[int, int]:
    return (m.partition(), m.offset())


@pytest.fixture
def bs():
    with MiniBroker(name="share") as b:
        yield b.bootstrap_servers


def test_implicit_acknowledgement_delivers_each_record_once(bs):
    topic = _topic(bs)
    _group_configs(bs, "g-implicit", share_auto_offset_reset="earliest")
    _produce(bs, topic, 40)
    c = _consumer(bs, "g-implicit", topic)
    try:
        got = _poll_until([c], 40, 30)
        c.commit_sync(15)  # implicit: the last poll's records are ACCEPTed
    finally:
        c.close()
    keys = [_key(m) for _, m in got]
    assert len(keys) == 40 and len(set(keys)) == 40
    assert {m.value() for _, m in got} == {b"v%d" % i for i in range(40)}
    assert all(m.delivery_count() == 1 for _, m in got)
    # a new member of the same group finds nothing left: everything was acknowledged
    again = _consumer(bs, "g-implicit", topic)
    try:
        assert _poll_until([again], 1, 10) == []
    finally:
        again.close()


def test_release_redelivers_with_a_higher_count_and_reject_never_again(bs):
    topic = _topic(bs, partitions=1)
    _group_configs(bs, "g-explicit", share_auto_offset_reset="earliest")
    _produce(bs, topic, 10, partitions=1)
    c = _consumer(bs, "g-explicit", topic, explicit=True)
    seen: dict[int, list[int]] = {}

    def ack(consumer, m):
        seen.setdefault(m.offset(), []).append(m.delivery_count())
        if m.offset() % 3 == 0 and m.delivery_count() == 1:
            consumer.acknowledge(m, AcknowledgeType.RELEASE)
        elif m.offset() % 3 == 1:
            consumer.acknowledge(m, AcknowledgeType.REJECT)
        else:
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)

    try:
        # 10 first deliveries, then the 4 released ones (offsets 0, 3, 6, 9) once more
        _poll_until([c], 14, 40, on_message=ack)
        c.commit_sync(15)
        # nothing else comes: rejected and accepted records are done with
        assert _poll_until([c], 1, 4, on_message=ack) == []
    finally:
        c.close()
    assert sorted(seen) == list(range(10))
    for offset, counts in seen.items():
        assert counts == ([1, 2] if offset % 3 == 0 else [1]), (offset, counts)


def test_two_consumers_share_and_two_groups_each_get_everything(bs):
    topic = _topic(bs, partitions=2)
    for g in ("g-a", "g-b"):
        _group_configs(bs, g, share_auto_offset_reset="earliest")
    _produce(bs, topic, 60)
    a1, a2 = _consumer(bs, "g-a", topic), _consumer(bs, "g-a", topic)
    b1 = _consumer(bs, "g-b", topic)
    try:
        got_a = _poll_until([a1, a2], 60, 40)
        got_b = _poll_until([b1], 60, 40)
        for c in (a1, a2, b1):
            c.commit_sync(15)
    finally:
        for c in (a1, a2, b1):
            c.close()
    keys_a = [_key(m) for _, m in got_a]
    assert len(keys_a) == 60 and len(set(keys_a)) == 60, "each record once in group g-a"
    assert sorted(_key(m) for _, m in got_b) == sorted(keys_a), "group g-b gets everything too"


def test_commit_async_and_a_lock_expiry(bs):
    topic = _topic(bs, partitions=1)
    # the shortest lock the group bounds allow (group.share.min.record.lock.duration.ms, 15 s)
    _group_configs(bs, "g-lock", share_auto_offset_reset="earliest",
                   share_record_lock_duration_ms="15000")
    _produce(bs, topic, 5, partitions=1)
    holder = _consumer(bs, "g-lock", topic, explicit=True)
    other = _consumer(bs, "g-lock", topic)
    try:
        held = _poll_until([holder], 5, 30)
        assert sorted(_key(m) for _, m in held) == [(0, i) for i in range(5)]
        t0 = time.monotonic()
        # the holder neither acknowledges nor leaves: the other member gets them after the lock
        redelivered = _poll_until([other], 5, 40)
        waited = time.monotonic() - t0
        other.commit_async()
        other.commit_sync(15)
    finally:
        other.close()
        holder.close()
    assert sorted(_key(m) for _, m in redelivered) == [(0, i) for i in range(5)]
    assert all(m.delivery_count() == 2 for _, m in redelivered)
    assert waited > 5, waited


def test_read_committed_skips_aborted_transactions(bs):
    topic = _topic(bs, partitions=1)
    _group_configs(bs, "g-txn", share_auto_offset_reset="earliest",
                   share_isolation_level="read_committed")
    p = Producer({"bootstrap.servers": bs, "transactional.id": "tx-" + topic})
    p.init_transactions(15)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=b"aborted%d" % i, partition=0)
    p.abort_transaction(15)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=b"committed%d" % i, partition=0)
    p.commit_transaction(15)
    c = _consumer(bs, "g-txn", topic)
    try:
        got = _poll_until([c], 3, 30)
        c.commit_sync(15)
        assert _poll_until([c], 1, 3) == []
    finally:
        c.close()
    assert sorted(m.value() for _, m in got) == [b"committed0", b"committed1", b"committed2"]


def test_kill_9_keeps_acknowledged_records_acknowledged():
    with MiniBroker(name="share-kill") as b:
        bs = b.bootstrap_servers
        topic = _topic(bs, partitions=1)
        _group_configs(bs, "g-kill", share_auto_offset_reset="earliest")
        _produce(bs, topic, 20, partitions=1)
        c = _consumer(bs, "g-kill", topic, explicit=True)
        accepted: set[int] = set()

        def ack_first_half(consumer, m):
            if m.offset() < 10:
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                accepted.add(m.offset())
            else:
                consumer.acknowledge(m, AcknowledgeType.RELEASE)

        try:
            _poll_until([c], 20, 30, on_message=ack_first_half)
            c.commit_sync(15)
        finally:
            c.close()
        assert accepted == set(range(10))
        b.kill9()
        b.start()
        bs = b.bootstrap_servers
        again = _consumer(bs, "g-kill", topic)
        try:
            got = _poll_until([again], 10, 40)
            again.commit_sync(15)
            assert _poll_until([again], 1, 3) == []
        finally:
            again.close()
        offsets = sorted(m.offset() for _, m in got)
        assert offsets == list(range(10, 20)), offsets
        # released once before the crash: that count was persisted, the new delivery is the 2nd
        assert all(m.delivery_count() == 2 for _, m in got)


# ---- the Java client 4.4's KafkaShareConsumer and Admin ------------------------------------

@pytest.fixture(scope="module")
def java():
    from .java_client import compile_drivers, java_toolchain
    tc = java_toolchain()
    return tc, compile_drivers(tc)


def _java_consume(java, bs, group, topic, mode, want, timeout_s, policy="accept", commit="sync"):
    from .java_client import start_driver
    return start_driver(java[0], java[1], "ShareConsume",
                        [bs, "consume", group, topic, mode, want, int(timeout_s * 1000), policy, commit])


def _java_records(proc, timeout: float) -> list[dict]:
    import json

    from .java_client import finish_driver
    r = finish_driver(proc, timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert lines and "done" in lines[-1], r.stdout[-2000:]
    return [x for x in lines if "o" in x]


def _java_admin(java, bs, *args) -> dict:
    import json

    from .java_client import run_driver
    r = run_driver(java[0], java[1], "ShareConsume", [bs, "admin", *args], timeout=60)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_java_share_consumers_split_a_group_and_admin_sees_it(bs, java):
    topic = _topic(bs, partitions=2)
    _group_configs(bs, "gj", share_auto_offset_reset="earliest")
    _produce(bs, topic, 60)
    a = _java_consume(java, bs, "gj", topic, "implicit", 60, 25, commit="async")
    b = _java_consume(java, bs, "gj", topic, "implicit", 60, 25)
    got = _java_records(a, 90) + _java_records(b, 90)
    keys = sorted((x["p"], x["o"]) for x in got)
    assert keys == sorted({(i % 2, i // 2) for i in range(60)}), "each record once in the group"
    assert all(x["dc"] == 1 for x in got)
    listed = _java_admin(java, bs, "list")["groups"]
    assert listed.get("gj") == "Empty", listed
    offsets = _java_admin(java, bs, "offsets", "gj")["offsets"]
    # everything acknowledged: no lag; the start offset is the persisted one, which (as in
    # Kafka) trails the partition's by one write
    assert set(offsets) == {f"{topic}-0", f"{topic}-1"}, offsets
    assert all(lag == 0 and 0 <= start <= 30 for start, lag in offsets.values()), offsets
    assert _java_admin(java, bs, "describe", "gj")["state"] == "Empty"
    assert _java_admin(java, bs, "delete", "gj") == {"ok": True}
    assert "gj" not in _java_admin(java, bs, "list")["groups"]


def test_java_explicit_release_then_accept(bs, java):
    topic = _topic(bs, partitions=1)
    _group_configs(bs, "gjr", share_auto_offset_reset="earliest")
    _produce(bs, topic, 10, partitions=1)
    got = _java_records(_java_consume(java, bs, "gjr", topic, "explicit", 20, 40,
                                      policy="release-first"), 90)
    by_offset: dict[int, list[int]] = {}
    for x in got:
        by_offset.setdefault(x["o"], []).append(x["dc"])
    assert by_offset == {i: [1, 2] for i in range(10)}, by_offset
    # all accepted at the second delivery: nothing is left for the group
    c = _consumer(bs, "gjr", topic)
    try:
        assert _poll_until([c], 1, 8) == []
    finally:
        c.close()


def test_clean_restart_keeps_the_group_and_its_state(java):
    with MiniBroker(name="share-restart") as b:
        bs = b.bootstrap_servers
        topic = _topic(bs, partitions=1)
        _group_configs(bs, "g-restart", share_auto_offset_reset="earliest")
        _produce(bs, topic, 10, partitions=1)
        c = _consumer(bs, "g-restart", topic, explicit=True)

        def reject_even(consumer, m):
            consumer.acknowledge(m, AcknowledgeType.REJECT if m.offset() % 2 == 0
                                 else AcknowledgeType.ACCEPT)

        try:
            assert len(_poll_until([c], 10, 30, on_message=reject_even)) == 10
            c.commit_sync(15)
        finally:
            c.close()
        before = _java_admin(java, bs, "describe", "g-restart")
        b.restart(graceful=True)  # a shutdown snapshot of the group coordinator this time
        bs = b.bootstrap_servers
        # the group itself came back (from the snapshot's share entries), at the same epoch
        assert _java_admin(java, bs, "describe", "g-restart") == before
        _produce(bs, topic, 5, partitions=1, start=10)
        again = _consumer(bs, "g-restart", topic)
        try:
            got = _poll_until([again], 5, 40)
            again.commit_sync(15)
            assert _poll_until([again], 1, 3) == []
        finally:
            again.close()
        # rejected (archived) and accepted records stay done with; only the new ones come
        assert sorted(m.offset() for _, m in got) == list(range(10, 15))
        assert "share.state_loaded" in b.log_text()
        assert "group.snapshot_loaded" in b.log_text()


def test_share_explain_tells_a_released_records_story(tmp_path):
    """A real share consumer RELEASEs offset 0 once; `minibroker share explain --data-dir` then
    tells its two deliveries from the history the broker kept."""
    import json
    import subprocess
    import sys

    data = tmp_path / "data"
    with MiniBroker(name="share-explain", data_dir=data) as b:
        bs = b.bootstrap_servers
        topic = _topic(bs, partitions=1)
        _group_configs(bs, "g-explain", share_auto_offset_reset="earliest")
        _produce(bs, topic, 3, partitions=1)
        c = _consumer(bs, "g-explain", topic, explicit=True)

        def release_0_once(consumer, m):
            again = m.offset() == 0 and m.delivery_count() == 1
            consumer.acknowledge(m, AcknowledgeType.RELEASE if again else AcknowledgeType.ACCEPT)

        try:
            assert len(_poll_until([c], 4, 30, on_message=release_0_once)) == 4
            c.commit_sync(15)
        finally:
            c.close()
    r = subprocess.run([sys.executable, "-m", "minibroker", "share", "explain", "g-explain", topic, "0",
                        "--offset", "0", "--data-dir", str(data), "--json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    text = json.loads(r.stdout)["text"]
    assert "delivery 1 of 5" in text and "RELEASED by member" in text, text
    assert "delivery 2 of 5" in text and "ACCEPTED by member" in text, text
    assert "1 redelivered (release 1)" in text, text


def test_the_control_planes_clock_expires_locks(broker_factory):
    """Lock deadlines are on the broker's clock: advancing it over the control plane gives the
    held records to another member at once, with no 30 s wait."""
    b = broker_factory(control=True)
    bs = b.bootstrap_servers
    topic = _topic(bs, partitions=1)
    _group_configs(bs, "g-clock", share_auto_offset_reset="earliest")
    _produce(bs, topic, 5, partitions=1)
    holder = _consumer(bs, "g-clock", topic, explicit=True)
    other = _consumer(bs, "g-clock", topic)
    try:
        assert len(_poll_until([holder], 5, 30)) == 5
        b.control.advance("31s")  # past share.record.lock.duration.ms (30 s)
        t0 = time.monotonic()
        got = _poll_until([other], 5, 20)
        waited = time.monotonic() - t0
        other.commit_sync(15)
    finally:
        other.close()
        holder.close()
    assert sorted(m.offset() for _, m in got) == list(range(5))
    assert all(m.delivery_count() == 2 for _, m in got)
    assert waited < 20, waited
    assert "share.locks_expired" in b.log_text()


def test_three_virtual_brokers_share_partitions_on_their_leaders(broker_factory):
    """--brokers 3: the share consumer fetches each partition from its leader; a ShareFetch
    sent to another node answers NOT_LEADER_OR_FOLLOWER with the leader and its address."""
    from tests.reference.client import Connection, part, req

    b = broker_factory(["--brokers", "3"], control=True)
    bs = ",".join(b.addresses)
    topic = _topic(bs, partitions=3)
    _group_configs(bs, "g-virtual", share_auto_offset_reset="earliest")
    _produce(bs, topic, 30, partitions=3)
    c = _consumer(bs, "g-virtual", topic)
    try:
        got = _poll_until([c], 30, 40)
        c.commit_sync(15)
    finally:
        c.close()
    assert sorted(_key(m) for _, m in got) == sorted((i % 3, i // 3) for i in range(30))
    fetchers = {r["broker"] for r in b.control.requests(api="ShareFetch", topic=topic)}
    assert len(fetchers) > 1, fetchers  # more than one leader served them

    host, port = b.addresses[0].rsplit(":", 1)
    with Connection(host, int(port)) as conn:
        md = conn.call(req(3, 12, topics=(part((3, 12), "MetadataRequestTopic", name=topic, topic_id=None),),
                           allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        t = md.topics[0]
        leaders = {p.partition_index: p.leader_id for p in t.partitions}
        ports = {br.node_id: br.port for br in md.brokers}
        mine = next(n for n, p in ports.items() if p == int(port))
        away = next(p for p, leader in leaders.items() if leader != mine)
        base = (78, 1)
        r = conn.call(req(78, 1, group_id="g-virtual", member_id="raw-member", share_session_epoch=0,
                          max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                          max_records=10, batch_size=10,
                          topics=(part(base, "FetchTopic", topic_id=t.topic_id, partitions=(
                              part(base, "FetchPartition", partition_index=away,
                                   acknowledgement_batches=()),)),),
                          forgotten_topics_data=()))
    [pd] = [p for tr in r.responses for p in tr.partitions]
    assert pd.error_code.name == "not_leader_or_follower", pd
    assert pd.current_leader.leader_id == leaders[away], pd
    assert [(n.node_id, n.port) for n in r.node_endpoints] == [(leaders[away], ports[leaders[away]])], r


def test_a_topic_deleted_and_created_again_under_a_running_consumer(bs):
    topic = _topic(bs, partitions=1)
    _group_configs(bs, "g-recreate", share_auto_offset_reset="earliest")
    _produce(bs, topic, 5, partitions=1)
    c = _consumer(bs, "g-recreate", topic)
    try:
        first = _poll_until([c], 5, 30)
        c.commit_sync(15)
        admin = AdminClient({"bootstrap.servers": bs})
        admin.delete_topics([topic])[topic].result(timeout=15)
        deadline = time.monotonic() + 15
        for _ in range(100):  # the deletion may take a moment to be seen by CreateTopics
            try:
                admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=15)
                break
            except Exception:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        _produce(bs, topic, 3, partitions=1, start=100)
        second = _poll_until([c], 3, 40)
        c.commit_sync(15)
    finally:
        c.close()
    assert sorted(m.offset() for _, m in first) == list(range(5))
    # the new topic is new to the group: its records from offset 0, each once
    assert sorted((m.offset(), m.value()) for _, m in second) == [(0, b"v100"), (1, b"v101"), (2, b"v102")]


def test_a_silent_member_expires_with_the_control_planes_clock(broker_factory):
    """share.session.timeout.ms (45 s) runs on the broker's clock: a member that stops
    heartbeating is fenced when the clock is advanced past it."""
    from tests.reference.client import Connection, req

    b = broker_factory(control=True)
    topic = _topic(b.bootstrap_servers, partitions=1)
    host, port = b.addresses[0].rsplit(":", 1)
    with Connection(host, int(port)) as conn:
        def hb(epoch, names=None):
            return conn.call(req(76, 1, group_id="g-expiry", member_id="silent-member", member_epoch=epoch,
                                 rack_id=None, subscribed_topic_names=names))
        joined = hb(0, (topic,))
        assert joined.error_code == 0 and joined.member_epoch > 0, joined
        assert hb(joined.member_epoch).error_code == 0
        b.control.advance("46s")
        deadline = time.monotonic() + 10
        for _ in range(100):
            if "share.member_expired" in b.log_text() or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        gone = hb(joined.member_epoch)
    assert gone.error_code.name == "unknown_member_id", gone
    assert "share.member_expired" in b.log_text()
