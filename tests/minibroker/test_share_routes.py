"""`share explain` from the outside: the control plane's share routes and /metrics on a real
Broker (no sockets for Kafka), and the CLI both ways — --data-dir on a history written here,
--control on the control plane listening on loopback.

Until the share coordinator is wired in, the broker's lookups (share_groups, share_partition,
share_history) are stand-ins set on the Broker object here, holding SharePartitions driven
directly; the same tests then run against the real ones."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys

import pytest

from minibroker.broker import Broker
from minibroker.cli.main import main as cli_main
from minibroker.config.options import Config, FsyncPolicy
from minibroker.control.faults.actions import Injector
from minibroker.control.faults.rules import FaultBook
from minibroker.control.http import ControlPlane
from minibroker.control.request_log import RequestLog
from minibroker.coordinator.share.history import ShareHistory
from minibroker.coordinator.share.partition import AckBatch, LogBatch, LogRead, ShareConfig, SharePartition
from minibroker.core.clock import ControlledClock

T = 1_700_000_000_000
LOCK = 30_000


def drive(hist: ShareHistory, sp: SharePartition) -> None:
    """Offsets 0-9: delivered to A, lock expired, redelivered to B; B accepts 0-4, releases 5-9;
    C takes 5-9 and holds them."""
    def keep(events):
        hist.record(sp.group_id, sp.topic, sp.partition, events, delivery_limit=sp.config.delivery_count_limit)

    read = LogRead([LogBatch(0, 9)])
    keep(sp.acquire("A", read, max_records=500, batch_size=500, now_ms=T).events)
    keep(sp.expire(T + LOCK).events)
    keep(sp.acquire("B", read, max_records=500, batch_size=500, now_ms=T + LOCK + 1000).events)
    out = sp.acknowledge("B", [AckBatch(0, 4, (1,)), AckBatch(5, 9, (2,))], T + LOCK + 2000)
    assert out.error is None
    keep(out.events)
    keep(sp.acquire("C", read, max_records=500, batch_size=500, now_ms=T + LOCK + 3000).events)


@pytest.fixture
async def env(tmp_path):
    clock = ControlledClock(virtual=True)
    broker = Broker(Config(port=0, data_dir=tmp_path / "data", fsync=FsyncPolicy("never"),
                           offsets_topic_partitions=1, transaction_state_partitions=1), clock=clock)
    plane = ControlPlane(node_id=broker.node_id, clock=clock, injector=Injector(FaultBook()),
                         request_log=RequestLog(), counts=broker.request_counts,
                         clock_advanced=broker.clock_advanced, broker=broker)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    await plane.start(sock)
    try:
        yield broker, plane, tmp_path
    finally:
        await plane.close()
        await broker.stop()


def share_coordinator(broker: Broker, tmp_path, limit: int = 5) -> tuple[ShareHistory, SharePartition]:
    """The stand-in: what the share coordinator will hand the broker."""
    hist = ShareHistory(tmp_path / "data")
    hist.open(T - 1000)
    sp = SharePartition("readers", "orders", 1, ShareConfig(delivery_count_limit=limit))
    parts = {("readers", "orders", 1): sp}
    broker.share_history = hist  # type: ignore[attr-defined]
    broker.share_groups = lambda: ["readers"]  # type: ignore[attr-defined]
    broker.share_partition = lambda g, t, p: parts.get((g, t, p))  # type: ignore[attr-defined]
    return hist, sp


async def cli(plane: ControlPlane, *args: str) -> tuple[int, str, str]:
    """`minibroker share ...` as a user runs it, against the plane on loopback."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "minibroker", "share", *args, "--control", f"127.0.0.1:{plane.port}",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def get(plane: ControlPlane, path: str) -> tuple[int, dict | str]:
    def fetch():
        import urllib.error
        import urllib.request
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{plane.port}{path}", timeout=10) as r:
                body = r.read().decode()
                return r.status, json.loads(body) if r.headers.get_content_type() == "application/json" else body
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())
    return await asyncio.to_thread(fetch)


async def test_no_share_coordinator_is_said_not_failed(env):
    broker, plane, _ = env
    # a broker without the share lookups (one built before share groups were served)
    broker.share_partition = None  # type: ignore[method-assign,assignment]
    broker.share_groups = None  # type: ignore[method-assign,assignment]
    status, body = await get(plane, "/v1/share/groups")
    assert status == 200 and body == {"served": False, "note": "this broker runs no share coordinator",
                                      "groups": []}
    status, body = await get(plane, "/v1/share/readers/orders/1")
    assert status == 404 and "(this broker runs no share coordinator)" in body["error"], body
    code, out, err = await cli(plane, "explain", "readers", "orders", "1")
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert err.startswith("minibroker: error: no share history for group 'readers' on orders-1"), err
    status, text = await get(plane, "/metrics")
    # the families are declared, with no sample
    assert status == 200 and "# TYPE minibroker_share_records gauge" in text
    assert not [line for line in text.splitlines() if line.startswith("minibroker_share_")]


async def test_groups_partition_story_and_metrics(env):
    broker, plane, tmp_path = env
    broker.create_topic("orders", 2)
    hist, sp = share_coordinator(broker, tmp_path)
    drive(hist, sp)
    status, body = await get(plane, "/v1/share/groups")
    assert status == 200 and body["served"] is True
    [group] = body["groups"]
    assert group["group_id"] == "readers"
    [row] = group["partitions"]
    assert (row["topic"], row["partition"], row["live"]) == ("orders", 1, True)
    # 0-4 were accepted: the start offset moved past them, they left the cache
    assert row["in_flight"] == {"available": 0, "acquired": 5, "acknowledged": 0, "archived": 0}
    assert (row["start_offset"], row["end_offset"]) == (5, 9)
    assert (row["deliveries"], row["redeliveries"], row["archived"]) == (25, 15, 0)
    assert row["delivery_limit"] == 5 and row["lock_duration_ms"] == LOCK

    status, body = await get(plane, "/v1/share/readers/orders/1")
    assert status == 200 and body["known"]
    assert [(r["first_offset"], r["last_offset"], r["state"]) for r in body["in_flight"]] == [
        (5, 9, "ACQUIRED")]
    assert body["in_flight"][0]["member"] == "C" and body["in_flight"][0]["lock_deadline_ms"] == T + 2 * LOCK + 3000
    assert body["summary"] == "10 records told from 6 events; 10 redelivered (lock expiry 10, release 5)."
    held = body["records"][1]
    assert (held["first_offset"], held["last_offset"], held["deliveries"]) == (5, 9, 3)
    assert held["diagnosis"].startswith("Held by member C (delivery 3 of 5)"), held["diagnosis"]
    assert "member B RELEASED it" in held["diagnosis"] and "the lock of member A expired" in held["diagnosis"]

    status, body = await get(plane, "/v1/share/readers/orders/1?offset=2")
    assert status == 200 and [(r["first_offset"], r["last_offset"]) for r in body["records"]] == [(2, 2)]
    assert body["records"][0]["diagnosis"].startswith("Accepted by member B on delivery 2 of 5")
    status, body = await get(plane, "/v1/share/readers/orders/1?offset=99")
    assert status == 404 and "offset 99 of group 'readers'" in body["error"]
    status, body = await get(plane, "/v1/share/readers/orders/x")
    assert status == 400

    status, text = await get(plane, "/metrics")
    assert 'minibroker_share_records{group="readers",partition="1",state="acquired",topic="orders"} 5.0' in text
    assert 'minibroker_share_redeliveries_total{group="readers",partition="1",topic="orders"} 15.0' in text
    assert 'minibroker_share_deliveries_total{group="readers",partition="1",topic="orders"} 25.0' in text

    code, out, err = await cli(plane, "explain", "readers", "orders", "1", "--offset", "7")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "Share group `readers`, partition orders-1, offset 7"
    assert "RELEASED by member B → available" in out and "acquired by member C — delivery 3 of 5" in out
    code, out, err = await cli(plane, "explain", "readers", "orders", "1", "--json")
    assert code == 0 and json.loads(out)["state"]["redeliveries"] == 15
    code, out, err = await cli(plane, "explain", "nobody", "orders", "1")
    assert code == 1 and "no share history for group 'nobody' on orders-1" in err
    hist.close()


async def test_a_group_id_with_a_slash(env):
    broker, plane, tmp_path = env
    hist, _sp = share_coordinator(broker, tmp_path)
    other = SharePartition("team/a", "orders", 0)
    hist.record("team/a", "orders", 0, other.acquire("A", LogRead([LogBatch(0, 0)]), max_records=1,
                                                     batch_size=1, now_ms=T).events)
    code, out, err = await cli(plane, "explain", "team/a", "orders", "0")
    assert code == 0, err
    assert "acquired by member A" in out
    hist.close()


def test_offline_explain_reads_the_data_dir(tmp_path, capsys):
    hist = ShareHistory(tmp_path)
    hist.open(T - 1000)
    sp = SharePartition("readers", "orders", 1, ShareConfig(delivery_count_limit=5))
    drive(hist, sp)
    hist.close()
    assert cli_main(["share", "explain", "readers", "orders", "1", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "offsets 5-9:" in out and "Diagnosis: Acquired by member C (delivery 3 of 5) when the history ends" in out
    assert cli_main(["share", "explain", "readers", "orders", "1", "--offset", "0", "--json",
                     "--data-dir", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["records"][0]["diagnosis"].startswith("Accepted by member B on delivery 2 of 5"), data
    assert data["in_flight"] == [] and data["delivery_limit"] == 5
    assert cli_main(["share", "explain", "readers", "orders", "0", "--data-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err == (f"minibroker: error: no share history for group 'readers' on orders-0 in data directory "
                   f"{tmp_path}: never delivered there, or expired from the history\n")
    assert cli_main(["share", "explain", "readers", "orders", "1", "--data-dir", str(tmp_path / "none")]) == 1
    assert capsys.readouterr().err == f"minibroker: error: no data directory {tmp_path / 'none'}\n"


def test_the_command_line_is_checked(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        cli_main(["share", "explain", "g", "t", "0"])
    assert e.value.code == 2 and "--control HOST:PORT (a running broker) or --data-dir DIR is required" in \
        capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli_main(["share", "explain", "g", "t", "zero", "--data-dir", str(tmp_path)])
    assert e.value.code == 2
