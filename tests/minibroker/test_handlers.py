"""Handler semantics over the wire, against an in-process broker."""

from __future__ import annotations

import asyncio
import struct
import time

import pytest

from minibroker_protocol.errors import ErrorCode

from . import requests as rq


async def test_api_versions_all_versions(broker):
    c = await broker.connect()
    for v in range(0, 6):
        resp = await c.call(rq.api_versions(v))
        assert resp.error_code == ErrorCode.none
        keys = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}
        assert keys[18] == (0, 5)
        assert keys[0][0] == 3 and keys[1][0] == 4


async def test_api_versions_unsupported_version_gets_v0_answer(broker):
    c = await broker.connect()
    # v99 of ApiVersions, flexible-looking header: Kafka answers in v0 format.
    body = struct.pack(">hhih", 18, 99, 7, 3) + b"abc" + b"\x00"
    await c.send_raw(struct.pack(">i", len(body)) + body)
    corr, resp = await c.recv(18, 0)
    assert corr == 7
    assert resp.error_code == ErrorCode.unsupported_version
    assert [(a.api_key, a.min_version, a.max_version) for a in resp.api_keys] == [(18, 0, 5)]
    # the connection stays usable
    assert (await c.call(rq.api_versions(3))).error_code == ErrorCode.none


async def test_api_versions_invalid_software_name(broker):
    c = await broker.connect()
    resp = await c.call(rq.req(18, 3, client_software_name="-bad-", client_software_version="1"))
    assert resp.error_code == ErrorCode.invalid_request


@pytest.mark.parametrize("header", [
    struct.pack(">hhih", 9999, 0, 1, -1),   # unknown api key
    struct.pack(">hhih", 3, 99, 1, -1),     # Metadata v99
    struct.pack(">hhih", 0, 1, 1, -1),      # Produce v1 (below Kafka 4's minimum)
    struct.pack(">hh", 3, 1),               # truncated header
])
async def test_unserviceable_requests_close_the_connection(broker, header):
    bad = await broker.connect()
    await bad.send_raw(struct.pack(">i", len(header)) + header)
    assert await bad.closed()
    good = await broker.connect()
    assert (await good.call(rq.api_versions())).error_code == ErrorCode.none


async def test_pipelined_answers_keep_request_order(broker):
    c = await broker.connect()
    await c.call(rq.metadata(["pipe"]))
    # A long-poll fetch first, then quick requests behind it on the same connection.
    frames = c.frame(rq.fetch("pipe", [(0, 0, 1 << 20)], max_wait_ms=300))
    for _ in range(4):
        frames += c.frame(rq.api_versions())
    t0 = time.monotonic()
    await c.send_raw(frames)
    corr, fetch = await c.recv(1, 12)
    assert corr == c.corr - 4
    assert time.monotonic() - t0 >= 0.25  # it really waited
    for i in range(4):
        corr, _ = await c.recv(18, 3)
        assert corr == c.corr - 3 + i


async def test_long_poll_wakes_on_produce(broker):
    c = await broker.connect()
    p = await broker.connect()
    await c.call(rq.metadata(["wake"]))
    task = asyncio.ensure_future(c.call(rq.fetch("wake", [(0, 0, 1 << 20)], max_wait_ms=5000)))
    await asyncio.sleep(0.2)
    t0 = time.monotonic()
    resp = await p.call(rq.produce("wake", 0, rq.batch(3)))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none
    fetched = await asyncio.wait_for(task, 5)
    assert time.monotonic() - t0 < 2
    part = fetched.responses[0].partitions[0]
    assert part.high_watermark == 3 and len(part.records) > 0


async def test_produce_assigns_offsets_and_fetch_returns_batches(broker):
    c = await broker.connect()
    await c.call(rq.metadata(["po"]))
    offsets = []
    for _ in range(3):
        resp = await c.call(rq.produce("po", 1, rq.batch(4)))
        pr = resp.responses[0].partition_responses[0]
        assert pr.error_code == ErrorCode.none
        offsets.append(pr.base_offset)
    assert offsets == [0, 4, 8]
    resp = await c.call(rq.fetch("po", [(1, 5, 1 << 20)]))
    part = resp.responses[0].partitions[0]
    assert part.high_watermark == 12 and part.log_start_offset == 0
    # fetch at offset 5 starts with the batch that contains it (base offset 4)
    assert struct.unpack_from(">q", part.records, 0)[0] == 4
    # offset beyond the end
    resp = await c.call(rq.fetch("po", [(1, 13, 1 << 20)]))
    assert resp.responses[0].partitions[0].error_code == ErrorCode.offset_out_of_range


async def test_fetch_max_bytes_and_first_batch_always_whole(broker):
    c = await broker.connect()
    await c.call(rq.metadata(["mb"]))
    b = rq.batch(5, size=200)
    for _ in range(10):
        await c.call(rq.produce("mb", 0, b))
    # partition limit smaller than one batch: still one whole batch (KIP-74)
    resp = await c.call(rq.fetch("mb", [(0, 0, 10)]))
    assert len(resp.responses[0].partitions[0].records) == len(b)
    # limit of 2.5 batches → 2 batches
    resp = await c.call(rq.fetch("mb", [(0, 0, int(len(b) * 2.5))]))
    assert len(resp.responses[0].partitions[0].records) == 2 * len(b)
    # total max_bytes caps the sum across partitions
    resp = await c.call(rq.fetch("mb", [(0, 0, 1 << 20), (1, 0, 1 << 20)], max_bytes=3 * len(b)))
    assert len(resp.responses[0].partitions[0].records) == 3 * len(b)


async def test_produce_errors(broker):
    c = await broker.connect()
    await c.call(rq.metadata(["pe"]))
    def err(resp):
        pr = resp.responses[0].partition_responses[0]
        return pr.error_code
    assert err(await c.call(rq.produce("nope", 0, rq.batch()))) == ErrorCode.unknown_topic_or_partition
    assert err(await c.call(rq.produce("pe", 7, rq.batch()))) == ErrorCode.unknown_topic_or_partition
    bad = bytearray(rq.batch())
    bad[-1] ^= 0xFF
    assert err(await c.call(rq.produce("pe", 0, bytes(bad)))) == ErrorCode.corrupt_message
    assert err(await c.call(rq.produce("pe", 0, rq.batch(200, size=1000)))) == ErrorCode.message_too_large
    assert err(await c.call(rq.produce("pe", 0, rq.batch() + rq.batch()))) == ErrorCode.invalid_record
    assert err(await c.call(rq.produce("pe", 0, rq.batch(), acks=2))) == ErrorCode.invalid_required_acks
    # nothing of the above reached the log
    lo = await c.call(rq.list_offsets("pe", 0, -1))
    assert lo.topics[0].partitions[0].offset == 0


async def test_acks0_produce_has_no_answer_and_error_disconnects(broker):
    c = await broker.connect()
    await c.call(rq.metadata(["a0"]))
    await c.send_raw(c.frame(rq.produce("a0", 0, rq.batch(2), acks=0)))
    resp = await c.call(rq.list_offsets("a0", 0, -1))  # the next answer is this one
    assert resp.topics[0].partitions[0].offset == 2
    await c.send_raw(c.frame(rq.produce("missing-topic", 0, rq.batch(2), acks=0)))
    assert await c.closed()


async def test_list_offsets(broker):
    c = await broker.connect()
    await c.call(rq.metadata(["lo"]))
    await c.call(rq.produce("lo", 0, rq.batch(3, ts=1_000_000)))
    await c.call(rq.produce("lo", 0, rq.batch(3, ts=2_000_000)))
    def first(resp):
        p = resp.topics[0].partitions[0]
        return p.error_code, p.offset, p.timestamp
    assert first(await c.call(rq.list_offsets("lo", 0, -2))) == (0, 0, -1)
    assert first(await c.call(rq.list_offsets("lo", 0, -1))) == (0, 6, -1)
    assert first(await c.call(rq.list_offsets("lo", 0, 1_000_001))) == (0, 1, 1_000_001)
    assert first(await c.call(rq.list_offsets("lo", 0, 1_500_000))) == (0, 3, 2_000_000)
    assert first(await c.call(rq.list_offsets("lo", 0, 9_000_000))) == (0, -1, -1)
    assert first(await c.call(rq.list_offsets("lo", 0, -3))) == (0, 5, 2_000_002)
    assert first(await c.call(rq.list_offsets("nope", 0, -1)))[0] == ErrorCode.unknown_topic_or_partition


async def test_metadata_auto_create_and_errors(broker):
    c = await broker.connect()
    resp = await c.call(rq.metadata(["auto-a"]))
    t = resp.topics[0]
    assert t.error_code == ErrorCode.none and len(t.partitions) == 2
    assert resp.brokers[0].port == broker.port
    resp = await c.call(rq.metadata(["no-auto"], auto=False))
    assert resp.topics[0].error_code == ErrorCode.unknown_topic_or_partition
    resp = await c.call(rq.metadata(["bad name!"]))
    assert resp.topics[0].error_code == ErrorCode.invalid_topic_exception
    resp = await c.call(rq.metadata(None))
    assert [t.name for t in resp.topics] == ["auto-a"]
    # v0: an empty list means all topics
    resp = await c.call(rq.metadata([], version=0))
    assert [t.name for t in resp.topics] == ["auto-a"]


async def test_create_topics_errors_and_describe_configs(broker):
    c = await broker.connect()
    resp = await c.call(rq.create_topics([
        ("ct-ok", 3, 1, {"retention.ms": "1000"}),
        ("ct-ok", 1, 1, None),
    ]))
    assert [r.error_code for r in resp.topics] == [ErrorCode.invalid_request] * 2
    resp = await c.call(rq.create_topics([
        ("ct-ok", 3, -1, {"retention.ms": "1000"}),
        ("bad/name", 1, 1, None),
        ("ct-rf", 1, 3, None),
        ("ct-parts", 0, 1, None),
        ("ct-cfg", 1, 1, {"no.such.config": "1"}),
        ("ct-validate", 1, 1, None),
    ]))
    codes = {r.name: r.error_code for r in resp.topics}
    assert codes == {"ct-ok": 0, "bad/name": ErrorCode.invalid_topic_exception,
                     "ct-rf": ErrorCode.invalid_replication_factor,
                     "ct-parts": ErrorCode.invalid_partitions, "ct-cfg": ErrorCode.invalid_config,
                     "ct-validate": 0}
    ok = resp.topics[0]
    assert ok.num_partitions == 3 and ok.topic_id is not None
    assert {c_.name: c_.value for c_ in ok.configs}["retention.ms"] == "1000"
    resp = await c.call(rq.create_topics([("ct-ok", 1, 1, None)]))
    assert resp.topics[0].error_code == ErrorCode.topic_already_exists
    resp = await c.call(rq.create_topics([("ct-v", 1, 1, None)], validate_only=True))
    assert resp.topics[0].error_code == ErrorCode.none
    md = await c.call(rq.metadata(["ct-v"], auto=False))
    assert md.topics[0].error_code == ErrorCode.unknown_topic_or_partition

    from kio.index import load_request_schema

    from minibroker_protocol.build import build, nested
    cls = load_request_schema(32, 4)
    R = nested(cls, "DescribeConfigsResource")
    resp = await c.call(build(cls, resources=(
        build(R, resource_type=2, resource_name="ct-ok", configuration_keys=None),
        build(R, resource_type=4, resource_name="1", configuration_keys=("num.partitions",)),
        build(R, resource_type=2, resource_name="missing", configuration_keys=None),
    ), include_synonyms=True, include_documentation=False))
    topic, brk, missing = resp.results
    cfg = {e.name: (e.value, e.config_source) for e in topic.configs}
    assert cfg["retention.ms"] == ("1000", 1)
    assert cfg["cleanup.policy"] == ("delete", 5)
    assert [(e.name, e.value) for e in brk.configs] == [("num.partitions", "2")]
    assert missing.error_code == ErrorCode.unknown_topic_or_partition


async def test_delete_topics(broker):
    c = await broker.connect()
    await c.call(rq.create_topics([("del-me", 1, 1, None)]))
    await c.call(rq.produce("del-me", 0, rq.batch()))
    resp = await c.call(rq.req(20, 5, topic_names=("del-me", "never-was"),
                               timeout=__import__("datetime").timedelta(seconds=5)))
    assert [(r.name, r.error_code) for r in resp.responses] == [
        ("del-me", 0), ("never-was", ErrorCode.unknown_topic_or_partition)]
    md = await c.call(rq.metadata(["del-me"], auto=False))
    assert md.topics[0].error_code == ErrorCode.unknown_topic_or_partition


async def test_describe_cluster(broker):
    c = await broker.connect()
    resp = await c.call(rq.req(60, 1, include_cluster_authorized_operations=False, endpoint_type=1))
    assert resp.error_code == 0 and resp.brokers[0].port == broker.port
    assert resp.cluster_id == broker.broker.cluster_id
    resp = await c.call(rq.req(60, 1, include_cluster_authorized_operations=False, endpoint_type=2))
    assert resp.error_code == ErrorCode.unsupported_endpoint_type


async def test_find_coordinator(broker):
    c = await broker.connect()
    resp = await c.call(rq.req(10, 4, key_type=0, coordinator_keys=("g1", "g2")))
    assert [(x.key, x.node_id, x.error_code) for x in resp.coordinators] == [("g1", 1, 0), ("g2", 1, 0)]
    resp = await c.call(rq.req(10, 1, key="g", key_type=0))
    assert resp.node_id == 1 and resp.port == broker.port
    resp = await c.call(rq.req(10, 1, key="g", key_type=7))
    assert resp.error_code == ErrorCode.invalid_request


async def test_client_control_batches_are_refused(broker):
    from minibroker_protocol.records import build_control_batch
    c = await broker.connect()
    await c.call(rq.metadata(["ctl"]))
    marker = build_control_batch(producer_id=1, producer_epoch=0, commit=True, coordinator_epoch=0)
    resp = await c.call(rq.produce("ctl", 0, marker))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.invalid_record


async def test_a_default_topic_never_decodes_records_but_a_compacted_one_does(broker, monkeypatch):
    """The record-level rules (protocol/record_checks.py) are per record: on a topic with the
    default configs Produce reads only the batch header; cleanup.policy=compact needs every key."""
    from minibroker.handlers import produce as handler
    decoded = []
    real = handler.check_records

    def counting(*args, **kwargs):
        decoded.append(args[4])
        return real(*args, **kwargs)

    monkeypatch.setattr(handler, "check_records", counting)
    c = await broker.connect()
    await c.call(rq.create_topics([("plain", 1, 1, None), ("keyed", 1, 1, {"cleanup.policy": "compact"})]))
    for topic in ("plain", "keyed"):
        resp = await c.call(rq.produce(topic, 0, rq.batch(3)))
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none
    assert decoded == ["keyed-0"]
