"""protocol/api_versions.py writes the bytes kio writes, and reads what clients send."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minibroker_protocol import api_versions as wire
from minibroker_protocol import codec
from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import nested
from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.header import HeaderError

int16 = st.integers(-(2**15), 2**15 - 1)
names = st.text(min_size=1, max_size=20)
tables = st.lists(st.tuples(st.integers(0, 100), int16, int16), max_size=60)
supported = st.lists(st.tuples(names, int16, int16), max_size=4)
finalized = st.lists(st.tuples(names, int16), max_size=4)


def _kio(corr, version, error, keys, throttle, sup, epoch, fin) -> bytes:
    import datetime
    cls = codec.response_type(ApiKey.ApiVersions, version)
    ApiVersion = nested(cls, "ApiVersion")
    fields = {"error_code": ErrorCode(error),
              "api_keys": tuple(ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in keys)}
    if version >= 1:
        fields["throttle_time"] = datetime.timedelta(milliseconds=throttle)
    if version >= 3:
        Supported = nested(cls, "SupportedFeatureKey")
        Finalized = nested(cls, "FinalizedFeatureKey")
        fields["supported_features"] = tuple(Supported(name=n, min_version=lo, max_version=hi)
                                             for n, lo, hi in sup)
        fields["finalized_features_epoch"] = epoch
        fields["finalized_features"] = tuple(Finalized(name=n, max_version_level=lv, min_version_level=lv)
                                             for n, lv in fin)
    return codec.encode_response(corr, cls(**fields))


@given(corr=st.integers(-(2**31), 2**31 - 1), version=st.integers(0, wire.MAX_VERSION),
       error=st.sampled_from([0, 35, 42]), keys=tables, throttle=st.integers(0, 2**31 - 1),
       sup=supported, epoch=st.integers(-1, 2**40), fin=finalized)
def test_answer_is_kio_s_bytes(corr, version, error, keys, throttle, sup, epoch, fin) -> None:
    if version < 3:
        sup, epoch, fin = [], -1, []
    ours = wire.encode_response(corr, version, error, keys, throttle, sup, epoch, fin)
    assert struct.unpack_from(">i", ours)[0] == len(ours) - 4
    assert ours[4:] == _kio(corr, version, error, keys, throttle, sup, epoch, fin)


def test_unsupported_version_answer() -> None:
    assert wire.UNSUPPORTED_VERSION == ErrorCode.unsupported_version
    assert wire.unsupported_version_response(7)[4:] == _kio(
        7, 0, ErrorCode.unsupported_version, [(int(ApiKey.ApiVersions), 0, wire.MAX_VERSION)], 0, [], -1, [])


def _request(version: int, corr: int, client_id: str | None, software=("librdkafka", "2.6.1")) -> bytes:
    cls = codec.request_type(ApiKey.ApiVersions, version)
    fields = {}
    if version >= 3:
        fields = {"client_software_name": software[0], "client_software_version": software[1]}
    return codec.encode_request(cls(**fields), corr, client_id)


@pytest.mark.parametrize("version", range(wire.MAX_VERSION + 1))
@pytest.mark.parametrize("client_id", ["rdkafka", None, ""])
def test_reads_kio_s_requests(version: int, client_id: str | None) -> None:
    got = wire.read_request(_request(version, 99, client_id))
    assert (got.version, got.correlation_id, got.client_id) == (version, 99, client_id)
    if version >= 3:
        assert (got.software_name, got.software_version) == ("librdkafka", "2.6.1")
    else:
        assert got.software_name is None


@pytest.mark.parametrize("frame", [
    b"",
    b"\x00\x12\x00\x03",                                      # header cut short
    _request(3, 1, "c")[:-3],                                 # body cut short
    _request(3, 1, "c") + b"\x00",                            # a byte after the request
    struct.pack(">hhih", ApiKey.ApiVersions, 5, 1, -1),       # a version it does not serve
    struct.pack(">hhih", ApiKey.Metadata, 0, 1, -1),          # another API
    struct.pack(">hhih", ApiKey.ApiVersions, 3, 1, -1) + b"\x00\x00\x02a\x00",  # null software name
])
def test_refuses_what_it_cannot_read(frame: bytes) -> None:
    with pytest.raises(HeaderError):
        wire.read_request(frame)
