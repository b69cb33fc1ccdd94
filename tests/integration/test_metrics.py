"""``GET /metrics`` on the control listener, scraped from a real broker with real clients and
parsed with Prometheus' own text-format parser: an open transaction, its LSO lag, a group's
lag under read_committed, requests and errors per API, and a timeout abort."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections import Counter

from minibroker.testing.control import call

from .clients import create_topic
from .test_txn_support import TXN_BROKER_ARGS, open_transaction, produce_sync, txn_id, txn_producer


def scrape(control: str) -> dict[tuple[str, frozenset], float]:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://{control}/metrics", timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = resp.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        assert family.name.startswith("minibroker_"), family.name
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples, name: str, **labels) -> float | None:
    return samples.get((name, frozenset((k, str(v)) for k, v in labels.items())))


def by_api(records) -> tuple[Counter, Counter]:
    requests, errors = Counter(), Counter()
    for r in records:
        requests[r["api"]] += 1
        if r["error_code"]:
            errors[r["api"]] += 1
    return requests, errors


def test_metrics_of_transactions_groups_and_requests(broker_factory, topic):
    from confluent_kafka import Consumer, Producer, TopicPartition

    b = broker_factory(TXN_BROKER_ARGS, control=True)
    control, bootstrap = b.control.address, b.bootstrap_servers
    empty = scrape(control)
    assert value(empty, "minibroker_open_transactions") == 0
    assert value(empty, "minibroker_oldest_open_transaction_age_seconds") == 0

    create_topic(bootstrap, topic, 2)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    produce_sync(plain, topic, [(0, b"p|%d" % i) for i in range(10)])  # offsets 0-9
    # left open: offsets 10-11 of partition 0
    tid = txn_id("metrics")
    holder = open_transaction(bootstrap, tid, topic, [(0, b"t|1"), (0, b"t|2")],
                              **{"transaction.timeout.ms": 60_000})
    # a second transaction, committed after one refused EndTxn (librdkafka retries it)
    tid2 = txn_id("metrics-2")
    rule = b.control.add_fault(api="EndTxn", action="error", error="CONCURRENT_TRANSACTIONS",
                               transactional_id=tid2, count=1)
    other = txn_producer(bootstrap, tid2)
    other.init_transactions(20)
    other.begin_transaction()
    produce_sync(other, topic, [(1, b"o|1")])
    other.commit_transaction(20)
    assert b.control.fault(rule["id"])["fired"] == 1
    # a group that read 4 records of partition 0
    group = f"metrics-{tid[-8:]}"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
    c.close()

    m = scrape(control)
    assert value(m, "minibroker_open_transactions") == 1
    assert 0 <= value(m, "minibroker_oldest_open_transaction_age_seconds") < 60
    assert value(m, "minibroker_partition_lso_lag", topic=topic, partition=0) == 2
    assert value(m, "minibroker_partition_lso_lag", topic=topic, partition=1) == 0
    assert value(m, "minibroker_partition_high_watermark", topic=topic, partition=0) == 12
    assert value(m, "minibroker_partition_size_bytes", topic=topic, partition=0) > 0
    # read_committed: the LSO (10) minus the committed offset (4)
    assert value(m, "minibroker_consumer_group_lag", group=group, topic=topic, partition=0) == 6
    assert value(m, "minibroker_transactions_committed_total") == 1
    assert value(m, "minibroker_transactions_aborted_total") == 0
    assert value(m, "minibroker_request_errors_total", api="EndTxn") == 1
    assert value(m, "minibroker_requests_total", api="EndTxn") == 2
    assert value(m, "minibroker_requests_total", api="InitProducerId") == 2
    assert value(m, "minibroker_bytes_in_total") > 0 and value(m, "minibroker_bytes_out_total") > 0

    # every API's counts are what the request log saw (clients idle: read until both agree)
    deadline = time.monotonic() + 20
    while True:
        before = by_api(b.control.requests())
        m = scrape(control)
        if by_api(b.control.requests()) == before or time.monotonic() > deadline:
            break
    requests, errors = before
    got_requests = {dict(k[1])["api"]: v for k, v in m.items() if k[0] == "minibroker_requests_total"}
    got_errors = {dict(k[1])["api"]: v for k, v in m.items() if k[0] == "minibroker_request_errors_total"}
    assert got_requests == dict(requests)
    assert got_errors == dict(errors) and errors["EndTxn"] == 1

    # the open transaction outlives its timeout: aborted by the coordinator
    b.control.advance("61s")
    m = scrape(control)
    assert value(m, "minibroker_open_transactions") == 0
    assert value(m, "minibroker_transactions_timed_out_total") == 1
    assert value(m, "minibroker_transactions_aborted_total") == 1
    assert value(m, "minibroker_partition_lso_lag", topic=topic, partition=0) == 0
    # the abort marker is offset 12: the group is 9 behind now
    assert value(m, "minibroker_consumer_group_lag", group=group, topic=topic, partition=0) == 9
    holder.flush(0)
    other.flush(0)
    plain.flush(0)


def test_metrics_and_the_console_data_of_an_idle_broker(broker_factory):
    b = broker_factory(TXN_BROKER_ARGS, control=True)
    m = scrape(b.control.address)
    assert value(m, "minibroker_bytes_in_total") == 0
    assert value(m, "minibroker_transactions_fenced_total") == 0
    assert not any(name == "minibroker_partition_lso_lag" for name, _ in m)
    ov = call(b.control.address, "GET", "/v1/console/overview")
    assert ov["partitions"] == [] and ov["groups"] == [] and ov["now_ms"] > 0
    # bad requests: one JSON line, as everywhere on the control plane
    for path, status, words in [("/v1/console/overview?internal=maybe", 400, "internal must be"),
                                ("/static/..%2Fhttp.py", 404, "no such file"),
                                ("/static/nope.js", 404, "no such file")]:
        try:
            urllib.request.urlopen(f"http://{b.control.address}{path}", timeout=10)
            raise AssertionError(path)
        except urllib.error.HTTPError as e:
            answer = json.loads(e.read())
            assert e.code == status and words in answer["error"], (path, e.code, answer)
    with urllib.request.urlopen(f"http://{b.control.address}/", timeout=10) as resp:
        assert b"<title>minibroker console</title>" in resp.read()


def test_fetch_partition_errors_are_counted(broker_factory, topic):
    """Fetch answers are encoded by hand (no kio entity to read): a partition error in one is
    still an error in the request log and in /metrics, as Kafka counts it per request."""
    import datetime

    from kio.schema.fetch.v4.request import FetchPartition, FetchRequest, FetchTopic

    from . import wire

    b = broker_factory(TXN_BROKER_ARGS, control=True)
    create_topic(b.bootstrap_servers, topic, 1)
    control = f"{b.host}:{b.control_port}"
    before = value(scrape(control), "minibroker_request_errors_total", api="Fetch") or 0
    req = FetchRequest(replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20,
                       isolation_level=1, topics=(FetchTopic(topic=topic, partitions=(
                           FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),
                           FetchPartition(partition=7, fetch_offset=0, partition_max_bytes=1 << 20))),))
    with wire.connect(b.port) as sock:
        wire.send_frame(sock, wire.encode_request(req, 41))
        answer = wire._decode_response(1, 4, wire.recv_frame(sock), 41)
    codes = {p.partition_index: int(p.error_code) for t in answer.responses for p in t.partitions}
    assert codes == {0: 0, 7: 3}, codes  # UNKNOWN_TOPIC_OR_PARTITION for the partition that is not there
    last = b.control.requests(api="Fetch")[-1]  # no other client fetches from this broker
    assert last["error_code"] == 3 and last["outcome"] == "answered", last
    assert value(scrape(control), "minibroker_request_errors_total", api="Fetch") == before + 1
