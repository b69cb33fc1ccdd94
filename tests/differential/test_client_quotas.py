"""Client quotas against Kafka 4.4: AlterClientQuotas' validation (entity types and their
combinations, default entities, unknown keys, the ip entity's only key, bad values, duplicate
keys and entities, validate_only) and DescribeClientQuotas' filters (exact, default and
specified matches, strict or not, bad filters), v0 and v1, each answer compared with Kafka's,
entries and their order included (Kafka lists them in its HashMaps' order)."""

from __future__ import annotations

import pytest

from tests.reference.client import part, req

DESCRIBE, ALTER = 48, 49
EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def _alter(entries, validate_only=False, version=1):
    api = (ALTER, version)
    return req(ALTER, version, validate_only=validate_only, entries=tuple(
        part(api, "EntryData",
             entity=tuple(part(api, "EntityData", entity_type=t, entity_name=n) for t, n in entity),
             ops=tuple(part(api, "OpData", key=k, value=0.0 if v is None else float(v), remove=v is None)
                       for k, v in ops))
        for entity, ops in entries))


def _describe(components, strict=False, version=1):
    api = (DESCRIBE, version)
    return req(DESCRIBE, version, strict=strict, components=tuple(
        part(api, "ComponentData", entity_type=t, match_type=m, match=x) for t, m, x in components))


def _clear(pair):
    """Every quota either broker has is removed (the reference Kafka lives for the session)."""
    for s in pair.sides:
        found = s.call(_describe([]))
        removals = [([(e.entity_type, e.entity_name) for e in entry.entity], [(v.key, None) for v in entry.values])
                    for entry in found.entries or ()]
        if removals:
            s.call(_alter(removals))


U, C, IP = "user", "client-id", "ip"
# (what, [(entity, ops)], validate_only): each answered alike by both brokers, in this order
ALTERATIONS = [
    ("a user", [([(U, "cq-alice")], [("producer_byte_rate", 1000)])], False),
    ("user and client", [([(U, "cq-alice"), (C, "cq-c1")], [("consumer_byte_rate", 2000),
                                                            ("request_percentage", 12.5)])], False),
    ("default client", [([(C, None)], [("producer_byte_rate", 5000)])], False),
    ("default user and default client", [([(U, None), (C, None)], [("request_percentage", 200)])], False),
    ("controller mutation rate", [([(U, "cq-erin")], [("controller_mutation_rate", 10.5)])], False),
    ("unknown key", [([(U, "cq-bob")], [("nope", 1)])], False),
    ("fractional long", [([(U, "cq-bob")], [("producer_byte_rate", 1.5)])], False),
    ("tiny fraction", [([(U, "cq-sf")], [("producer_byte_rate", 1000.0000001)])], False),
    ("negative", [([(U, "cq-bob")], [("producer_byte_rate", -5)])], False),
    ("zero", [([(U, "cq-bob")], [("consumer_byte_rate", 0)])], False),
    ("too large for a long", [([(U, "cq-bob")], [("producer_byte_rate", 1e30)])], False),
    ("nan", [([(U, "cq-bob")], [("request_percentage", float("nan"))])], False),
    ("-inf", [([(U, "cq-bob")], [("request_percentage", float("-inf"))])], False),
    ("bad values: checked in Kafka's key order", [([(U, "cq-bob")], [("producer_byte_rate", 1.5),
                                                                       ("request_percentage", -1),
                                                                       ("consumer_byte_rate", -1)])], False),
    ("one bad value spoils the entity", [([(U, "cq-pp")], [("producer_byte_rate", 10),
                                                          ("consumer_byte_rate", 1.5)])], False),
    ("ip", [([(IP, "127.0.0.1")], [("connection_creation_rate", 10)])], False),
    ("default ip", [([(IP, None)], [("connection_creation_rate", 10)])], False),
    ("ip with a user's key", [([(IP, "127.0.0.1")], [("producer_byte_rate", 10)])], False),
    ("fractional int", [([(IP, "127.0.0.1")], [("connection_creation_rate", 1.5)])], False),
    ("too large for an int", [([(IP, "127.0.0.1")], [("connection_creation_rate", 3e9)])], False),
    ("ip that does not resolve", [([(IP, "cq.no-such-host.invalid")], [("connection_creation_rate", 1)])],
     False),
    ("empty ip", [([(IP, "")], [("connection_creation_rate", 3)])], False),
    ("ip and user", [([(IP, "127.0.0.1"), (U, "x")], [("connection_creation_rate", 10)])], False),
    ("unknown entity type", [([("group", "g")], [("producer_byte_rate", 10)])], False),
    ("unknown type beside a user", [([("zzz", "x"), (U, "a")], [("nope", 3)])], False),
    ("empty entity", [([], [("producer_byte_rate", 10)])], False),
    ("empty user", [([(U, "")], [("producer_byte_rate", 10)])], False),
    ("a type twice: the last name wins", [([(U, "cq-a"), (U, "cq-b")], [("producer_byte_rate", 10)])], False),
    ("duplicate key", [([(U, "cq-carol")], [("producer_byte_rate", 10), ("producer_byte_rate", 20)])], False),
    ("duplicate entity", [([(U, "cq-dave")], [("producer_byte_rate", 10)]),
                          ([(U, "cq-dave")], [("producer_byte_rate", 20)])], False),
    ("removing what is not there", [([(U, "cq-zed")], [("producer_byte_rate", None)])], False),
    ("removing an unknown key", [([(U, "cq-zed")], [("nope", None)])], False),
    ("several entities", [([(U, "cq-m1")], [("producer_byte_rate", 10)]),
                          ([(C, "cq-m2")], [("producer_byte_rate", 10)]),
                          ([(U, "cq-m3"), (C, None)], [("consumer_byte_rate", 1)]),
                          ([(U, None)], [("nope", 1)])], False),
    ("validate only", [([(U, "cq-vo")], [("producer_byte_rate", 10)])], True),
    ("validate only, bad", [([(U, "cq-vo")], [("producer_byte_rate", -1)])], True),
    ("remove one key of two", [([(U, "cq-alice"), (C, "cq-c1")], [("request_percentage", None)])], False),
    ("change a value", [([(U, "cq-alice")], [("producer_byte_rate", 3000)])], False),
]

DESCRIPTIONS = [
    ([], False), ([], True),
    ([(U, SPECIFIED, None)], False), ([(U, SPECIFIED, None)], True),
    ([(U, EXACT, "cq-alice")], False), ([(U, EXACT, "cq-alice")], True),
    ([(C, DEFAULT, None)], True), ([(C, DEFAULT, None)], False),
    ([(U, DEFAULT, None), (C, DEFAULT, None)], True),
    ([(U, SPECIFIED, None), (C, SPECIFIED, None)], True),
    ([(U, EXACT, "nobody")], False),
    ([(IP, SPECIFIED, None)], False), ([(IP, DEFAULT, None)], True),
    ([(IP, SPECIFIED, None), (U, SPECIFIED, None)], False),
    ([("foo", SPECIFIED, None)], False), ([("", SPECIFIED, None)], False),
    ([(U, EXACT, None)], False), ([(U, DEFAULT, "x")], False), ([(U, SPECIFIED, "x")], False),
    ([(U, 5, None)], False), ([(U, SPECIFIED, None), (U, SPECIFIED, None)], False),
]


@pytest.mark.parametrize("version", [0, 1])
def test_client_quotas_match_kafka(differential_pair, version):
    pair = differential_pair
    _clear(pair)
    try:
        for what, entries, validate_only in ALTERATIONS:
            pair.check(f"alter v{version}: {what}",
                       pair.both(lambda s, e=entries, v=validate_only: _alter(e, v, version)))
        for components, strict in DESCRIPTIONS:
            pair.check(f"describe v{version}: {components} strict={strict}",
                       pair.both(lambda s, c=components, st=strict: _describe(c, st, version)))
    finally:
        _clear(pair)
