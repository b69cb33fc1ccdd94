"""ACLs with a real client: confluent-kafka (librdkafka) over SASL_PLAINTEXT/PLAIN against a
minibroker with ``--authorizer standard``.

A transactional producer without WRITE on its transactional id fails init_transactions with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; with it but without WRITE on the topic, its transaction
fails with TOPIC_AUTHORIZATION_FAILED (AddPartitionsToTxn) and must be aborted; once the admin
(a super user) has granted the ACLs with AdminClient.create_acls, the transaction commits and a
read_committed consumer in a group sees the record.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.integration.support import free_port

USERS = {"alice": "alice-secret", "admin": "admin-secret"}


@pytest.fixture
def acl_broker(broker_factory, tmp_path):
    users = tmp_path / "users"
    users.write_text("".join(f"{u}:{p}\n" for u, p in USERS.items()))
    listeners = f"PLAINTEXT://127.0.0.1:{free_port()},SASL_PLAINTEXT://127.0.0.1:{free_port()}"
    return broker_factory(listeners=listeners, sasl_users=users, sasl_mechanisms="PLAIN",
                          authorizer="standard", super_users="User:admin")


def _sasl(broker, user: str) -> dict:
    return {"bootstrap.servers": broker.addresses[1], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]}


def _grant(admin: AdminClient, *bindings: AclBinding) -> None:
    for f in admin.create_acls(list(bindings)).values():
        f.result(timeout=10)


def _acl(rtype, name, op, principal="User:alice") -> AclBinding:
    return AclBinding(rtype, name, ResourcePatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW)


def _producer(broker, tid: str) -> Producer:
    return Producer({**_sasl(broker, "alice"), "transactional.id": tid, "transaction.timeout.ms": 60_000,
                     "message.timeout.ms": 10_000})


def test_transactional_producer_needs_its_acls(acl_broker):
    topic, tid, group = "acl-orders", "acl-txn-1", "acl-group"
    admin = AdminClient(_sasl(acl_broker, "admin"))
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(timeout=10)

    # 1. no ACL on the transactional id
    p = _producer(acl_broker, tid)
    with pytest.raises(KafkaException) as e:
        p.init_transactions(10)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, e.value
    del p

    # 2. WRITE on the id, DESCRIBE on the topic (its metadata), no WRITE on it
    _grant(admin, _acl(ResourceType.TRANSACTIONAL_ID, tid, AclOperation.WRITE),
           _acl(ResourceType.TOPIC, topic, AclOperation.DESCRIBE))
    p = _producer(acl_broker, tid)
    p.init_transactions(10)
    p.begin_transaction()
    delivered: list = []
    p.produce(topic, b"refused", on_delivery=lambda err, msg: delivered.append(err))
    codes = set()
    try:
        p.commit_transaction(10)
    except KafkaException as ex:
        codes.add(ex.args[0].code())
        assert ex.args[0].txn_requires_abort(), ex
    p.flush(10)
    codes |= {err.code() for err in delivered if err is not None}
    assert KafkaError.TOPIC_AUTHORIZATION_FAILED in codes, (codes, delivered)
    # No abort_transaction: nothing joined the transaction, and EndTxn(abort) of an Empty
    # transaction is INVALID_TXN_STATE, fatal to librdkafka, from Kafka as from minibroker
    # (TransactionCoordinator.handleEndTransaction). A new producer with the id goes on.
    del p

    # 3. WRITE on the topic: the next transaction commits
    _grant(admin, _acl(ResourceType.TOPIC, topic, AclOperation.WRITE))
    p = _producer(acl_broker, tid)
    p.init_transactions(10)
    p.begin_transaction()
    p.produce(topic, b"committed")
    p.commit_transaction(10)

    # 4. alice reads it in a group with READ on the topic and the group
    _grant(admin, _acl(ResourceType.TOPIC, topic, AclOperation.READ),
           _acl(ResourceType.GROUP, group, AclOperation.READ))
    c = Consumer({**_sasl(acl_broker, "alice"), "group.id": group, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        values = []
        for _ in range(40):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                values.append(m.value())
                c.commit(m, asynchronous=False)
                break
        assert values == [b"committed"]
    finally:
        c.close()

    # the ACLs the admin made, as the AdminClient lists them
    listed = admin.describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None, AclOperation.ANY,
        AclPermissionType.ANY)).result(timeout=10)
    assert {(b.restype, b.name, b.operation) for b in listed} == {
        (ResourceType.TRANSACTIONAL_ID, tid, AclOperation.WRITE), (ResourceType.TOPIC, topic, AclOperation.DESCRIBE),
        (ResourceType.TOPIC, topic, AclOperation.WRITE), (ResourceType.TOPIC, topic, AclOperation.READ),
        (ResourceType.GROUP, group, AclOperation.READ)}
    # and they survive a restart (acls.json in the data dir)
    acl_broker.restart()
    listed = admin.describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(timeout=10)
    assert len(listed) == 5
