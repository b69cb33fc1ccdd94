"""Fault rules without I/O: parsing (one-line refusals), matching, firing, and an error answer
in the shape of every API and version the broker serves."""

from __future__ import annotations

import dataclasses

import pytest

from minibroker.app import build_dispatcher
from minibroker.broker import Broker
from minibroker.config.options import Config
from minibroker.control.faults import subjects
from minibroker.control.faults.error_answers import NoErrorShape, error_entity, error_shape_problem
from minibroker.control.faults.rules import CRASH_POINTS, FaultBook, FaultError, RequestFacts, parse_rule
from minibroker_protocol import codec
from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.errors import ErrorCode

END_TXN = RequestFacts(ApiKey.EndTxn, 3, "app", "librdkafka", frozenset({"t1"}))


def test_a_rule_fires_on_the_next_count_matches():
    book = FaultBook([{"api": "EndTxn", "action": "error", "error": "CONCURRENT_TRANSACTIONS",
                       "count": 2}])
    fired = [book.decide(END_TXN) is not None for _ in range(4)]
    assert fired == [True, True, False, False]
    assert book.listing()[0]["matched"] == 4 and book.listing()[0]["fired"] == 2


def test_nth_fires_once_on_that_match():
    book = FaultBook([{"api": 26, "action": "drop-response", "nth": 3}])
    assert [book.decide(END_TXN) is not None for _ in range(5)] == [False, False, True, False, False]


def test_every_match_with_count_minus_one():
    book = FaultBook([{"api": "endtxn", "action": "delay", "delay_ms": 5, "count": -1}])
    assert all(book.decide(END_TXN) is not None for _ in range(50))


def test_a_seeded_probability_replays_exactly():
    def run():
        book = FaultBook([{"api": "EndTxn", "action": "disconnect", "probability": 0.3, "seed": 7}])
        return [book.decide(END_TXN) is not None for _ in range(200)]
    first = run()
    assert first == run() and 30 < sum(first) < 90


@pytest.mark.parametrize("field, value, matches", [
    ("transactional_id", "t1", True), ("transactional_id", "t2", False),
    ("client_id", "app", True), ("client_id", "other", False),
    ("client_software", "librdkafka", True), ("min_version", 4, False), ("max_version", 3, True),
    ("group", "g", False),
])
def test_matching_by_field(field, value, matches):
    book = FaultBook([{"api": "EndTxn", "action": "hold", field: value}])
    assert (book.decide(END_TXN) is not None) is matches


def test_topic_and_partition_matching():
    facts = RequestFacts(ApiKey.Produce, 9, topic_partitions=frozenset({("a", 0), ("a", 2)}))
    assert FaultBook([{"api": "Produce", "action": "hold", "topic": "a"}]).decide(facts)
    assert FaultBook([{"api": "Produce", "action": "hold", "topic": "a", "partition": 2}]).decide(facts)
    assert not FaultBook([{"api": "Produce", "action": "hold", "topic": "a", "partition": 1}]).decide(facts)
    assert not FaultBook([{"api": "Produce", "action": "hold", "topic": "b"}]).decide(facts)


def test_crash_points_are_asked_for_by_name_not_by_request():
    book = FaultBook([{"action": "crash", "point": "txn.after_prepare", "transactional_id": "t1"}])
    assert book.decide(END_TXN) is None
    assert book.at_point("txn.after_prepare", "t2") is None
    assert book.at_point("txn.after_prepare", "t1") is not None
    assert book.at_point("txn.after_prepare", "t1") is None  # count 1: spent
    assert set(CRASH_POINTS) >= {"txn.after_prepare", "txn.after_first_marker", "txn.before_complete"}


@pytest.mark.parametrize("spec, words", [
    ({"action": "error", "api": "EndTxn"}, "needs an error"),
    ({"action": "nope", "api": "EndTxn"}, "action must be one of"),
    ({"action": "hold"}, "needs api"),
    ({"action": "hold", "api": "Nope"}, "unknown API"),
    ({"action": "error", "api": "EndTxn", "error": "NONE"}, "not a fault"),
    ({"action": "hold", "api": "EndTxn", "error": 51}, "only for the actions error"),
    ({"action": "hold", "api": "EndTxn", "probability": 2}, "probability must be in"),
    ({"action": "hold", "api": "EndTxn", "partition": 1}, "partition needs topic"),
    ({"action": "throttle", "api": "Produce"}, "action throttle needs throttle_ms"),
    ({"action": "throttle", "api": "Produce", "throttle_ms": 0}, "throttle_ms must be >= 1"),
    ({"action": "delay", "api": "Produce", "delay_ms": 1, "throttle_ms": 5}, "only for the action throttle"),
    ({"action": "hold", "api": "EndTxn", "min_version": 4, "max_version": 2}, "min_version 4 > max_version 2"),
    ({"action": "crash", "point": "after-apply"}, "needs api"),
    ({"action": "disconnect", "api": "EndTxn", "when": "later"}, "before or after"),
    ({"action": "error", "api": "Fetch", "error": "NOT_LEADER_OR_FOLLOWER", "nth": "x"}, "nth must be an integer"),
])
def test_bad_rules_are_one_line(spec, words):
    with pytest.raises(FaultError) as info:
        parse_rule(spec, 1)
    assert words in str(info.value) and "\n" not in str(info.value)


def _served(tmp_path):
    broker = Broker(Config(data_dir=tmp_path, port=0, client_telemetry="on"))  # every API there is
    try:
        return {a.key: (a.min_version, a.max_version) for a in build_dispatcher(broker).apis.values()}
    finally:
        broker.logs.close_all()


def test_an_error_answer_encodes_for_every_served_api_and_version(tmp_path):
    """Every API an error rule is accepted for answers every version it serves with an error
    that encodes (Metadata below v13 asked for all topics, and the versions of some APIs without a
    top-level error code, have no place for one: disconnect);
    the others are refused when the rule is added, with the actions that do apply."""
    refused = set()
    for key, (lo, hi) in _served(tmp_path).items():
        if error_shape_problem(key) is not None:
            refused.add(ApiKey(key).name)
            with pytest.raises(FaultError, match="use the actions disconnect or drop-response"):
                parse_rule({"api": int(key), "action": "error", "error": "NOT_COORDINATOR"}, 1)
            continue
        for version in range(lo, hi + 1):
            req_cls = codec.request_type(key, version)
            try:
                entity = error_entity(key, version, _empty_request(req_cls), ErrorCode.not_coordinator, None)
            except NoErrorShape:  # answered by a disconnect
                # older versions of some APIs have no top-level error code (DescribeLogDirs v1-2,
                # ElectLeaders v0); Metadata below v13 asked for all topics has nowhere to put one
                top = {f.name for f in dataclasses.fields(codec.response_type(key, version))}
                assert (key == ApiKey.Metadata and version < 13) or "error_code" not in top
                continue
            assert codec.encode_response(1, entity)
    # Batched answers with a code per entry and nothing at the top.
    assert "EndTxn" not in refused and "Produce" not in refused and "TxnOffsetCommit" not in refused
    batched = {"CreateTopics", "DeleteTopics", "OffsetFetch", "DescribeGroups", "DeleteGroups",
               "DescribeProducers", "WriteTxnMarkers", "DescribeConfigs", "ConsumerGroupDescribe",
               "DescribeTransactions", "OffsetDelete", "Fetch", "ListGroups", "IncrementalAlterConfigs",
               "OffsetForLeaderEpoch", "DeleteRecords", "CreatePartitions",
               "CreateAcls", "DeleteAcls", "AlterUserScramCredentials", "ShareGroupDescribe",
               "DescribeShareGroupOffsets", "AlterConfigs", "DescribeTopicPartitions",
               "AlterClientQuotas", "StreamsGroupDescribe",
               "AlterReplicaLogDirs"}
    assert refused <= batched, refused


def _empty_request(cls):
    import dataclasses
    if cls is None:
        return None
    return type("Req", (), {f.name: None for f in dataclasses.fields(cls)})()


def test_the_error_echoes_the_partitions_asked_about():
    from minibroker_protocol.produce import ProducePartition, ProduceRequest, ProduceTopic
    req = ProduceRequest(9, "t", -1, 1000, [ProduceTopic("a", [ProducePartition(0, None),
                                                              ProducePartition(3, None)])])
    entity = error_entity(ApiKey.Produce, 9, req, ErrorCode.not_leader_or_follower, None)
    parts = entity.responses[0].partition_responses
    assert [(p.index, p.error_code, p.base_offset) for p in parts] == [
        (0, ErrorCode.not_leader_or_follower, -1), (3, ErrorCode.not_leader_or_follower, -1)]
    assert subjects.topic_partitions(req) == {("a", 0), ("a", 3)}
    assert subjects.transactional_ids(ApiKey.Produce, req) == {"t"}


def test_topics_named_by_id_are_matched_by_name():
    """Produce v13 and Fetch v13+ name topics by id only: the subjects of a rule or of the
    request log are still topic names, resolved by the broker; an unknown id names nothing."""
    import uuid

    from kio.schema.fetch.v13.request import FetchPartition, FetchTopic

    from minibroker_protocol.produce import ProducePartition, ProduceRequest, ProduceTopic
    known, unknown = uuid.uuid4(), uuid.uuid4()
    names = {known: "orders"}.get
    produce = ProduceRequest(13, None, -1, 1000, [ProduceTopic("", [ProducePartition(2, None)], known),
                                                   ProduceTopic("", [ProducePartition(0, None)], unknown)])
    assert subjects.topic_partitions(produce, names) == {("orders", 2)}
    assert subjects.topic_partitions(produce) == frozenset()
    fetch = type("Fetch", (), {"topics": (FetchTopic(topic_id=known, partitions=(
        FetchPartition(partition=1, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                       log_start_offset=-1, partition_max_bytes=1),)),)})()
    assert subjects.topic_partitions(fetch, names) == {("orders", 1)}
    rule = parse_rule({"api": "Produce", "action": "error", "error": "NOT_LEADER_OR_FOLLOWER",
                       "topic": "orders"}, 1)
    assert rule.matches(RequestFacts(ApiKey.Produce, 13, topic_partitions=subjects.topic_partitions(produce, names)))


def test_share_requests_name_their_groups_and_partitions():
    """Fault rules and the request log match the share APIs by group and topic-partition:
    ShareFetch/ShareAcknowledge name topics by id, the offsets APIs by name (per group for
    DescribeShareGroupOffsets), ShareGroupDescribe its groups in GroupIds."""
    import uuid

    from minibroker_protocol import codec
    known = uuid.uuid4()
    names = {known: "orders"}.get

    def req(key, version, **fields):
        return codec.request_type(key, version)(**fields)

    import kio.schema.alter_share_group_offsets.v0.request as alter
    import kio.schema.describe_share_group_offsets.v1.request as describe
    import kio.schema.share_fetch.v2.request as fetch
    sf = fetch.ShareFetchRequest(
        group_id="g", member_id="m", share_session_epoch=0, max_wait=__import__("datetime").timedelta(0),
        min_bytes=0, max_bytes=1, max_records=1, batch_size=1, share_acquire_mode=0, is_renew_ack=False,
        topics=(fetch.FetchTopic(topic_id=known, partitions=(
            fetch.FetchPartition(partition_index=3, acknowledgement_batches=()),)),),
        forgotten_topics_data=())
    assert subjects.topic_partitions(sf, names) == {("orders", 3)}
    assert subjects.groups(ApiKey.ShareFetch, sf) == {"g"}
    al = alter.AlterShareGroupOffsetsRequest(group_id="g", topics=(alter.AlterShareGroupOffsetsRequestTopic(
        topic_name="orders", partitions=(alter.AlterShareGroupOffsetsRequestPartition(
            partition_index=1, start_offset=5),)),))
    assert subjects.topic_partitions(al) == {("orders", 1)}
    de = describe.DescribeShareGroupOffsetsRequest(groups=(describe.DescribeShareGroupOffsetsRequestGroup(
        group_id="g2", topics=(describe.DescribeShareGroupOffsetsRequestTopic(
            topic_name="orders", partitions=(0, 2)),)),))
    assert subjects.topic_partitions(de) == {("orders", 0), ("orders", 2)}
    assert subjects.groups(ApiKey.DescribeShareGroupOffsets, de) == {"g2"}
    sd = req(ApiKey.ShareGroupDescribe, 1, group_ids=("a", "b"), include_authorized_operations=False)
    assert subjects.groups(ApiKey.ShareGroupDescribe, sd) == {"a", "b"}
