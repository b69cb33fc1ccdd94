"""Committed offsets of the groups: OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete.

A commit is checked against the group's membership and generation (Kafka's
``GroupCoordinator.validateOffsetCommit``), written to ``__consumer_offsets``, then
applied. Offsets committed inside a transaction stay pending per producer id until the
transaction's marker lands on the group's offsets partition; a commit completed by a
marker never overwrites a plain commit written after it (Kafka's
``GroupMetadata.completePendingTxnOffsetCommit``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from minibroker_protocol import group_log as gl
from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.topics import GROUP_METADATA_TOPIC
from minibroker_storage.lazylog import get_logger

from .consumer_group import subscribed_by_consumer_group, validate_offset_commit, validate_offset_fetch
from .model import Group, GroupError, Member, Offset
from .state import GroupState
from .store import GroupStore
from .streams_group import (
    source_topics_of,
    validate_streams_offset_commit,
    validate_streams_offset_fetch,
)

log = get_logger("minibroker.group")

# The transaction coordinator's check that a producer may write to a partition
# (pid, epoch, topic, partition): None, or the error to answer.
# (producer id, epoch, topic, partition, add implicitly: transactions v2) -> refusal or None
VerifyProduce = Callable[[int, int, str, int, bool], "ErrorCode | None"]


class Offsets:
    def __init__(self, groups: dict[str, Group], store: GroupStore,
                 touch: Callable[[Group, Member], None],
                 verify_produce: VerifyProduce | None) -> None:
        self.groups = groups
        self.store = store
        self._touch = touch  # a commit counts as a member's sign of life
        self.verify_produce = verify_produce

    def _check_commit_member(self, g: Group | None, generation: int, member_id: str,
                             instance_id: str | None, transactional: bool = False,
                             api_version: int = 0, kip_1319: bool = False) -> None:
        """Kafka's GroupCoordinator.validateOffsetCommit (ConsumerGroup's for a consumer group,
        StreamsGroup's for a streams group). ``kip_1319``: TxnOffsetCommit v6+, which may answer
        GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH (KIP-1319)."""
        if g is not None and (g.consumer is not None or g.streams is not None):
            check = validate_offset_commit if g.consumer is not None else validate_streams_offset_commit
            try:
                check(g, member_id, instance_id, generation, transactional, api_version)
            except GroupError as e:
                if transactional and e.code == ErrorCode.stale_member_epoch and not kip_1319:
                    # TxnOffsetCommit has no STALE_MEMBER_EPOCH (OffsetMetadataManager.
                    # validateTransactionalOffsetCommit): a zombie's generation is illegal
                    raise GroupError(ErrorCode.illegal_generation) from None
                raise
            return
        if g is None or not g.members:
            if generation < 0:
                return  # the group only stores offsets (assign() consumers)
            if g is None or g.state == GroupState.DEAD:
                # OffsetCommit v9+ names the missing group (Kafka 4.4, tests/differential)
                raise GroupError(ErrorCode.group_id_not_found if api_version >= 9 or kip_1319
                                 else ErrorCode.illegal_generation)
        if generation >= 0 or member_id or instance_id is not None:
            if instance_id is not None and g.static.get(instance_id, member_id) != member_id:
                raise GroupError(ErrorCode.fenced_instance_id)
            if member_id not in g.members:
                raise GroupError(ErrorCode.unknown_member_id)
            if generation != g.generation:
                raise GroupError(ErrorCode.illegal_generation)
            if not transactional and g.state == GroupState.COMPLETING_REBALANCE:
                raise GroupError(ErrorCode.rebalance_in_progress)
        elif not transactional and g.members:
            # The group is managed and the committer is not one of its members.
            raise GroupError(ErrorCode.unknown_member_id)

    def commit(self, group_id: str, generation: int, member_id: str,
               instance_id: str | None, offsets: dict[tuple[str, int], Offset],
               api_version: int = 0) -> None:
        g = self.groups.get(group_id)
        self._check_commit_member(g, generation, member_id, instance_id, api_version=api_version)
        if g is None:
            g = self.groups[group_id] = Group(group_id)
        self.store.write_offsets(group_id, offsets)
        g.offsets.update(offsets)
        if member_id and g.consumer is None and g.streams is None:
            m = g.members.get(member_id)
            if m is not None:
                self._touch(g, m)

    def verify_txn_producer(self, group_id: str, producer_id: int,
                            producer_epoch: int, add: bool = False) -> ErrorCode | None:
        """May this producer write to the group's offsets partition (is it in a
        transaction that added it)? None when it may, else the code to answer. With ``add``
        (TxnOffsetCommit v5, transactions v2) the partition joins the transaction."""
        if self.verify_produce is None:
            return None
        return self.verify_produce(producer_id, producer_epoch, GROUP_METADATA_TOPIC,
                                   self.store.topic.partition_for(group_id), add)

    def txn_commit(self, group_id: str, producer_id: int, producer_epoch: int,
                   generation: int, member_id: str, instance_id: str | None,
                   offsets: dict[tuple[str, int], Offset], api_version: int = 0) -> None:
        g = self.groups.get(group_id)
        # KIP-447: the consumer's generation fences zombies of older generations.
        self._check_commit_member(g, generation, member_id, instance_id, transactional=True,
                                  kip_1319=api_version >= 6)
        if g is None:
            g = self.groups[group_id] = Group(group_id)
        self.store.write_offsets(group_id, offsets, producer=(producer_id, producer_epoch))
        g.txn_offsets.setdefault(producer_id, {}).update(offsets)

    def fetch(self, group_id: str, partitions: list[tuple[str, int]] | None,
              require_stable: bool, member_id: str | None = None,
              member_epoch: int = -1) -> tuple[ErrorCode, list]:
        """[(topic, partition, Offset | None, error)], or all committed when partitions is None.
        A consumer group's member asking (OffsetFetch v9+) must be at its epoch."""
        g = self.groups.get(group_id)
        if g is not None and g.consumer is not None:
            validate_offset_fetch(g, member_id, member_epoch)
        elif g is not None and g.streams is not None:
            validate_streams_offset_fetch(g, member_id, member_epoch)
        if partitions is None:
            partitions = sorted(g.offsets) if g is not None else []
        out: list[tuple[str, int, Offset | None, ErrorCode]] = []
        for tp in partitions:
            if g is not None and require_stable and g.has_pending_txn_offset(tp):
                out.append((tp[0], tp[1], None, ErrorCode.unstable_offset_commit))
                continue
            off = g.offsets.get(tp) if g is not None else None
            out.append((tp[0], tp[1], off, ErrorCode.none))
        return ErrorCode.none, out

    def delete(self, group_id: str, partitions: list[tuple[str, int]]) -> dict:
        g = self.groups.get(group_id)
        if g is None:
            raise GroupError(ErrorCode.group_id_not_found)
        subscribed: set[str] = set()
        if g.consumer is not None:
            subscribed = subscribed_by_consumer_group(g.consumer)
        elif g.streams is not None:
            subscribed = source_topics_of(g.streams)
        elif g.state != GroupState.EMPTY and g.members:
            if g.protocol_type != "consumer":
                raise GroupError(ErrorCode.non_empty_group)
            subscribed = {t for m in g.members.values()
                          for t in subscribed_topics(m.metadata_for(g.protocol))}
        result = {}
        tombstones = []
        for tp in partitions:
            if tp[0] in subscribed:
                result[tp] = ErrorCode.group_subscribed_to_topic
                continue
            result[tp] = ErrorCode.none
            if g.offsets.pop(tp, None) is not None:
                tombstones.append({"key": gl.offset_key(group_id, *tp), "value": None})
        if tombstones:
            self.store.append(group_id, tombstones)
        return result


def subscribed_topics(metadata: bytes) -> list[str]:
    """Topics of a ConsumerProtocolSubscription (version, array of topics, ...)."""
    try:
        pos = 2
        (n,) = struct.unpack_from(">i", metadata, pos)
        pos += 4
        topics = []
        for _ in range(n):
            (ln,) = struct.unpack_from(">h", metadata, pos)
            pos += 2
            topics.append(metadata[pos:pos + ln].decode())
            pos += ln
        return topics
    except (struct.error, UnicodeDecodeError):
        return []
