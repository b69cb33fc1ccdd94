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
    create_topic(broker.bootstrap, topic, 1)
    m = write_txn_mix(broker.bootstrap, topic, 1)
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
    opts = parse_options({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": mix.topic,
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
        opts = parse_options({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": mix.topic,
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
    create_topic(b.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
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
        opts = parse_options({"kafka.bootstrap.servers": b.bootstrap, "subscribe": topic,
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
