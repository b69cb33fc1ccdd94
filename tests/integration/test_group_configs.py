"""Group configs (GROUP config resources) with real admin clients, across restarts, and the KIP-848
coordinator honouring them.

confluent-kafka's AdminClient (ConfigResource(ResourceType.GROUP, ...), which librdkafka sends
as config resource type 32) and the stock Java Admin 4.4 (tests/integration/java/GroupConfigs.java,
what kafka-configs.sh --entity-type groups runs) set, describe, refuse and delete them; a kill -9
and a clean restart keep them. A group's consumer.session.timeout.ms and
consumer.heartbeat.interval.ms override the broker's for that group's ConsumerGroupHeartbeat.
"""

from __future__ import annotations

import datetime
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from minibroker.testing import MiniBroker, requests_seen
from tests.reference.client import Connection, req

from . import java_client
from .clients import create_topic, unique_topic

DYNAMIC_GROUP_CONFIG, DEFAULT_CONFIG = 8, 5
HEARTBEAT = 68
UNKNOWN_MEMBER_ID = 25


@pytest.fixture(scope="module")
def java_admin():
    return java_client.json_driver("GroupConfigs")


def _alter(admin: AdminClient, group: str, **configs: str | None):
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.DELETE
                           if v is None else AlterConfigOpType.SET) for k, v in configs.items()]
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    return admin.incremental_alter_configs([res])[res].result(timeout=20)


def _describe(admin: AdminClient, group: str) -> dict[str, tuple[str, int]]:
    res = ConfigResource(ResourceType.GROUP, group)
    got = admin.describe_configs([res])[res].result(timeout=20)
    return {name: (e.value, e.source) for name, e in got.items()}


def test_confluent_and_java_admins_set_group_configs_that_survive_restarts(java_admin):
    with MiniBroker(name="group-configs") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        before = _describe(admin, "gc-app")
        assert before["consumer.session.timeout.ms"] == ("45000", DEFAULT_CONFIG)
        assert before["share.delivery.count.limit"] == ("5", DEFAULT_CONFIG)
        assert "consumer.assignor.offload.enable" not in before  # internal: listed only when set

        _alter(admin, "gc-app", consumer_session_timeout_ms="50000", share_delivery_count_limit="3")
        with pytest.raises(Exception, match="share.record.lock.duration.ms must be in the range 15000 to "
                                            "60000 inclusive"):
            _alter(admin, "gc-app", share_record_lock_duration_ms="1000")
        with pytest.raises(Exception, match="Unknown group config name: bogus"):
            _alter(admin, "gc-app", bogus="1")
        after = _describe(admin, "gc-app")
        assert after["consumer.session.timeout.ms"] == ("50000", DYNAMIC_GROUP_CONFIG)
        assert after["share.delivery.count.limit"] == ("3", DYNAMIC_GROUP_CONFIG)
        assert after["share.record.lock.duration.ms"] == ("30000", DEFAULT_CONFIG)

        assert java_admin(b.bootstrap_servers, "set", "gc-java", "share.auto.offset.reset=earliest",
                          "share.isolation.level=read_committed") == {"ok": True}
        refused = java_admin(b.bootstrap_servers, "set", "gc-java", "share.isolation.level=dirty")
        assert refused["ok"] is False and refused["error"].startswith("InvalidConfigurationException"), refused
        assert "String must be one of: read_committed, read_uncommitted" in refused["error"], refused
        seen = java_admin(b.bootstrap_servers, "describe", "gc-java")
        assert seen["configs"]["share.isolation.level"] == [
            "read_committed", "DYNAMIC_GROUP_CONFIG",
            ["share.isolation.level=read_committed:DYNAMIC_GROUP_CONFIG",
             "share.isolation.level=read_uncommitted:DEFAULT_CONFIG"]], seen
        assert seen["configs"]["consumer.heartbeat.interval.ms"] == [
            "5000", "DEFAULT_CONFIG", ["group.consumer.heartbeat.interval.ms=5000:DEFAULT_CONFIG"]], seen
        assert sorted(seen["listed"]) == ["gc-app", "gc-java"], seen
        log = b.log_text()
        assert ("IncrementalAlterConfigs", 1, "apache-kafka-java") in requests_seen(log)
        assert "group_configs.altered" in log

        b.restart(graceful=False)  # kill -9: the file was replaced before the answer
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        kept = _describe(admin, "gc-app")
        assert kept["consumer.session.timeout.ms"] == ("50000", DYNAMIC_GROUP_CONFIG)
        assert kept["share.delivery.count.limit"] == ("3", DYNAMIC_GROUP_CONFIG)
        assert java_admin(b.bootstrap_servers, "describe", "gc-java")["configs"]["share.auto.offset.reset"][:2] == [
            "earliest", "DYNAMIC_GROUP_CONFIG"]

        assert java_admin(b.bootstrap_servers, "delete", "gc-java", "share.auto.offset.reset",
                          "share.isolation.level") == {"ok": True}
        b.restart()
        again = java_admin(b.bootstrap_servers, "describe", "gc-java")
        assert again["configs"]["share.auto.offset.reset"][:2] == ["latest", "DEFAULT_CONFIG"], again
        assert again["listed"] == ["gc-app"], again


def _heartbeat(conn: Connection, group: str, member: str, epoch: int, topic: str | None = None):
    return conn.call(req(HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=epoch, instance_id=None,
                         rack_id=None, rebalance_timeout=datetime.timedelta(milliseconds=60_000 if epoch == 0 else -1),
                         subscribed_topic_names=(topic,) if epoch == 0 else None, subscribed_topic_regex=None,
                         server_assignor=None, topic_partitions=() if epoch == 0 else None))


def test_consumer_group_timeouts_come_from_the_group_config():
    # broker defaults short; the group config widens the session for one group only
    args = ["--group-consumer-session-timeout-ms", "2000", "--group-consumer-heartbeat-interval-ms", "500"]
    with MiniBroker(name="group-configs-kip848", args=args) as b:
        topic = unique_topic("gc")
        create_topic(b.bootstrap_servers, topic, 1)
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        _alter(admin, "gc-long", consumer_session_timeout_ms="60000", consumer_heartbeat_interval_ms="7000")
        host, port = b.bootstrap_servers.rsplit(":", 1)
        conn = Connection(host, int(port))
        try:
            members = {g: str(uuid.uuid4()) for g in ("gc-long", "gc-plain")}
            joined = {g: _heartbeat(conn, g, m, 0, topic) for g, m in members.items()}
            assert all(r.error_code == 0 for r in joined.values()), joined
            assert joined["gc-long"].heartbeat_interval == datetime.timedelta(milliseconds=7000)
            assert joined["gc-plain"].heartbeat_interval == datetime.timedelta(milliseconds=500)
            # no heartbeat for longer than the broker's session timeout, well inside the group's
            time.sleep(3.5)
            later = {g: _heartbeat(conn, g, m, joined[g].member_epoch) for g, m in members.items()}
            assert later["gc-plain"].error_code == UNKNOWN_MEMBER_ID, later
            assert later["gc-long"].error_code == 0, later
            assert later["gc-long"].heartbeat_interval == datetime.timedelta(milliseconds=7000)
        finally:
            conn.close()
