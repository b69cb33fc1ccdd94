"""Records of the ``__consumer_offsets`` topic, in Kafka's own layout.

OffsetCommitKey v1: int16 1, string group, string topic, int32 partition.
OffsetCommitValue v3: int16 3, int64 offset, int32 leader_epoch, string metadata,
int64 commit_timestamp. GroupMetadataKey v2: int16 2, string group.
GroupMetadataValue v3: int16 3, string protocol_type, int32 generation,
nullable string protocol, nullable string leader, int64 state_timestamp, array
of members (string member_id, nullable string instance_id, string client_id,
string client_host, int32 rebalance_timeout, int32 session_timeout, bytes
subscription, bytes assignment). A null value deletes the key.
Source: Kafka's OffsetCommitKey/Value.json and GroupMetadataKey/Value.json.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class GroupLogFormatError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_timestamp: int
    members: tuple[MemberValue, ...]


def _s(value: str | None) -> bytes:
    if value is None:
        return _I16.pack(-1)
    b = value.encode()
    return _I16.pack(len(b)) + b


def _b(value: bytes) -> bytes:
    return _I32.pack(len(value)) + value


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def fixed(self, st: struct.Struct) -> int:
        try:
            (v,) = st.unpack_from(self.data, self.pos)
        except struct.error as e:
            raise GroupLogFormatError(str(e)) from None
        self.pos += st.size
        return v

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise GroupLogFormatError(f"field of {n} bytes at {self.pos} overruns the "
                                      f"{len(self.data)}-byte record")
        v = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return v

    def string(self) -> str | None:
        n = self.fixed(_I16)
        if n == -1:
            return None
        if n < 0:
            raise GroupLogFormatError(f"negative string length {n}")
        try:
            return self._take(n).decode()
        except UnicodeDecodeError as e:
            raise GroupLogFormatError(f"string is not UTF-8: {e}") from None

    def required_string(self) -> str:
        v = self.string()
        if v is None:
            raise GroupLogFormatError("null where a string is required")
        return v

    def bytes_(self) -> bytes:
        n = self.fixed(_I32)
        return self._take(max(n, 0))

    def count(self) -> int:
        n = self.fixed(_I32)
        if n < 0 or n > len(self.data) - self.pos:
            raise GroupLogFormatError(f"array of {n} entries overruns the record")
        return n


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return _I16.pack(1) + _s(group) + _s(topic) + _I32.pack(partition)


def group_key(group: str) -> bytes:
    return _I16.pack(2) + _s(group)


def decode_key(data: bytes | None):
    """("offset", group, topic, partition) or ("group", group); GroupLogFormatError for
    anything else, so a replay can skip it (Kafka's GroupCoordinatorRecordSerde throws
    for an unknown key version too, and its loader skips such records)."""
    if data is None:
        raise GroupLogFormatError("record without a key")
    r = _Reader(data)
    version = r.fixed(_I16)
    if version in (0, 1):
        return ("offset", r.required_string(), r.required_string(), r.fixed(_I32))
    if version == 2:
        return ("group", r.required_string())
    raise GroupLogFormatError(f"unknown __consumer_offsets key version {version}")


def encode_offset(v: OffsetValue) -> bytes:
    return (_I16.pack(3) + _I64.pack(v.offset) + _I32.pack(v.leader_epoch) + _s(v.metadata)
            + _I64.pack(v.commit_timestamp))


def decode_offset(data: bytes) -> OffsetValue:
    r = _Reader(data)
    version = r.fixed(_I16)
    if version != 3:
        raise GroupLogFormatError(f"unsupported offset value version {version}")
    return OffsetValue(r.fixed(_I64), r.fixed(_I32), r.string() or "", r.fixed(_I64))


def encode_group(v: GroupValue) -> bytes:
    out = bytearray(_I16.pack(3) + _s(v.protocol_type) + _I32.pack(v.generation) + _s(v.protocol)
                    + _s(v.leader) + _I64.pack(v.state_timestamp) + _I32.pack(len(v.members)))
    for m in v.members:
        out += (_s(m.member_id) + _s(m.instance_id) + _s(m.client_id) + _s(m.client_host)
                + _I32.pack(m.rebalance_timeout_ms) + _I32.pack(m.session_timeout_ms)
                + _b(m.subscription) + _b(m.assignment))
    return bytes(out)


def decode_group(data: bytes) -> GroupValue:
    r = _Reader(data)
    version = r.fixed(_I16)
    if version != 3:
        raise GroupLogFormatError(f"unsupported group value version {version}")
    protocol_type = r.string() or ""
    generation = r.fixed(_I32)
    protocol = r.string()
    leader = r.string()
    ts = r.fixed(_I64)
    members = []
    for _ in range(r.count()):
        members.append(MemberValue(r.string() or "", r.string(), r.string() or "", r.string() or "",
                                   r.fixed(_I32), r.fixed(_I32), r.bytes_(), r.bytes_()))
    return GroupValue(protocol_type, generation, protocol, leader, ts, tuple(members))
