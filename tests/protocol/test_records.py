import datetime
import gzip
import io
import struct

import cramjam
import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from minibroker_protocol import batch
from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    Record,
    build_batch,
    build_control_batch,
    decode_batch,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    parse_control_record,
    parse_end_txn_marker,
)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
TS = 1_700_000_000_123


def check_and_decode(buf, position=0):
    header = batch.read_header(buf, position)
    assert header.magic == 2
    assert header.end == len(buf) if position == 0 else True
    assert batch.crc_ok(buf, header)
    return header, decode_batch(buf, position)


def with_crc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


# ---------------------------------------------------------------- varints


@pytest.mark.parametrize(
    "value, encoded",
    [
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (63, "7e"),
        (-64, "7f"),
        (64, "8001"),
        (-65, "8101"),
        (300, "d804"),
        (INT32_MAX, "feffffff0f"),
        (INT32_MIN, "ffffffff0f"),
    ],
)
def test_varint_known_encodings(value, encoded):
    assert encode_varint(value).hex() == encoded
    assert decode_varint(bytes.fromhex(encoded)) == (value, len(encoded) // 2)
    assert encode_varlong(value).hex() == encoded
    assert decode_varlong(bytes.fromhex(encoded)) == (value, len(encoded) // 2)


@pytest.mark.parametrize(
    "value, encoded",
    [
        (INT64_MAX, "fe" + "ff" * 8 + "01"),
        (INT64_MIN, "ff" * 9 + "01"),
        (INT32_MAX + 1, "8080808010"),
        (INT32_MIN - 1, "8180808010"),
    ],
)
def test_varlong_extremes(value, encoded):
    assert encode_varlong(value).hex() == encoded
    assert decode_varlong(b"\xaa" + bytes.fromhex(encoded) + b"\xbb", 1) == (
        value,
        1 + len(encoded) // 2,
    )


def test_varint_range_errors():
    for bad in (INT32_MAX + 1, INT32_MIN - 1):
        with pytest.raises(ValueError):
            encode_varint(bad)
    for bad in (INT64_MAX + 1, INT64_MIN - 1):
        with pytest.raises(ValueError):
            encode_varlong(bad)
    with pytest.raises(ValueError):  # six bytes
        decode_varint(b"\x80\x80\x80\x80\x80\x01")
    with pytest.raises(ValueError):  # five bytes but more than 32 bits
        decode_varint(b"\xff\xff\xff\xff\x1f")
    with pytest.raises(ValueError):  # eleven bytes
        decode_varlong(b"\x80" * 10 + b"\x01")
    with pytest.raises(ValueError):  # ten bytes but more than 64 bits
        decode_varlong(b"\xff" * 9 + b"\x03")
    with pytest.raises(IndexError):
        decode_varint(b"\x80")


@given(st.integers(INT32_MIN, INT32_MAX))
def test_varint_matches_kio(value):
    from kio.serial.readers import read_signed_varint
    from kio.serial.writers import write_signed_varint

    out = io.BytesIO()
    write_signed_varint(out, value)
    assert encode_varint(value) == out.getvalue()
    assert decode_varint(out.getvalue()) == (value, len(out.getvalue()))
    assert read_signed_varint(encode_varint(value), 0)[0] == value


@given(st.integers(INT64_MIN, INT64_MAX))
def test_varlong_matches_kio(value):
    from kio.serial.readers import read_signed_varlong
    from kio.serial.writers import write_signed_varlong

    out = io.BytesIO()
    write_signed_varlong(out, value)
    assert encode_varlong(value) == out.getvalue()
    assert decode_varlong(out.getvalue()) == (value, len(out.getvalue()))
    assert read_signed_varlong(encode_varlong(value), 0)[0] == value


# ---------------------------------------------------------------- batches

SAMPLE = [
    Record(0, TS, b"key-0", b"value-0" * 50, [("trace", b"abc"), ("empty", b"")]),
    Record(1, TS - 5, None, b"no key"),
    Record(2, TS + 7, b"no value", None, [("null", None), ("ünï", b"\x00\xff")]),
    Record(3, TS, None, None),
    Record(4, TS + 1, b"", b""),
]

CODECS = [0, 1, 2, 3, 4]
CODEC_MAGIC = {
    1: b"\x1f\x8b",  # gzip member
    2: b"\x82SNAPPY\x00",  # xerial framing, as the Java producer writes
    3: b"\x04\x22\x4d\x18",  # LZ4 frame
    4: b"\x28\xb5\x2f\xfd",  # zstd frame
}


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_each_codec(codec):
    buf = build_batch(SAMPLE, compression=codec)
    header, records = check_and_decode(buf)
    assert header.compression == codec
    assert header.record_count == len(SAMPLE)
    assert header.last_offset_delta == len(SAMPLE) - 1
    assert header.base_timestamp == TS
    assert header.max_timestamp == TS + 7
    assert header.timestamp_type == 0
    assert not header.is_transactional and not header.is_control
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, -1)
    assert records == SAMPLE
    if codec:
        assert buf[batch.HEADER_SIZE :].startswith(CODEC_MAGIC[codec])


@pytest.mark.parametrize("name, codec", [("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4), ("none", 0)])
def test_codec_names(name, codec):
    buf = build_batch([(b"k", b"v")], compression=name)
    assert batch.read_header(buf).compression == codec


@pytest.mark.parametrize("codec", CODECS)
def test_large_batch_round_trip(codec):
    # > 64 KiB: several xerial snappy blocks and LZ4 frame blocks.
    records = [
        Record(i, TS + i, str(i).encode(), bytes([i % 251]) * 1000 + str(i).encode())
        for i in range(300)
    ]
    buf = build_batch(records, compression=codec, base_offset=0)
    assert check_and_decode(buf)[1] == records


def test_xerial_snappy_layout():
    payload = [Record(i, TS, None, bytes(range(256)) * 40) for i in range(10)]
    buf = build_batch(payload, compression=2)
    section = buf[batch.HEADER_SIZE :]
    assert section[:8] == b"\x82SNAPPY\x00"
    assert struct.unpack(">ii", section[8:16]) == (1, 1)
    # Blocks of int32 length + raw snappy, each at most 32 KiB uncompressed.
    pos, plain = 16, b""
    while pos < len(section):
        (size,) = struct.unpack_from(">i", section, pos)
        block = bytes(cramjam.snappy.decompress_raw(section[pos + 4 : pos + 4 + size]))
        assert len(block) <= 32 * 1024
        plain += block
        pos += 4 + size
    assert pos == len(section)
    assert len(plain) > 32 * 1024


def reframe(buf: bytes, section: bytes) -> bytes:
    """The same header over a new records section, with length and CRC fixed."""
    out = bytearray(buf[: batch.HEADER_SIZE] + section)
    struct.pack_into(">i", out, 8, len(out) - batch.LOG_OVERHEAD)
    return with_crc(out)


def test_raw_snappy_as_librdkafka_writes_it():
    plain_batch = build_batch(SAMPLE)
    records_section = plain_batch[batch.HEADER_SIZE :]
    raw = bytes(cramjam.snappy.compress_raw(records_section))
    buf = bytearray(reframe(plain_batch, raw))
    struct.pack_into(">h", buf, 21, 2)  # attributes: snappy
    buf = with_crc(buf)
    assert check_and_decode(buf)[1] == SAMPLE


def test_gzip_with_other_compressor_settings():
    plain_batch = build_batch(SAMPLE)
    section = gzip.compress(plain_batch[batch.HEADER_SIZE :], compresslevel=1)
    buf = bytearray(reframe(plain_batch, section))
    struct.pack_into(">h", buf, 21, 1)
    assert check_and_decode(with_crc(buf))[1] == SAMPLE


def test_base_offset_and_producer_fields():
    buf = build_batch(
        [(b"a", b"1"), (b"b", b"2", [("h", b"v")]), {"key": "c", "value": "3", "timestamp": TS}],
        base_offset=1000,
        producer_id=42,
        producer_epoch=3,
        base_sequence=17,
        transactional=True,
        partition_leader_epoch=9,
    )
    header, records = check_and_decode(buf)
    assert batch.validate_produce_records(buf) == header
    assert (header.base_offset, header.last_offset, header.next_offset) == (1000, 1002, 1003)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 17)
    assert header.last_sequence == 19
    assert header.partition_leader_epoch == 9
    assert header.is_transactional and not header.is_control
    assert header.attributes == batch.TRANSACTIONAL_BIT
    assert [r.offset for r in records] == [1000, 1001, 1002]
    assert [(r.key, r.value) for r in records] == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]
    assert records[1].headers == [("h", b"v")]
    assert records[2].timestamp == TS


def test_default_timestamp_is_now():
    import time

    before = time.time_ns() // 1_000_000
    buf = build_batch([(b"k", b"v"), (None, b"w")])
    after = time.time_ns() // 1_000_000
    header, records = check_and_decode(buf)
    assert before <= header.base_timestamp <= header.max_timestamp <= after
    assert all(before <= r.timestamp <= after for r in records)


def test_null_key_and_value_encoding():
    buf = build_batch([Record(0, TS, None, None)])
    # length, attributes, tsDelta 0, offsetDelta 0, key -1, value -1, 0 headers
    assert buf[batch.HEADER_SIZE :] == bytes([0x0C, 0, 0, 0, 0x01, 0x01, 0])
    assert decode_batch(buf) == [Record(0, TS, None, None, [], 0)]


def test_headers_encoding():
    buf = build_batch([Record(0, TS, b"k", b"v", [("a", b"xy"), ("b", None)])])
    section = buf[batch.HEADER_SIZE :]
    body = bytes([0, 0, 0, 2]) + b"k" + bytes([2]) + b"v" + bytes([4])
    body += bytes([2]) + b"a" + bytes([4]) + b"xy" + bytes([2]) + b"b" + bytes([1])
    assert section == encode_varint(len(body)) + body
    assert decode_batch(buf)[0].headers == [("a", b"xy"), ("b", None)]


def test_log_append_time():
    records = [Record(0, TS, b"a", b"1"), Record(1, TS + 50, b"b", b"2"), Record(2, TS + 20, None, b"3")]
    buf = build_batch(records, timestamp_type=1)
    header, decoded = check_and_decode(buf)
    assert header.timestamp_type == 1
    assert header.attributes & batch.TIMESTAMP_TYPE_BIT
    assert header.base_timestamp == TS and header.max_timestamp == TS + 50
    assert [r.timestamp for r in decoded] == [TS + 50] * 3

    # The broker stamping LogAppendTime rewrites maxTimestamp and the bit only.
    stamped = bytearray(build_batch(records))
    struct.pack_into(">h", stamped, 21, batch.TIMESTAMP_TYPE_BIT)
    struct.pack_into(">q", stamped, 35, TS + 999)
    stamped = with_crc(stamped)
    assert [r.timestamp for r in check_and_decode(stamped)[1]] == [TS + 999] * 3
    # ... and CreateTime decoding of the same records keeps their own times.
    assert [r.timestamp for r in decode_batch(build_batch(records))] == [TS, TS + 50, TS + 20]


@pytest.mark.parametrize("commit, type_", [(True, CONTROL_COMMIT), (False, CONTROL_ABORT)])
def test_control_batch_layout(commit, type_):
    buf = build_control_batch(
        producer_id=0x0102030405,
        producer_epoch=7,
        commit=commit,
        coordinator_epoch=0x0A0B0C0D,
        base_offset=500,
        timestamp_ms=TS,
    )
    record = (
        bytes([0])  # attributes
        + bytes([0])  # timestampDelta
        + bytes([0])  # offsetDelta
        + bytes([8]) + struct.pack(">hh", 0, type_)  # key: version 0, type
        + bytes([12]) + struct.pack(">hi", 0, 0x0A0B0C0D)  # value: version 0, epoch
        + bytes([0])  # no headers
    )
    records = bytes([2 * len(record)]) + record
    after_crc = (
        struct.pack(">h", 0x30)  # transactional | control
        + struct.pack(">i", 0)  # lastOffsetDelta
        + struct.pack(">q", TS)  # baseTimestamp
        + struct.pack(">q", TS)  # maxTimestamp
        + struct.pack(">q", 0x0102030405)  # producerId
        + struct.pack(">h", 7)  # producerEpoch
        + struct.pack(">i", -1)  # baseSequence
        + struct.pack(">i", 1)  # recordCount
        + records
    )
    expected = (
        struct.pack(">q", 500)  # baseOffset
        + struct.pack(">i", 4 + 1 + 4 + len(after_crc))  # batchLength
        + struct.pack(">i", 0)  # partitionLeaderEpoch
        + bytes([2])  # magic
        + struct.pack(">I", crc32c(after_crc))
        + after_crc
    )
    assert buf == expected
    assert len(buf) == 78  # the size of every Kafka end-transaction marker batch

    header, decoded = check_and_decode(buf)
    assert header.is_control and header.is_transactional
    assert header.base_sequence == batch.NO_SEQUENCE
    assert len(decoded) == 1
    (rec,) = decoded
    assert (rec.offset, rec.timestamp, rec.headers) == (500, TS, [])
    assert parse_control_record(rec.key) == (0, type_)
    assert parse_end_txn_marker(rec.value) == (0, 0x0A0B0C0D)


def test_control_batch_default_timestamp():
    import time

    before = time.time_ns() // 1_000_000
    buf = build_control_batch(producer_id=1, producer_epoch=0, commit=False, coordinator_epoch=0)
    header = batch.read_header(buf)
    assert before <= header.base_timestamp == header.max_timestamp
    assert batch.validate_produce_records(buf) == header


def test_parse_control_record_errors():
    assert parse_control_record(b"\x00\x01\x00\x01") == (1, 1)  # newer versions tolerated
    assert parse_control_record(b"\x00\x00\x00\x00extra") == (0, CONTROL_ABORT)
    for bad in (None, b"", b"\x00\x00\x00", b"\xff\xff\x00\x01"):
        with pytest.raises(ValueError):
            parse_control_record(bad)
    with pytest.raises(ValueError):
        parse_end_txn_marker(b"\x00\x00\x00")


def test_decode_at_position_among_several_batches():
    first = build_batch([Record(0, TS, b"a", b"1")], base_offset=0)
    second = build_batch([Record(0, TS, b"b", b"2"), (b"c", b"3")], base_offset=1, compression=3)
    third = build_control_batch(
        producer_id=5, producer_epoch=0, commit=True, coordinator_epoch=1, base_offset=3, timestamp_ms=TS
    )
    log = bytearray(first + second + third + b"\x00" * 40)
    headers = list(batch.iter_headers(log, check_crc=True))
    assert [h.base_offset for h in headers] == [0, 1, 3]
    offsets = [[r.offset for r in decode_batch(log, h.position)] for h in headers]
    assert offsets == [[0], [1, 2], [3]]
    assert decode_batch(memoryview(log)[headers[1].position :])[1].key == b"c"


def test_input_shapes_and_errors():
    buf = build_batch(
        [
            (b"k", b"v"),
            (b"k", b"v", [("h", "text")]),
            {"value": b"only value"},
            Record(99, TS, bytearray(b"ba"), memoryview(b"mv"), attributes=0),
        ]
    )
    records = decode_batch(buf)
    assert [r.offset for r in records] == [0, 1, 2, 3]  # Record.offset is not used
    assert records[1].headers == [("h", b"text")]
    assert (records[2].key, records[2].value) == (None, b"only value")
    assert (records[3].key, records[3].value) == (b"ba", b"mv")
    with pytest.raises(ValueError):
        build_batch([])
    with pytest.raises(TypeError):
        build_batch([{"vaule": b"typo"}])
    with pytest.raises(TypeError):
        build_batch([b"just bytes"])
    with pytest.raises(ValueError):
        build_batch([(b"k", b"v")], compression=5)


def test_corrupt_batches_raise_invalid_batch():
    good = build_batch(SAMPLE)
    cases = {
        "truncated header": good[:40],
        "truncated records": good[:-3],
        "wrong magic": good[:16] + b"\x01" + good[17:],
    }
    more_records = bytearray(good)
    struct.pack_into(">i", more_records, 57, len(SAMPLE) + 1)
    cases["record count too high"] = bytes(more_records)
    fewer = bytearray(good)
    struct.pack_into(">i", fewer, 57, len(SAMPLE) - 1)
    cases["bytes left over"] = bytes(fewer)
    bad_length = bytearray(good)
    bad_length[batch.HEADER_SIZE] += 2  # first record claims one more byte
    cases["record length mismatch"] = bytes(bad_length)
    bad_codec = bytearray(good)
    struct.pack_into(">h", bad_codec, 21, 3)  # says lz4, is plain
    cases["not compressed"] = bytes(bad_codec)
    for name, buf in cases.items():
        with pytest.raises(batch.InvalidBatch) as info:
            decode_batch(buf)
        assert info.value.error_code == ErrorCode.corrupt_message, name


def test_zero_record_batch_decodes_empty():
    good = bytearray(build_batch([(b"k", b"v")])[: batch.HEADER_SIZE])
    struct.pack_into(">i", good, 8, batch.MIN_BATCH_LENGTH)
    struct.pack_into(">i", good, 57, 0)
    assert decode_batch(with_crc(good)) == []


# ---------------------------------------------------------------- hypothesis

data = st.one_of(st.none(), st.binary(max_size=300))
record_st = st.builds(
    Record,
    offset=st.just(0),
    timestamp=st.integers(0, 2**45),
    key=data,
    value=data,
    headers=st.lists(st.tuples(st.text(max_size=20), data), max_size=4),
    attributes=st.just(0),
)


@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(record_st, min_size=1, max_size=12),
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 2**62),
    log_append=st.booleans(),
)
def test_hypothesis_round_trip(records, codec, base_offset, log_append):
    buf = build_batch(records, compression=codec, base_offset=base_offset, timestamp_type=int(log_append))
    header, decoded = check_and_decode(buf)
    assert header.record_count == len(records)
    max_ts = max(r.timestamp for r in records)
    assert header.max_timestamp == max_ts
    expected = [
        Record(base_offset + i, max_ts if log_append else r.timestamp, r.key, r.value, r.headers, 0)
        for i, r in enumerate(records)
    ]
    assert decoded == expected


# ---------------------------------------------------------------- kio


def kio_records(base_offset, items):
    from kio.records.schema import Record as KioRecord
    from kio.records.schema import RecordHeader
    from kio.static.primitive import TZAwareMicros, i8, i64

    return tuple(
        KioRecord(
            attributes=i8(0),
            timestamp=TZAwareMicros.parse(
                datetime.datetime.fromtimestamp(ts_ms // 1000, datetime.UTC)
            ),
            offset=i64(base_offset + i),
            key=key,
            value=value,
            headers=tuple(RecordHeader(key=k.encode(), value=v) for k, v in headers),
        )
        for i, (ts_ms, key, value, headers) in enumerate(items)
    )


def test_cross_check_with_kio():
    from kio.records.readers import read_batch
    from kio.records.schema import NewRecordBatch
    from kio.records.writers import write_new_batch
    from kio.static.primitive import i16, i32, i64

    base_offset = 77
    second = 1_700_000_000_000  # kio keeps whole seconds only
    items = [
        (second, b"k1", b"v1", [("h1", b"x"), ("h2", None)]),
        (second + 3000, None, b"v2", []),
        (second - 2000, b"k3", None, [("h3", b"")]),
    ]
    out = io.BytesIO()
    write_new_batch(
        out,
        NewRecordBatch(
            producer_id=i64(12),
            producer_epoch=i16(1),
            base_sequence=i32(5),
            records=kio_records(base_offset, items),
            attributes=i16(0),
        ),
    )
    theirs = out.getvalue()
    ours = build_batch(
        [Record(0, ts, k, v, h) for ts, k, v, h in items],
        base_offset=base_offset,
        producer_id=12,
        producer_epoch=1,
        base_sequence=5,
    )
    assert ours == theirs

    expected = [
        Record(base_offset + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(items)
    ]
    assert check_and_decode(theirs)[1] == expected

    kio_batch, size = read_batch(ours, 0)
    assert size == len(ours)
    assert kio_batch.base_offset == base_offset
    assert kio_batch.last_offset_delta == 2
    assert kio_batch.max_timestamp == second + 3000
    assert [r.offset for r in kio_batch.records] == [77, 78, 79]
    assert [(r.key, r.value) for r in kio_batch.records] == [(k, v) for _, k, v, _ in items]
    assert [int(r.timestamp.timestamp() * 1000) for r in kio_batch.records] == [
        ts for ts, *_ in items
    ]
    assert [
        [(h.key.decode(), h.value) for h in r.headers] for r in kio_batch.records
    ] == [h for *_, h in items]


def test_stamp_log_append_time_keeps_the_payload():
    from minibroker_protocol.batch import crc_ok, read_header
    from minibroker_protocol.record_checks import stamp_log_append_time

    for codec in ("none", "gzip", "zstd"):
        buf = build_batch([{"key": b"k", "value": b"v", "timestamp": 1000},
                           {"key": None, "value": b"w", "timestamp": 1005}], compression=codec,
                          producer_id=7, producer_epoch=1, base_sequence=3, transactional=True)
        out = stamp_log_append_time(buf, 99_000)
        before, after = read_header(buf), read_header(out)
        assert crc_ok(out, after)
        assert after.timestamp_type == 1 and after.max_timestamp == 99_000
        assert after.base_timestamp == before.base_timestamp == 1000
        assert after.attributes == before.attributes | 0x08 and after.is_transactional
        assert bytes(out[61:]) == bytes(buf[61:])  # the records, compressed or not, untouched
        assert [r.timestamp for r in decode_batch(out)] == [99_000, 99_000]


@pytest.mark.parametrize("key,value", [
    (b"\x00\x00\x00\x03abc", b"v" * 10), (b"k" * 70, None), (b"k" * 200, b"x" * 20000), (b"", b""),
])
def test_build_keyed_batch_is_build_batch(key, value):
    from minibroker_protocol.records import build_keyed_batch
    ts = 1_795_000_000_123
    assert build_keyed_batch(key, value, ts) == build_batch([{"key": key, "value": value, "timestamp": ts}])
