"""The share session cache against Kafka 4.4's SharePartitionManager.newContext /
acknowledgeSessionUpdate and the answers seen on the reference (docs/design/share-groups.md §4, §10)."""

from __future__ import annotations

import pytest

from minibroker.coordinator.share.sessions import (
    MAX_EPOCH,
    PartitionResult,
    ShareSessionCache,
    ShareSessionError,
    next_epoch,
)
from minibroker_protocol.errors import ErrorCode

P0, P1, P2 = ("tid", 0), ("tid", 1), ("tid", 2)


def code_of(fn, *args, **kwargs) -> ErrorCode:
    with pytest.raises(ShareSessionError) as e:
        fn(*args, **kwargs)
    return e.value.code


def open_session(cache: ShareSessionCache, member: str = "m", partitions=(P0,), conn: str = "c1"):
    return cache.new_context("g", member, 0, partitions, [], False, conn)


def test_epochs_open_advance_and_mismatch():
    cache = ShareSessionCache()
    ctx = open_session(cache)
    assert ctx.full and ctx.session.epoch == 1 and ctx.partitions == (P0,)
    ctx = cache.new_context("g", "m", 1, [], [], True, "c1")
    assert not ctx.full and ctx.session.epoch == 2
    # §10: epoch 1 again -> top-level INVALID_SHARE_SESSION_EPOCH
    assert code_of(cache.new_context, "g", "m", 1, [], [], False, "c1") == ErrorCode.invalid_share_session_epoch
    assert code_of(cache.new_context, "g", "other", 1, [], [], False, "c1") == ErrorCode.share_session_not_found
    assert cache.get("g", "m").epoch == 2


def test_epoch_zero_with_acks_is_invalid_request_and_keeps_the_old_session():
    cache = ShareSessionCache()
    open_session(cache)
    assert code_of(cache.new_context, "g", "m", 0, [P0], [], True, "c1") == ErrorCode.invalid_request
    assert cache.new_context("g", "m", 1, [], [], False, "c1").session.epoch == 2


def test_epoch_zero_replaces_without_closing():
    cache = ShareSessionCache()
    open_session(cache, partitions=(P0, P1))
    ctx = open_session(cache, partitions=(P2,))
    assert len(cache) == 1 and ctx.session.epoch == 1 and list(ctx.session.partitions) == [P2]
    assert cache.members("g") == 1


def test_final_epoch():
    cache = ShareSessionCache()
    assert code_of(cache.new_context, "g", "m", -1, [], [], False, "c1") == ErrorCode.share_session_not_found
    open_session(cache)
    ctx = cache.new_context("g", "m", -1, [P0], [], True, "c1")
    assert ctx.close_after and ctx.full and ctx.partitions == ()  # FinalContext fetches nothing
    gone = cache.release("g", "m")
    assert list(gone.partitions) == [P0]
    assert code_of(cache.release, "g", "m") == ErrorCode.share_session_not_found
    # §10: a fetch after the close -> SHARE_SESSION_NOT_FOUND
    assert code_of(cache.new_context, "g", "m", -1, [], [], False, "c1") == ErrorCode.share_session_not_found


def test_session_limit():
    cache = ShareSessionCache(max_sessions=1)
    open_session(cache, "a")
    assert code_of(open_session, cache, "b") == ErrorCode.share_session_limit_reached
    open_session(cache, "a")  # the same key replaces, so it fits
    assert len(cache) == 1


def test_epoch_wraps_to_one():
    assert next_epoch(0) == 1 and next_epoch(MAX_EPOCH) == 1 and next_epoch(-1) == -1
    cache = ShareSessionCache()
    open_session(cache)
    cache.get("g", "m").epoch = MAX_EPOCH
    assert cache.new_context("g", "m", MAX_EPOCH, [], [], False, "c1").session.epoch == 1


def test_incremental_partition_set_and_response_partitions():
    cache = ShareSessionCache()
    full = open_session(cache, partitions=(P0, P0, P1))  # a repeated entry counts once
    assert full.partitions == (P0, P1)
    assert cache.response_partitions(full, {P0: PartitionResult(), P1: PartitionResult()}) == [P0, P1]
    ctx = cache.new_context("g", "m", 1, [P2], [P0], False, "c1")
    assert ctx.partitions == (P1, P2)
    nothing = {P1: PartitionResult(), P2: PartitionResult()}
    # the newly added partition is listed once, even with nothing to say
    assert cache.response_partitions(ctx, nothing) == [P2]
    ctx = cache.new_context("g", "m", 2, [], [], False, "c1")
    assert cache.response_partitions(ctx, nothing) == []  # §10: an empty Responses
    ctx = cache.new_context("g", "m", 3, [], [], False, "c1")
    assert cache.response_partitions(ctx, {P1: PartitionResult(has_records=True), P2: PartitionResult(
        error=ErrorCode.not_leader_or_follower)}) == [P1, P2]
    # an error makes the partition listed once more
    ctx = cache.new_context("g", "m", 4, [], [], False, "c1")
    assert cache.response_partitions(ctx, nothing) == [P2]
    ctx = cache.new_context("g", "m", 5, [], [], False, "c1")
    assert cache.response_partitions(ctx, nothing) == []


def test_share_acknowledge_epochs():
    cache = ShareSessionCache()
    # §10: ShareAcknowledge epoch 0 -> INVALID_SHARE_SESSION_EPOCH; -1 without a session -> NOT_FOUND
    assert code_of(cache.acknowledge_update, "g", "m", 0) == ErrorCode.invalid_share_session_epoch
    assert code_of(cache.acknowledge_update, "g", "m", -1) == ErrorCode.share_session_not_found
    assert code_of(cache.acknowledge_update, "g", "m", 1) == ErrorCode.share_session_not_found
    open_session(cache)
    assert code_of(cache.acknowledge_update, "g", "m", 0) == ErrorCode.invalid_share_session_epoch
    assert code_of(cache.acknowledge_update, "g", "m", 2) == ErrorCode.invalid_share_session_epoch
    assert cache.acknowledge_update("g", "m", 1).epoch == 2
    assert cache.acknowledge_update("g", "m", -1).epoch == 2  # closing does not advance


def test_disconnect_removes_the_session_and_reports_an_empty_group():
    cache = ShareSessionCache()
    open_session(cache, "a", conn="c1")
    open_session(cache, "b", conn="c2")
    gone, empty = cache.on_disconnect("c1")
    assert gone.member_id == "a" and not empty
    gone, empty = cache.on_disconnect("c2")
    assert gone.member_id == "b" and empty
    assert cache.on_disconnect("c2") == (None, False)


def test_disconnect_after_release_releases_nothing_again():
    cache = ShareSessionCache()
    open_session(cache, "a", conn="c1")
    cache.release("g", "a")
    assert cache.on_disconnect("c1") == (None, True)


def test_remove_all_on_share_version_off():
    cache = ShareSessionCache()
    open_session(cache, "a")
    open_session(cache, "b", conn="c2")
    assert {s.member_id for s in cache.remove_all()} == {"a", "b"}
    assert len(cache) == 0 and cache.members("g") == 0


def test_each_broker_keeps_its_own_session_of_a_member():
    """Kafka's ShareSessionCache is per broker: a member fetching from two leaders opens a
    session on each, and one's epoch 0 replaces nothing on the other."""
    cache = ShareSessionCache()
    a = cache.new_context("g", "m", 0, [P0], [], False, "c1", node=1)
    b = cache.new_context("g", "m", 0, [P1], [], False, "c2", node=2)
    assert a.session is not None and b.session is not None and a.session is not b.session
    assert cache.new_context("g", "m", 1, [], [], True, "c1", node=1).partitions == (P0,)
    assert cache.acknowledge_update("g", "m", 1, node=2).epoch == 2
    assert code_of(cache.acknowledge_update, "g", "m", 1, node=3) == ErrorCode.share_session_not_found
    assert cache.release("g", "m", node=1).partitions == {P0: False}
    assert cache.get("g", "m", node=2) is b.session and cache.get("g", "m", node=1) is None
