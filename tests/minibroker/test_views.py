"""What the console and /metrics compute (minibroker/control/views.py), on a broker without
sockets: the coordinators and logs are driven directly, the clock is virtual."""

from __future__ import annotations

import pytest

from minibroker.broker import Broker
from minibroker.config.options import Config, FsyncPolicy
from minibroker.control import views
from minibroker.coordinator.group.model import Offset
from minibroker.core.clock import ControlledClock
from minibroker_protocol.records import build_batch


@pytest.fixture
async def env(tmp_path):
    clock = ControlledClock(virtual=True)
    broker = Broker(Config(port=0, data_dir=tmp_path / "data", fsync=FsyncPolicy("never"),
                           offsets_topic_partitions=1, transaction_state_partitions=1),
                    clock=clock)
    try:
        yield broker, clock
    finally:
        await broker.stop()


def plain(n: int) -> bytes:
    return build_batch([{"key": b"k", "value": b"v%d" % i} for i in range(n)])


def txn(pid: int, epoch: int, seq: int, n: int) -> bytes:
    return build_batch([{"key": b"k", "value": b"t%d" % i} for i in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)


def part(broker, topic: str, p: int) -> dict:
    found = [r for r in views.partitions(broker) if (r["topic"], r["partition"]) == (topic, p)]
    assert len(found) == 1, found
    return found[0]


async def test_an_empty_broker(env):
    broker, clock = env
    ov = views.overview(broker, clock.wall_ms())
    assert ov["partitions"] == [] and ov["groups"] == [] and ov["node_id"] == broker.node_id
    assert views.open_transactions(broker, clock.wall_ms()) == []


async def test_an_open_transaction_holds_the_lso_and_the_group_lag(env):
    broker, clock = env
    broker.create_topic("orders", 2)
    broker.get_log("orders", 0).append(plain(3))  # offsets 0-2, decided at once
    pid, epoch = broker.txn_coordinator.init_producer_id("tx-1", 60_000)
    broker.txn_coordinator.add_partitions("tx-1", pid, epoch, [("orders", 0)])
    broker.get_log("orders", 0).append(txn(pid, epoch, 0, 2))  # offsets 3-4, open
    broker.group_coordinator.commit_offsets("readers", -1, "", None,
                                            {("orders", 0): Offset(1, -1, "", clock.wall_ms())})
    clock.advance(5_000)

    p0 = part(broker, "orders", 0)
    assert (p0["log_start_offset"], p0["high_watermark"], p0["last_stable_offset"]) == (0, 5, 3)
    assert p0["lso_lag"] == 2 and p0["size_bytes"] > 0 and p0["segments"] == 1
    assert p0["held_by"] == {"producer_id": pid, "transactional_id": "tx-1", "first_offset": 3}
    assert [(x["producer_id"], x["transactional_id"], x["txn_first_offset"]) for x in p0["producers"]] == [
        (pid, "tx-1", 3)]
    p1 = part(broker, "orders", 1)
    assert p1["held_by"] is None and p1["lso_lag"] == 0 and p1["high_watermark"] == 0

    [t] = views.open_transactions(broker, clock.wall_ms())
    assert t["transactional_id"] == "tx-1" and t["state"] == "Ongoing" and t["age_ms"] == 5_000
    assert t["partitions"] == [["orders", 0]] and t["timeout_ms"] == 60_000

    [g] = views.groups(broker)
    assert g["group_id"] == "readers" and g["type"] == "classic" and g["state"] == "Empty"
    # read_committed: the 2 open records are not lag yet
    assert g["offsets"] == [{"topic": "orders", "partition": 0, "committed": 1, "last_stable_offset": 3,
                             "high_watermark": 5, "lag": 2, "pending_transaction": False}]
    assert g["lag"] == 2

    # committed: the marker (offset 5) moves the LSO past everything
    broker.txn_coordinator.end_txn("tx-1", pid, epoch, True)
    p0 = part(broker, "orders", 0)
    assert (p0["high_watermark"], p0["last_stable_offset"], p0["held_by"]) == (6, 6, None)
    assert views.open_transactions(broker, clock.wall_ms()) == []
    assert views.groups(broker)[0]["offsets"][0]["lag"] == 5


async def test_internal_topics_can_be_left_out(env):
    broker, clock = env
    broker.create_topic("a", 1)
    broker.group_coordinator.commit_offsets("g", -1, "", None, {("a", 0): Offset(0, -1, "", 0)})
    names = {r["topic"] for r in views.partitions(broker)}
    assert names == {"a", "__consumer_offsets"}
    ov = views.overview(broker, clock.wall_ms(), internal=False)
    assert {r["topic"] for r in ov["partitions"]} == {"a"}
    assert ov["groups"][0]["offsets"][0]["lag"] == 0  # lag still computed with internal left out


async def test_a_kip848_group_lists_its_members_and_their_partitions(env):
    broker, clock = env
    broker.create_topic("t", 2)
    broker.group_coordinator.consumer_heartbeat(
        version=1, group_id="g848", member_id="m1", member_epoch=0, rebalance_timeout_ms=60_000,
        subscribed_names=("t",), owned={}, client_id="app-1", client_host="/127.0.0.1")
    [g] = views.groups(broker)
    assert g["type"] == "consumer" and g["protocol_type"] == "consumer"
    [m] = g["members"]
    assert m["member_id"] == "m1" and m["client_id"] == "app-1"
    assert sorted(map(tuple, m["assigned"])) == [("t", 0), ("t", 1)]


async def test_telemetry_lists_every_client_that_asked_live_or_gone(tmp_path):
    """A client told to push nothing (no subscription matched it) is a client that asked: listed
    while connected and after, with its asks, as `requests --counts` counts them."""
    clock = ControlledClock(virtual=True)
    broker = Broker(Config(port=0, data_dir=tmp_path / "data", fsync=FsyncPolicy("never"),
                           client_telemetry="on"), clock=clock)
    try:
        class Conn:
            closed = False

        conn = Conn()
        client = {"client_id": "quiet", "client_software_name": "librdkafka", "client_software_version": "2.16.0",
                  "client_source_address": "127.0.0.1", "client_source_port": "5000"}
        inst = broker.client_metrics.get_subscriptions(None, client, conn)
        [row] = views.telemetry(broker)["clients"]
        assert (row["client_id"], row["live"], row["gone"], row["asks"]) == ("quiet", True, None, 1)
        assert row["requested_metrics"] == [] and row["push_interval_ms"] == 300_000
        conn.closed = True
        clock.advance(10)
        [row] = views.telemetry(broker)["clients"]
        assert (row["live"], row["gone"], row["gone_ms"], row["asks"]) == (False, "disconnected", clock.wall_ms(), 1)
        assert row["requested_metrics"] == [] and inst.gone_reason == "disconnected"
    finally:
        await broker.stop()
