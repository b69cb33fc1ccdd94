"""LogValidator's per-record checks without a broker (protocol/record_checks.py); the answers
themselves are compared with Kafka 4.4 in tests/differential/test_record_validation.py."""

from minibroker_protocol.batch import read_header
from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.record_checks import LONG_MAX, RecordRules, check_records
from minibroker_protocol.records import build_batch

HOUR = 3_600_000
NOW = 1_800_000_000_000


def _check(records, rules, now=NOW, latest=None, **kw):
    buf = build_batch(records, **kw)
    return check_records(buf, read_header(buf), rules, now, "t-0", latest)


def test_default_rules_decode_nothing_for_a_fresh_batch():
    buf = build_batch([{"value": b"v", "timestamp": NOW}])
    rules = RecordRules(after_max_ms=HOUR)
    assert not rules.needs_records(read_header(buf), NOW)
    assert rules.needs_records(read_header(buf), NOW - 2 * HOUR)  # its header is from the future
    assert not RecordRules(timestamp_type="LogAppendTime").needs_records(read_header(buf), 0)


def test_key_error_before_timestamp_error_and_per_index():
    rules = RecordRules(after_max_ms=HOUR, compacted=True)
    got = _check([{"key": b"k", "value": b"1", "timestamp": NOW}, {"key": None, "value": b"2", "timestamp": NOW},
                  {"key": b"k", "value": b"3", "timestamp": NOW + 2 * HOUR}], rules)
    assert got is not None and got.error_code == ErrorCode.invalid_timestamp
    assert [i for i, _ in got.records] == [1, 2]
    assert got.records[0][1].startswith("Compacted topic cannot accept message without key")
    assert got.records[1][1] == (f"Timestamp {NOW + 2 * HOUR} of message with offset 2 is out of range. "
                                 f"The timestamp should be within [{NOW - LONG_MAX}, {NOW + HOUR}]")


def test_invalid_record_message_shows_three():
    got = _check([(None, b"%d" % i) for i in range(5)], RecordRules(compacted=True))
    assert got is not None and got.error_code == ErrorCode.invalid_record
    assert got.message.startswith("One or more records have been rejected due to 5 record errors in total, "
                                  "and only showing the first three errors at most: [RecordError(batchIndex=0, ")
    assert got.message.count("RecordError(") == 3


def test_a_held_back_clock_does_not_make_real_time_records_future():
    """--clock virtual: the broker's time stands still; records stamped with the system's time
    are measured against the system's time for message.timestamp.after.max.ms."""
    rules = RecordRules(after_max_ms=HOUR)
    held = NOW - 5 * HOUR
    assert _check([{"value": b"v", "timestamp": NOW}], rules, now=held, latest=NOW) is None
    assert _check([{"value": b"v", "timestamp": NOW}], rules, now=held) is not None
    assert _check([{"value": b"v", "timestamp": NOW + 2 * HOUR}], rules, now=held, latest=NOW) is not None
