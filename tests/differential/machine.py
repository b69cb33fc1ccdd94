"""The stateful differential test of the exactly-once protocol: Kafka and minibroker, step by step.

Each hypothesis example makes two fresh topics of three partitions, two transactional ids, a
consumer group with one member, and five producers: instances A and B share transactional id
tx0 (so one of them is a zombie once the other initialises), C owns tx1, I is an idempotent
producer and N a plain one. Every rule sends the same request to both brokers (ids that each
broker made itself — producer ids, topic ids, member ids — are filled in per broker) and fails
when the normalised answers differ. Teardown compares every record visible under each
isolation level.

Transient states are awaited the way a client would, and each broker gets the same chance:
- CONCURRENT_TRANSACTIONS (51) and coordinator-loading errors are retried (bounded), so a
  broker that completes a transaction synchronously and one that writes markers afterwards
  (Kafka) give the same final answer;
- after EndTxn, InitProducerId and a timed-out transaction, DescribeTransactions is polled
  until no transaction is in a Prepare* state (Kafka writes markers after answering);
- time-driven events (transaction timeout, producer-state expiry) are never raced: before each
  step, if one of them is due within a safety margin, the step waits until it has surely
  happened on both brokers. ``wait_txn_timeout`` and ``wait_producer_expiry`` wait on purpose.

A failing example prints as a script of ``state.<rule>(...)`` calls; ``python -m
tests.differential --replay FILE`` runs such a script against fresh brokers.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from minibroker_protocol.records import build_batch
from tests.reference import settings
from tests.reference.client import part, req

from .normalise import ProducerIds
from .pair import Pair

PRODUCE, FETCH, LIST_OFFSETS, OFFSET_FETCH = 0, 1, 2, 9
INIT_PID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 22, 24, 25, 26, 28
DESCRIBE_PRODUCERS, DESCRIBE_TXNS, LIST_TXNS = 61, 65, 66
RETRY_ERRORS = {51, 14, 15, 16}  # CONCURRENT_TRANSACTIONS, coordinator loading / not available / moved
PARTITIONS = 3
TXN_TIMEOUT_MS = 1500
MARGIN = 0.4  # seconds either side of a time-driven event in which no step is sent
ABORT_INTERVAL = settings.value("transaction_abort_check_interval_ms") / 1000
EXPIRY = settings.value("producer_id_expiration_ms") / 1000
EXPIRY_INTERVAL = settings.value("producer_id_expiration_check_interval_ms") / 1000
MAX_TIMEOUT_MS = settings.value("transaction_max_timeout_ms")

PAIR: Pair | None = None  # set by the pytest fixture or ``python -m tests.differential``


@dataclass
class Producer:
    name: str
    txn: int | None  # index of the transactional id, None for the idempotent/plain producers
    pid: dict[str, int] = field(default_factory=dict)  # per broker
    epoch: int = -1
    seq: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)  # tp -> (epoch, next seq)
    last: dict[tuple[int, int], tuple[int, int, int, int]] = field(default_factory=dict)  # tp -> epoch, seq, n, tag


@dataclass
class Txn:
    started: float | None = None
    partitions: set = field(default_factory=set)


def errors_of(tree) -> set[int]:
    """Every error_code anywhere in an answer."""
    out: set[int] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if hasattr(node, "__dataclass_fields__"):
            for name in node.__dataclass_fields__:
                v = getattr(node, name)
                if name.endswith("error_code") and isinstance(v, int):
                    out.add(v)
                elif isinstance(v, (tuple, list)) or hasattr(v, "__dataclass_fields__"):
                    stack.append(v)
        elif isinstance(node, (tuple, list)):
            stack.extend(node)
    return out


def ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


class DifferentialEOS(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        if PAIR is None:
            raise RuntimeError("tests.differential.machine.PAIR is not set (run through pytest or "
                               "python -m tests.differential)")
        self.pair = PAIR
        for side in self.pair.sides:  # producer ids are named afresh in each example
            side.pids = ProducerIds()
        tag = uuid.uuid4().hex[:10]
        self.topics = [f"diff-{tag}-t0", f"diff-{tag}-t1"]
        self.txn_ids = [f"diff-{tag}-tx0", f"diff-{tag}-tx1"]
        self.group = f"diff-{tag}-group"
        self.generation = -1
        self.producers = {"A": Producer("A", 0), "B": Producer("B", 0), "C": Producer("C", 1),
                          "I": Producer("I", None), "N": Producer("N", None)}
        self.txns = [Txn(), Txn()]
        self.last_write: dict[tuple[int, int, int], float] = {}  # (kafka pid, topic, partition) -> time
        self.tags = 0
        self.diverged = False

    # ------------------------------------------------------------------ plumbing

    def _versions(self, key: int, lo: int, hi: int, version: int) -> int:
        lo, hi = self.pair.version_range(key, lo, hi)
        return min(max(version, lo), hi)

    def _send(self, what: str, make, retry: bool = False):
        """Both brokers, each retried like a client while the answer is transient; then compared."""
        answers = []
        for side in self.pair.sides:
            deadline = time.monotonic() + 15
            for _ in range(300):
                answer = side.call(make(side))
                if not (retry and errors_of(answer) & RETRY_ERRORS) or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            answers.append(answer)
        self._raw = answers
        try:
            return self.pair.check(what, answers), answers[0]
        except AssertionError:
            self.diverged = True  # teardown then compares nothing more: one divergence is the report
            raise

    def _settle_txn(self, idx: int) -> None:
        """Wait (bounded) until neither broker has tx<idx> in a Prepare* state."""
        txn_id = self.txn_ids[idx]
        for side in self.pair.sides:
            deadline = time.monotonic() + 15
            while True:
                r = side.call(req(DESCRIBE_TXNS, 0, transactional_ids=(txn_id,)))
                state = r.transaction_states[0].transaction_state
                if not state.startswith("Prepare") or time.monotonic() > deadline:
                    break
                time.sleep(0.05)

    def _windows(self, now: float) -> list[tuple[float, float, str, object]]:
        out = []
        for i, t in enumerate(self.txns):
            if t.started is not None:
                due = t.started + TXN_TIMEOUT_MS / 1000
                out.append((due - MARGIN, due + ABORT_INTERVAL + MARGIN + 0.3, "txn", i))
        for key, t in self.last_write.items():
            due = t + EXPIRY
            out.append((due - MARGIN, due + EXPIRY_INTERVAL + ABORT_INTERVAL + MARGIN, "pid", key))
        return out

    def _clock(self) -> None:
        """Keep every step clear of a transaction timeout or a producer expiry that is about to fire."""
        for _ in range(50):
            now = time.monotonic()
            inside = [w for w in self._windows(now) if w[0] <= now < w[1]]
            if not inside:
                break
            time.sleep(max(w[1] for w in inside) - now)
        now = time.monotonic()
        for lo, hi, kind, what in self._windows(now):
            if kind == "txn" and now >= hi:
                # The coordinator aborted it: markers landed at about the due time.
                self._markers_written(what, self.txns[what].started + TXN_TIMEOUT_MS / 1000 + ABORT_INTERVAL)
                self._settle_txn(what)
            elif kind == "pid" and now >= hi:
                del self.last_write[what]

    def _markers_written(self, idx: int, at: float) -> None:
        """tx<idx>'s markers landed at ``at``: its producer's state on those partitions ages from then."""
        t = self.txns[idx]
        for tp in t.partitions:
            for p in self.producers.values():
                if p.txn == idx and "kafka" in p.pid:
                    self.last_write[(p.pid["kafka"], *tp)] = at
        t.started, t.partitions = None, set()

    def _txn_ended(self, idx: int) -> None:
        self._markers_written(idx, time.monotonic())
        self._settle_txn(idx)

    # ------------------------------------------------------------------ set-up

    @initialize()
    def setup(self) -> None:
        self.pair.create_topics(self.topics, PARTITIONS)
        self.pair.find_coordinators(self.group, self.txn_ids)
        self.generation = self.pair.join_group(self.group, self.topics)

    # ------------------------------------------------------------------ coordinator rules

    @rule(who=st.sampled_from("ABC"), version=st.integers(0, 5),
          ids=st.sampled_from(["none", "own", "other", "pid_only", "epoch_only", "stale_epoch"]),
          timeout=st.sampled_from(["short", "short", "too_long"]))
    def init_producer_id(self, who, version, ids, timeout):
        self._clock()
        p = self.producers[who]
        other = self.producers["B" if who == "A" else "A"]
        v = self._versions(INIT_PID, 0, 5, version)

        def ids_for(side):
            if v < 3 or ids == "none":
                return -1, -1
            src = other if ids == "other" else p
            pid, epoch = src.pid.get(side.name, -1), src.epoch
            return {"own": (pid, epoch), "other": (pid, epoch), "pid_only": (pid, -1),
                    "epoch_only": (-1, epoch), "stale_epoch": (pid, epoch - 1)}[ids]

        tmo = TXN_TIMEOUT_MS if timeout == "short" else MAX_TIMEOUT_MS + 1
        answer, k = self._send(f"InitProducerId v{v} {who} ids={ids} timeout={timeout}", lambda s: req(
            INIT_PID, v, transactional_id=self.txn_ids[p.txn], transaction_timeout=ms(tmo),
            producer_id=ids_for(s)[0], producer_epoch=ids_for(s)[1]), retry=True)
        self._after_init(p, answer)

    def _after_init(self, p: Producer, answer) -> None:
        if answer["error_code"] != 0:
            return
        p.epoch = answer["producer_epoch"]
        p.seq.clear()
        p.last.clear()
        # The real ids come from the raw answers, read back through the pair's last calls.
        for side, raw in zip(self.pair.sides, self._raw):
            p.pid[side.name] = raw.producer_id
        if p.txn is not None:
            self._txn_ended(p.txn)

    def fast_forward_epoch(self, who: str, to: int = 32766) -> None:
        """InitProducerId without ids, pipelined, until ``who``'s epoch is ``to`` on both brokers.

        Not a rule: 32k round trips cost ~12 s a broker. Explicit cases (cases.py) call it to
        reach the end of the epoch range, where fencing must bump to 32767.
        """
        self._clock()
        p = self.producers[who]
        v = self._versions(INIT_PID, 3, 4, 4)
        entity = req(INIT_PID, v, transactional_id=self.txn_ids[p.txn], transaction_timeout=ms(TXN_TIMEOUT_MS),
                     producer_id=-1, producer_epoch=-1)
        def forward(side):
            epoch, last = -1, None
            for _ in range(to + 2000):
                want = min(256, to - epoch)
                if want <= 0:
                    break
                # Kafka answers CONCURRENT_TRANSACTIONS to some pipelined requests: count only bumps.
                for answer in side.conn.pipeline([entity] * want):
                    if answer.error_code == 0:
                        epoch, last = answer.producer_epoch, answer
            return last
        # Both brokers at once (each on its own connection): the suite's time, not the answers
        with ThreadPoolExecutor(len(self.pair.sides)) as pool:
            finals = list(pool.map(forward, self.pair.sides))
        self._raw = finals
        answer = self.pair.check(f"InitProducerId v{v} {who} x{to} (fast-forward)", finals)
        self._after_init(p, answer)

    @rule(version=st.integers(0, 5))
    def init_idempotent(self, version):
        self._clock()
        p = self.producers["I"]
        v = self._versions(INIT_PID, 0, 5, version)
        answer, _ = self._send(f"InitProducerId v{v} idempotent", lambda s: req(
            INIT_PID, v, transactional_id=None, transaction_timeout=ms(60_000),
            producer_id=-1, producer_epoch=-1), retry=True)
        self._after_init(p, answer)

    def _tp_list(self, which: str):
        return {"t0p0": [(0, 0)], "t0p1": [(0, 1)], "t1p2": [(1, 2)], "t0all": [(0, 0), (0, 1), (0, 2)],
                "both": [(0, 0), (1, 0)], "internal": [], "unknown": [], "t0p0+internal": [(0, 0)],
                "t0p9": []}[which]

    @rule(who=st.sampled_from("ABC"), version=st.integers(0, 3),
          which=st.sampled_from(["t0p0", "t0p1", "t1p2", "t0all", "both", "internal", "unknown",
                                 "t0p0+internal", "t0p9"]),
          epoch_delta=st.sampled_from([0, 0, 0, -1, 1]))
    def add_partitions(self, who, version, which, epoch_delta):
        self._clock()
        p = self.producers[who]
        v = self._versions(ADD_PARTITIONS, 0, 3, version)
        tps = self._tp_list(which)
        named: dict[str, list[int]] = {}
        for t, i in tps:
            named.setdefault(self.topics[t], []).append(i)
        if "internal" in which:
            named["__consumer_offsets"] = [0]
        if which == "unknown":
            named[f"{self.topics[0]}-nosuch"] = [0]
        if which == "t0p9":
            named[self.topics[0]] = [9]

        def make(s):
            base = (ADD_PARTITIONS, v)
            topics = tuple(part(base, "AddPartitionsToTxnTopic", name=n, partitions=tuple(ps))
                           for n, ps in named.items())
            return req(ADD_PARTITIONS, v, v3_and_below_transactional_id=self.txn_ids[p.txn],
                       v3_and_below_producer_id=p.pid.get(s.name, -1),
                       v3_and_below_producer_epoch=p.epoch + epoch_delta, v3_and_below_topics=topics)

        _answer, k = self._send(f"AddPartitionsToTxn v{v} {who} {which} epoch{epoch_delta:+d}", make, retry=True)
        if errors_of(k) == {0}:
            t = self.txns[p.txn]
            if t.started is None:
                t.started = time.monotonic()
            t.partitions |= set(tps)

    @rule(who=st.sampled_from("ABC"), version=st.integers(0, 4), epoch_delta=st.sampled_from([0, 0, -1, 1]))
    def add_offsets(self, who, version, epoch_delta):
        self._clock()
        p = self.producers[who]
        v = self._versions(ADD_OFFSETS, 0, 4, version)
        answer, _ = self._send(f"AddOffsetsToTxn v{v} {who} epoch{epoch_delta:+d}", lambda s: req(
            ADD_OFFSETS, v, transactional_id=self.txn_ids[p.txn], producer_id=p.pid.get(s.name, -1),
            producer_epoch=p.epoch + epoch_delta, group_id=self.group), retry=True)
        if answer["error_code"] == 0 and self.txns[p.txn].started is None:
            self.txns[p.txn].started = time.monotonic()

    @rule(who=st.sampled_from("ABC"), version=st.integers(0, 5),
          member=st.sampled_from(["none", "right", "wrong_generation", "unknown_member"]),
          offset=st.integers(0, 4), epoch_delta=st.sampled_from([0, 0, -1, 1]))
    def txn_offset_commit(self, who, version, member, offset, epoch_delta):
        self._clock()
        p = self.producers[who]
        v = self._versions(TXN_OFFSET_COMMIT, 0, 5, version)

        def make(s):
            gen, mid = {"none": (-1, ""), "right": (self.generation, s.member_ids[self.group]),
                        "wrong_generation": (self.generation + 5, s.member_ids[self.group]),
                        "unknown_member": (self.generation, "nobody-" + self.group)}[member]
            base = (TXN_OFFSET_COMMIT, v)
            prt = part(base, "TxnOffsetCommitRequestPartition", partition_index=0, committed_offset=offset,
                       committed_leader_epoch=-1, committed_metadata="")
            topic = part(base, "TxnOffsetCommitRequestTopic", name=self.topics[0], partitions=(prt,))
            return req(TXN_OFFSET_COMMIT, v, transactional_id=self.txn_ids[p.txn], group_id=self.group,
                       producer_id=p.pid.get(s.name, -1), producer_epoch=p.epoch + epoch_delta,
                       generation_id=gen, member_id=mid, group_instance_id=None, topics=(topic,))

        _answer, k = self._send(f"TxnOffsetCommit v{v} {who} member={member} offset={offset}", make,
                                retry=True)
        if v >= 5 and errors_of(k) == {0}:
            self._implicitly_added(p, None)

    @rule(who=st.sampled_from("ABC"), version=st.integers(0, 5), commit=st.booleans(),
          ids=st.sampled_from(["own", "own", "own", "other_pid", "stale_epoch", "bumped_epoch"]))
    def end_txn(self, who, version, commit, ids):
        self._clock()
        p = self.producers[who]
        other = self.producers["C" if p.txn == 0 else "A"]
        v = self._versions(END_TXN, 0, 5, version)

        def make(s):
            pid = (other if ids == "other_pid" else p).pid.get(s.name, -1)
            epoch = p.epoch + {"stale_epoch": -1, "bumped_epoch": 1}.get(ids, 0)
            return req(END_TXN, v, transactional_id=self.txn_ids[p.txn], producer_id=pid,
                       producer_epoch=epoch, committed=commit)

        answer, _ = self._send(f"EndTxn v{v} {who} {'commit' if commit else 'abort'} ids={ids}", make, retry=True)
        if answer["error_code"] == 0 and self.txns[p.txn].started is not None:
            self._txn_ended(p.txn)
        else:
            self._settle_txn(p.txn)
        if v >= 5 and answer["error_code"] == 0:
            # Transactions v2 (KIP-890): every EndTxn bumps the epoch (or rotates the producer
            # id) and answers the ids the next transaction uses.
            p.epoch = answer["producer_epoch"]
            p.seq.clear()
            p.last.clear()
            for side, raw in zip(self.pair.sides, self._raw):
                p.pid[side.name] = raw.producer_id

    def _implicitly_added(self, p: Producer, tp: tuple[int, int] | None) -> None:
        """Produce v12 / TxnOffsetCommit v5 register their partition in the transaction (KIP-890)."""
        t = self.txns[p.txn]
        if t.started is None:
            t.started = time.monotonic()
        if tp is not None:
            t.partitions.add(tp)

    # ------------------------------------------------------------------ produce

    @rule(who=st.sampled_from("ABCIN"), topic=st.integers(0, 1), partition=st.integers(0, 2),
          version=st.integers(3, 12), epoch_delta=st.sampled_from([0, 0, 0, 0, -1, 1]),
          seq=st.sampled_from(["next", "next", "next", "dup_last", "gap", "zero"]), count=st.integers(1, 3))
    def produce(self, who, topic, partition, version, epoch_delta, seq, count):
        self._clock()
        p = self.producers[who]
        tp = (topic, partition)
        v = self._versions(PRODUCE, 3, 12, version)
        epoch = p.epoch + epoch_delta if who != "N" else -1
        st_epoch, st_next = p.seq.get(tp, (None, 0))
        nxt = st_next if st_epoch == epoch else 0
        last = p.last.get(tp)
        if seq == "dup_last" and last is not None and last[0] == epoch:
            base_seq, count, tag = last[1], last[2], last[3]
        else:
            seq = "next" if seq == "dup_last" else seq
            base_seq = {"next": nxt, "gap": nxt + 2, "zero": 0}[seq]
            self.tags += 1
            tag = self.tags
        if who == "N":
            base_seq = -1

        def make(s):
            pid = p.pid.get(s.name, -1) if who != "N" else -1
            recs = [(f"{who}-{tag}-{i}".encode(), f"v{tag}.{i}".encode()) for i in range(count)]
            blob = build_batch(recs, producer_id=pid, producer_epoch=epoch if pid >= 0 else -1,
                               base_sequence=base_seq if pid >= 0 else -1, transactional=p.txn is not None)
            base = (PRODUCE, v)
            pd = part(base, "PartitionProduceData", index=partition, records=blob)
            td = part(base, "TopicProduceData", name=self.topics[topic], partition_data=(pd,))
            return req(PRODUCE, v, transactional_id=self.txn_ids[p.txn] if p.txn is not None else None,
                       acks=-1, timeout=ms(5000), topic_data=(td,))

        answer, _ = self._send(f"Produce v{v} {who} t{topic}p{partition} epoch{epoch_delta:+d} seq={seq}"
                               f"({base_seq}) n={count}", make)
        err = answer["responses"][0]["partition_responses"][0]["error_code"]
        if err == 0 and who != "N" and p.pid:
            if seq != "dup_last":
                p.seq[tp] = (epoch, base_seq + count)
                p.last[tp] = (epoch, base_seq, count, tag)
            if p.txn is None:
                self.last_write[(p.pid["kafka"], *tp)] = time.monotonic()
            elif v >= 12:
                self._implicitly_added(p, tp)

    # ------------------------------------------------------------------ reads

    def _fetch(self, topic: int, isolation: int, version: int):
        v = self._versions(FETCH, 4, 18, version)
        name = self.topics[topic]

        def make(s):
            base = (FETCH, v)
            parts = tuple(part(base, "FetchPartition", partition=i, current_leader_epoch=-1, fetch_offset=0,
                               last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
                          for i in range(PARTITIONS))
            ft = part(base, "FetchTopic", topic=name, topic_id=s.topic_ids[name], partitions=parts)
            replica = part(base, "ReplicaState", replica_id=-1, replica_epoch=-1) if v >= 15 else None
            return req(FETCH, v, cluster_id=None, replica_id=-1, replica_state=replica,
                       max_wait=ms(0), min_bytes=0, max_bytes=8 << 20, isolation_level=isolation,
                       session_id=0, session_epoch=-1, topics=(ft,), forgotten_topics_data=(), rack_id="")

        return self._send(f"Fetch v{v} t{topic} isolation={isolation}", make)

    @rule(topic=st.integers(0, 1), isolation=st.integers(0, 1), version=st.integers(4, 18))
    def fetch(self, topic, isolation, version):
        self._clock()
        self._fetch(topic, isolation, version)

    @rule(topic=st.integers(0, 1), isolation=st.integers(0, 1), earliest=st.booleans(), version=st.integers(2, 11))
    def list_offsets(self, topic, isolation, earliest, version):
        self._clock()
        v = self._versions(LIST_OFFSETS, 2, 11, version)

        def make(s):
            base = (LIST_OFFSETS, v)
            parts = tuple(part(base, "ListOffsetsPartition", partition_index=i, current_leader_epoch=-1,
                               timestamp=-2 if earliest else -1) for i in range(PARTITIONS))
            lt = part(base, "ListOffsetsTopic", name=self.topics[topic], partitions=parts)
            return req(LIST_OFFSETS, v, replica_id=-1, isolation_level=isolation, topics=(lt,),
                       timeout=ms(5000))

        self._send(f"ListOffsets v{v} t{topic} isolation={isolation} {'earliest' if earliest else 'latest'}", make)

    @rule(require_stable=st.booleans(), version=st.integers(7, 9))
    def offset_fetch(self, require_stable, version):
        self._clock()
        v = self._versions(OFFSET_FETCH, 7, 9, version)

        def make(s):
            base = (OFFSET_FETCH, v)
            if v >= 8:
                t = part(base, "OffsetFetchRequestTopics", name=self.topics[0], partition_indexes=(0, 1))
                g = part(base, "OffsetFetchRequestGroup", group_id=self.group, member_id=None,
                         member_epoch=-1, topics=(t,))
                return req(OFFSET_FETCH, v, groups=(g,), require_stable=require_stable)
            t = part(base, "OffsetFetchRequestTopic", name=self.topics[0], partition_indexes=(0, 1))
            return req(OFFSET_FETCH, v, group_id=self.group, topics=(t,), require_stable=require_stable)

        self._send(f"OffsetFetch v{v} require_stable={require_stable}", make)

    @rule()
    def describe_transactions(self):
        self._clock()
        self._send("DescribeTransactions", lambda s: req(DESCRIBE_TXNS, 0, transactional_ids=tuple(self.txn_ids)))

    @rule(version=st.integers(0, 2), states=st.sampled_from([(), ("Ongoing",), ("CompleteCommit", "CompleteAbort")]))
    def list_transactions(self, version, states):
        self._clock()
        v = self._versions(LIST_TXNS, 0, 2, version)
        mine = set(self.txn_ids)
        answers = []
        # Both brokers outlive one example: compare only this example's transactional ids.
        for side in self.pair.sides:
            r = side.call(req(LIST_TXNS, v, state_filters=states, producer_id_filters=(), duration_filter=-1,
                              transactional_id_pattern=None))
            answers.append(dataclasses.replace(r, transaction_states=tuple(
                t for t in r.transaction_states if t.transactional_id in mine)))
        self.pair.check(f"ListTransactions v{v} states={states}", answers)

    @rule(topic=st.integers(0, 1))
    def describe_producers(self, topic):
        self._clock()

        def make(s):
            base = (DESCRIBE_PRODUCERS, 0)
            t = part(base, "TopicRequest", name=self.topics[topic], partition_indexes=tuple(range(PARTITIONS)))
            return req(DESCRIBE_PRODUCERS, 0, topics=(t,))

        self._send(f"DescribeProducers t{topic}", make)

    # ------------------------------------------------------------------ time

    # No preconditions on these two: what is pending depends on the clock, and hypothesis needs
    # the same rules available when it replays an example. With nothing pending they only settle.
    @rule()
    def wait_txn_timeout(self):
        if all(t.started is None for t in self.txns):
            return self._clock()
        due = max(t.started for t in self.txns if t.started is not None) + TXN_TIMEOUT_MS / 1000
        time.sleep(max(0.0, due + ABORT_INTERVAL + MARGIN + 0.3 - time.monotonic()))
        self._clock()

    @rule()
    def wait_producer_expiry(self):
        if not self.last_write:
            return self._clock()
        due = max(self.last_write.values()) + EXPIRY
        time.sleep(max(0.0, due + EXPIRY_INTERVAL + ABORT_INTERVAL + MARGIN - time.monotonic()))
        self._clock()

    # ------------------------------------------------------------------ end

    def teardown(self) -> None:
        if self.generation < 0 or self.diverged:
            return
        self._clock()
        for topic in (0, 1):
            for isolation in (0, 1):
                self._fetch(topic, isolation, 16)
