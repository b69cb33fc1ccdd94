"""Share-group records, in Kafka 4.4's own layout (KIP-932).

Two topics hold them. ``__share_group_state`` (the share coordinator's): key type 0
ShareSnapshotKey and 1 ShareUpdateKey, both ``{GroupId, TopicId, Partition}``, with values
ShareSnapshotValue (the full state of one share partition) and ShareUpdateValue (a delta over the
last snapshot). ``__consumer_offsets`` (the group coordinator's): key types 10-15, the share group's
member metadata, group metadata, target assignment metadata and members, current member
assignments and the state-partition metadata (which topics are initializing/initialized/deleting).

Layout, as Kafka's CoordinatorRecordSerde writes it (coordinator-common/…/CoordinatorRecordSerde.java,
``MessageUtil.toCoordinatorTypePrefixedBytes`` for keys, ``toVersionPrefixedBytes`` for values): a
key is int16 record type then the key fields at version 0, not flexible (int16-length strings,
16-byte uuids). A value is int16 version (0 for all of these) then the fields in the flexible
encoding: compact strings and arrays (unsigned varint length + 1), every struct ending in a tagged
field section. Two tagged fields exist: DeliveryCompleteCount (tag 0, default -1, Kafka 4.2+,
KIP-1226) in the share state values, and AssignmentTimestamp (tag 0, default 0, Kafka 4.3+,
KIP-1263) in ShareGroupTargetAssignmentMetadataValue; like Kafka, they are written only when they
differ from their default. Unknown tags are skipped on read, as Kafka's readers do. A null value
is a tombstone. Sources: the JSON schemas in kafka-share-coordinator-4.4.0.jar and
kafka-group-coordinator-4.4.0.jar (``common/message/Share*.json``); tests/protocol/
test_share_log.py checks bytes produced by Kafka's generated classes.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from .header import write_uvarint as _uvarint

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

# Record types (the key's int16 prefix).
SHARE_SNAPSHOT, SHARE_UPDATE = 0, 1
SHARE_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_TARGET_ASSIGNMENT_METADATA = 12
SHARE_TARGET_ASSIGNMENT_MEMBER = 13
SHARE_CURRENT_MEMBER_ASSIGNMENT = 14
SHARE_STATE_PARTITION_METADATA = 15
GROUP_KEYED = frozenset({SHARE_GROUP_METADATA, SHARE_TARGET_ASSIGNMENT_METADATA,
                         SHARE_STATE_PARTITION_METADATA})
MEMBER_KEYED = frozenset({SHARE_MEMBER_METADATA, SHARE_TARGET_ASSIGNMENT_MEMBER,
                          SHARE_CURRENT_MEMBER_ASSIGNMENT})

# RecordState ids as persisted in StateBatch.DeliveryState (server/…/share/fetch/RecordState.java).
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVING, ARCHIVED = 0, 1, 2, 3, 4


class ShareLogFormatError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    """Key of ``__share_group_state``: ``record_type`` is SHARE_SNAPSHOT or SHARE_UPDATE."""

    record_type: int
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1


@dataclass(frozen=True, slots=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1


@dataclass(frozen=True, slots=True)
class ShareGroupKey:
    """Key of a ``__consumer_offsets`` share record; ``member_id`` is None for the group-keyed
    types (11, 12, 15) and set for the member-keyed ones (10, 13, 14)."""

    record_type: int
    group_id: str
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    epoch: int
    metadata_hash: int


@dataclass(frozen=True, slots=True)
class TargetAssignmentMetadataValue:
    assignment_epoch: int
    assignment_timestamp: int = 0


# An assignment as the records carry it: (topic id, partitions) pairs.
TopicPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class TargetAssignmentMemberValue:
    topic_partitions: TopicPartitions


@dataclass(frozen=True, slots=True)
class CurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: TopicPartitions


@dataclass(frozen=True, slots=True)
class TopicPartitionsInfo:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicInfo:
    topic_id: uuid.UUID
    topic_name: str


@dataclass(frozen=True, slots=True)
class StatePartitionMetadataValue:
    initializing_topics: tuple[TopicPartitionsInfo, ...]
    initialized_topics: tuple[TopicPartitionsInfo, ...]
    deleting_topics: tuple[TopicInfo, ...]


ShareValue = (ShareSnapshotValue | ShareUpdateValue | MemberMetadataValue | GroupMetadataValue
              | TargetAssignmentMetadataValue | TargetAssignmentMemberValue
              | CurrentMemberAssignmentValue | StatePartitionMetadataValue)


# ---- writing -------------------------------------------------------------------------------

def _string(value: str) -> bytes:
    b = value.encode()
    return _I16.pack(len(b)) + b


def _cstring(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    b = value.encode()
    return _uvarint(len(b) + 1) + b


def _carray(items: list[bytes] | tuple[bytes, ...]) -> bytes:
    return _uvarint(len(items) + 1) + b"".join(items)


def _tags(tags: dict[int, bytes]) -> bytes:
    out = bytearray(_uvarint(len(tags)))
    for tag in sorted(tags):
        out += _uvarint(tag) + _uvarint(len(tags[tag])) + tags[tag]
    return bytes(out)


_NO_TAGS = b"\x00"


def _batches(batches: tuple[StateBatch, ...]) -> bytes:
    return _carray([_I64.pack(b.first_offset) + _I64.pack(b.last_offset)
                    + _I8.pack(b.delivery_state) + _I16.pack(b.delivery_count) + _NO_TAGS
                    for b in batches])


def _int32s(values: tuple[int, ...]) -> bytes:
    return _carray([_I32.pack(v) for v in values])


def _topic_partitions(tps: TopicPartitions) -> bytes:
    return _carray([tid.bytes + _int32s(parts) + _NO_TAGS for tid, parts in tps])


def _dcc_tag(count: int) -> dict[int, bytes]:
    return {} if count == -1 else {0: _I32.pack(count)}


def encode_state_key(key: ShareStateKey) -> bytes:
    if key.record_type not in (SHARE_SNAPSHOT, SHARE_UPDATE):
        raise ShareLogFormatError(f"not a __share_group_state key type: {key.record_type}")
    return (_I16.pack(key.record_type) + _string(key.group_id) + key.topic_id.bytes
            + _I32.pack(key.partition))


def encode_group_key(key: ShareGroupKey) -> bytes:
    if key.record_type in GROUP_KEYED:
        if key.member_id is not None:
            raise ShareLogFormatError(f"key type {key.record_type} has no member id")
        return _I16.pack(key.record_type) + _string(key.group_id)
    if key.record_type in MEMBER_KEYED:
        if key.member_id is None:
            raise ShareLogFormatError(f"key type {key.record_type} needs a member id")
        return _I16.pack(key.record_type) + _string(key.group_id) + _string(key.member_id)
    raise ShareLogFormatError(f"not a share-group key type: {key.record_type}")


def encode_value(value: ShareValue) -> bytes:
    """Version 0 of the value, prefixed with that version as Kafka writes it."""
    head = _I16.pack(0)
    match value:
        case ShareSnapshotValue():
            return (head + _I32.pack(value.snapshot_epoch) + _I32.pack(value.state_epoch)
                    + _I32.pack(value.leader_epoch) + _I64.pack(value.start_offset)
                    + _I64.pack(value.create_timestamp) + _I64.pack(value.write_timestamp)
                    + _batches(value.state_batches) + _tags(_dcc_tag(value.delivery_complete_count)))
        case ShareUpdateValue():
            return (head + _I32.pack(value.snapshot_epoch) + _I32.pack(value.leader_epoch)
                    + _I64.pack(value.start_offset) + _batches(value.state_batches)
                    + _tags(_dcc_tag(value.delivery_complete_count)))
        case MemberMetadataValue():
            return (head + _cstring(value.rack_id) + _cstring(value.client_id)
                    + _cstring(value.client_host)
                    + _carray([_cstring(t) for t in value.subscribed_topic_names]) + _NO_TAGS)
        case GroupMetadataValue():
            return head + _I32.pack(value.epoch) + _I64.pack(value.metadata_hash) + _NO_TAGS
        case TargetAssignmentMetadataValue():
            ts = value.assignment_timestamp
            return head + _I32.pack(value.assignment_epoch) + _tags({} if ts == 0 else
                                                                    {0: _I64.pack(ts)})
        case TargetAssignmentMemberValue():
            return head + _topic_partitions(value.topic_partitions) + _NO_TAGS
        case CurrentMemberAssignmentValue():
            return (head + _I32.pack(value.member_epoch) + _I32.pack(value.previous_member_epoch)
                    + _I8.pack(value.state) + _topic_partitions(value.assigned_partitions)
                    + _NO_TAGS)
        case StatePartitionMetadataValue():
            def infos(ts: tuple[TopicPartitionsInfo, ...]) -> bytes:
                return _carray([t.topic_id.bytes + _cstring(t.topic_name)
                                + _int32s(t.partitions) + _NO_TAGS for t in ts])
            return (head + infos(value.initializing_topics) + infos(value.initialized_topics)
                    + _carray([t.topic_id.bytes + _cstring(t.topic_name) + _NO_TAGS
                               for t in value.deleting_topics]) + _NO_TAGS)
    raise ShareLogFormatError(f"not a share record value: {type(value).__name__}")


# ---- reading -------------------------------------------------------------------------------

class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def fixed(self, st: struct.Struct) -> int:
        if self.pos + st.size > len(self.data):
            raise ShareLogFormatError(f"field of {st.size} bytes at {self.pos} overruns the "
                                      f"{len(self.data)}-byte record")
        (v,) = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return v

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ShareLogFormatError(f"field of {n} bytes at {self.pos} overruns the "
                                      f"{len(self.data)}-byte record")
        v = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return v

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            if self.pos >= len(self.data):
                raise ShareLogFormatError("varint overruns the record")
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise ShareLogFormatError("varint longer than 5 bytes")

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16))

    def string(self) -> str:
        return self._decode(self.take(self.fixed(_I16)))

    def cstring(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._decode(self.take(n - 1))

    def required_cstring(self) -> str:
        v = self.cstring()
        if v is None:
            raise ShareLogFormatError("null where a string is required")
        return v

    @staticmethod
    def _decode(b: bytes) -> str:
        try:
            return b.decode()
        except UnicodeDecodeError as e:
            raise ShareLogFormatError(f"string is not UTF-8: {e}") from None

    def count(self) -> int:
        n = self.uvarint()
        if n == 0:
            raise ShareLogFormatError("null where an array is required")
        if n - 1 > len(self.data) - self.pos:
            raise ShareLogFormatError(f"array of {n - 1} entries overruns the record")
        return n - 1

    def tags(self) -> dict[int, bytes]:
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self.take(self.uvarint())
        return out

    def end(self) -> None:
        if self.pos != len(self.data):
            raise ShareLogFormatError(f"{len(self.data) - self.pos} bytes left after the record")


def _tag_int(tags: dict[int, bytes], st: struct.Struct, default: int) -> int:
    raw = tags.get(0)
    if raw is None:
        return default
    if len(raw) != st.size:
        raise ShareLogFormatError(f"tagged field 0 of {len(raw)} bytes, {st.size} expected")
    return st.unpack(raw)[0]


def _read_batches(r: _Reader) -> tuple[StateBatch, ...]:
    out = []
    for _ in range(r.count()):
        out.append(StateBatch(r.fixed(_I64), r.fixed(_I64), r.fixed(_I8), r.fixed(_I16)))
        r.tags()
    return tuple(out)


def _read_int32s(r: _Reader) -> tuple[int, ...]:
    return tuple(r.fixed(_I32) for _ in range(r.count()))


def _read_topic_partitions(r: _Reader) -> TopicPartitions:
    out = []
    for _ in range(r.count()):
        tid = r.uuid()
        out.append((tid, _read_int32s(r)))
        r.tags()
    return tuple(out)


def decode_key(data: bytes | None) -> ShareStateKey | ShareGroupKey:
    """The key of any share record, of either topic; ShareLogFormatError for another type, so a
    replay can pass the record to the next decoder or skip it."""
    if data is None:
        raise ShareLogFormatError("record without a key")
    r = _Reader(data)
    record_type = r.fixed(_I16)
    key: ShareStateKey | ShareGroupKey
    if record_type in (SHARE_SNAPSHOT, SHARE_UPDATE):
        key = ShareStateKey(record_type, r.string(), r.uuid(), r.fixed(_I32))
    elif record_type in GROUP_KEYED:
        key = ShareGroupKey(record_type, r.string())
    elif record_type in MEMBER_KEYED:
        key = ShareGroupKey(record_type, r.string(), r.string())
    else:
        raise ShareLogFormatError(f"not a share record key type: {record_type}")
    r.end()
    return key


def decode_value(record_type: int, data: bytes) -> ShareValue:
    """The value for a key of ``record_type`` (a tombstone's None is the caller's to handle)."""
    r = _Reader(data)
    version = r.fixed(_I16)
    if version != 0:
        raise ShareLogFormatError(f"unsupported value version {version} for record type "
                                  f"{record_type}")
    value: ShareValue
    if record_type == SHARE_SNAPSHOT:
        head = (r.fixed(_I32), r.fixed(_I32), r.fixed(_I32), r.fixed(_I64), r.fixed(_I64),
                r.fixed(_I64))
        batches = _read_batches(r)
        value = ShareSnapshotValue(*head, batches, _tag_int(r.tags(), _I32, -1))
    elif record_type == SHARE_UPDATE:
        snap, leader, start = r.fixed(_I32), r.fixed(_I32), r.fixed(_I64)
        batches = _read_batches(r)
        value = ShareUpdateValue(snap, leader, start, batches, _tag_int(r.tags(), _I32, -1))
    elif record_type == SHARE_MEMBER_METADATA:
        rack, client_id, host = r.cstring(), r.required_cstring(), r.required_cstring()
        topics = tuple(r.required_cstring() for _ in range(r.count()))
        r.tags()
        value = MemberMetadataValue(rack, client_id, host, topics)
    elif record_type == SHARE_GROUP_METADATA:
        value = GroupMetadataValue(r.fixed(_I32), r.fixed(_I64))
        r.tags()
    elif record_type == SHARE_TARGET_ASSIGNMENT_METADATA:
        epoch = r.fixed(_I32)
        value = TargetAssignmentMetadataValue(epoch, _tag_int(r.tags(), _I64, 0))
    elif record_type == SHARE_TARGET_ASSIGNMENT_MEMBER:
        value = TargetAssignmentMemberValue(_read_topic_partitions(r))
        r.tags()
    elif record_type == SHARE_CURRENT_MEMBER_ASSIGNMENT:
        epoch, prev, state = r.fixed(_I32), r.fixed(_I32), r.fixed(_I8)
        value = CurrentMemberAssignmentValue(epoch, prev, state, _read_topic_partitions(r))
        r.tags()
    elif record_type == SHARE_STATE_PARTITION_METADATA:
        def infos() -> tuple[TopicPartitionsInfo, ...]:
            out = []
            for _ in range(r.count()):
                tid, name = r.uuid(), r.required_cstring()
                out.append(TopicPartitionsInfo(tid, name, _read_int32s(r)))
                r.tags()
            return tuple(out)
        initializing, initialized = infos(), infos()
        deleting = []
        for _ in range(r.count()):
            deleting.append(TopicInfo(r.uuid(), r.required_cstring()))
            r.tags()
        r.tags()
        value = StatePartitionMetadataValue(initializing, initialized, tuple(deleting))
    else:
        raise ShareLogFormatError(f"not a share record type: {record_type}")
    r.end()
    return value
