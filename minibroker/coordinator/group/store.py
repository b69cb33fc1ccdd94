"""The group coordinator's ``__consumer_offsets``: writing it, replaying it, snapshotting it.

Committed offsets and group metadata are records in ``__consumer_offsets`` (Kafka's
layout, ``protocol/group_log.py``); the state in memory is what replaying them builds,
and a coordinator snapshot is a shortcut to that state at a known offset per partition.
Everything here is synchronous: replay needs no event loop.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from minibroker_protocol import group_log as gl
from minibroker_protocol.records import build_batch, parse_control_record
from minibroker_protocol.topics import GROUP_METADATA_TOPIC
from minibroker_storage.lazylog import get_logger

from .. import replay, snapshot
from .model import Group, Member, Offset

log = get_logger("minibroker.group")

SNAPSHOT_FILE = "group-coordinator.snapshot"

_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")


class OffsetsTopic(Protocol):
    """What the coordinator needs of ``__consumer_offsets``."""

    def partition_for(self, group_id: str) -> int: ...

    def append(self, partition: int, batch: bytes) -> int:
        """Append a batch (creating the topic on first use); its base offset."""

    def info(self):
        """The topic's info (``partitions``, ``topic_id``), or None before it exists."""

    def log(self, partition: int):
        """A partition's log, for replay and its end offset."""


class BrokerOffsetsTopic:
    """``__consumer_offsets`` from the broker's log manager and internal-log appender."""

    def __init__(self, logs, internal_log: Callable[[str, int], Any],
                 partition_for: Callable[[str], int]) -> None:
        self._logs = logs
        self._internal_log = internal_log
        self.partition_for = partition_for

    def append(self, partition: int, batch: bytes) -> int:
        plog = self._internal_log(GROUP_METADATA_TOPIC, partition)
        return plog.append(batch, origin="coordinator").base_offset

    def info(self):
        return self._logs.topic(GROUP_METADATA_TOPIC)

    def log(self, partition: int):
        return self._logs.get_log(GROUP_METADATA_TOPIC, partition)


def _keyed(key: bytes, value: bytes) -> bytes:
    return _U32.pack(len(key)) + key + value


def _offset_value(o: Offset) -> bytes:
    return gl.encode_offset(gl.OffsetValue(o.offset, o.leader_epoch, o.metadata,
                                           o.commit_timestamp))


class GroupStore:
    def __init__(self, topic: OffsetsTopic, groups: dict[str, Group], *,
                 wall_ms: Callable[[], int], data_dir: str | os.PathLike | None) -> None:
        self.topic = topic
        self.groups = groups
        self._wall_ms = wall_ms
        self.data_dir = data_dir
        self.snapshots = snapshot.Schedule()
        self._applied_end: dict[int, int] = {}  # partition -> log offset the state covers up to
        # Share groups' records (key types 10-15) belong to the share coordinator, which this
        # package must not import: the broker hands over its replay and its snapshot entries.
        self.share_replay: Callable[[bytes, bytes | None], str | None] | None = None
        self.share_snapshot: Callable[[], list[tuple[bytes, bytes]]] | None = None

    # -- writing --------------------------------------------------------------------------
    def append(self, group_id: str, records: list[dict],
               producer: tuple[int, int] | None = None) -> int:
        if producer is None:
            batch = build_batch(records)
        else:
            # A transactional batch of the committing producer, so the transaction's
            # marker on this partition decides whether the offsets count.
            batch = build_batch(records, producer_id=producer[0], producer_epoch=producer[1],
                                base_sequence=-1, transactional=True)
        partition = self.topic.partition_for(group_id)
        base = self.topic.append(partition, batch)
        self._applied_end[partition] = base + len(records)
        self.snapshots.wrote(len(records))
        return base

    def persist_group(self, g: Group) -> None:
        value = gl.GroupValue(
            g.protocol_type or "", g.generation, g.protocol, g.leader, self._wall_ms(),
            tuple(gl.MemberValue(m.member_id, m.instance_id, m.client_id, m.client_host,
                                 m.rebalance_timeout_ms, m.session_timeout_ms,
                                 m.metadata_for(g.protocol) if g.protocol else b"", m.assignment)
                  for m in g.members.values()))
        encoded = gl.encode_group(value)
        self.append(g.group_id, [{"key": gl.group_key(g.group_id), "value": encoded}])
        g.persisted_value = encoded

    def write_offsets(self, group_id: str, offsets: dict[tuple[str, int], Offset],
                      producer: tuple[int, int] | None = None) -> None:
        """One record per offset; each remembers where it landed, so a later
        transactional completion can tell which commit is newer."""
        base = self.append(group_id, [
            {"key": gl.offset_key(group_id, t, p), "value": _offset_value(o)}
            for (t, p), o in offsets.items()], producer=producer)
        for i, o in enumerate(offsets.values()):
            o.log_offset = base + i

    def marker_written(self, partition: int) -> None:
        """A transaction marker is the partition's last record: the state now covers
        the log up to its end."""
        self._applied_end[partition] = self.topic.log(partition).log_end_offset
        self.snapshots.wrote()

    # -- replay ---------------------------------------------------------------------------
    def load(self) -> bool:
        """Replay ``__consumer_offsets``: committed offsets, group generations, pending
        transactional offsets resolved by the markers that follow them. False when the
        topic does not exist yet."""
        info = self.topic.info()
        if info is None:
            return False
        t0 = time.perf_counter()
        logs = {p: self.topic.log(p) for p in range(info.partitions)}
        starts = self._load_snapshot(info, logs)
        records = skipped = 0
        skips = replay.Skips()
        for partition, plog in logs.items():
            for h, recs in replay.batches(plog, GROUP_METADATA_TOPIC, partition,
                                          starts[partition], "group_log.record_skipped",
                                          skips):
                if h.is_control:
                    try:
                        _v, kind = parse_control_record(recs[0].key) if recs else (0, -1)
                    except ValueError as e:
                        kind, reason = -1, str(e)
                    else:
                        reason = f"unknown control record type {kind}"
                    if kind not in (0, 1):
                        skipped += 1
                        log.warning("group_log.record_skipped", topic=GROUP_METADATA_TOPIC,
                                    partition=partition, offset=h.base_offset, reason=reason)
                        continue
                    self.complete_txn_offsets(h.producer_id, kind == 1, partition, log_it=False)
                    continue
                for rec in recs:
                    records += 1
                    problem = self.apply(rec.key, rec.value, rec.offset,
                                         h.producer_id if h.is_transactional else None)
                    if problem is not None:
                        skipped += 1
                        log.warning("group_log.record_skipped", topic=GROUP_METADATA_TOPIC,
                                    partition=partition, offset=rec.offset, reason=problem)
        self._applied_end = {p: plog.log_end_offset for p, plog in logs.items()}
        if records:
            self.snapshots.wrote(records)
        log.info("group.coordinator_loaded", groups=len(self.groups), records=records,
                 from_snapshot=any(starts[p] > logs[p].log_start_offset for p in logs),
                 skipped=skipped + skips.count,
                 ms=round((time.perf_counter() - t0) * 1000, 1))
        return True

    def complete_txn_offsets(self, producer_id: int, commit: bool, partition: int,
                             log_it: bool) -> None:
        """The transaction of ``producer_id`` ended on ``partition``: only the groups whose
        offsets live there are concerned."""
        complete_txn_offsets(
            (g for g in self.groups.values() if self.topic.partition_for(g.group_id) == partition),
            producer_id, commit, log_it)

    def apply(self, key: bytes | None, value: bytes | None, log_offset: int,
              txn_pid: int | None) -> str | None:
        """Apply one record of the log; the reason it cannot be applied, if so. Decoding
        comes first, so a bad record changes nothing."""
        ov: gl.OffsetValue | None = None
        gv: gl.GroupValue | None = None
        try:
            k = gl.decode_key(key)
            if value is None:
                pass  # a tombstone
            elif k[0] == "offset":
                ov = gl.decode_offset(value)
            else:
                gv = gl.decode_group(value)
        except gl.GroupLogFormatError as e:
            if (self.share_replay is not None and key is not None and len(key) >= 2
                    and 10 <= int.from_bytes(key[:2], "big") <= 15):
                return self.share_replay(bytes(key), None if value is None else bytes(value))
            return str(e)
        if k[0] == "offset":
            _, gid, topic, partition = k
            g = self.groups.setdefault(gid, Group(gid))
            v = ov
            if v is None:
                g.offsets.pop((topic, partition), None)
                return None
            off = Offset(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, log_offset)
            if txn_pid is not None:
                g.txn_offsets.setdefault(txn_pid, {})[(topic, partition)] = off
            else:
                g.offsets[(topic, partition)] = off
            return None
        _, gid = k
        if gv is None or value is None:  # either both or neither: gv is decoded from value
            self.groups.pop(gid, None)
            return None
        g = self.groups.setdefault(gid, Group(gid))
        _apply_group_value(g, gv)
        g.persisted_value = bytes(value)
        return None

    # -- snapshots ---------------------------------------------------------------------------
    # Entries: b"G" group key | group value; b"O" log offset i64 | offset key | value;
    # b"T" producer id i64 | log offset i64 | offset key | value (a pending transactional
    # commit). Keys are length-prefixed (u32); values take the rest of the entry.
    def snapshot_path(self) -> str:
        # data_dir is None only for in-memory machines (tests), which never snapshot; a
        # clear error instead of join's TypeError would be a behaviour change (issue 15).
        return os.path.join(self.data_dir, SNAPSHOT_FILE)  # type: ignore[arg-type]

    def capture_snapshot(self) -> tuple[str, Callable[[], bytes], dict] | None:
        info = self.topic.info()
        if info is None:
            return None
        offsets = {p: self.topic.log(p).log_end_offset for p in range(info.partitions)}
        foreign = {p: o for p, o in offsets.items() if o != self._applied_end.get(p, 0)}
        if foreign:
            # Something other than this coordinator appended to its log (markers are the
            # coordinator's too, see marker_written): the state in memory is not what a
            # replay would build, so it must not claim those offsets.
            log.warning("group.snapshot_skipped", partitions=sorted(foreign),
                        reason="records in the log this coordinator did not write")
            self.snapshots.taken()
            return None
        # Copies of the containers are taken here; the Offset objects in them are never
        # changed once stored, so encoding can wait for the writer's thread, off the loop.
        groups = [(g.group_id, g.persisted_value, list(g.offsets.items()),
                   [(pid, list(pending.items())) for pid, pending in g.txn_offsets.items()])
                  for g in self.groups.values()]
        shares = self.share_snapshot() if self.share_snapshot is not None else []

        def encode() -> bytes:
            entries = [b"S" + _keyed(k, v) for k, v in shares]
            for gid, persisted, committed, pending_by_pid in groups:
                if persisted is not None:
                    entries.append(b"G" + _keyed(gl.group_key(gid), persisted))
                for (t, p), o in committed:
                    entries.append(b"O" + _I64.pack(o.log_offset) + _keyed(
                        gl.offset_key(gid, t, p), _offset_value(o)))
                for pid, pending in pending_by_pid:
                    for (t, p), o in pending:
                        entries.append(b"T" + _I64.pack(pid) + _I64.pack(o.log_offset) + _keyed(
                            gl.offset_key(gid, t, p), _offset_value(o)))
            return snapshot.encode(info.topic_id, offsets, entries)

        self.snapshots.taken()
        return self.snapshot_path(), encode, {"groups": len(groups),
                                              "offsets": sum(len(c) for _, _, c, _ in groups)}

    def _load_snapshot(self, info, logs) -> dict[int, int]:
        """Load the snapshot if it can be trusted; where each partition's replay starts."""
        starts = {p: plog.log_start_offset for p, plog in logs.items()}
        path = self.snapshot_path()
        snap = snapshot.load(path, "group", info.topic_id, logs)
        if snap is None:
            return starts
        try:
            for entry in snap.entries:
                self._load_entry(entry)
        except (gl.GroupLogFormatError, struct.error, ValueError) as e:
            # The checksum held, so this is a broker bug, not damage: trust the log.
            log.error("group.snapshot_ignored", path=path, reason=f"entry does not decode: {e}",
                      consequence="full replay")
            self.groups.clear()
            return starts
        log.info("group.snapshot_loaded", path=path, groups=len(self.groups),
                 offsets=dict(sorted(snap.offsets.items())) if len(snap.offsets) <= 8 else None)
        return {p: snap.offsets[p] for p in logs}

    def _load_entry(self, entry: bytes) -> None:
        kind, pos = entry[:1], 1
        pid = log_offset = -1
        if kind == b"T":
            (pid,) = _I64.unpack_from(entry, pos)
            pos += 8
        if kind in (b"T", b"O"):
            (log_offset,) = _I64.unpack_from(entry, pos)
            pos += 8
        elif kind not in (b"G", b"S"):
            raise ValueError(f"unknown snapshot entry kind {kind!r}")
        (n,) = _U32.unpack_from(entry, pos)
        key, value = entry[pos + 4:pos + 4 + n], entry[pos + 4 + n:]
        reason = self.apply(key, value, log_offset, pid if kind == b"T" else None)
        if reason is not None:
            raise ValueError(reason)


def _apply_group_value(g: Group, v: gl.GroupValue) -> None:
    g.generation = v.generation
    g.protocol_type = v.protocol_type or None
    g.protocol = v.protocol
    g.leader = v.leader
    g.members = {}
    g.static = {}
    for mv in v.members:
        m = Member(mv.member_id, mv.instance_id, mv.client_id, mv.client_host,
                   mv.session_timeout_ms, mv.rebalance_timeout_ms, g.protocol_type or "",
                   [(v.protocol or "", mv.subscription)], assignment=mv.assignment,
                   is_new=False)
        g.members[m.member_id] = m
        if m.instance_id is not None:
            g.static[m.instance_id] = m.member_id


def complete_txn_offsets(groups: Iterable[Group], producer_id: int, commit: bool,
                         log_it: bool) -> None:
    """The transaction of ``producer_id`` ended: its pending offsets in ``groups`` count
    (commit) or vanish (abort)."""
    for g in groups:
        pending = g.txn_offsets.pop(producer_id, None)
        if not pending:
            continue
        if commit:
            # completePendingTxnOffsetCommit: a newer plain commit wins.
            for tp, off in pending.items():
                current = g.offsets.get(tp)
                if current is None or current.log_offset < off.log_offset:
                    g.offsets[tp] = off
        if log_it:
            log.info("group.txn_offsets_" + ("committed" if commit else "aborted"),
                     group_id=g.group_id, producer_id=producer_id, partitions=len(pending))
