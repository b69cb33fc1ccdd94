"""Share-group records (protocol/share_log.py) against bytes written by Kafka 4.4's own generated
classes (share_log_golden/ShareLogGolden.java, output in golden.txt), plus round trips and the
decoder's refusal of anything malformed with its own error."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minibroker_protocol import share_log as sl

T1 = uuid.UUID("0123456789abcdef-fedcba9876543210".replace("-", ""))
T2 = uuid.UUID("1111111111111111" "2222222222222222")
ZERO = uuid.UUID(int=0)

# The same cases as ShareLogGolden.java, in the same order and with the same names.
CASES: dict[str, tuple[sl.ShareStateKey | sl.ShareGroupKey, sl.ShareValue]] = {
    "snapshot": (sl.ShareStateKey(sl.SHARE_SNAPSHOT, "grüppe", T1, 3), sl.ShareSnapshotValue(
        2, 1, 7, 100, 1700000000000, 1700000000500,
        (sl.StateBatch(100, 109, sl.AVAILABLE, 2), sl.StateBatch(110, 110, sl.ARCHIVED, 5)))),
    "snapshot_dcc": (sl.ShareStateKey(sl.SHARE_SNAPSHOT, "g", T2, 0),
                     sl.ShareSnapshotValue(0, 0, -1, -1, 5, 6, (), delivery_complete_count=7)),
    "update_dcc": (sl.ShareStateKey(sl.SHARE_UPDATE, "g", T1, 49), sl.ShareUpdateValue(
        3, 1, -1, (sl.StateBatch(5, 9, sl.ACKNOWLEDGED, 1),), delivery_complete_count=300)),
    "update": (sl.ShareStateKey(sl.SHARE_UPDATE, "g", T1, 0), sl.ShareUpdateValue(1, 0, 42, ())),
    "member_metadata": (sl.ShareGroupKey(sl.SHARE_MEMBER_METADATA, "g", "m-1"),
                        sl.MemberMetadataValue(None, "console-share-consumer", "/127.0.0.1",
                                               ("t", "ü"))),
    "member_metadata_rack": (sl.ShareGroupKey(sl.SHARE_MEMBER_METADATA, "g", "m-2"),
                             sl.MemberMetadataValue("r1", "", "/::1", ())),
    "group_metadata": (sl.ShareGroupKey(sl.SHARE_GROUP_METADATA, "g"),
                       sl.GroupMetadataValue(3, -6148914691236517206)),
    "target_metadata": (sl.ShareGroupKey(sl.SHARE_TARGET_ASSIGNMENT_METADATA, "g"),
                        sl.TargetAssignmentMetadataValue(3)),
    "target_metadata_ts": (sl.ShareGroupKey(sl.SHARE_TARGET_ASSIGNMENT_METADATA, "g"),
                           sl.TargetAssignmentMetadataValue(4, 1700000000123)),
    "target_member": (sl.ShareGroupKey(sl.SHARE_TARGET_ASSIGNMENT_MEMBER, "g", "m-1"),
                      sl.TargetAssignmentMemberValue(((T1, (0, 2)), (T2, (1,))))),
    "current_member": (sl.ShareGroupKey(sl.SHARE_CURRENT_MEMBER_ASSIGNMENT, "g", "m-1"),
                       sl.CurrentMemberAssignmentValue(3, 2, 0, ((T1, (0, 1, 2)),))),
    "state_partition_metadata": (sl.ShareGroupKey(sl.SHARE_STATE_PARTITION_METADATA, "g"),
                                 sl.StatePartitionMetadataValue(
                                     (sl.TopicPartitionsInfo(T2, "new", (0, 1)),),
                                     (sl.TopicPartitionsInfo(T1, "t", (0, 1, 2)),),
                                     (sl.TopicInfo(ZERO, "gone"),))),
}


def _golden() -> dict[str, tuple[bytes, bytes]]:
    out = {}
    for line in (Path(__file__).parent / "share_log_golden" / "golden.txt").read_text().splitlines():
        name, key, value = line.split()
        out[name] = (bytes.fromhex(key), bytes.fromhex(value))
    return out


GOLDEN = _golden()


def test_every_golden_case_is_checked():
    assert list(GOLDEN) == list(CASES)


def _encode_key(key):
    return sl.encode_state_key(key) if isinstance(key, sl.ShareStateKey) else sl.encode_group_key(key)


@pytest.mark.parametrize("name", list(CASES))
def test_bytes_match_kafka(name):
    key, value = CASES[name]
    gkey, gvalue = GOLDEN[name]
    assert _encode_key(key) == gkey
    assert sl.encode_value(value) == gvalue
    assert sl.decode_key(gkey) == key
    assert sl.decode_value(key.record_type, gvalue) == value


def test_tagged_fields_absent_at_their_default_present_otherwise():
    # Kafka writes DeliveryCompleteCount only when it is not -1 (the 4.1 layout otherwise).
    assert GOLDEN["update"][1].endswith(b"\x01\x00")
    assert GOLDEN["update_dcc"][1].endswith(b"\x01\x00\x04" + struct.pack(">i", 300))
    assert GOLDEN["target_metadata"][1] == b"\x00\x00" + struct.pack(">i", 3) + b"\x00"


def test_unknown_tags_are_skipped():
    # A later Kafka may add tags; like its readers, ours skip what they do not know.
    plain = sl.encode_value(sl.GroupMetadataValue(1, 2))
    with_tag = plain[:-1] + b"\x01\x05\x02ab"
    assert sl.decode_value(sl.SHARE_GROUP_METADATA, with_tag) == sl.GroupMetadataValue(1, 2)


def test_keys_refuse_wrong_shapes():
    with pytest.raises(sl.ShareLogFormatError):
        sl.encode_group_key(sl.ShareGroupKey(sl.SHARE_GROUP_METADATA, "g", "m"))
    with pytest.raises(sl.ShareLogFormatError):
        sl.encode_group_key(sl.ShareGroupKey(sl.SHARE_MEMBER_METADATA, "g"))
    with pytest.raises(sl.ShareLogFormatError):
        sl.encode_state_key(sl.ShareStateKey(5, "g", T1, 0))
    with pytest.raises(sl.ShareLogFormatError, match="key type: 2"):
        sl.decode_key(struct.pack(">hh", 2, 1) + b"g")
    with pytest.raises(sl.ShareLogFormatError):
        sl.decode_key(None)


@pytest.mark.parametrize("name", list(CASES))
def test_malformed_bytes_raise_the_format_error_only(name):
    key, _ = CASES[name]
    gkey, gvalue = GOLDEN[name]
    for n in range(len(gkey)):
        with pytest.raises(sl.ShareLogFormatError):
            sl.decode_key(gkey[:n])
    for n in range(len(gvalue)):
        with pytest.raises(sl.ShareLogFormatError):
            sl.decode_value(key.record_type, gvalue[:n])
    with pytest.raises(sl.ShareLogFormatError, match="left after"):
        sl.decode_value(key.record_type, gvalue + b"\x00")
    with pytest.raises(sl.ShareLogFormatError, match="version 1"):
        sl.decode_value(key.record_type, b"\x00\x01" + gvalue[2:])


@given(st.binary(max_size=64), st.sampled_from([0, 1, 10, 11, 12, 13, 14, 15]))
def test_arbitrary_bytes_never_escape_as_another_error(data, record_type):
    for call in (lambda: sl.decode_key(data), lambda: sl.decode_value(record_type, data)):
        try:
            call()
        except sl.ShareLogFormatError:
            pass


_batch = st.builds(sl.StateBatch, st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1),
                   st.sampled_from([0, 2, 4]), st.integers(-(2**15), 2**15 - 1))
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_uuid = st.uuids()
_tps = st.lists(st.tuples(_uuid, st.lists(_i32, max_size=4).map(tuple)), max_size=3).map(tuple)


@given(st.one_of(
    st.builds(sl.ShareSnapshotValue, _i32, _i32, _i32, _i64, _i64, _i64,
              st.lists(_batch, max_size=3).map(tuple), _i32),
    st.builds(sl.ShareUpdateValue, _i32, _i32, _i64, st.lists(_batch, max_size=3).map(tuple), _i32),
    st.builds(sl.MemberMetadataValue, st.none() | st.text(max_size=5), st.text(max_size=5),
              st.text(max_size=5), st.lists(st.text(max_size=5), max_size=3).map(tuple)),
    st.builds(sl.TargetAssignmentMetadataValue, _i32, _i64),
    st.builds(sl.TargetAssignmentMemberValue, _tps),
    st.builds(sl.CurrentMemberAssignmentValue, _i32, _i32, st.integers(-128, 127), _tps),
))
def test_round_trip(value):
    record_type = {sl.ShareSnapshotValue: 0, sl.ShareUpdateValue: 1, sl.MemberMetadataValue: 10,
                   sl.TargetAssignmentMetadataValue: 12, sl.TargetAssignmentMemberValue: 13,
                   sl.CurrentMemberAssignmentValue: 14}[type(value)]
    assert sl.decode_value(record_type, sl.encode_value(value)) == value
