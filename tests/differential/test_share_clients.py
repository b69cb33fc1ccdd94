"""Share groups (KIP-932) with real clients on both brokers: the same consumer programs against the
session's reference Kafka 4.4 and a minibroker with the same settings, comparing what each consumer
received and what the group ended with.

Clients: the Java client 4.4's KafkaShareConsumer (tests/integration/java/ShareClients.java, one JVM
per consumer) and confluent-kafka's ShareConsumer (librdkafka, in this process). A scenario runs
against one broker given its bootstrap servers and returns *facts*: the records each group received
(topic, partition, offset, delivery count, key), the acknowledgement outcomes the client reported,
and the group's final state as Admin's listShareGroupOffsets reads it (start offset, lag). Both
brokers run a scenario at the same time; the facts must be equal, and must also be the outcome share
groups promise, so two brokers that fail alike do not pass. What depends on timing (which member of a
group got which partition, how long a redelivery took) is left out of the facts.

Every program is bounded in time; the JVMs are killed by their PIDs.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import AcknowledgeType, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from minibroker.testing.broker import MiniBroker
from tests.reference import settings

# The shortest lock Kafka's default bounds allow (group.share.min.record.lock.duration.ms).
LOCK_MS = 15_000


# ---- the two brokers -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def minibroker_ref():
    with MiniBroker(name="share-clients", **settings.minibroker_options()) as mb:
        yield mb


@pytest.fixture(scope="module")
def brokers(kafka_reference, minibroker_ref):
    return {"kafka": kafka_reference.bootstrap_servers, "minibroker": minibroker_ref.bootstrap_servers}


@pytest.fixture(scope="module")
def plain_brokers():
    """A Kafka 4.4 and a minibroker with the shared settings but no authorizer, for the one scenario
    Kafka fails with its authorizer on (test_topic_deleted_and_recreated_under_a_running_consumer)."""
    from tests.reference.kafka import KafkaReference, KafkaUnavailable

    props = {k: v for k, v in settings.kafka_properties().items()
             if k not in ("authorizer.class.name", "super.users")}
    options = {k: v for k, v in settings.minibroker_options().items() if k not in ("authorizer", "super_users")}
    kafka = KafkaReference(props, classpath=settings.kafka_classpath())
    try:
        kafka.java()
    except KafkaUnavailable as e:
        if os.environ.get("MINIBROKER_TEST_REQUIRE_TOOLS"):
            pytest.fail(str(e))
        pytest.skip(str(e))
    with kafka, MiniBroker(name="share-clients-plain", **options) as mb:
        print(f"plain pair: kafka {kafka.bootstrap_servers}, minibroker {mb.bootstrap_servers}")
        yield {"kafka": kafka.bootstrap_servers, "minibroker": mb.bootstrap_servers}


@pytest.fixture(scope="module")
def java():
    from tests.integration.java_client import compile_drivers, java_toolchain

    tc = java_toolchain()
    return tc, compile_drivers(tc)


def on_both(brokers: dict, fn) -> dict:
    """``fn(bootstrap)`` against both brokers at the same time: {broker name: its facts}."""
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(fn, bs) for name, bs in brokers.items()}
        return {name: f.result() for name, f in futures.items()}


def assert_same(out: dict, what: str) -> dict:
    for name, facts in out.items():
        print(f"{what} on {name}: {facts}")
    assert out["minibroker"] == out["kafka"], (
        f"{what}: minibroker's facts differ from Kafka's\n kafka:      {out['kafka']}\n"
        f" minibroker: {out['minibroker']}")
    return out["kafka"]


# ---- setting a scenario up (the same calls on either broker) ------------------------------------

def uid(hint: str) -> str:
    return f"sc-{hint}-{uuid.uuid4().hex[:6]}"


def create_topic(bs: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)
    create_topic_wait(bs, topic, partitions)


def create_topic_wait(bs: str, topic: str, partitions: int) -> None:
    # Kafka names a leader before the partition serves; produce retries cover that, and the
    # metadata wait below covers a consumer that subscribes at once
    admin = AdminClient({"bootstrap.servers": bs})
    deadline = time.monotonic() + 30
    for _ in range(300):
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions and all(
                p.leader >= 0 for p in md.partitions.values()):
            return
        assert time.monotonic() < deadline, f"{topic} has no leaders on {bs}"
        time.sleep(0.1)


def group_configs(bs: str, group: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    res = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    admin.incremental_alter_configs([res])[res].result(timeout=30)


def produce(bs: str, topic: str, n: int, partitions: int, start: int = 0) -> None:
    """Records keyed k<i> to partition i mod ``partitions``, in order."""
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for i in range(start, start + n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions)
    assert p.flush(30) == 0


def setup(bs: str, topic: str, partitions: int, n: int, groups: list[str], **configs: str) -> None:
    create_topic(bs, topic, partitions)
    for g in groups:
        group_configs(bs, g, share_auto_offset_reset="earliest", **configs)
    produce(bs, topic, n, partitions)


def all_keys(n: int) -> list[str]:
    return sorted(f"k{i}" for i in range(n))


# ---- the Java client --------------------------------------------------------------------------

class JavaConsumer:
    """One ShareClients JVM; its stdout is read as it comes (records, then {"done": N})."""

    def __init__(self, java, bs: str, group: str, topics: list[str], *, mode: str = "implicit",
                 want: int, timeout_s: float, policy: str = "accept", commit: str = "sync",
                 idle_ms: int = 2000, props: dict[str, str] | None = None) -> None:
        from tests.integration.java_client import start_driver

        args = [bs, group, ",".join(topics), mode, want, int(timeout_s * 1000), policy, commit, idle_ms,
                *(f"{k}={v}" for k, v in (props or {}).items())]
        self.proc = start_driver(java[0], java[1], "ShareClients", args)
        self.lines: list[dict] = []
        self.stderr = ""
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._err = threading.Thread(target=self._read_err, daemon=True)
        self._err.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                with self._cond:
                    self.lines.append(json.loads(line))
                    self._cond.notify_all()

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def wait_for(self, key: str, timeout: float) -> dict:
        """The first output line with ``key``, waiting at most ``timeout`` s."""
        deadline = time.monotonic() + timeout
        with self._cond:
            for _ in range(10_000):
                hit = next((x for x in self.lines if key in x), None)
                if hit is not None:
                    return hit
                left = deadline - time.monotonic()
                assert left > 0 and self.proc.poll() is None or any(key in x for x in self.lines), (
                    f"no {key!r} from the Java consumer within {timeout} s: {self.lines[-5:]}\n"
                    f"{self.stderr[-3000:]}")
                self._cond.wait(min(max(left, 0.01), 0.5))
        raise AssertionError(f"no {key!r}")

    def finish(self, timeout: float) -> list[dict]:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # this JVM only
            self.proc.wait(timeout=30)
            raise AssertionError(
                f"the Java consumer did not finish within {timeout} s: {self.lines[-5:]}") from None
        self._reader.join(10)
        self._err.join(10)
        assert self.proc.returncode == 0, self.stderr[-3000:]
        assert self.lines and "done" in self.lines[-1], (self.lines[-5:], self.stderr[-3000:])
        return self.lines

    def kill9(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._reader.join(10)


def records_of(lines: list[dict]) -> list[dict]:
    return [x for x in lines if "o" in x]


def describe(bs: str, group: str) -> tuple[str, int]:
    """ShareGroupDescribe's (state, member count); one broker: it is the group's coordinator."""
    from tests.reference.client import Connection, req

    host, port = bs.rsplit(":", 1)
    with Connection(host, int(port)) as conn:
        r = conn.call(req(77, 1, group_ids=(group,), include_authorized_operations=False))
    g = r.groups[0]
    return (g.group_state, len(g.members)) if g.error_code == 0 else (g.error_code.name, 0)


def members(bs: str, group: str) -> int:
    return describe(bs, group)[1]


def java_admin(java, bs: str, *args: str) -> dict:
    from tests.integration.java_client import run_driver

    r = run_driver(java[0], java[1], "ShareConsume", [bs, "admin", *args], timeout=90)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def final_offsets(java, bs: str, group: str) -> dict:
    """Admin.listShareGroupOffsets: {"topic-p": [start offset, lag]}."""
    return java_admin(java, bs, "offsets", group)["offsets"]


def deliveries(records: list[dict]) -> dict[str, list[int]]:
    """key -> the delivery counts it came with, in order."""
    out: dict[str, list[int]] = {}
    for x in records:
        out.setdefault(x["k"], []).append(x["dc"])
    return dict(sorted(out.items()))


def keys_once(records: list[dict]) -> list[str]:
    return sorted(x["k"] for x in records)


def lag_zero(offsets: dict) -> bool:
    return bool(offsets) and all(lag == 0 for _start, lag in offsets.values())


# ---- 1. the Java client's KafkaShareConsumer -----------------------------------------------------

@pytest.mark.parametrize("commit", ["sync", "async"])
def test_java_implicit_acknowledgement(brokers, java, commit):
    """Implicit acknowledgement, commitSync or commitAsync after every poll: each record once with
    delivery count 1, and the group's share partitions end with nothing left (lag 0)."""
    topic, group, n = uid("ji"), uid("g-ji"), 40

    def scenario(bs):
        setup(bs, topic, 2, n, [group])
        got = records_of(JavaConsumer(java, bs, group, [topic], want=n, timeout_s=60, commit=commit)
                         .finish(120))
        offsets = final_offsets(java, bs, group)
        return {"deliveries": deliveries(got), "lag_zero": lag_zero(offsets),
                "partitions": sorted(offsets)}

    facts = assert_same(on_both(brokers, scenario), f"Java implicit, commit {commit}")
    assert facts["deliveries"] == {k: [1] for k in all_keys(n)}
    assert facts["lag_zero"] and facts["partitions"] == [f"{topic}-0", f"{topic}-1"]


def test_java_explicit_release_accept_and_reject(brokers, java):
    """Explicit acknowledgement: offsets 0 mod 3 RELEASEd at their first delivery come again with
    delivery count 2 and are ACCEPTed then; offsets 1 mod 3 REJECTed never come again."""
    topic, group, n = uid("je"), uid("g-je"), 12

    def scenario(bs):
        setup(bs, topic, 1, n, [group])
        c = JavaConsumer(java, bs, group, [topic], mode="explicit", want=n + n // 3, timeout_s=60,
                         policy="mixed", idle_ms=3000)
        got = records_of(c.finish(120))
        offsets = final_offsets(java, bs, group)
        return {"deliveries": deliveries(got), "offsets": offsets}

    facts = assert_same(on_both(brokers, scenario), "Java explicit RELEASE/REJECT/ACCEPT")
    assert facts["deliveries"] == {f"k{i}": ([1, 2] if i % 3 == 0 else [1]) for i in range(n)}, facts
    assert lag_zero(facts["offsets"])


def test_java_three_consumers_in_a_group_and_a_second_group(brokers, java):
    """Three KafkaShareConsumers in one group split the records (each once in the group, whichever
    member got it); one consumer of a second group gets every record too."""
    topic, ga, gb, n = uid("j3"), uid("g-j3a"), uid("g-j3b"), 90

    def scenario(bs):
        setup(bs, topic, 3, n, [ga, gb])
        # a member stops 8 s after its first record (or at 60 s): the others joined meanwhile
        members = [JavaConsumer(java, bs, ga, [topic], want=1, timeout_s=60, idle_ms=8000,
                                commit=("async" if i == 1 else "sync")) for i in range(3)]
        other = JavaConsumer(java, bs, gb, [topic], want=n, timeout_s=60)
        got_a = [x for m in members for x in records_of(m.finish(150))]
        got_b = records_of(other.finish(150))
        return {"group_a": sorted(keys_once(got_a)), "group_a_counts": sorted({x["dc"] for x in got_a}),
                "group_b": deliveries(got_b),
                "lag_zero": [lag_zero(final_offsets(java, bs, g)) for g in (ga, gb)]}

    facts = assert_same(on_both(brokers, scenario), "three Java consumers + a second group")
    assert facts["group_a"] == all_keys(n), "each record exactly once in the shared group"
    assert facts["group_a_counts"] == [1]
    assert facts["group_b"] == {k: [1] for k in all_keys(n)}
    assert facts["lag_zero"] == [True, True]


@pytest.mark.parametrize("how", ["kill", "freeze"])
def test_java_consumer_killed_mid_delivery(brokers, java, how):
    """A KafkaShareConsumer acquires every record and, before acknowledging any, is killed with
    SIGKILL ("kill") or stopped with SIGSTOP ("freeze", killed at the end). Its records come to the
    group's other member with delivery count 2: after a kill at once, as its connection closed
    (ClientConnectionDisconnectListener releases the share session), after a freeze only when the
    acquisition lock (the group's share.record.lock.duration.ms, 15 s) expires."""
    topic, group, n = uid("jk"), uid("g-jk"), 20

    # A kill must come well within the lock: once it expires, the victim's client (its fetching
    # runs in a background thread) may acquire the records again, a third delivery for the
    # survivor. Kafka's longest lock (group.share.max.record.lock.duration.ms) for the kill.
    lock_ms = LOCK_MS if how == "freeze" else 60_000

    def scenario(bs):
        setup(bs, topic, 1, n, [group], share_record_lock_duration_ms=str(lock_ms))
        victim = JavaConsumer(java, bs, group, [topic], mode="explicit", want=n, timeout_s=120, policy="hold")
        try:
            held = victim.wait_for("holding", 60)["holding"]
            acquired = time.monotonic()
            held_keys = keys_once(records_of(victim.lines))
            survivor = JavaConsumer(java, bs, group, [topic], want=n, timeout_s=90, idle_ms=3000)
            deadline = time.monotonic() + 60
            for _ in range(600):  # the survivor joins while the victim holds everything
                if members(bs, group) == 2:
                    break
                assert time.monotonic() < deadline, "the second consumer did not join"
                time.sleep(0.1)
            t0 = time.monotonic()
            if how == "kill":
                victim.kill9()
            else:
                os.kill(victim.proc.pid, signal.SIGSTOP)
            survivor.wait_for("o", 80)
            waited, since_acquired = time.monotonic() - t0, time.monotonic() - acquired
            got = records_of(survivor.finish(150))
        finally:
            if victim.proc.poll() is None:
                victim.kill9()
        print(f"{bs}: the survivor's first record {waited:.1f} s after the {how}, "
              f"{since_acquired:.1f} s after the acquisition")
        return {"held": held, "held_keys": held_keys, "survivor": deliveries(got),
                # the lock's 15 s against a redelivery within a few seconds (a loaded machine's
                # margin both ways)
                "after_the_lock": since_acquired >= LOCK_MS / 1000 - 4,
                "kill_within_the_lock": t0 - acquired < lock_ms / 1000 - 5,
                "lag_zero": lag_zero(final_offsets(java, bs, group))}

    facts = assert_same(on_both(brokers, scenario), f"{how} of a Java consumer")
    assert facts["held"] == n and facts["held_keys"] == all_keys(n)
    assert facts["survivor"] == {k: [2] for k in all_keys(n)}, "each held record again, its 2nd delivery"
    assert facts["after_the_lock"] == (how == "freeze") and facts["kill_within_the_lock"], facts
    assert facts["lag_zero"]


# ---- 2. confluent-kafka's ShareConsumer ----------------------------------------------------------

class RdkafkaLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def rd_consumer(bs: str, group: str, topics: list[str], explicit: bool = False,
                log: RdkafkaLog | None = None, extra: dict[str, str] | None = None) -> ShareConsumer:
    conf = {"bootstrap.servers": bs, "group.id": group,
            "share.acknowledgement.mode": "explicit" if explicit else "implicit", **(extra or {})}
    if log is not None:
        logger = logging.getLogger(f"rdkafka-{uuid.uuid4().hex[:6]}")
        logger.addHandler(log)
        logger.setLevel(logging.DEBUG)
        conf["logger"] = logger
    c = ShareConsumer(conf)
    c.subscribe(topics)
    return c


def rd_poll(c: ShareConsumer, want: int, timeout: float, idle: float = 0.0, on_message=None) -> list[dict]:
    """Poll until ``want`` records came (then ``idle`` s more) or ``timeout`` passed."""
    got: list[dict] = []
    deadline = time.monotonic() + timeout
    until = None
    for _ in range(10_000):
        now = time.monotonic()
        if now > deadline or (until is not None and now > until):
            break
        for m in c.poll(0.3):
            if m.error() is not None:
                continue
            got.append({"t": m.topic(), "p": m.partition(), "o": m.offset(), "dc": m.delivery_count(),
                        "k": (m.key() or b"").decode()})
            if on_message is not None:
                on_message(c, m)
        if until is None and len(got) >= want:
            until = time.monotonic() + idle
    return got


def test_confluent_implicit_and_explicit(brokers, java):
    """confluent-kafka's ShareConsumer: implicit acknowledgement in one group; explicit RELEASE
    (then ACCEPT) / REJECT / ACCEPT in another, on the same records."""
    topic, gi, ge, n = uid("ci"), uid("g-ci"), uid("g-ce"), 30

    def mixed(c, m):
        if m.offset() % 3 == 0 and m.delivery_count() == 1:
            c.acknowledge(m, AcknowledgeType.RELEASE)
        elif m.offset() % 3 == 1:
            c.acknowledge(m, AcknowledgeType.REJECT)
        else:
            c.acknowledge(m, AcknowledgeType.ACCEPT)

    def scenario(bs):
        setup(bs, topic, 1, n, [gi, ge])
        out = {}
        for name, group, explicit, want in (("implicit", gi, False, n), ("explicit", ge, True, n + n // 3)):
            c = rd_consumer(bs, group, [topic], explicit=explicit)
            try:
                got = rd_poll(c, want, 60, idle=3, on_message=mixed if explicit else None)
                c.commit_sync(15)
            finally:
                c.close()
            out[name] = deliveries(got)
            out[f"{name}_lag_zero"] = lag_zero(final_offsets(java, bs, group))
        return out

    facts = assert_same(on_both(brokers, scenario), "confluent ShareConsumer")
    assert facts["implicit"] == {k: [1] for k in all_keys(n)}
    assert facts["explicit"] == {f"k{i}": ([1, 2] if i % 3 == 0 else [1]) for i in range(n)}
    assert facts["implicit_lag_zero"] and facts["explicit_lag_zero"]


# ---- 3. the clients' rough edges -----------------------------------------------------------------

def _address_free(line: str) -> str:
    """A client log line without the parts that name one broker (addresses, node ids, members)."""
    import re

    line = re.sub(r"127\.0\.0\.1:\d+(/\d+)?", "BROKER", line)
    line = re.sub(r"\[thrd:[^\]]*\]", "", line)
    return re.sub(r'member id "[^"]*"', "member", line)


def test_confluent_close_reports_no_error(brokers, java):
    """librdkafka's close sends its leave heartbeat and its final (epoch -1) ShareAcknowledge at
    once; Kafka keeps a member's share session until that acknowledgement or the connection's end,
    so the acknowledgement never finds its session gone ("ShareAcknowledge reply error: share
    session not found" was minibroker's answer when the leave won the race). Several closes, after
    implicit and explicit acknowledgement, with records still unacknowledged at the last one."""
    topic, n = uid("cc"), 12
    groups = [uid("g-cc") for _ in range(4)]

    def scenario(bs):
        # one partition: which partitions a first poll covers depends on when each was loaded
        setup(bs, topic, 1, n, groups)
        log = RdkafkaLog()
        got = []
        held: list[dict] = []

        def accept(c, m):
            c.acknowledge(m, AcknowledgeType.ACCEPT)

        for i, g in enumerate(groups):
            c = rd_consumer(bs, g, [topic], explicit=i % 2 == 1, log=log)
            try:
                if i < 3:
                    got.append(len(rd_poll(c, n, 60, on_message=accept if i % 2 else None)))
                else:  # one poll's records, never acknowledged (polling again would refuse)
                    held = rd_poll(c, 1, 60)
                    got.append(len(held))
            finally:
                c.close()
        # what the last close left unacknowledged went back at once (the final acknowledgement
        # released it): another member of that group gets it with delivery count 2
        c = rd_consumer(bs, groups[3], [topic])
        try:
            again = rd_poll(c, n, 60)
            c.commit_sync(15)
        finally:
            c.close()
        errors = sorted({_address_free(x) for x in log.lines
                         if "error" in x.lower() or "session not found" in x.lower()})
        return {"received": got, "errors": errors, "held": keys_once(held), "again": deliveries(again)}

    facts = assert_same(on_both(brokers, scenario), "confluent ShareConsumer close")
    assert facts["received"][:3] == [n] * 3 and facts["received"][3] > 0 and facts["errors"] == [], facts
    assert facts["again"] == {k: [2] if k in facts["held"] else [1] for k in all_keys(n)}, facts


def test_a_leave_heartbeat_keeps_the_share_session(differential_pair):
    """The raw requests under that close: after a leave heartbeat (epoch -1) the member's share
    session still serves its ShareAcknowledge and its final one, on Kafka as on minibroker."""
    from .test_share_groups import Script, _group_configs, _member

    s = Script(differential_pair)
    _group_configs(s, share_auto_offset_reset="earliest")
    m = _member()
    s.join_until_assigned(m, 1)
    s.fetch("open", m, 0, top_only=True)
    s.fetch("an empty fetch: Kafka has loaded the partition by its end", m, 1, max_wait_ms=1000,
            top_only=True)
    s.produce(5)
    delivered = s.fetch("deliver", m, 2, max_wait_ms=2000)
    assert delivered[3] == [("T", 0, "none", 0, None, [(0, 4, 1)], True)], delivered
    left = s.hb("leave", m, -1, names=None)
    assert left[0] == "none" and left[2] == -1, left
    acked = s.ack("ACCEPT 0-1 on the session after the leave", m, 3, {0: [(0, 1, [1])]})
    assert acked[0] == "none" and acked[2] == [(0, "none", None)], acked
    final = s.ack("the final acknowledgement (RELEASE 2) closes the session", m, -1, {0: [(2, 2, [2])]})
    assert final[0] == "none", final
    gone = s.ack("and then there is none", m, 4, {0: [(3, 3, [1])]})
    assert gone[0] == "share_session_not_found", gone


def test_java_consumer_past_max_poll_interval(brokers, java):
    """A KafkaShareConsumer that stops polling for longer than max.poll.interval.ms leaves its
    group (the client's own poll timer sends the leave heartbeat); its records stay acquired under
    their lock, and when it polls again it rejoins and acknowledges them."""
    topic, group, n = uid("mp"), uid("g-mp"), 5
    stall_ms, max_poll_ms = 12_000, 4_000

    def scenario(bs):
        setup(bs, topic, 1, n, [group], share_record_lock_duration_ms=str(LOCK_MS + 15_000))
        c = JavaConsumer(java, bs, group, [topic], mode="explicit", want=n, timeout_s=90,
                         policy=f"stall:{stall_ms}", idle_ms=3000,
                         props={"max.poll.interval.ms": str(max_poll_ms)})
        c.wait_for("stalling", 60)
        t0 = time.monotonic()
        time.sleep(max_poll_ms / 1000 + 3)
        state, during = describe(bs, group)
        assert time.monotonic() - t0 < stall_ms / 1000, "the stall ended before the group was described"
        lines = c.finish(120)
        return {"records": deliveries(records_of(lines)), "commits": [x["commit"] for x in lines if "commit" in x],
                "members_during_stall": during, "state_during_stall": state,
                "state_after": describe(bs, group), "lag_zero": lag_zero(final_offsets(java, bs, group))}

    facts = assert_same(on_both(brokers, scenario), "Java consumer past max.poll.interval.ms")
    assert facts["members_during_stall"] == 0, facts
    assert facts["records"] == {k: [1] for k in all_keys(n)}, facts
    # the share session outlived the leave: the late acknowledgements land (minibroker had ended
    # the session with the leave; the client then saw a NetworkException and the records stayed)
    assert facts["commits"] == [{f"{topic}-0": "ok"}] and facts["lag_zero"], facts


def test_confluent_consumer_past_max_poll_interval(brokers, java):
    """librdkafka's ShareConsumer past max.poll.interval.ms leaves its group too ("leaving group");
    its explicit acknowledgements, sent after, still land on the share session (as on Kafka), and
    its next poll raises _MAX_POLL_EXCEEDED."""
    topic, group, n = uid("mr"), uid("g-mr"), 5
    stall_s, max_poll_ms = 8, 4_000

    def scenario(bs):
        setup(bs, topic, 1, n, [group], share_record_lock_duration_ms=str(LOCK_MS + 15_000))
        log = RdkafkaLog()
        c = rd_consumer(bs, group, [topic], explicit=True, log=log, extra={"max.poll.interval.ms": str(max_poll_ms)})
        raised = []
        try:
            msgs = []
            deadline = time.monotonic() + 60
            for _ in range(1000):
                msgs += [m for m in c.poll(0.3) if m.error() is None]
                if len(msgs) >= n or time.monotonic() > deadline:
                    break
            time.sleep(stall_s)
            state, during = describe(bs, group)
            for m in msgs:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            committed = c.commit_sync(15)
            for _ in range(10):
                try:
                    c.poll(0.3)
                except KafkaException as e:
                    raised.append(e.args[0].name())
                    break
        finally:
            c.close()
        return {"received": sorted((m.offset(), m.delivery_count()) for m in msgs),
                "members_during_stall": during, "state_during_stall": state,
                "commit": sorted((f"{tp.topic}-{tp.partition}", tp.error is None) for tp in committed),
                "raised": raised, "left": any("leaving group" in x for x in log.lines),
                "lag_zero": lag_zero(final_offsets(java, bs, group))}

    facts = assert_same(on_both(brokers, scenario), "confluent consumer past max.poll.interval.ms")
    assert facts["received"] == [(i, 1) for i in range(n)] and facts["members_during_stall"] == 0, facts
    assert facts["commit"] == [(f"{topic}-0", True)] and facts["lag_zero"], facts
    assert facts["raised"] == ["_MAX_POLL_EXCEEDED"] and facts["left"], facts


def recreate_topic(bs: str, topic: str, partitions: int) -> None:
    """Delete ``topic`` and create it again. Both brokers answer DeleteTopics once the topic is
    gone; a running consumer's Metadata request may auto-create it again before our CreateTopics
    (auto.create.topics.enable, on both), which then answers TOPIC_ALREADY_EXISTS: that topic is
    the new one too, and with ``partitions`` = num.partitions it looks the same either way."""
    from confluent_kafka import KafkaError

    assert partitions == settings.value("num_partitions")
    admin = AdminClient({"bootstrap.servers": bs})
    admin.delete_topics([topic])[topic].result(timeout=30)
    try:
        create_topic(bs, topic, partitions)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
        create_topic_wait(bs, topic, partitions)


@pytest.mark.parametrize("client", ["confluent", "java"])
def test_topic_deleted_and_recreated_under_a_running_consumer(request, java, client):
    """A share consumer subscribed to a topic that is deleted and created again: the new topic is
    new to the group, its records come from offset 0 (share.auto.offset.reset earliest), each once.

    The Java client runs against a pair without an authorizer: the KafkaShareConsumer keeps the
    deleted topic's id in its share session, and Kafka 4.4 with an authorizer configured (as the
    session's reference is) answers each such ShareFetch UNKNOWN_SERVER_ERROR — a
    NullPointerException in AuthHelper.filterByAuthorized building a ResourcePattern for the
    topic's null name (KafkaApis.handleShareFetchRequest), logged per request while the client
    retries at once — so the new topic's records never come. Without an authorizer Kafka delivers
    them; minibroker does with or without one."""
    topic, group = uid("dr"), uid("g-dr")
    brokers = request.getfixturevalue("plain_brokers" if client == "java" else "brokers")

    parts = settings.value("num_partitions")  # what an auto-created topic gets (recreate_topic)

    def scenario(bs):
        create_topic(bs, topic, parts)
        group_configs(bs, group, share_auto_offset_reset="earliest")
        produce(bs, topic, 5, 1)  # all to partition 0
        if client == "java":
            c = JavaConsumer(java, bs, group, [topic], want=8, timeout_s=90, idle_ms=3000)
            try:
                c.wait_for("o", 60)
                deadline = time.monotonic() + 60
                for _ in range(600):
                    if len(records_of(c.lines)) >= 5:
                        break
                    assert time.monotonic() < deadline, c.lines
                    time.sleep(0.1)
                recreate_topic(bs, topic, parts)
                produce(bs, topic, 3, 1, start=100)
            finally:
                got = records_of(c.finish(150))
            first, second = got[:5], got[5:]
        else:
            rc = rd_consumer(bs, group, [topic])
            try:
                first = rd_poll(rc, 5, 60)
                rc.commit_sync(15)
                recreate_topic(bs, topic, parts)
                produce(bs, topic, 3, 1, start=100)
                second = rd_poll(rc, 3, 60, idle=2)
                rc.commit_sync(15)
            finally:
                rc.close()
        return {"first": [(x["p"], x["o"], x["k"], x["dc"]) for x in first],
                "second": sorted((x["p"], x["o"], x["k"], x["dc"]) for x in second)}

    facts = assert_same(on_both(brokers, scenario), f"{client}: topic deleted and recreated")
    assert facts["first"] == [(0, i, f"k{i}", 1) for i in range(5)]
    assert facts["second"] == [(0, 0, "k100", 1), (0, 1, "k101", 1), (0, 2, "k102", 1)]


def assigned_topic_ids(bs: str, group: str) -> set[str]:
    """The topic ids ShareGroupDescribe shows assigned to the group's members."""
    from tests.reference.client import Connection, req

    host, port = bs.rsplit(":", 1)
    with Connection(host, int(port)) as conn:
        r = conn.call(req(77, 1, group_ids=(group,), include_authorized_operations=False))
    return {str(tp.topic_id) for m in r.groups[0].members for tp in m.assignment.topic_partitions}


def topic_id(bs: str, topic: str) -> str:
    from tests.reference.client import Connection, part, req

    host, port = bs.rsplit(":", 1)
    with Connection(host, int(port)) as conn:
        md = conn.call(req(3, 12, topics=(part((3, 12), "MetadataRequestTopic", name=topic, topic_id=None),),
                           allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    return str(md.topics[0].topic_id)


def wait_assigned(bs: str, group: str, topic: str, tick=lambda: time.sleep(0.2)) -> None:
    want = {topic_id(bs, topic)}
    deadline = time.monotonic() + 60
    for _ in range(1000):
        if assigned_topic_ids(bs, group) == want:
            return
        assert time.monotonic() < deadline, f"{group} is not assigned {topic} alone on {bs}"
        tick()


@pytest.mark.parametrize("client", ["confluent", "java"])
def test_subscription_change(brokers, java, client):
    """A share consumer moves its subscription from one topic to another: once the group has
    assigned it the second topic alone, it gets the second topic's records, and the first topic's
    later records stay for the group (its lag)."""
    t1, t2, group = uid("s1"), uid("s2"), uid("g-sub")

    def scenario(bs):
        setup(bs, t1, 1, 5, [group])
        create_topic(bs, t2, 1)
        if client == "java":
            c = JavaConsumer(java, bs, group, [t1], want=5, timeout_s=90, idle_ms=3000,
                             policy=f"resubscribe:{t2}:4")
            try:
                c.wait_for("resubscribed", 60)
                wait_assigned(bs, group, t2)
                produce(bs, t1, 4, 1, start=5)
                produce(bs, t2, 4, 1, start=10)
            finally:
                got = records_of(c.finish(150))
            first, second = got[:5], got[5:]
        else:
            rc = rd_consumer(bs, group, [t1])
            try:
                first = rd_poll(rc, 5, 60)
                rc.commit_sync(15)
                rc.subscribe([t2])
                extra: list[dict] = []
                wait_assigned(bs, group, t2, tick=lambda: extra.extend(rd_poll(rc, 1, 0.3)))
                assert extra == [], extra
                produce(bs, t1, 4, 1, start=5)
                produce(bs, t2, 4, 1, start=10)
                second = rd_poll(rc, 4, 60, idle=3)
                rc.commit_sync(15)
            finally:
                rc.close()
        offsets = final_offsets(java, bs, group)
        return {"first": [(x["t"], x["k"]) for x in first],
                "second": sorted((x["t"], x["k"], x["dc"]) for x in second),
                "lag": {tp: lag for tp, (_start, lag) in sorted(offsets.items())}}

    facts = assert_same(on_both(brokers, scenario), f"{client}: subscription change")
    assert facts["first"] == [(t1, f"k{i}") for i in range(5)]
    assert facts["second"] == [(t2, f"k{i}", 1) for i in range(10, 14)]
