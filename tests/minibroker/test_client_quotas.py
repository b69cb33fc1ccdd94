"""Client quotas without a broker: Kafka's windowed rate and throttle time, the entity each
request is measured on (ClientQuotaManager's precedence and shared sensors), and the quotas kept
across a restart."""

from __future__ import annotations

import pytest

from minibroker.config import client_quotas as cq
from minibroker.handlers.quotas import QuotaEnforcer, Rate

U, C = "user", "client-id"


def _quotas(tmp_path, *entries):
    q = cq.ClientQuotas(tmp_path)
    results = q.alter([(entity, ops) for entity, ops in entries], validate_only=False)
    assert all(code == 0 for _k, code, _m in results), results
    return q


def test_rate_is_kafkas_windowed_rate():
    r = Rate()
    r.record(20_000, 0.0)
    # a young sensor's window is at least 10 whole samples: 20000 B over 10 s
    assert r.window_ms(0.0) == 10_000
    assert r.measure(0.0) == pytest.approx(2000.0)
    r.record(10_000, 5_500.0)  # a new sample starts where its first value lands
    # 5 whole windows elapsed, topped up to 10: 10.5 s
    assert r.measure(5_500.0) == pytest.approx(30_000 / 10.5)
    # after 11 windows the first sample has expired: the oldest is the one of 5.5 s
    assert r.measure(11_000.0) == pytest.approx(10_000 / 10.5)
    r2 = Rate()
    r2.record(1, 0.0)
    r2.record(1, 12_000.0)
    # two samples 12 s apart: the first expired (reset at now), the window is 10 whole samples
    assert r2.window_ms(12_000.0) == 10_000


def test_throttle_time_is_kafkas(tmp_path):
    q = _quotas(tmp_path, ([(C, "p")], [(cq.PRODUCER_BYTE_RATE, 1000)]))
    e = QuotaEnforcer(q, clock_ms=lambda: 0.0)
    # 5000 B in a 10 s window: 500 B/s, under the bound
    assert e.record(cq.PRODUCER_BYTE_RATE, "ANONYMOUS", "p", 5000, 0.0) == 0
    # 20000 B: 2000 B/s, (2000 - 1000) / 1000 * 10 s
    assert e.record(cq.PRODUCER_BYTE_RATE, "ANONYMOUS", "p", 15000, 0.0) == 10_000
    # another client id has no quota
    assert e.record(cq.PRODUCER_BYTE_RATE, "ANONYMOUS", "other", 10**9, 0.0) == 0
    # the request quota's throttle is capped at one window
    q.alter([([(C, "p")], [(cq.REQUEST_PERCENTAGE, 1.0)])], False)
    assert e.record(cq.REQUEST_PERCENTAGE, "ANONYMOUS", "p", 5000.0, 0.0) == 1000


def test_a_user_quota_is_shared_by_its_clients(tmp_path):
    q = _quotas(tmp_path, ([(U, "alice")], [(cq.PRODUCER_BYTE_RATE, 1000)]))
    assert q.metric_tags(cq.PRODUCER_BYTE_RATE, "alice", "a") == ("alice", "")
    e = QuotaEnforcer(q)
    assert e.record(cq.PRODUCER_BYTE_RATE, "alice", "a", 8000, 0.0) == 0
    # the same sensor: 16000 B over 10 s
    assert e.record(cq.PRODUCER_BYTE_RATE, "alice", "b", 8000, 0.0) == 6000
    assert e.record(cq.PRODUCER_BYTE_RATE, "bob", "b", 10**6, 0.0) == 0


@pytest.mark.parametrize("entities, expected", [
    # ClientQuotaManager's order: user+client, user+default client, user, default user+client,
    # default user+default client, default user, client, default client
    ([([(U, "alice"), (C, "a")], 1), ([(U, "alice"), (C, None)], 2), ([(U, "alice")], 3)], 1),
    ([([(U, "alice"), (C, None)], 2), ([(U, "alice")], 3), ([(U, None), (C, "a")], 4)], 2),
    ([([(U, "alice")], 3), ([(U, None), (C, "a")], 4), ([(C, "a")], 7)], 3),
    ([([(U, None), (C, "a")], 4), ([(U, None), (C, None)], 5), ([(C, "a")], 7)], 4),
    ([([(U, None), (C, None)], 5), ([(U, None)], 6), ([(C, "a")], 7)], 5),
    ([([(U, None)], 6), ([(C, "a")], 7), ([(C, None)], 8)], 6),
    ([([(C, "a")], 7), ([(C, None)], 8), ([(U, "bob")], 9)], 7),
    ([([(C, None)], 8), ([(U, "bob")], 9)], 8),
])
def test_precedence(tmp_path, entities, expected):
    q = _quotas(tmp_path, *[(ent, [(cq.CONSUMER_BYTE_RATE, float(v))]) for ent, v in entities])
    tags = q.metric_tags(cq.CONSUMER_BYTE_RATE, "alice", "a")
    assert q.limit(cq.CONSUMER_BYTE_RATE, tags) == expected


def test_kept_across_a_restart(tmp_path):
    _quotas(tmp_path, ([(U, "alice"), (C, None)], [(cq.PRODUCER_BYTE_RATE, 1000),
                                                    (cq.REQUEST_PERCENTAGE, 50.5)]),
            ([("ip", "127.0.0.1")], [(cq.CONNECTION_CREATION_RATE, 3)]))
    again = cq.ClientQuotas.load(tmp_path)
    assert again.entities() == {
        ((C, None), (U, "alice")): {cq.PRODUCER_BYTE_RATE: 1000.0, cq.REQUEST_PERCENTAGE: 50.5},
        (("ip", "127.0.0.1"),): {cq.CONNECTION_CREATION_RATE: 3.0}}
    again.alter([([(U, "alice"), (C, None)], [(cq.PRODUCER_BYTE_RATE, None), (cq.REQUEST_PERCENTAGE, None)])],
                False)
    assert list(cq.ClientQuotas.load(tmp_path).entities()) == [(("ip", "127.0.0.1"),)]


def test_validate_only_changes_nothing(tmp_path):
    q = cq.ClientQuotas(tmp_path)
    [(key, code, _)] = q.alter([([(U, "x")], [(cq.PRODUCER_BYTE_RATE, 10)])], validate_only=True)
    assert code == 0 and not q.entities() and not q.any
    assert not (tmp_path / "client-quotas.json").exists()


def test_an_unreadable_file_is_reported_not_fatal(tmp_path):
    (tmp_path / "client-quotas.json").write_text('{"quotas": [{"entity": {"group": "g"}, "quotas": {}}]}')
    assert cq.ClientQuotas.load(tmp_path).entities() == {}


def test_each_virtual_broker_measures_its_own_traffic(tmp_path):
    # quotas are per broker in Kafka: a client producing to two leaders has the quota on each
    q = _quotas(tmp_path, ([(C, "p")], [(cq.PRODUCER_BYTE_RATE, 1000)]))
    e = QuotaEnforcer(q)
    assert e.record(cq.PRODUCER_BYTE_RATE, "ANONYMOUS", "p", 9000, 0.0, node=1) == 0
    assert e.record(cq.PRODUCER_BYTE_RATE, "ANONYMOUS", "p", 9000, 0.0, node=2) == 0
    assert e.record(cq.PRODUCER_BYTE_RATE, "ANONYMOUS", "p", 9000, 0.0, node=1) == 8000
