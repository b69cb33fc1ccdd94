"""Share groups (KIP-932) as Kafka 4.4 answers them: the same raw requests to the reference Kafka
and to minibroker, answer by answer (docs/design/share-groups.md §9).

Answers are reduced to what a client reads: error codes and messages, member epochs, heartbeat
intervals, assignments and acquired records by topic name (topic ids differ between the
brokers), acknowledgement errors, the lock timeout. Member ids are the client's own, so the same
on both sides.

Kafka initializes a group's share partitions off the request path (InitializeShareGroupState to
its share coordinator), minibroker at once; both answer the first heartbeat with an empty
assignment, and the test heartbeats each side until its assignment arrives (bounded) and then
compares where both ended.
"""

from __future__ import annotations

import datetime
import os
import time
import uuid

import pytest

from minibroker_protocol.records import build_batch
from tests.reference.client import part, req

HEARTBEAT, DESCRIBE, SHARE_FETCH, SHARE_ACK = 76, 77, 78, 79
DESCRIBE_OFFSETS = 90
PRODUCE = 0
TRACE = bool(os.environ.get("MINIBROKER_DIFF_TRACE"))


def _uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _member() -> str:
    return uuid.uuid4().hex[:22]


class KafkaRaced(Exception):
    """Kafka's answer came from the less usual side of a race inside Kafka (for example a
    piggybacked acknowledgement's state write finishing before the fetch that carried it):
    the scenario is not compared as it is but run once more."""


class Script:
    def __init__(self, pair, partitions: int = 1) -> None:
        self.pair = pair
        self.topic = _uid("st")
        pair.create_topics([self.topic], partitions)
        self.group = _uid("sg")
        pair.find_coordinators(self.group, [])
        self.names = {s.name: {v: k for k, v in s.topic_ids.items()} for s in pair.sides}
        self.ids = {s.name: s.topic_ids[self.topic] for s in pair.sides}
        self.epochs: dict[str, dict[str, int]] = {s.name: {} for s in pair.sides}

    def both(self, what: str, make, reduce, kafka_raced=None):
        answers = [reduce(s, s.call(make(s))) for s in self.pair.sides]
        k, m = answers
        if kafka_raced is not None and kafka_raced(k):
            raise KafkaRaced(f"{what}: Kafka answered {k}")
        assert k == m, f"{what}:\n  Kafka:      {k}\n  minibroker: {m}"
        if TRACE:
            print(f"{what}: {k}")
        return k

    def _name(self, s, topic_id) -> str:
        return "T" if topic_id == self.ids[s.name] else str(topic_id)

    # ---- heartbeat ------------------------------------------------------------------------
    def hb_request(self, member: str | None, epoch: int, *, group: str | None = None,
                   names: tuple[str, ...] | None = ("T",), rack: str | None = None):
        return req(HEARTBEAT, 1, group_id=self.group if group is None else group, member_id=member,
                   member_epoch=epoch, rack_id=rack,
                   subscribed_topic_names=None if names is None else tuple(
                       self.topic if n == "T" else n for n in names))

    def hb_reduce(self, s, r):
        return (r.error_code.name, r.error_message, r.member_epoch,
                int(r.heartbeat_interval.total_seconds() * 1000),
                None if r.assignment is None else sorted(
                    (self._name(s, t.topic_id), sorted(t.partitions)) for t in r.assignment.topic_partitions))

    def hb(self, what: str, member: str | None, epoch: int = 0, **kw):
        return self.both(what, lambda s: self.hb_request(member, epoch, **kw), self.hb_reduce)

    def join_until_assigned(self, member: str, partitions: int) -> int:
        """Join on both sides (the first answers compared), then heartbeat each until the
        assignment arrives; compare the answer that brought it. The member's epoch."""
        first = self.hb(f"{member} joins", member, 0)
        assert first[4] == [], first  # the empty, non-null first assignment
        final = []
        for s in self.pair.sides:
            epoch = first[2]
            deadline = time.monotonic() + 20
            for _ in range(200):
                r = s.call(self.hb_request(member, epoch, names=None))
                assert r.error_code == 0, (s.name, r)
                epoch = r.member_epoch
                if r.assignment is not None and r.assignment.topic_partitions:
                    final.append(self.hb_reduce(s, r))
                    break
                assert time.monotonic() < deadline, f"{s.name}: no assignment within 20 s"
                time.sleep(0.5)
            self.epochs[s.name][member] = epoch
        assert final[0] == final[1], f"the assignment:\n  Kafka:      {final[0]}\n  minibroker: {final[1]}"
        assert final[0][4] == [("T", list(range(partitions)))]
        return final[0][2]

    # ---- share fetch / acknowledge ---------------------------------------------------------------
    def fetch(self, what: str, member: str, epoch: int, *, partitions=(0,), acks=None,
              max_wait_ms: int = 0, version: int = 1, forget=(), top_only: bool = False,
              kafka_raced=None):
        def make(s):
            base = (SHARE_FETCH, version)
            topics = (part(base, "FetchTopic", topic_id=self.ids[s.name], partitions=tuple(
                part(base, "FetchPartition", partition_index=p, acknowledgement_batches=tuple(
                    part(base, "AcknowledgementBatch", first_offset=f, last_offset=la,
                         acknowledge_types=tuple(ts))
                    for f, la, ts in (acks or {}).get(p, ())))
                for p in partitions)),) if partitions else ()
            fields = dict(group_id=self.group, member_id=member, share_session_epoch=epoch,
                          max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1,
                          max_bytes=1 << 20, max_records=500, batch_size=500, topics=topics,
                          forgotten_topics_data=tuple(
                              part(base, "ForgottenTopic", topic_id=self.ids[s.name], partitions=tuple(forget))
                              for _ in [0] if forget))
            if version >= 2:
                fields.update(share_acquire_mode=0, is_renew_ack=False)
            return req(SHARE_FETCH, version, **fields)

        def reduce(s, r):
            parts = sorted(
                (self._name(s, t.topic_id), p.partition_index, p.error_code.name,
                 int(p.acknowledge_error_code), p.acknowledge_error_message,
                 [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records],
                 bool(p.records))
                for t in r.responses for p in t.partitions)
            # Kafka loads a share partition off the request path: whether an epoch-0 answer
            # on a partition not yet loaded lists it depends on that race (top_only)
            return (r.error_code.name, r.error_message,
                    int(r.acquisition_lock_timeout.total_seconds() * 1000), None if top_only else parts)

        return self.both(what, make, reduce, kafka_raced)

    def ack(self, what: str, member: str, epoch: int, acks: dict, *, version: int = 1,
            renew: bool = False):
        def make(s):
            base = (SHARE_ACK, version)
            fields = dict(group_id=self.group, member_id=member, share_session_epoch=epoch,
                          topics=(part(base, "AcknowledgeTopic", topic_id=self.ids[s.name], partitions=tuple(
                              part(base, "AcknowledgePartition", partition_index=p, acknowledgement_batches=tuple(
                                  part(base, "AcknowledgementBatch", first_offset=f, last_offset=la,
                                       acknowledge_types=tuple(ts)) for f, la, ts in batches))
                              for p, batches in acks.items())),))
            if version >= 2:
                fields["is_renew_ack"] = renew
            return req(SHARE_ACK, version, **fields)

        def reduce(s, r):
            out = [r.error_code.name, r.error_message,
                   sorted((p.partition_index, p.error_code.name, p.error_message)
                          for t in r.responses for p in t.partitions)]
            if version >= 2:
                out.append(int(r.acquisition_lock_timeout.total_seconds() * 1000))
            return tuple(out)

        return self.both(what, make, reduce)

    def produce(self, n: int, partition: int = 0) -> None:
        batch = build_batch([(None, b"v%d" % i) for i in range(n)])
        for s in self.pair.sides:
            base = (PRODUCE, 9)
            data = part(base, "PartitionProduceData", index=partition, records=batch)
            r = s.call(req(PRODUCE, 9, transactional_id=None, acks=-1,
                           timeout=datetime.timedelta(seconds=10),
                           topic_data=(part(base, "TopicProduceData", name=self.topic,
                                            partition_data=(data,)),)))
            assert r.responses[0].partition_responses[0].error_code == 0, (s.name, r)

    def describe_offsets(self, what: str):
        def make(s):
            base = (DESCRIBE_OFFSETS, 1)
            return req(DESCRIBE_OFFSETS, 1, groups=(part(
                base, "DescribeShareGroupOffsetsRequestGroup", group_id=self.group,
                topics=(part(base, "DescribeShareGroupOffsetsRequestTopic", topic_name=self.topic,
                             partitions=(0,)),)),))

        def reduce(s, r):
            return [(g.error_code.name, [(p.partition_index, p.start_offset, p.lag, p.error_code.name)
                                         for t in g.topics for p in t.partitions]) for g in r.groups]

        return self.both(what, make, reduce)


@pytest.fixture
def script(differential_pair):
    def make(partitions: int = 1) -> Script:
        return Script(differential_pair, partitions)
    return make


def test_share_apis_are_served_at_kafkas_versions(differential_pair):
    for key in (HEARTBEAT, DESCRIBE, SHARE_FETCH, SHARE_ACK, DESCRIBE_OFFSETS, 91, 92):
        k, m = (s.versions.get(key) for s in differential_pair.sides)
        assert k == m, (key, k, m)


def test_invalid_heartbeats(script):
    s = script()
    s.hb("empty member id", "")
    s.hb("a 37-character member id", "x" * 37)
    s.hb("joining without topics", _member(), 0, names=None)
    s.hb("epoch -2", _member(), -2)
    s.hb("a blank rack", _member(), 0, rack=" ")
    s.hb("a blank group id", _member(), 0, group=" ")
    s.hb("heartbeat of a group nobody created", _member(), 5, group=_uid("nogroup"))


def test_join_assignment_fencing_and_leave(script):
    s = script(partitions=3)
    m = _member()
    epoch = s.join_until_assigned(m, 3)
    s.hb("a heartbeat at the current epoch", m, epoch, names=None)
    s.hb("an epoch from the future", m, epoch + 5, names=None)
    s.hb("leave", m, -1, names=None)
    s.hb("after leaving", m, epoch, names=None)


def test_fetch_acknowledge_and_session_errors(script):
    s = script()
    m = _member()
    s.join_until_assigned(m, 1)
    s.fetch("opening a session on an empty partition", m, 0, top_only=True)
    s.fetch("an empty fetch: Kafka has loaded the partition (at latest) by its end", m, 1, max_wait_ms=1000,
            top_only=True)
    s.produce(10)
    s.fetch("the first delivery", m, 2, max_wait_ms=2000)
    s.fetch("the same session epoch again", m, 2)
    s.fetch("a new session carrying acknowledgements", m, 0, acks={0: [(0, 9, [1])]})
    s.fetch("a new session", m, 0)
    s.fetch("release 0-4, accept 5-9: the released come back", m, 1,
            acks={0: [(0, 9, [2, 2, 2, 2, 2, 1, 1, 1, 1, 1])]}, max_wait_ms=2000)
    s.ack("ShareAcknowledge at epoch 0", m, 0, {0: [(0, 0, [1])]})
    s.ack("an offset already accepted", m, 2, {0: [(7, 7, [1])]})
    s.ack("an offset past the acquired records", m, 3, {0: [(50, 50, [1])]})
    s.ack("type 4 on v1", m, 4, {0: [(0, 4, [4])]})
    s.ack("reject 0, accept 1-4", m, 5, {0: [(0, 0, [3]), (1, 4, [1])]})
    s.fetch("nothing left", m, 6)
    s.fetch("close the session", m, -1, partitions=())
    s.fetch("close it again", m, -1, partitions=())
    s.ack("ShareAcknowledge after the close", m, -1, {0: [(0, 0, [1])]})


def test_describe_renew_offsets_and_group_apis(script):
    s = script()
    m = _member()
    s.join_until_assigned(m, 1)
    s.fetch("open", m, 0, top_only=True)
    s.fetch("an empty fetch: Kafka has loaded the partition (at latest) by its end", m, 1, max_wait_ms=1000,
            top_only=True)
    s.produce(10)
    s.fetch("deliver", m, 2, max_wait_ms=2000)
    s.ack("renew 0-4 (v2)", m, 3, {0: [(0, 4, [4])]}, version=2, renew=True)
    s.ack("renew without IsRenewAck (v2)", m, 4, {0: [(0, 4, [4])]}, version=2)
    s.ack("accept everything", m, 5, {0: [(0, 9, [1])]}, version=2)

    nobody = _uid("none")

    def describe(side):
        return req(DESCRIBE, 1, group_ids=(s.group, nobody), include_authorized_operations=False)

    def reduce_describe(side, r):
        return [(g.error_code.name, g.error_message if g.error_code else None, g.group_state,
                 g.group_epoch, g.assignment_epoch, g.assignor_name,
                 [(x.member_epoch, x.client_host, sorted(x.subscribed_topic_names) == [s.topic],
                   [(s._name(side, t.topic_id), t.topic_name == s.topic, sorted(t.partitions))
                    for t in x.assignment.topic_partitions]) for x in g.members])
                for g in r.groups]

    s.both("ShareGroupDescribe", describe, reduce_describe)

    def list_share(side):
        return req(16, 5, states_filter=(), types_filter=("share",))

    s.both("ListGroups of type share",
           list_share, lambda side, r: sorted((g.group_state, g.protocol_type, g.group_type)
                                              for g in r.groups if g.group_id == s.group))
    for v in (5, 6):
        s.both(f"DescribeGroups v{v} of a share group",
               lambda side, v=v: req(15, v, groups=(s.group,), include_authorized_operations=False),
               lambda side, r: [(g.error_code.name, getattr(g, "error_message", None), g.group_state,
                                 g.protocol_type)
                                for g in r.groups])
    s.both("DeleteGroups of a share group with a member",
           lambda side: req(42, 2, groups_names=(s.group,)),
           lambda side, r: [(x.group_id == s.group, x.error_code.name) for x in r.results])


def test_describe_share_group_offsets_trails_by_one_write(script):
    s = script()
    m = _member()
    s.join_until_assigned(m, 1)
    s.describe_offsets("before any fetch (initializing: start -1)")
    s.fetch("open", m, 0, top_only=True)
    s.fetch("an empty fetch: Kafka has loaded the partition (at latest) by its end", m, 1, max_wait_ms=1000,
            top_only=True)
    s.produce(10)
    s.fetch("deliver", m, 2, max_wait_ms=2000)
    s.describe_offsets("records acquired, nothing written")
    s.ack("release 0-1, accept 2-9", m, 3, {0: [(0, 1, [2]), (2, 9, [1])]})
    s.describe_offsets("after the first write")
    s.fetch("the released ones again", m, 4, max_wait_ms=2000)
    s.ack("accept them", m, 5, {0: [(0, 1, [1])]})
    s.describe_offsets("after everything was accepted")


def test_a_closed_connection_gives_its_records_back(script):
    """The session remembers its connection: when it closes, the member's acquired records are
    released at once (ClientConnectionDisconnectListener), not after their lock."""
    from tests.reference.client import Connection

    s = script()
    m = _member()
    s.join_until_assigned(m, 1)
    s.fetch("open", m, 0, top_only=True)
    s.fetch("an empty fetch: Kafka has loaded the partition (at latest) by its end", m, 1, max_wait_ms=1000,
            top_only=True)
    s.produce(5)
    s.fetch("deliver", m, 2, max_wait_ms=2000)
    s.fetch("close", m, -1, partitions=())
    # a second connection opens a session, takes the records and goes away
    other = {}
    for side in s.pair.sides:
        conn = Connection(*side.conn.address)
        other[side.name] = conn
    m2 = _member()

    def on_other(epoch, max_wait_ms=0):
        return [other[side.name].call(_fetch_request(s, side, m2, epoch, max_wait_ms))
                for side in s.pair.sides]

    answers = on_other(0, 2000)
    if not any(p.acquired_records for r in answers for t in r.responses for p in t.partitions):
        answers = on_other(1, 2000)
    got = [sorted((a.first_offset, a.last_offset, a.delivery_count)
                  for t in r.responses for p in t.partitions for a in p.acquired_records) for r in answers]
    # released by the first session's close: the second delivery
    assert got[0] == got[1] == [(0, 4, 2)], got
    for conn in other.values():
        conn.close()
    time.sleep(1)  # both brokers notice the close
    s.fetch("a new session after the other connection closed", m, 0, max_wait_ms=2000)


def _fetch_request(s: Script, side, member: str, epoch: int, max_wait_ms: int):
    base = (SHARE_FETCH, 1)
    return req(SHARE_FETCH, 1, group_id=s.group, member_id=member, share_session_epoch=epoch,
               max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1, max_bytes=1 << 20,
               max_records=500, batch_size=500,
               topics=(part(base, "FetchTopic", topic_id=s.ids[side.name], partitions=(
                   part(base, "FetchPartition", partition_index=0, acknowledgement_batches=()),)),),
               forgotten_topics_data=())


def _group_configs(s: Script, **configs: str) -> None:
    api = (44, 1)
    r = s.pair.both(lambda side: req(44, 1, validate_only=False, resources=(
        part(api, "AlterConfigsResource", resource_type=32, resource_name=s.group,
             configs=tuple(part(api, "AlterableConfig", name=k.replace("_", "."), config_operation=0,
                                value=v) for k, v in configs.items())),)))
    assert [x.error_code for a in r for x in a.responses] == [0, 0], r


def test_delivery_limit_archives_and_earliest_reset(script):
    s = script()
    s.produce(4)  # before the group: only share.auto.offset.reset=earliest delivers them
    _group_configs(s, share_delivery_count_limit="2", share_auto_offset_reset="earliest")
    m = _member()
    s.join_until_assigned(m, 1)
    # Kafka delivers 0-3 in the epoch-0 answer or in the next one, as its load races
    s.fetch("open from the log start", m, 0, max_wait_ms=2000, top_only=True)
    s.fetch("the next fetch", m, 1, max_wait_ms=500, top_only=True)
    s.fetch("release 0-1, accept 2-3: 0-1 come back", m, 2, acks={0: [(0, 1, [2]), (2, 3, [1])]},
            max_wait_ms=2000)
    s.fetch("release them again: archived at the limit of 2", m, 3, acks={0: [(0, 1, [2])]})
    s.fetch("nothing more", m, 4)
    s.describe_offsets("all done with")
