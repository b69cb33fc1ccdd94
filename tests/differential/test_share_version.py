"""``share.version`` below 1 turns share groups off, as on Kafka 4.4: the reference Kafka and
minibroker are both downgraded to share.version 0 with UpdateFeatures, asked the share APIs, and
upgraded again (the way a data dir made before share groups is turned on, see
minibroker/config/features.py), answer by answer.
"""

from __future__ import annotations

import time

from tests.reference.client import part, req

from .test_features import _features, _settled, _update
from .test_share_groups import DESCRIBE, Script, _member

SAFE_DOWNGRADE, UPGRADE = 2, 1


def _share_level(side) -> int | None:
    r = side.call(req(18, 4, client_software_name="differential", client_software_version="1"))
    levels = {k.name: k.max_version_level for k in r.finalized_features}
    return levels.get("share.version")


def _set_share_version(pair, level: int, kind: int) -> None:
    before = [_features(s, 4)[0] for s in pair.sides]
    answers = [_update(s, 1, [("share.version", level, kind)], False) for s in pair.sides]
    pair.check(f"UpdateFeatures share.version={level} type {kind}", answers)
    assert answers[0].error_code == 0, answers[0]
    for s, epoch in zip(pair.sides, before):
        _settled(s, epoch, True)
    deadline = time.monotonic() + 10
    for s in pair.sides:  # Kafka's broker sees its controller's change a moment later
        while _share_level(s) != (level or None) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _share_level(s) == (level or None), s.name


def _wait_for_the_coordinator(s: Script) -> None:
    """A Kafka just started answers COORDINATOR_LOAD_IN_PROGRESS until it has loaded its
    __consumer_offsets partitions (all at once): a member of another group joins each side once
    it can, and leaves; the compared group has seen nothing yet."""
    warm, group = _member(), s.group + "-warm"
    for side in s.pair.sides:
        deadline = time.monotonic() + 30
        for _ in range(300):
            r = side.call(s.hb_request(warm, 0, group=group))
            if r.error_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert r.error_code == 0, (side.name, r)
        assert side.call(s.hb_request(warm, -1, group=group, names=None)).error_code == 0


def test_share_version_0_refuses_the_share_apis_and_an_upgrade_brings_them_back(differential_pair):
    pair = differential_pair
    s = Script(pair)
    _wait_for_the_coordinator(s)
    m = _member()
    epoch = s.join_until_assigned(m, 1)
    s.produce(3)
    try:
        _set_share_version(pair, 0, SAFE_DOWNGRADE)
        s.hb("a member's heartbeat at share.version 0", m, epoch, names=None)
        s.hb("a new member at share.version 0", _member(), 0)
        s.fetch("ShareFetch at share.version 0", m, 0, top_only=True)
        s.ack("ShareAcknowledge at share.version 0", m, 1, {0: [(0, 0, [1])]})
        s.describe_offsets("DescribeShareGroupOffsets at share.version 0")
        s.both("ShareGroupDescribe at share.version 0",
               lambda side: req(DESCRIBE, 1, group_ids=(s.group,), include_authorized_operations=False),
               lambda side, r: [(g.error_code.name, g.error_message, g.group_state) for g in r.groups])
    finally:
        _set_share_version(pair, 2, UPGRADE)
    # the group and its member outlived the downgrade: both go on where they were
    s.hb("a new member after the upgrade", _member(), 0)
    s.hb("the member's heartbeat after the upgrade", m, epoch, names=None)
    s.fetch("ShareFetch after the upgrade", m, 0, max_wait_ms=2000)




def test_share_group_state_has_kafkas_topic_configs(differential_pair):
    """__share_group_state, made at a share group's first heartbeat, with the configs Kafka 4.4's
    share coordinator gives it: a delete topic kept forever (pruned by the coordinator), not a
    compacted one (ShareCoordinatorService.shareGroupStateTopicConfigs)."""
    s = Script(differential_pair)
    _wait_for_the_coordinator(s)
    s.join_until_assigned(_member(), 1)
    keys = ("cleanup.policy", "retention.ms", "compression.type", "segment.bytes")

    def describe(side):
        base = (32, 4)
        return req(32, 4, include_synonyms=False, include_documentation=False, resources=(
            part(base, "DescribeConfigsResource", resource_type=2, resource_name="__share_group_state",
                 configuration_keys=keys),))

    answers = []
    for side in differential_pair.sides:
        r = side.call(describe(side))
        [res] = r.results
        assert res.error_code == 0, (side.name, res)
        answers.append({c.name: c.value for c in res.configs})
    kafka, ours = answers
    assert kafka["cleanup.policy"] == "delete" and kafka["retention.ms"] == "-1", kafka
    assert ours == kafka, (kafka, ours)
