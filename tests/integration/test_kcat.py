"""kcat (Debian's, built on librdkafka 2.0.2, strict about tagged fields): produce, consume, metadata."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict

import pytest

from . import wire
from .clients import create_topic, require_tool

N = 2000


def kcat(*args: str, input: bytes | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess:
    exe = require_tool("kcat")
    return subprocess.run([exe, *args], input=input, capture_output=True, timeout=timeout)


def _check(proc: subprocess.CompletedProcess, what: str) -> None:
    assert proc.returncode == 0 and b"ERROR" not in proc.stderr, (
        f"{what}: exit {proc.returncode}\nstderr: {proc.stderr.decode(errors='replace')[-3000:]}")


def _lines(i: int) -> bytes:
    # Sizes vary; the value holds no ':' (the key delimiter) and no newline.
    return f"k{i}:value-{i}-".encode() + b"x" * ((i * 37) % 700)


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_kcat_produce_consume(broker, topic, codec):
    require_tool("kcat")
    partitions = 3
    create_topic(broker.bootstrap_servers, topic, partitions)
    data = b"\n".join(_lines(i) for i in range(N)) + b"\n"
    p = kcat("-P", "-b", broker.bootstrap_servers, "-t", topic, "-K", ":", "-X", "acks=all",
             "-X", f"compression.codec={codec}", input=data)
    _check(p, "kcat -P")

    ends = wire.high_watermarks(broker.port, topic, range(partitions))
    assert sum(ends.values()) == N, f"high watermarks {ends} after producing {N} messages"

    c = kcat("-C", "-b", broker.bootstrap_servers, "-t", topic, "-e", "-o", "beginning", "-q",
             "-f", "%p\t%o\t%k\t%s\n")
    _check(c, "kcat -C")
    by_partition = defaultdict(list)
    for line in c.stdout.decode().splitlines():
        part, off, key, value = line.split("\t")
        by_partition[int(part)].append((int(off), key, value))
    seen = {}
    for part, recs in by_partition.items():
        assert [o for o, _, _ in recs] == list(range(ends[part])), f"partition {part}: offsets not contiguous"
        indices = [int(k[1:]) for _, k, _ in recs]
        assert indices == sorted(indices), f"partition {part}: producer order not kept"
        for _, k, v in recs:
            i = int(k[1:])
            assert f"{k}:{v}".encode() == _lines(i)
            seen[i] = part
    assert sorted(seen) == list(range(N)), f"read back {len(seen)} of {N} distinct messages"


def test_kcat_metadata(broker, topic):
    require_tool("kcat")
    create_topic(broker.bootstrap_servers, topic, 2)
    m = kcat("-L", "-J", "-b", broker.bootstrap_servers, "-t", topic)
    _check(m, "kcat -L")
    md = json.loads(m.stdout)
    assert [(b["id"], b["name"]) for b in md["brokers"]] == [(1, f"127.0.0.1:{broker.port}")], md["brokers"]
    (t,) = md["topics"]
    assert t["topic"] == topic and "error" not in t, t
    assert sorted(p["partition"] for p in t["partitions"]) == [0, 1]
    for p in t["partitions"]:
        assert p["leader"] == 1 and p["replicas"] == [{"id": 1}] and p["isrs"] == [{"id": 1}], p

    # Whole-cluster listing (no -t) works too and includes the topic.
    m = kcat("-L", "-J", "-b", broker.bootstrap_servers)
    _check(m, "kcat -L (all topics)")
    assert topic in {t["topic"] for t in json.loads(m.stdout)["topics"]}
