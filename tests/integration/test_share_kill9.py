"""The broker killed with kill -9 under several share consumers in two groups (confluent-kafka's
ShareConsumer, explicit acknowledgement): after the restart (same port, same data) the same
consumers go on, and per group every record is acknowledged exactly once, a record whose
acknowledgement the broker confirmed is never delivered again, and no delivery goes beyond
``group.share.delivery.count.limit`` (5).
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

from minibroker.testing import MiniBroker

from .test_share_groups import _group_configs, _produce, _topic

pytestmark = pytest.mark.integration

RECORDS = 300
PARTITIONS = 3
GROUPS = ("g-kill-a", "g-kill-b")
CONSUMERS_PER_GROUP = 2
DELIVERY_LIMIT = 5


class Group:
    """What one group's consumers were given and what the broker confirmed."""

    def __init__(self, name: str, bs: str, topic: str) -> None:
        self.name = name
        self.consumers = []
        for _ in range(CONSUMERS_PER_GROUP):
            # a few records per poll: the kill comes with records acquired and acknowledged
            c = ShareConsumer({"bootstrap.servers": bs, "group.id": name,
                               "share.acknowledgement.mode": "explicit", "max.poll.records": 10})
            c.subscribe([topic])
            self.consumers.append(c)
        self.acked: Counter[tuple[int, int]] = Counter()  # confirmed ACCEPTs per record
        self.unsure: set[tuple[int, int]] = set()  # ACCEPTs whose commit failed (the kill)
        self.deliveries: list[tuple[tuple[int, int], int, bool]] = []  # (record, count, after kill)
        self.held: dict[ShareConsumer, list] = {}
        self.last_delivery = time.monotonic()

    def poll_once(self, after_kill: bool, hold: bool = False) -> None:
        """One poll per consumer, each record ACCEPTed and committed; with ``hold`` the records
        are kept acquired, unacknowledged, for the kill to interrupt."""
        for c in self.consumers:
            try:
                msgs = c.poll(0.3)
            except KafkaException:
                continue  # the broker is down or restarting: the client retries
            got = []
            for m in msgs:
                if m.error() is not None:
                    continue
                self.deliveries.append(((m.partition(), m.offset()), m.delivery_count(), after_kill))
                self.last_delivery = time.monotonic()
                got.append(m)
            if hold:
                self.held[c] = got
            else:
                self.accept(c, got)

    def accept(self, c, msgs) -> None:
        pending: dict[int, list[tuple[int, int]]] = {}
        for m in msgs:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
            pending.setdefault(m.partition(), []).append((m.partition(), m.offset()))
        if pending:
            try:
                results = c.commit_sync(10)
            except KafkaException:
                results = {}
            by_partition = {tp.partition: err for tp, err in results.items()}
            for p, keys in pending.items():
                if p in by_partition and by_partition[p] is None:
                    self.acked.update(keys)
                else:
                    self.unsure.update(keys)

    def accept_held(self) -> None:
        # explicit mode: the last poll's records are acknowledged before the next poll
        for c, msgs in self.held.items():
            self.accept(c, msgs)
        self.held.clear()

    def done(self) -> bool:
        """Every record confirmed, or unsure and not delivered again for 3 s (an ACCEPT the
        broker kept while the crash cut off its answer)."""
        covered = len(set(self.acked) | self.unsure) >= RECORDS
        return covered and (len(self.acked) >= RECORDS or time.monotonic() - self.last_delivery > 3)

    def close(self) -> None:
        for c in self.consumers:
            c.close()


def _run(groups: list[Group], until, timeout: float, after_kill: bool) -> None:
    deadline = time.monotonic() + timeout
    for _ in range(10_000):
        if until() or time.monotonic() > deadline:
            return
        for g in groups:
            g.poll_once(after_kill)


def test_kill_9_mid_consumption_acknowledges_each_record_once_per_group(tmp_path):
    with MiniBroker(name="share-kill-groups", data_dir=tmp_path / "data") as b:
        bs = b.bootstrap_servers
        topic = _topic(bs, partitions=PARTITIONS)
        for name in GROUPS:
            _group_configs(bs, name, share_auto_offset_reset="earliest")
        _produce(bs, topic, RECORDS, partitions=PARTITIONS)
        groups = [Group(name, bs, topic) for name in GROUPS]
        try:
            _run(groups, lambda: all(len(g.acked) >= RECORDS // 3 for g in groups), 60, False)
            assert all(len(g.acked) >= RECORDS // 3 for g in groups), [len(g.acked) for g in groups]
            assert all(len(g.acked) < RECORDS for g in groups), "the kill came too late to matter"
            for g in groups:
                g.poll_once(False, hold=True)
            held = {g.name: {(m.partition(), m.offset()) for ms in g.held.values() for m in ms} for g in groups}
            assert all(held.values()), held
            acked_before = {g.name: set(g.acked) for g in groups}
            b.kill9()
            b.start()  # the same port: the consumers reconnect by themselves
            for g in groups:
                g.accept_held()  # too late: the crash gave them back
            _run(groups, lambda: all(g.done() for g in groups), 120, True)
        finally:
            for g in groups:
                g.close()
        everything = {(i % PARTITIONS, i // PARTITIONS) for i in range(RECORDS)}
        for g in groups:
            assert g.done(), (g.name, len(g.acked), len(g.unsure))
            # exactly once: no record confirmed twice, none left out (an ACCEPT cut off by the
            # kill may have been kept by the broker without the client hearing of it)
            twice = {k: n for k, n in g.acked.items() if n > 1}
            assert not twice, (g.name, twice)
            assert set(g.acked) <= everything and everything - set(g.acked) <= g.unsure, g.name
            # a confirmed acknowledgement is never undone by the crash
            again = {k for k, _, after in g.deliveries if after and k in acked_before[g.name]}
            assert not again, (g.name, sorted(again)[:10])
            assert max(n for _, n, _ in g.deliveries) <= DELIVERY_LIMIT, g.name
            # what the kill interrupted came again (acquired but not acknowledged: Kafka's
            # persister never held the acquisition, so its count starts over) unless the broker
            # had kept an ACCEPT its client never heard of
            came_again = {k for k, _, after in g.deliveries if after}
            assert held[g.name] - set(acked_before[g.name]) <= came_again | set(g.acked), g.name
            assert not held[g.name] & set(g.acked) - came_again, g.name
        # each group on its own: a fresh member of either finds nothing left
        print("share-kill9:", [(g.name, len(g.acked), len(g.unsure), len(held[g.name]),
                                Counter(n for _, n, _ in g.deliveries)) for g in groups])
        late = [Group(name, b.bootstrap_servers, topic) for name in GROUPS]
        try:
            _run(late, lambda: False, 5, True)
        finally:
            for g in late:
                g.close()
        assert [len(g.deliveries) for g in late] == [0, 0]
