"""The range readers without Spark: they stop exactly at the planned end offset whatever
sits just before it (a marker, an aborted batch) and start anywhere, online and offline."""

from __future__ import annotations

import pytest

from minibroker.spark import kafka as online
from minibroker.spark.logdir import LogDirPlanner, read_range
from minibroker.spark.offsets import OffsetRange
from minibroker.spark.options import parse_options
from tests.integration.clients import create_topic, unique_topic

from .producers import ABORTED, write_txn_mix


@pytest.fixture(scope="module")
def mix(broker):
    topic = unique_topic("ranges")
    create_topic(broker.bootstrap_servers, topic, 1)
    m = write_txn_mix(broker.bootstrap_servers, topic, 1)
    yield m
    m.close_open()


def _expected(mix, isolation, start, end):
    visible = mix.read_committed() if isolation == "read_committed" else mix.records
    return sorted(o for (p, o) in visible if start <= o < end)


def _offsets(batches):
    return [o for b in batches for o in b.column("offset").to_pylist()]


def _interesting_ranges(mix):
    data = {o for (_, o) in mix.records}
    hw = max(data) + 1
    gaps = [o for o in range(hw) if o not in data]  # markers
    aborted = sorted(o for (_, o), r in mix.records.items() if r[3] == ABORTED)
    lso = mix.first_open_offset(0)
    ends = sorted({e for o in gaps + aborted for e in (o, o + 1)} | {lso, lso - 1, lso + 1, hw})
    starts = sorted({0, aborted[0] + 2, gaps[0], gaps[0] + 1})
    return [(0, e) for e in ends if e > 0] + [(s, lso) for s in starts]


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_ranges_stop_exactly_at_the_end(broker, mix, isolation):
    opts = parse_options({"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": mix.topic,
                          "isolation.level": isolation, "kafkaConsumer.pollTimeoutMs": "20000"},
                         streaming=False)
    planner = LogDirPlanner(str(broker.data_dir), isolation == "read_committed", [mix.topic])
    (tp,) = planner.partitions()
    latest = planner.watermarks([tp])[tp].latest
    for start, end in _interesting_ranges(mix):
        end = min(end, latest)  # what any plan does: never past the LSO / high watermark
        if end <= start:
            continue
        r = OffsetRange(mix.topic, 0, start, end)
        want = _expected(mix, isolation, start, end)
        got = _offsets(online.read_range(opts, r))
        assert got == want, f"online {isolation} [{start}, {end})"
        got = _offsets(read_range(str(broker.data_dir), r, read_committed=opts.read_committed,
                                  include_headers=False, aborted_seen=planner.aborted_for(r)))
        assert got == want, f"offline {isolation} [{start}, {end})"


def test_read_committed_latest_is_the_lso(broker, mix):
    hw = max(o for (_, o) in mix.records) + 2  # the last commit's marker ends the log
    for isolation, want in (("read_committed", mix.first_open_offset(0)), ("read_uncommitted", hw)):
        opts = parse_options({"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": mix.topic,
                              "isolation.level": isolation}, streaming=False)
        planner = online.KafkaPlanner(opts)
        try:
            tps = planner.partitions()
            assert planner.watermarks(tps)[(mix.topic, 0)].latest == want
        finally:
            planner.close()
        offline = LogDirPlanner(str(broker.data_dir), isolation == "read_committed")
        assert offline.watermarks(tps)[(mix.topic, 0)].latest == want


def test_data_loss_is_an_error_unless_allowed(broker_factory):
    """Retention deleted the head of the planned range: failOnDataLoss (the default) fails
    the read; failOnDataLoss=false reads what is left, online and offline alike."""
    import time

    from confluent_kafka import Producer

    b = broker_factory(["--segment-bytes", "4096", "--retention-bytes", "8192",
                        "--retention-check-interval-ms", "200"])
    topic = unique_topic("loss")
    create_topic(b.bootstrap_servers, topic, 1)
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0, "batch.num.messages": 1})
    errors = []
    for i in range(300):
        p.produce(topic, value=b"%d" % i + b"." * 100, partition=0,
                  on_delivery=lambda err, msg: err and errors.append(err))
        p.poll(0)
    assert p.flush(30) == 0 and not errors, errors[:3]
    planner = LogDirPlanner(str(b.data_dir), False)
    deadline = time.monotonic() + 30
    while planner.watermarks([(topic, 0)])[(topic, 0)].earliest == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
        planner = LogDirPlanner(str(b.data_dir), False)
    low, end = (lambda w: (w.earliest, w.latest))(planner.watermarks([(topic, 0)])[(topic, 0)])
    assert 0 < low < end == 300
    r = OffsetRange(topic, 0, 0, end)
    for fail in (True, False):
        opts = parse_options({"kafka.bootstrap.servers": b.bootstrap_servers, "subscribe": topic,
                              "failOnDataLoss": str(fail).lower(), "kafkaConsumer.pollTimeoutMs": "20000"},
                             streaming=False)
        readers = {"online": lambda: online.read_range(opts, r),
                   "offline": lambda: read_range(str(b.data_dir), r, read_committed=False,
                                                 include_headers=False, fail_on_data_loss=fail)}
        for name, read in readers.items():
            if fail:
                with pytest.raises(Exception, match="failOnDataLoss"):
                    _offsets(read())
            else:
                got = _offsets(read())
                # Retention may have moved on meanwhile: a suffix, ending exactly at the end.
                assert got == list(range(got[0], end)) and got[0] >= low, name


def test_ranges_over_interleaved_transactions(broker):
    """Two transactions open at once on one partition: A writes, B opens, A aborts. The LSO
    is then B's first offset and A's ABORT marker lies beyond it, so a read_committed range
    ending at the LSO ends with aborted batches whose marker it never sees (librdkafka
    drops them without moving position()). Every range stops exactly at its end, online
    and offline, in both isolation levels, before and after B commits."""
    import time

    from confluent_kafka import Producer

    from .producers import txn_producer

    topic = unique_topic("interleaved")
    create_topic(broker.bootstrap_servers, topic, 1)
    offsets: dict[str, list[int]] = {}

    def write(producer, group, n):
        for _ in range(n):
            producer.produce(topic, value=group.encode(), partition=0,
                             on_delivery=lambda err, msg: offsets.setdefault(
                                 msg.value().decode() if err is None else "error", []).append(msg.offset()))
        assert producer.flush(30) == 0

    plain = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True, "linger.ms": 0})
    a = txn_producer(broker.bootstrap_servers, f"{topic}-a", **{"linger.ms": 0})
    b = txn_producer(broker.bootstrap_servers, f"{topic}-b", **{"linger.ms": 0})
    c = txn_producer(broker.bootstrap_servers, f"{topic}-c", **{"linger.ms": 0})
    write(plain, "p1", 3)
    a.begin_transaction()
    write(a, "a", 10)
    b.begin_transaction()
    write(b, "b", 5)
    a.abort_transaction(30)

    def check(visible_committed, lso, hw):
        assert "error" not in offsets, offsets.get("error")
        for isolation, end, visible in (("read_committed", lso, visible_committed),
                                        ("read_uncommitted", hw, sorted(o for v in offsets.values() for o in v))):
            opts = parse_options({"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": topic,
                                  "isolation.level": isolation, "kafkaConsumer.pollTimeoutMs": "15000"},
                                 streaming=False)
            planner = online.KafkaPlanner(opts)
            try:
                assert planner.watermarks([(topic, 0)])[(topic, 0)].latest == end, isolation
            finally:
                planner.close()
            offline = LogDirPlanner(str(broker.data_dir), isolation == "read_committed", [topic])
            assert offline.watermarks([(topic, 0)])[(topic, 0)].latest == end, isolation
            a_first, a_last = min(offsets["a"]), max(offsets["a"])
            ranges = {(0, end), (2, end), (a_first, end), (a_last, end), (end - 1, end),
                      (0, a_first + 4), (a_first + 1, a_last + 1)}
            for start, stop in sorted(ranges):
                r = OffsetRange(topic, 0, start, stop)
                want = [o for o in visible if start <= o < stop]
                t0 = time.monotonic()
                assert _offsets(online.read_range(opts, r)) == want, f"online {isolation} [{start}, {stop})"
                assert time.monotonic() - t0 < 10, f"online {isolation} [{start}, {stop}) stalled"
                got = _offsets(read_range(str(broker.data_dir), r, read_committed=opts.read_committed,
                                          include_headers=False, aborted_seen=offline.aborted_for(r)))
                assert got == want, f"offline {isolation} [{start}, {stop})"

    # A aborted, B open: the LSO is B's first offset, A's marker lies past it.
    lso = min(offsets["b"])
    assert lso == max(offsets["a"]) + 1
    check(offsets["p1"], lso, max(offsets["b"]) + 2)
    # C opens, B commits, more plain records: the LSO is C's first offset, past B's marker.
    c.begin_transaction()
    write(c, "c", 4)
    b.commit_transaction(30)
    write(plain, "p2", 2)
    check(sorted(offsets["p1"] + offsets["b"]), min(offsets["c"]), max(offsets["p2"]) + 1)
    c.abort_transaction(30)


def test_online_start_past_the_end_of_the_log(broker):
    """A planned range above the high watermark (the topic was recreated smaller): data
    loss named as such, and with failOnDataLoss=false an empty read, not a retry loop."""
    import time

    from confluent_kafka import Producer

    topic = unique_topic("pastend")
    create_topic(broker.bootstrap_servers, topic, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(3):
        p.produce(topic, value=b"%d" % i, partition=0)
    assert p.flush(30) == 0
    r = OffsetRange(topic, 0, 10, 20)
    for fail in (True, False):
        opts = parse_options({"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": topic,
                              "failOnDataLoss": str(fail).lower(), "kafkaConsumer.pollTimeoutMs": "8000"},
                             streaming=False)
        t0 = time.monotonic()
        if fail:
            with pytest.raises(Exception, match="past the end of the log, which now ends at 3"):
                _offsets(online.read_range(opts, r))
        else:
            assert _offsets(online.read_range(opts, r)) == []
        assert time.monotonic() - t0 < 6
