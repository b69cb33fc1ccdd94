"""DescribeGroups up to v6 (KIP-1043's per-group error message) as Kafka 4.4 answers it: a group
nobody knows, a group with committed offsets and no members, a group with a member."""

from __future__ import annotations

import uuid

import pytest

from tests.reference.client import part, req

DESCRIBE_GROUPS, OFFSET_COMMIT = 15, 8


@pytest.mark.parametrize("version", [5, 6])
def test_describe_groups(differential_pair, version):
    pair = differential_pair
    for s in pair.sides:
        lo, hi = s.versions[DESCRIBE_GROUPS]
        assert lo <= version <= hi, (s.name, lo, hi)
    joined, unknown = f"dg-{uuid.uuid4().hex[:8]}", f"dg-none-{uuid.uuid4().hex[:8]}"
    offsets_only = f"dg-offsets-{uuid.uuid4().hex[:8]}"
    pair.find_coordinators(joined, [])
    pair.find_coordinators(offsets_only, [])
    pair.join_group(joined, [])
    topic = f"dg-{uuid.uuid4().hex[:8]}"
    pair.create_topics([topic], 1)
    base = (OFFSET_COMMIT, 8)
    commit = req(OFFSET_COMMIT, 8, group_id=offsets_only, generation_id_or_member_epoch=-1, member_id="",
                 group_instance_id=None, topics=(part(base, "OffsetCommitRequestTopic", name=topic, partitions=(
                     part(base, "OffsetCommitRequestPartition", partition_index=0, committed_offset=0,
                          committed_leader_epoch=-1, committed_metadata=""),)),))
    pair.check("OffsetCommit v8 of a group without members", pair.both(lambda s: commit))

    def make(s):
        return req(DESCRIBE_GROUPS, version, groups=(joined, unknown, offsets_only),
                   include_authorized_operations=False)

    pair.check(f"DescribeGroups v{version}", pair.both(make))
