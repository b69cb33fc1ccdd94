"""The request handlers' ACL checks over the wire, in-process: a broker with --authorizer
standard and no super user, so the PLAINTEXT connection's User:ANONYMOUS is judged by the ACLs
the test gives the authorizer directly. (tests/differential/test_acls.py compares the same
checks with Kafka's answers.)"""

from __future__ import annotations

import datetime

import pytest

from minibroker.app import start
from minibroker.config.options import Config, FsyncPolicy
from minibroker.security.acl.model import AclBinding, AclOperation, PatternType, PermissionType, ResourceType
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.records import build_batch

from . import requests as rq
from .conftest import RawClient

ANON = "User:ANONYMOUS"


@pytest.fixture
async def secured(tmp_path):
    cfg = Config(port=0, data_dir=tmp_path / "data", fsync=FsyncPolicy("never"), num_partitions=1,
                 authorizer="standard", super_users="User:admin")
    running = await start(cfg)
    running.broker.create_topic("open", 1)
    running.broker.create_topic("closed", 1)
    client = await RawClient.connect(running.port)
    yield running, client
    await client.close()
    await running.close()


def allow(running, rtype, name, op, pattern=PatternType.LITERAL, perm=PermissionType.ALLOW):
    running.broker.authorizer.create([AclBinding(rtype, name, pattern, ANON, "*", op, perm)])


def init_pid(tid):
    return rq.req(22, 4, transactional_id=tid, transaction_timeout=datetime.timedelta(seconds=60),
                  producer_id=-1, producer_epoch=-1)


async def test_transactional_producer_checks(secured):
    running, c = secured
    assert (await c.call(init_pid("tx"))).error_code == ErrorCode.transactional_id_authorization_failed
    assert (await c.call(init_pid(None))).error_code == ErrorCode.cluster_authorization_failed
    allow(running, ResourceType.TRANSACTIONAL_ID, "tx", AclOperation.WRITE)
    allow(running, ResourceType.TOPIC, "open", AclOperation.WRITE)
    # WRITE on a topic is enough for an idempotent producer (Kafka's authorizeByResourceType)
    assert (await c.call(init_pid(None))).error_code == ErrorCode.none
    ip = await c.call(init_pid("tx"))
    assert ip.error_code == ErrorCode.none
    cls = type(rq.req(24, 3, v3_and_below_transactional_id="", v3_and_below_producer_id=0,
                      v3_and_below_producer_epoch=0, v3_and_below_topics=()))
    T = nested(cls, "AddPartitionsToTxnTopic")
    r = await c.call(build(cls, v3_and_below_transactional_id="tx", v3_and_below_producer_id=ip.producer_id,
                           v3_and_below_producer_epoch=ip.producer_epoch, v3_and_below_topics=(
                               build(T, name="open", partitions=(0,)), build(T, name="closed", partitions=(0,)))))
    codes = {t.name: [p.partition_error_code for p in t.results_by_partition] for t in r.results_by_topic_v3_and_below}
    assert codes == {"open": [ErrorCode.operation_not_attempted], "closed": [ErrorCode.topic_authorization_failed]}
    # a transactional batch without a transactional id in the request
    blob = build_batch([(b"k", b"v")], producer_id=ip.producer_id, producer_epoch=ip.producer_epoch,
                       base_sequence=0, transactional=True)
    r = await c.call(rq.produce("open", 0, blob))
    assert [p.error_code for t in r.responses for p in t.partition_responses] == \
        [ErrorCode.transactional_id_authorization_failed]
    # a plain batch: WRITE per topic, before the topic's existence
    for topic, code in (("open", ErrorCode.none), ("closed", ErrorCode.topic_authorization_failed),
                        ("missing", ErrorCode.topic_authorization_failed)):
        r = await c.call(rq.produce(topic, 0, rq.batch(1)))
        assert [p.error_code for t in r.responses for p in t.partition_responses] == [code], topic


async def test_consumer_checks(secured):
    running, c = secured
    allow(running, ResourceType.TOPIC, "op", AclOperation.READ, pattern=PatternType.PREFIXED)
    md = await c.call(rq.metadata(None))
    assert [t.name for t in md.topics] == ["open"]  # only what it may DESCRIBE (READ implies it)
    md = await c.call(rq.metadata(["closed", "nothing"]))
    assert {t.name: t.error_code for t in md.topics} == {
        "closed": ErrorCode.topic_authorization_failed, "nothing": ErrorCode.topic_authorization_failed}
    r = await c.call(rq.fetch("closed", [(0, 0, 1024)]))
    assert r.responses[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
    r = await c.call(rq.fetch("open", [(0, 0, 1024)]))
    assert r.responses[0].partitions[0].error_code == ErrorCode.none
    # a DENY wins over the prefix ALLOW
    allow(running, ResourceType.TOPIC, "open", AclOperation.READ, perm=PermissionType.DENY)
    r = await c.call(rq.fetch("open", [(0, 0, 1024)]))
    assert r.responses[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
    fc = await c.call(rq.req(10, 3, key="g", key_type=0))
    assert fc.error_code == ErrorCode.group_authorization_failed
    allow(running, ResourceType.GROUP, "g", AclOperation.READ)
    assert (await c.call(rq.req(10, 3, key="g", key_type=0))).error_code == ErrorCode.none
