"""Random interleavings of idempotent producers, retries, gaps, epoch bumps and
restarts never leave a duplicate or a gap in the log."""

import os
import shutil
import tempfile
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker_protocol.batch import iter_headers
from minibroker_protocol.records import build_batch
from minibroker_storage import LogConfig, PartitionLog
from minibroker_storage.errors import InvalidProducerEpoch, OutOfOrderSequence
from minibroker_storage.producer_state import list_snapshots

from .batches import TS0, crash

PIDS = (11, 12, 13)

pid = st.sampled_from(PIDS)
send = st.tuples(st.just("send"), pid, st.integers(1, 4))
retry = st.tuples(st.just("retry"), pid, st.integers(0, 12))
gap = st.tuples(st.just("gap"), pid, st.integers(1, 3))
bump = st.tuples(st.just("bump"), pid, st.just(0))
roll = st.tuples(st.just("roll"), st.just(0), st.just(0))
reopen = st.tuples(st.just("reopen"), st.sampled_from(["clean", "crash", "lose_snapshots"]), st.just(0))
operations = st.lists(
    st.one_of(send, send, send, retry, retry, gap, bump, roll, reopen), min_size=1, max_size=50
)


@dataclass
class Sent:
    epoch: int
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int
    batch: bytes


@dataclass
class Producer:
    epoch: int = 0
    next_seq: int = 0
    sent: list[Sent] = field(default_factory=list)

    def retained(self) -> list[Sent]:
        return [s for s in self.sent if s.epoch == self.epoch][-5:]


def batch_for(p: int, epoch: int, seq: int, n: int, i: int) -> bytes:
    records = [{"key": f"{p}".encode(), "value": f"{p}-{epoch}-{seq + k}".encode() * 20,
                "timestamp": TS0 + i} for k in range(n)]
    return build_batch(records, producer_id=p, producer_epoch=epoch, base_sequence=seq)


def stored(log):
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        view = log.read(offset, 1 << 20)
        headers = list(iter_headers(view))
        assert headers, f"no progress at {offset}"
        out.extend((h, bytes(view[h.position : h.end])) for h in headers)
        offset = headers[-1].next_offset
    return out


def state(log):
    return {p: e.copy() for p, e in log.producer_state.items()}


def check_log(log, model):
    seen = set()
    last = {}  # pid -> (epoch, last_seq)
    by_key = {}
    for h, raw in stored(log):
        assert h.producer_id in PIDS
        for k in range(h.last_offset_delta + 1):
            key = (h.producer_id, h.producer_epoch, h.base_sequence + k)
            assert key not in seen, f"duplicate in the log: {key}"
            seen.add(key)
        prev = last.get(h.producer_id)
        if prev is None or prev[0] != h.producer_epoch:
            assert prev is None or h.producer_epoch > prev[0]
            assert h.base_sequence == 0, f"epoch starts at {h.base_sequence}"
        else:
            assert h.base_sequence == prev[1] + 1, f"gap: {prev[1]} then {h.base_sequence}"
        last[h.producer_id] = (h.producer_epoch, h.last_sequence)
        by_key[(h.producer_id, h.producer_epoch, h.base_sequence)] = (h.base_offset, raw)
    accepted = [(p, s) for p, prod in model.items() for s in prod.sent]
    assert len(by_key) == len(accepted)
    for p, s in accepted:
        offset, raw = by_key[(p, s.epoch, s.first_seq)]
        assert offset == s.base_offset
        assert raw[8:] == s.batch[8:]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations, segment_bytes=st.sampled_from([2048, 8192]))
def test_no_duplicates_no_gaps(ops, segment_bytes):
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=256)
    directory = tempfile.mkdtemp()
    try:
        log = PartitionLog.open(directory, config, now_ms=TS0, clock=lambda: TS0)
        model = {p: Producer() for p in PIDS}
        for i, (op, a, b) in enumerate(ops):
            if op in ("send", "bump"):
                prod = model[a]
                if op == "bump":
                    prod.epoch += 1
                    prod.next_seq = 0
                    b = 1
                batch = batch_for(a, prod.epoch, prod.next_seq, b, i)
                end = log.log_end_offset
                info = log.append(batch)
                assert not info.duplicate
                assert (info.base_offset, info.last_offset) == (end, end + b - 1)
                prod.sent.append(Sent(prod.epoch, prod.next_seq, prod.next_seq + b - 1,
                                      info.base_offset, info.last_offset, batch))
                prod.next_seq += b
            elif op == "retry":
                prod = model[a]
                if not prod.sent:
                    continue
                old = prod.sent[-1 - b % len(prod.sent)]
                end = log.log_end_offset
                if old.epoch < prod.epoch:
                    with pytest.raises(InvalidProducerEpoch):
                        log.append(old.batch)
                elif old in prod.retained():
                    info = log.append(old.batch)
                    assert info.duplicate
                    assert (info.base_offset, info.last_offset) == (old.base_offset, old.last_offset)
                else:
                    with pytest.raises(OutOfOrderSequence):
                        log.append(old.batch)
                assert log.log_end_offset == end
            elif op == "gap":
                prod = model[a]
                if not prod.sent:
                    # an unknown producer may start anywhere (Kafka >= 2.5): no gap to refuse
                    continue
                end = log.log_end_offset
                batch = batch_for(a, prod.epoch, prod.next_seq + b, 1, i)
                with pytest.raises(OutOfOrderSequence):
                    log.append(batch)
                assert log.log_end_offset == end
            elif op == "roll":
                log.roll(TS0)
            else:
                before = state(log)
                if a == "crash":
                    crash(log)
                else:
                    log.close()
                    if a == "lose_snapshots":
                        for offset in list_snapshots(directory):
                            os.unlink(os.path.join(directory, f"{offset:020d}.snapshot"))
                log = PartitionLog.open(directory, config, now_ms=TS0, clock=lambda: TS0)
                assert state(log) == before
        check_log(log, model)
        log.close()
        log = PartitionLog.open(directory, config, now_ms=TS0, clock=lambda: TS0)
        check_log(log, model)
        log.close()
    finally:
        shutil.rmtree(directory)
