import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker_protocol.batch import read_header
from minibroker_storage import LogConfig, PartitionLog, RecordBatchTooLarge

from .batches import TS0, base_offset_of, crash, make_batch, split_batches

append = st.tuples(st.just("append"), st.integers(1, 5), st.integers(0, 1500))
reopen = st.tuples(st.just("reopen"), st.sampled_from(["clean", "crash"]), st.just(0))
roll = st.tuples(st.just("roll"), st.just(0), st.just(0))
operations = st.lists(st.one_of(append, append, append, reopen, roll), min_size=1, max_size=40)


def read_everything(log, max_bytes):
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        got = split_batches(log.read(offset, max_bytes))
        assert got, f"no progress at offset {offset}"
        out.extend(got)
        offset = read_header(got[-1]).next_offset
    assert len(log.read(offset, max_bytes)) == 0
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=operations,
    segment_bytes=st.sampled_from([2048, 4096, 16384]),
    interval=st.sampled_from([0, 100, 4096]),
    max_bytes=st.integers(1, 40_000),
)
def test_reads_return_every_appended_batch_in_order(ops, segment_bytes, interval, max_bytes):
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval)
    directory = tempfile.mkdtemp()
    try:
        log = PartitionLog.open(directory, config, now_ms=TS0)
        sent: list[tuple[int, bytes]] = []
        next_offset = 0
        for i, (op, a, b) in enumerate(ops):
            if op == "append":
                batch = make_batch(a, b, fill=i, timestamp=TS0 + i)
                if len(batch) > segment_bytes:
                    with pytest.raises(RecordBatchTooLarge):
                        log.append(batch, now_ms=TS0)
                    continue
                info = log.append(batch, now_ms=TS0)
                assert info.base_offset == next_offset
                sent.append((next_offset, batch))
                next_offset += a
            elif op == "roll":
                log.roll(TS0)
            else:
                if a == "clean":
                    log.close()
                else:
                    crash(log)
                log = PartitionLog.open(directory, config, now_ms=TS0)
            assert log.log_end_offset == next_offset

        stored = read_everything(log, max_bytes)
        assert [base_offset_of(b) for b in stored] == [off for off, _ in sent]
        assert [b[8:] for b in stored] == [b[8:] for _, b in sent]
        for offset, batch in sent:
            header = read_header(batch)
            for probe in {offset, offset + header.last_offset_delta}:
                assert base_offset_of(split_batches(log.read(probe, 1))[0]) == offset
        log.close()
    finally:
        shutil.rmtree(directory)
