"""Issue 32's raises to Kafka 4.4's newest versions, each compared with the reference Kafka:
FindCoordinator v6 (share-partition keys, KIP-932), WriteTxnMarkers v2 (the marker's
transaction version, KIP-1228), AddPartitionsToTxn v4-5 (the brokers' batched verification),
DeleteGroups v3 (a message per group)."""

from __future__ import annotations

import base64
import datetime
import time
import uuid

from minibroker_protocol.records import build_batch
from tests.reference.client import part, req

FIND_COORDINATOR = 10
COORDINATOR_NOT_AVAILABLE = 15


def _tid() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _find(version: int, key_type: int, keys: tuple[str, ...]):
    return req(FIND_COORDINATOR, version, key_type=key_type, coordinator_keys=keys)


def _settled(pair, version, key_type, keys):
    """Both answers once neither says COORDINATOR_NOT_AVAILABLE: Kafka answers it while it creates
    the coordinator's internal topic (minibroker creates it before answering)."""
    deadline = time.monotonic() + 30
    for _ in range(150):
        answers = pair.both(lambda s: _find(version, key_type, keys))
        if all(c.error_code != COORDINATOR_NOT_AVAILABLE for a in answers for c in a.coordinators):
            return answers
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    raise AssertionError(f"FindCoordinator {keys}: still COORDINATOR_NOT_AVAILABLE after 30 s")


def test_find_coordinator_v6_share_keys_match_kafka(differential_pair):
    pair = differential_pair
    tid = _tid()
    good = (f"share-g:{tid}:0", f"a:b:c:{tid}:1", f"share-g:{tid}:-1")
    answers = _settled(pair, 6, 2, good)
    pair.check("FindCoordinator v6: share-partition keys", answers)
    assert all(c.error_code == 0 and c.node_id == 1 for a in answers for c in a.coordinators), answers
    bad = (f"share-g:{tid}:x", f":{tid}:0", f"share-g:{tid}", "share-g:not-a-topic-id:0", "")
    pair.check("FindCoordinator v6: malformed share-partition keys", pair.both(lambda s: _find(6, 2, bad)))
    pair.check("FindCoordinator v5: the share key type is unknown", pair.both(lambda s: _find(5, 2, good[:1])))
    for key_type, keys in ((0, ("v6-group",)), (1, ("v6-txn",)), (3, ("z",))):
        pair.check(f"FindCoordinator v6: key type {key_type}", _settled(pair, 6, key_type, keys))


# -- WriteTxnMarkers v2 ----------------------------------------------------------------------------

PRODUCE, FETCH, INIT_PRODUCER_ID, ADD_PARTITIONS, WRITE_TXN_MARKERS = 0, 1, 22, 24, 27


def _ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


def _open_transaction(pair, topic: str, tid: str) -> dict[str, tuple[int, int]]:
    """A transaction with one batch in ``topic``-0 on each broker: side -> (producer id, epoch)."""
    _settled(pair, 6, 1, (tid,))
    ids = {}
    for s in pair.sides:
        deadline = time.monotonic() + 30
        for _ in range(150):  # Kafka loads a new __transaction_state partition first
            r = s.call(req(INIT_PRODUCER_ID, 4, transactional_id=tid, transaction_timeout=_ms(900_000),
                           producer_id=-1, producer_epoch=-1))
            if r.error_code not in (14, 15) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert r.error_code == 0, (s.name, r)
        ids[s.name] = (r.producer_id, r.producer_epoch)
    pair.check("AddPartitionsToTxn v3", pair.both(lambda s: req(
        ADD_PARTITIONS, 3, v3_and_below_transactional_id=tid, v3_and_below_producer_id=ids[s.name][0],
        v3_and_below_producer_epoch=ids[s.name][1], v3_and_below_topics=(part(
            (ADD_PARTITIONS, 3), "AddPartitionsToTxnTopic", name=topic, partitions=(0,)),))))

    def produce(s):
        pid, epoch = ids[s.name]
        blob = build_batch([(b"k", b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                           transactional=True)
        base = (PRODUCE, 9)
        pd = part(base, "PartitionProduceData", index=0, records=blob)
        return req(PRODUCE, 9, transactional_id=tid, acks=-1, timeout=_ms(5000),
                   topic_data=(part(base, "TopicProduceData", name=topic, partition_data=(pd,)),))
    pair.check("transactional produce", pair.both(produce))
    return ids


def test_write_txn_markers_v2_matches_kafka(differential_pair):
    pair = differential_pair
    topic, tid = f"wtm-{uuid.uuid4().hex[:8]}", f"wtm-{uuid.uuid4().hex[:8]}"
    pair.create_topics([topic], 1)
    ids = _open_transaction(pair, topic, tid)

    def markers(version, delta, tv=None, commit=True):
        def make(s):
            pid, epoch = ids[s.name]
            base = (WRITE_TXN_MARKERS, version)
            extra = {} if tv is None else {"transaction_version": tv}
            return req(WRITE_TXN_MARKERS, version, markers=(part(
                base, "WritableTxnMarker", producer_id=pid, producer_epoch=epoch + delta, transaction_result=commit,
                coordinator_epoch=0, topics=(part(base, "WritableTxnMarkerTopic", name=topic,
                                                  partition_indexes=(0,)),), **extra),))
        return make

    for what, make, code in [
        ("TV2, the producer's epoch, its transaction open", markers(2, 0, tv=2), 47),
        ("TV2, the next epoch: ends the transaction", markers(2, 1, tv=2), 0),
        ("TV2, that epoch again: a retry", markers(2, 1, tv=2), 0),
        ("TV2, an older epoch", markers(2, 0, tv=2), 47),
        ("v1, an older epoch", markers(1, 0), 47),
        ("TV1, the same epoch", markers(2, 1, tv=1, commit=False), 0),
        ("TV0 (the default), the same epoch", markers(2, 1, tv=0), 0),
    ]:
        answers = pair.both(make)
        pair.check(f"WriteTxnMarkers {what}", answers)
        assert [int(a.markers[0].topics[0].partitions[0].error_code) for a in answers] == [code] * 2, what

    def fetch(s):
        base = (FETCH, 12)
        fp = part(base, "FetchPartition", partition=0, current_leader_epoch=-1, fetch_offset=0,
                  last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
        return req(FETCH, 12, replica_id=-1, max_wait=_ms(0), min_bytes=0, max_bytes=1 << 20, isolation_level=1,
                   session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=(),
                   topics=(part(base, "FetchTopic", topic=topic, partitions=(fp,)),))
    pair.check("the log, read_committed", pair.both(fetch))


# -- AddPartitionsToTxn v4-5 -----------------------------------------------------------------------

def _init_transactional(pair, tid: str) -> dict[str, tuple[int, int]]:
    _settled(pair, 6, 1, (tid,))
    ids = {}
    for s in pair.sides:
        deadline = time.monotonic() + 30
        for _ in range(150):  # Kafka loads a new __transaction_state partition first
            r = s.call(req(INIT_PRODUCER_ID, 4, transactional_id=tid, transaction_timeout=_ms(900_000),
                           producer_id=-1, producer_epoch=-1))
            if r.error_code not in (14, 15) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert r.error_code == 0, (s.name, r)
        ids[s.name] = (r.producer_id, r.producer_epoch)
    return ids


def test_add_partitions_to_txn_v4_v5_match_kafka(differential_pair):
    pair = differential_pair
    topic, tid = f"apt-{uuid.uuid4().hex[:8]}", f"apt-{uuid.uuid4().hex[:8]}"
    pair.create_topics([topic], 2)
    ids = _init_transactional(pair, tid)

    def apt(version, *txns):
        """txns: (transactional id or None for the test's, pid delta, epoch delta, verify_only, [(topic, [p])])."""
        def make(s):
            pid, epoch = ids[s.name]
            base = (ADD_PARTITIONS, version)
            return req(ADD_PARTITIONS, version, transactions=tuple(
                part(base, "AddPartitionsToTxnTransaction", transactional_id=t or tid, producer_id=pid + dp,
                     producer_epoch=epoch + de, verify_only=vo, topics=tuple(
                         part(base, "AddPartitionsToTxnTopic", name=n, partitions=tuple(ps)) for n, ps in tps))
                for t, dp, de, vo, tps in txns))
        return make
    other = f"{topic}-none"
    for what, make in [
        ("v4 verify, not added", apt(4, (None, 0, 0, True, [(topic, [0])]))),
        ("v5 verify, not added", apt(5, (None, 0, 0, True, [(topic, [0])]))),
        ("v4 add", apt(4, (None, 0, 0, False, [(topic, [0])]))),
        ("v4 verify, one added one not", apt(4, (None, 0, 0, True, [(topic, [0, 1])]))),
        ("v5 verify, one added one not", apt(5, (None, 0, 0, True, [(topic, [0, 1])]))),
        ("verify, another epoch", apt(5, (None, 0, 1, True, [(topic, [0])]))),
        ("verify, another producer id", apt(5, (None, 1, 0, True, [(topic, [0])]))),
        ("verify, an unknown transactional id", apt(5, (f"{tid}-none", 0, 0, True, [(topic, [0])]))),
        ("verify, an unknown topic", apt(5, (None, 0, 0, True, [(other, [0])]))),
        ("add, an unknown topic", apt(4, (None, 0, 0, False, [(other, [0])]))),
        ("add, another epoch", apt(5, (None, 0, 1, False, [(topic, [1])]))),
        ("two transactions", apt(5, (None, 0, 0, True, [(topic, [0])]),
                                 (f"{tid}-other", 0, 0, True, [(topic, [0])]))),
        ("v5 add", apt(5, (None, 0, 0, False, [(topic, [1])]))),
        ("v5 verify, both added", apt(5, (None, 0, 0, True, [(topic, [0, 1])]))),
    ]:
        pair.check(f"AddPartitionsToTxn {what}", pair.both(make))
    # what the adds left in the transaction (partition lists compared as sets: Kafka's are in
    # hash order)
    described = pair.both(lambda s: req(65, 0, transactional_ids=(tid,)))
    k, m = ([(st.transaction_state, {t.topic: sorted(t.partitions) for t in st.topics})
             for st in d.transaction_states] for d in described)
    assert k == m == [("Ongoing", {topic: [0, 1]})], (k, m)


# -- DeleteGroups v3 -------------------------------------------------------------------------------

def test_delete_groups_v3_matches_kafka(differential_pair):
    """v3 adds a message per group (kio lacks v3: minibroker_protocol.schemas); Kafka 4.4
    leaves it null, for refused groups too."""
    from minibroker_protocol import codec
    from minibroker_protocol.build import build

    pair = differential_pair
    topic = f"dg-{uuid.uuid4().hex[:8]}"
    empty, busy = f"{topic}-empty", f"{topic}-busy"
    pair.create_topics([topic], 1)
    _settled(pair, 6, 0, (empty, busy))
    base = (8, 9)

    def commit(s):
        return req(8, 9, group_id=empty, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                   topics=(part(base, "OffsetCommitRequestTopic", name=topic, partitions=(part(
                       base, "OffsetCommitRequestPartition", partition_index=0, committed_offset=0,
                       committed_leader_epoch=-1, committed_metadata=None),)),))
    deadline = time.monotonic() + 30
    for _ in range(150):  # Kafka loads a new __consumer_offsets partition first
        answers = pair.both(commit)
        if answers[0].topics[0].partitions[0].error_code != 14 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    pair.check("OffsetCommit: a group with offsets and no members", answers)
    members = {}
    for s in pair.sides:  # a classic group with a member (JoinGroup v9: MEMBER_ID_REQUIRED, then in)
        def join(member_id, s=s):
            jb = (11, 9)
            return s.call(req(11, 9, group_id=busy, session_timeout=_ms(30_000), rebalance_timeout=_ms(30_000),
                              member_id=member_id, group_instance_id=None, protocol_type="consumer",
                              protocols=(part(jb, "JoinGroupRequestProtocol", name="range", metadata=b""),),
                              reason=None))
        first = join("")
        assert join(first.member_id).error_code == 0, s.name
        members[s.name] = first.member_id
    for version in (2, 3):
        answers = pair.both(lambda s, v=version: build(
            codec.request_type(42, v), groups_names=(busy, f"{topic}-none", "")))
        pair.check(f"DeleteGroups v{version}", answers)
        if version == 3:
            assert [r.error_message for a in answers for r in a.results] == [None] * 6, answers
    answers = pair.both(lambda s: build(codec.request_type(42, 3), groups_names=(empty,)))
    pair.check("DeleteGroups v3: the empty group", answers)
    assert [int(r.error_code) for a in answers for r in a.results] == [0, 0]


# -- ApiVersions v5 --------------------------------------------------------------------------------

def test_api_versions_v5_matches_kafka(differential_pair):
    """KIP-1242: the client names the cluster and node it means to reach (kio lacks v5:
    minibroker_protocol.schemas). Both right, or neither: the usual answer; another cluster or
    node: REBOOTSTRAP_REQUIRED and nothing listed; one without the other: INVALID_REQUEST."""
    pair = differential_pair
    cluster = {s.name: s.call(req(60, 0, include_cluster_authorized_operations=False)).cluster_id
               for s in pair.sides}
    for what, fields, code in [
        ("neither", lambda s: {}, 0),
        ("the right cluster and node", lambda s: {"cluster_id": cluster[s.name], "node_id": 1}, 0),
        ("another cluster", lambda s: {"cluster_id": "AAAAAAAAAAAAAAAAAAAAAA", "node_id": 1}, 129),
        ("another node", lambda s: {"cluster_id": cluster[s.name], "node_id": 7}, 129),
        ("the cluster alone", lambda s: {"cluster_id": cluster[s.name]}, 42),
        ("a node alone", lambda s: {"node_id": 1}, 42),
    ]:
        answers = pair.both(lambda s, f=fields: req(18, 5, client_software_name="differential",
                                                    client_software_version="1", **f(s)))
        assert [int(a.error_code) for a in answers] == [code, code], (what, answers)
        if code:
            pair.check(f"ApiVersions v5: {what}", answers)
        else:  # the lists themselves are compared key by key in test_api_versions_vs_kafka.py
            assert all(a.api_keys and a.finalized_features_epoch >= 0 for a in answers), what


# -- TxnOffsetCommit v6 ----------------------------------------------------------------------------

def test_txn_offset_commit_v6_matches_kafka(differential_pair):
    """KIP-1319: topics by id (kio lacks v6: minibroker_protocol.schemas), and the errors v6
    may answer: UNKNOWN_TOPIC_ID, GROUP_ID_NOT_FOUND."""
    pair = differential_pair
    topic, tid = f"toc-{uuid.uuid4().hex[:8]}", f"toc-{uuid.uuid4().hex[:8]}"
    group = f"{topic}-g"
    pair.create_topics([topic], 2)
    topic_ids = {s.name: s.call(req(3, 12, topics=(part((3, 12), "MetadataRequestTopic", name=topic, topic_id=None),),
                                    allow_auto_topic_creation=False, include_topic_authorized_operations=False)
                                ).topics[0].topic_id for s in pair.sides}
    _settled(pair, 6, 0, (group,))
    ids = _init_transactional(pair, tid)
    pair.check("AddOffsetsToTxn", pair.both(lambda s: req(25, 4, transactional_id=tid, producer_id=ids[s.name][0],
                                                          producer_epoch=ids[s.name][1], group_id=group)))
    unknown = uuid.uuid4()

    def commit(version, topics, generation=-1, member="", group_id=group):
        def make(s):
            base = (28, version)
            pid, epoch = ids[s.name]
            return req(28, version, transactional_id=tid, group_id=group_id, producer_id=pid, producer_epoch=epoch,
                       generation_id=generation, member_id=member, group_instance_id=None, topics=tuple(
                           part(base, "TxnOffsetCommitRequestTopic",
                                **({"topic_id": t(s)} if version >= 6 else {"name": topic}),
                                partitions=tuple(part(base, "TxnOffsetCommitRequestPartition", partition_index=p,
                                                      committed_offset=5, committed_leader_epoch=-1,
                                                      committed_metadata=None) for p in ps))
                           for t, ps in topics))
        return make
    mine = (lambda s: topic_ids[s.name])
    for what, make in [
        ("v6 by id, one partition unknown", commit(6, [(mine, [0, 1, 7])])),
        ("v6 an unknown topic id", commit(6, [(lambda s: unknown, [0])])),
        ("v6 a member of an unknown group", commit(6, [(mine, [0])], 3, "m1", f"{group}-none")),
        ("v5 a member of an unknown group", commit(5, [(mine, [0])], 3, "m1", f"{group}-none")),
        ("v6 a member of a group without members", commit(6, [(mine, [0])], 3, "m1")),
        ("v6 a generation alone", commit(6, [(mine, [0])], 3)),
        ("v6 a generation alone, an unknown group", commit(6, [(mine, [0])], 3, "", f"{group}-none2")),
        ("v5 a generation alone, an unknown group", commit(5, [(mine, [0])], 3, "", f"{group}-none3")),
        ("v6 a member alone, an unknown group", commit(6, [(mine, [0])], -1, "m1", f"{group}-none4")),
    ]:
        pair.check(f"TxnOffsetCommit {what}", pair.both(make))

    # a KIP-848 consumer group's member at another epoch: ILLEGAL_GENERATION below v6,
    # STALE_MEMBER_EPOCH from v6
    consumers = f"{topic}-cg"
    _settled(pair, 6, 0, (consumers,))
    member = uuid.uuid4().hex[:22]
    beats = pair.both(lambda s: req(68, 1, group_id=consumers, member_id=member, member_epoch=0, instance_id=None,
                                    rack_id=None, rebalance_timeout=_ms(30_000), subscribed_topic_names=(topic,),
                                    subscribed_topic_regex=None, server_assignor=None, topic_partitions=()))
    assert [b.error_code for b in beats] == [0, 0], beats
    epoch = beats[0].member_epoch
    assert beats[1].member_epoch == epoch
    pair.check("AddOffsetsToTxn (the consumer group)", pair.both(lambda s: req(
        25, 4, transactional_id=tid, producer_id=ids[s.name][0], producer_epoch=ids[s.name][1], group_id=consumers)))
    for version in (5, 6):
        for what, gen in (("its epoch", epoch), ("an older epoch", epoch - 1), ("a newer epoch", epoch + 1)):
            pair.check(f"TxnOffsetCommit v{version}: a consumer group member at {what}",
                       pair.both(commit(version, [(mine, [0])], gen, member, consumers)))
