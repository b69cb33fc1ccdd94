"""DescribeTopicPartitions v0 (KIP-966) against Kafka 4.4: topics by name and all of them, pages
cut by ``response_partition_limit`` and resumed from ``next_cursor``, unknown and invalid names,
and the cursors Kafka refuses (DescribeTopicPartitionsRequestHandler)."""

from __future__ import annotations

import uuid

import pytest

from tests.reference.client import part, req

DTP = 75
API = (DTP, 0)
# zz- sorts after every other topic these tests make, so "all topics from this cursor" is ours only
PREFIX = f"zz-dtp-{uuid.uuid4().hex[:6]}"
TOPICS = {f"{PREFIX}-a": 5, f"{PREFIX}-b": 3, f"{PREFIX}-c": 1}


@pytest.fixture(scope="module")
def topics(differential_pair):
    for name, n in TOPICS.items():
        differential_pair.create_topics([name], n)
    return sorted(TOPICS)


def _dtp(names, limit=2000, cursor=None):
    return req(DTP, 0, topics=tuple(part(API, "TopicRequest", name=n) for n in names),
               response_partition_limit=limit,
               cursor=None if cursor is None else part(API, "Cursor", topic_name=cursor[0],
                                                       partition_index=cursor[1]))


def _pages(pair, names, limit, cursor=None):
    """Follows next_cursor page by page on both brokers, comparing each page; the pages Kafka gave."""
    pages = []
    for _ in range(20):
        k, m = pair.both(lambda s, c=cursor: _dtp(names, limit, c))
        pair.check(f"DescribeTopicPartitions limit={limit} cursor={cursor}", (k, m))
        pages.append(k)
        if k.next_cursor is None:
            return pages
        cursor = (k.next_cursor.topic_name, k.next_cursor.partition_index)
    raise AssertionError(f"more than 20 pages for {names} at limit {limit}")


def _served(pair):
    for s in pair.sides:
        lo, hi = s.versions[DTP]
        assert lo <= 0 <= hi, f"{s.name} does not serve DescribeTopicPartitions v0"


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 9, 2000, 0, -1])
def test_paging_by_name(differential_pair, topics, limit):
    pair = differential_pair
    _served(pair)
    names = [*topics, f"{PREFIX}-missing", "bad/name", topics[0]]
    pages = _pages(pair, names, limit)
    seen = [(t.name, p.partition_index) for page in pages for t in page.topics for p in t.partitions]
    assert seen == [(n, i) for n in topics for i in range(TOPICS[n])]


@pytest.mark.parametrize("limit", [2, 4, 2000])
def test_paging_all_topics(differential_pair, topics, limit):
    pages = _pages(differential_pair, [], limit, cursor=(topics[0], 0))
    seen = [(t.name, p.partition_index) for page in pages for t in page.topics for p in t.partitions]
    assert seen == [(n, i) for n in topics for i in range(TOPICS[n])]


@pytest.mark.parametrize("what,names,cursor", [
    ("cursor inside a topic", None, (f"{PREFIX}-a", 3)),
    ("cursor past the last partition", None, (f"{PREFIX}-b", 7)),
    ("cursor on an unknown topic", [f"{PREFIX}-a", f"{PREFIX}-0"], (f"{PREFIX}-0", 0)),
    ("cursor topic not asked", [f"{PREFIX}-a"], (f"{PREFIX}-b", 0)),
    ("negative cursor partition", None, (f"{PREFIX}-a", -1)),
    ("negative cursor, all topics", [], (f"{PREFIX}-a", -1)),
])
def test_cursors(differential_pair, topics, what, names, cursor):
    names = topics if names is None else names
    differential_pair.check(what, differential_pair.both(lambda s: _dtp(names, 4, cursor)))
