"""Kafka and minibroker side by side: the same request to both, answers compared after normalising.

A ``Side`` is one broker as the differential test sees it: a raw connection, the topic ids and
member ids that broker made (requests that carry them are built per side), and its producer-id
naming. ``Pair.both(make)`` calls ``make(side)`` for each side to build that side's request and
returns both answers; ``Pair.check`` normalises and compares them.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
from dataclasses import dataclass, field

from tests.reference.client import Connection, api_versions, part, req

from .normalise import ProducerIds, diff, normalise

CREATE_TOPICS, METADATA, FIND_COORDINATOR, LIST_OFFSETS = 19, 3, 10, 2
JOIN_GROUP, SYNC_GROUP = 11, 14
RETRIABLE_SETUP = {5, 7, 14, 15, 3}  # leader/coordinator not ready yet, unknown topic just created


# MINIBROKER_DIFFERENTIAL_TRACE=1 prints every step's (agreed) answer: what a case really exercised.
TRACE = bool(os.environ.get("MINIBROKER_DIFFERENTIAL_TRACE"))


class Divergence(AssertionError):
    """Kafka and minibroker answered the same request differently."""


@dataclass
class Side:
    name: str
    conn: Connection
    versions: dict[int, tuple[int, int]] = field(default_factory=dict)
    topic_ids: dict[str, object] = field(default_factory=dict)
    member_ids: dict[str, str] = field(default_factory=dict)
    pids: ProducerIds = field(default_factory=ProducerIds)

    def call(self, entity):
        return self.conn.call(entity)


class Pair:
    def __init__(self, kafka_port: int, minibroker_port: int):
        self.kafka = Side("kafka", Connection("127.0.0.1", kafka_port))
        self.mini = Side("minibroker", Connection("127.0.0.1", minibroker_port))
        for s in self.sides:
            s.versions = api_versions(s.conn)
        # (Kafka's, minibroker's) SASL_PLAINTEXT listener address, when both have one
        self.sasl: tuple[tuple[str, int], tuple[str, int]] | None = None

    @property
    def sides(self) -> tuple[Side, Side]:
        return (self.kafka, self.mini)

    def close(self) -> None:
        for s in self.sides:
            s.conn.close()

    def version_range(self, api_key: int, lo: int, hi: int) -> tuple[int, int]:
        """The versions in [lo, hi] that both brokers serve."""
        for s in self.sides:
            smin, smax = s.versions[api_key]
            lo, hi = max(lo, smin), min(hi, smax)
        if lo > hi:
            raise RuntimeError(f"api {api_key}: no version both brokers serve in the asked range")
        return lo, hi

    def both(self, make):
        return tuple(s.call(make(s)) for s in self.sides)

    def check(self, what: str, answers) -> object:
        """Normalise both answers; raise ``Divergence`` when they differ. Returns Kafka's normalised answer."""
        k, m = answers
        nk, nm = normalise(k, self.kafka.pids), normalise(m, self.mini.pids)
        if nk != nm:
            lines = "\n  ".join(diff(nk, nm))
            raise Divergence(f"{what}: Kafka and minibroker answered differently:\n  {lines}")
        if TRACE:
            print(f"{what}: {nk}", file=sys.stderr)
        return nk

    # ----------------------------------------------------------------- setup of one example

    def create_topics(self, names: list[str], partitions: int) -> None:
        for s in self.sides:
            r = s.call(req(CREATE_TOPICS, 5, topics=tuple(
                part((CREATE_TOPICS, 5), "CreatableTopic", name=n, num_partitions=partitions,
                     replication_factor=1, assignments=(), configs=()) for n in names),
                timeout=datetime.timedelta(seconds=10), validate_only=False))
            bad = [(t.name, t.error_code) for t in r.topics if t.error_code]
            if bad:
                raise RuntimeError(f"{s.name}: CreateTopics failed: {bad}")
            self._await_leaders(s, names, partitions)

    def _await_leaders(self, s: Side, names: list[str], partitions: int) -> None:
        topics = tuple(part((METADATA, 12), "MetadataRequestTopic", name=n, topic_id=None) for n in names)
        deadline = time.monotonic() + 30
        while True:
            md = s.call(req(METADATA, 12, topics=topics, allow_auto_topic_creation=False,
                            include_topic_authorized_operations=False))
            ready = all(t.error_code == 0 and len(t.partitions) == partitions
                        and all(p.error_code == 0 and p.leader_id >= 0 for p in t.partitions)
                        for t in md.topics)
            if ready:
                ready = self._partitions_serve(s, names, partitions)
            if ready:
                for t in md.topics:
                    s.topic_ids[t.name] = t.topic_id
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{s.name}: topics {names} have no leaders after 30 s: {md.topics}")
            time.sleep(0.05)

    @staticmethod
    def _partitions_serve(s: Side, names: list[str], partitions: int) -> bool:
        # Kafka's Metadata names a leader before its replica manager has made the log; until then a
        # Fetch or ListOffsets answers NOT_LEADER_OR_FOLLOWER. Ask the partitions themselves.
        topics = tuple(part((LIST_OFFSETS, 7), "ListOffsetsTopic", name=n, partitions=tuple(
            part((LIST_OFFSETS, 7), "ListOffsetsPartition", partition_index=i, current_leader_epoch=-1,
                 timestamp=-1) for i in range(partitions))) for n in names)
        r = s.call(req(LIST_OFFSETS, 7, replica_id=-1, isolation_level=0, topics=topics))
        return all(p.error_code == 0 for t in r.topics for p in t.partitions)

    def find_coordinators(self, group: str, txn_ids: list[str]) -> None:
        """Both brokers create their coordinator state (and Kafka its internal topics) before the test."""
        keys = [(group, 0)] + [(t, 1) for t in txn_ids]
        for s in self.sides:
            for key, key_type in keys:
                deadline = time.monotonic() + 30
                while True:
                    r = s.call(req(FIND_COORDINATOR, 3, key=key, key_type=key_type))
                    if r.error_code == 0:
                        break
                    if r.error_code not in RETRIABLE_SETUP or time.monotonic() > deadline:
                        raise RuntimeError(f"{s.name}: FindCoordinator({key}) error {r.error_code}")
                    time.sleep(0.1)

    def join_group(self, group: str, topics: list[str]) -> int:
        """One consumer-group member on each broker (classic protocol); returns the generation."""
        gens = []
        for s in self.sides:
            base = dict(group_id=group, session_timeout=datetime.timedelta(seconds=45),
                        rebalance_timeout=datetime.timedelta(seconds=10), group_instance_id=None,
                        protocol_type="consumer")
            proto = part((JOIN_GROUP, 5), "JoinGroupRequestProtocol",
                         name="range", metadata=b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00")
            member = ""
            deadline = time.monotonic() + 30
            while True:
                r = s.call(req(JOIN_GROUP, 5, member_id=member, protocols=(proto,), **base))
                if r.error_code == 79:  # MEMBER_ID_REQUIRED: join again with the id given
                    member = r.member_id
                elif r.error_code == 0:
                    break
                elif time.monotonic() > deadline or r.error_code not in RETRIABLE_SETUP | {27}:
                    raise RuntimeError(f"{s.name}: JoinGroup error {r.error_code}")
                else:
                    time.sleep(0.1)
            member, gen = r.member_id, r.generation_id
            assign = part((SYNC_GROUP, 5), "SyncGroupRequestAssignment", member_id=member, assignment=b"")
            r = s.call(req(SYNC_GROUP, 5, group_id=group, generation_id=gen, member_id=member,
                           group_instance_id=None, protocol_type="consumer", protocol_name="range",
                           assignments=(assign,)))
            if r.error_code:
                raise RuntimeError(f"{s.name}: SyncGroup error {r.error_code}")
            s.member_ids[group] = member
            gens.append(gen)
        if gens[0] != gens[1]:
            raise Divergence(f"JoinGroup: generation {gens[0]} on Kafka, {gens[1]} on minibroker")
        return gens[0]
