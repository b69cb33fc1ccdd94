"""Request header v1/v2 parsing and response header v0/v1 bytes."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.request_header.v1.header import RequestHeader as KioRequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as KioRequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as KioResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as KioResponseHeaderV1
from kio.serial import entity_writer

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.header import (
    HeaderError,
    RequestHeader,
    peek_header,
    read_request_header,
    read_uvarint,
    response_header,
    skip_tagged_fields,
    write_uvarint,
)

BODY = b"\xde\xad\xbe\xef-body"


def v1_header(api_key=3, version=7, corr=12345, client_id: bytes | None = b"my-client") -> bytes:
    if client_id is None:
        return struct.pack(">hhih", api_key, version, corr, -1)
    return struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id


def tagged(fields: list[tuple[int, bytes]]) -> bytes:
    out = write_uvarint(len(fields))
    for tag, data in fields:
        out += write_uvarint(tag) + write_uvarint(len(data)) + data
    return out


def v2_header(tags: list[tuple[int, bytes]] = (), **kw) -> bytes:
    return v1_header(**kw) + tagged(list(tags))


def kio_bytes(entity) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


# -- v1 (non-flexible) --------------------------------------------------------------


def test_v1_header():
    frame = memoryview(v1_header() + BODY)
    h = read_request_header(frame, flexible=False)
    assert h == RequestHeader(3, 7, 12345, "my-client", len(v1_header()))
    assert bytes(frame[h.body_offset :]) == BODY


def test_v1_header_with_negative_fields():
    frame = v1_header(api_key=-1, version=-2, corr=-(2**31), client_id=b"") + BODY
    h = read_request_header(frame, flexible=False)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (-1, -2, -(2**31), "")
    assert frame[h.body_offset :] == BODY


def test_v1_null_client_id():
    frame = v1_header(client_id=None) + BODY
    h = read_request_header(frame, flexible=False)
    assert h.client_id is None
    assert h.body_offset == 10
    assert frame[h.body_offset :] == BODY


def test_v1_utf8_client_id():
    cid = "clïent-ü-€".encode()
    frame = v1_header(client_id=cid)
    h = read_request_header(frame, flexible=False)
    assert h.client_id == "clïent-ü-€"
    assert h.body_offset == len(frame)


def test_v1_does_not_read_tagged_fields():
    # A non-flexible header ends after client_id: a following 0x00 is body.
    frame = v1_header() + b"\x00" + BODY
    h = read_request_header(frame, flexible=False)
    assert frame[h.body_offset :] == b"\x00" + BODY


# -- v2 (flexible) -------------------------------------------------------------------


def test_v2_header_without_tagged_fields():
    head = v2_header()
    frame = memoryview(head + BODY)
    h = read_request_header(frame, flexible=True)
    assert h == RequestHeader(3, 7, 12345, "my-client", len(head))
    assert bytes(frame[h.body_offset :]) == BODY


def test_v2_header_skips_unknown_tagged_fields():
    tags = [(0, b"\x01\x02\x03"), (7, b""), (300, b"x" * 200), (2**20, b"\xff")]
    head = v2_header(tags)
    frame = head + BODY
    h = read_request_header(frame, flexible=True)
    assert h.client_id == "my-client"
    assert h.body_offset == len(head)
    assert frame[h.body_offset :] == BODY


def test_v2_null_client_id():
    head = v2_header([(1, b"ab")], client_id=None)
    h = read_request_header(head + BODY, flexible=True)
    assert h.client_id is None
    assert h.body_offset == len(head)


@pytest.mark.parametrize("flexible", [False, True])
@pytest.mark.parametrize("client_id", [None, "", "rdkafka", "ünï"])
def test_kio_encoded_headers(flexible, client_id):
    cls = KioRequestHeaderV2 if flexible else KioRequestHeaderV1
    head = kio_bytes(
        cls(request_api_key=1, request_api_version=12, correlation_id=99, client_id=client_id)
    )
    h = read_request_header(head + BODY, flexible=flexible)
    assert h == RequestHeader(1, 12, 99, client_id, len(head))


@settings(max_examples=100, deadline=None)
@given(
    api_key=st.integers(-(2**15), 2**15 - 1),
    version=st.integers(-(2**15), 2**15 - 1),
    corr=st.integers(-(2**31), 2**31 - 1),
    client_id=st.none() | st.text(max_size=30),
    tags=st.lists(
        st.tuples(st.integers(0, 2**31 - 1), st.binary(max_size=20)), max_size=4
    ),
    body=st.binary(max_size=20),
    flexible=st.booleans(),
)
def test_header_round_trip(api_key, version, corr, client_id, tags, body, flexible):
    cid = None if client_id is None else client_id.encode()
    head = v1_header(api_key, version, corr, cid)
    if flexible:
        head += tagged(tags)
    frame = memoryview(head + body)
    h = read_request_header(frame, flexible)
    assert h == RequestHeader(api_key, version, corr, client_id, len(head))
    assert bytes(frame[h.body_offset :]) == body
    assert peek_header(frame) == (api_key, version, corr)


# -- malformed headers ------------------------------------------------------------------


@pytest.mark.parametrize("flexible", [False, True])
@pytest.mark.parametrize("client_id", [None, b"", b"client"])
def test_truncated_header(flexible, client_id):
    head = v1_header(client_id=client_id)
    if flexible:
        head += tagged([(5, b"abc"), (400, b"")])
    for cut in range(len(head)):
        with pytest.raises(HeaderError):
            read_request_header(memoryview(head[:cut]), flexible)


def test_client_id_past_the_end():
    frame = struct.pack(">hhih", 0, 3, 1, 100) + b"short"
    with pytest.raises(HeaderError):
        read_request_header(frame, flexible=False)


@pytest.mark.parametrize("length", [-2, -100, -(2**15)])
def test_invalid_client_id_length(length):
    frame = struct.pack(">hhih", 0, 3, 1, length) + b"\x00" * 10
    with pytest.raises(HeaderError):
        read_request_header(frame, flexible=False)


def test_client_id_not_utf8():
    frame = v1_header(client_id=b"\xff\xfe") + BODY
    with pytest.raises(HeaderError):
        read_request_header(frame, flexible=False)


def test_tagged_field_past_the_end():
    head = v1_header() + write_uvarint(1) + write_uvarint(3) + write_uvarint(50) + b"abc"
    with pytest.raises(HeaderError):
        read_request_header(head, flexible=True)


def test_tagged_field_count_past_the_end():
    head = v1_header() + write_uvarint(3) + tagged([(1, b"x")])[1:]
    with pytest.raises(HeaderError):
        read_request_header(head, flexible=True)


def test_overlong_varint_in_tagged_fields():
    head = v1_header() + b"\xff" * 6
    with pytest.raises(HeaderError):
        read_request_header(head, flexible=True)


def test_peek_header():
    assert peek_header(v1_header(api_key=18, version=3, corr=-7)) == (18, 3, -7)
    assert peek_header(struct.pack(">hhi", 1, 2, 3)) == (1, 2, 3)  # 8 bytes are enough
    for cut in range(8):
        with pytest.raises(HeaderError):
            peek_header(struct.pack(">hhi", 1, 2, 3)[:cut])


# -- varints ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
     (2**32 - 1, b"\xff\xff\xff\xff\x0f")],
)
def test_uvarint_known_encodings(value, encoded):
    assert write_uvarint(value) == encoded
    assert read_uvarint(encoded + b"tail", 0) == (value, len(encoded))


@given(st.integers(0, 2**32 - 1), st.binary(max_size=3))
def test_uvarint_round_trip(value, prefix):
    data = prefix + write_uvarint(value)
    assert read_uvarint(data, len(prefix)) == (value, len(data))


def test_uvarint_truncated_and_too_long():
    with pytest.raises(HeaderError):
        read_uvarint(b"", 0)
    with pytest.raises(HeaderError):
        read_uvarint(b"\x80\x80", 0)
    with pytest.raises(HeaderError):
        read_uvarint(b"\x80\x80\x80\x80\x80\x01", 0)


def test_skip_tagged_fields():
    data = b"pre" + tagged([(0, b"abc"), (9, b"")]) + b"post"
    assert data[skip_tagged_fields(data, 3) :] == b"post"
    assert skip_tagged_fields(b"\x00", 0) == 1


# -- response headers -----------------------------------------------------------------------


@pytest.mark.parametrize("corr", [0, 1, 12345, -1, 2**31 - 1, -(2**31)])
def test_response_header(corr):
    v0 = response_header(corr, flexible=False)
    v1 = response_header(corr, flexible=True)
    assert v0 == struct.pack(">i", corr)
    assert v1 == struct.pack(">i", corr) + b"\x00"
    assert v0 == kio_bytes(KioResponseHeaderV0(correlation_id=corr))
    assert v1 == kio_bytes(KioResponseHeaderV1(correlation_id=corr))


def test_api_versions_key():
    assert ApiKey.ApiVersions == 18
