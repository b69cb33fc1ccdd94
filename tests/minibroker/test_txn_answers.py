"""The EndTxn and AddPartitionsToTxn handlers answer hand-written bytes (protocol/txn_wire.py)
beside the kio entity the request log and a quota's throttle read: the two must say the same
thing, for every version and for refusals too."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from minibroker.coordinator.txn.machine import TxnError
from minibroker.coordinator.txn.timeline import NO_TIMELINE
from minibroker.handlers.api import RequestContext, Response
from minibroker.handlers.txn import TxnHandlers
from minibroker_protocol import codec
from minibroker_protocol.build import nested
from minibroker_protocol.errors import ErrorCode


class FakeCoordinator:
    timeline = NO_TIMELINE

    def __init__(self, refuse: ErrorCode | None = None) -> None:
        self.refuse = refuse

    def end_txn(self, tid, pid, epoch, commit, client_tv, who):
        if self.refuse is not None:
            raise TxnError(self.refuse, "refused")
        return pid, epoch + (1 if client_tv >= 2 else 0)

    def add_partitions(self, tid, pid, epoch, partitions, who, group=None, client_tv=None):
        if self.refuse is not None:
            raise TxnError(self.refuse, "refused")

    def describe(self, tid):
        return None


class FakeLogs:
    def topic(self, name):
        return SimpleNamespace(partitions=4) if name == "t" else None


def handlers(refuse=None) -> TxnHandlers:
    return TxnHandlers(coordinator=FakeCoordinator(refuse), logs=FakeLogs(),  # type: ignore[arg-type]
                       producer_ids=None, offsets_partition_for=lambda g: 0)  # type: ignore[arg-type]


def ctx(api: int, version: int) -> RequestContext:
    return RequestContext(api, version, 4242, "c", SimpleNamespace(peer=("127.0.0.1", 1), client_software=None))


def same_as_kio(answer: Response) -> None:
    assert answer.entity is not None
    assert b"".join(answer.chunks) == codec.encode_response(4242, answer.entity)
    assert answer.size == len(b"".join(answer.chunks))


@pytest.mark.parametrize("version", range(0, 6))
@pytest.mark.parametrize("refuse", [None, ErrorCode.producer_fenced, ErrorCode.concurrent_transactions])
def test_end_txn_answer_matches_its_entity(version, refuse):
    req = codec.request_type(26, version)(transactional_id="tx", producer_id=9, producer_epoch=3, committed=True)
    answer = handlers(refuse).end_txn(ctx(26, version), req)
    same_as_kio(answer)
    if refuse is None:
        assert answer.entity.error_code == ErrorCode.none
    else:  # PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2 (errors.for_version)
        assert answer.entity.error_code != ErrorCode.none


@pytest.mark.parametrize("version", range(0, 4))
@pytest.mark.parametrize("topics,refuse", [
    ([("t", (0, 1))], None), ([("t", (0,)), ("missing", (2,))], None),
    ([("t", (3,))], ErrorCode.concurrent_transactions), ([("__consumer_offsets", (0,))], None)])
def test_add_partitions_answer_matches_its_entity(version, topics, refuse):
    cls = codec.request_type(24, version)
    T = nested(cls, "AddPartitionsToTxnTopic")
    req = cls(v3_and_below_transactional_id="tx", v3_and_below_producer_id=9, v3_and_below_producer_epoch=3,
              v3_and_below_topics=tuple(T(name=n, partitions=p) for n, p in topics))
    answer = handlers(refuse).add_partitions(ctx(24, version), req)
    same_as_kio(answer)
    codes = {(t.name, p.partition_index): p.partition_error_code
             for t in answer.entity.results_by_topic_v3_and_below for p in t.results_by_partition}
    assert set(codes) == {(n, p) for n, ps in topics for p in ps}


def test_a_refused_partition_refuses_the_request_in_the_hand_written_bytes_too():
    cls = codec.request_type(24, 3)
    T = nested(cls, "AddPartitionsToTxnTopic")
    req = cls(v3_and_below_transactional_id="tx", v3_and_below_producer_id=9, v3_and_below_producer_epoch=3,
              v3_and_below_topics=(T(name="t", partitions=(0,)), T(name="missing", partitions=(2,)),
                                   T(name="__consumer_offsets", partitions=(0,))))
    answer = handlers().add_partitions(ctx(24, 3), req)
    same_as_kio(answer)
    codes = {(t.name, p.partition_index): p.partition_error_code
             for t in answer.entity.results_by_topic_v3_and_below for p in t.results_by_partition}
    assert codes == {("t", 0): ErrorCode.operation_not_attempted,
                     ("missing", 2): ErrorCode.unknown_topic_or_partition,
                     ("__consumer_offsets", 0): ErrorCode.topic_authorization_failed}
