"""A raw Kafka connection for reference tests: kio entities in, kio entities out.

Requests are encoded with the project's codec (minibroker_protocol.codec) and responses
decoded with kio's schemas, so a test sees every field either broker sent. Every call is
bounded by the socket timeout.
"""

from __future__ import annotations

import socket
import struct

from kio.index import load_request_schema
from kio.serial import entity_reader

from minibroker_protocol.build import build, nested
from minibroker_protocol.codec import encode_request, is_flexible_response, response_type

API_VERSIONS = 18


class ConnectionClosed(Exception):
    """The broker closed the connection before a whole answer arrived."""


def req(key: int, version: int, /, **fields):
    """A request entity of ``key``/``version`` from the fields that version has."""
    return build(load_request_schema(key, version), **fields)


def part(entity_or_cls, name: str, /, **fields):
    """A nested entity (e.g. ``"AddPartitionsToTxnTopic"``) of the same schema version."""
    cls = entity_or_cls if isinstance(entity_or_cls, type) else type(entity_or_cls)
    return build(nested(cls, name), **fields)


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _skip_tagged_fields(buf: bytes, pos: int) -> int:
    count, pos = _uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        pos += size
    return pos


class Connection:
    """One TCP connection to a broker; ``call(entity)`` sends it and returns the decoded answer."""

    def __init__(self, host: str, port: int, timeout: float = 10.0, client_id: str = "differential"):
        self.address = (host, port)
        self.timeout = timeout
        self.client_id = client_id
        self._corr = 0
        self._sock: socket.socket | None = None

    def _connect(self) -> socket.socket:
        if self._sock is None:
            sock = socket.create_connection(self.address, timeout=self.timeout)
            sock.settimeout(self.timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock = sock
        return self._sock

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self._sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionClosed(f"{self.address}: closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def call(self, entity, timeout: float | None = None):
        """Send ``entity`` and return the decoded response entity (the connection is dropped on error)."""
        sock = self._connect()
        sock.settimeout(timeout or self.timeout)
        self._corr += 1
        corr = self._corr
        payload = encode_request(entity, corr, self.client_id)
        try:
            sock.sendall(struct.pack(">i", len(payload)) + payload)
            (size,) = struct.unpack(">i", self._recv_exact(4))
            frame = self._recv_exact(size)
        except BaseException:
            self.close()
            raise
        (got,) = struct.unpack_from(">i", frame, 0)
        if got != corr:
            self.close()
            raise ValueError(f"{self.address}: correlation id {got}, expected {corr}")
        key, version = entity.__api_key__, entity.__version__
        pos = 4
        if is_flexible_response(key, version):
            pos = _skip_tagged_fields(frame, pos)
        answer, _size = entity_reader(response_type(key, version))(frame[pos:], 0)
        return answer


def api_versions(conn: Connection) -> dict[int, tuple[int, int]]:
    """api key -> (min, max) version the broker serves (ApiVersions v3)."""
    resp = conn.call(req(API_VERSIONS, 3, client_software_name="differential",
                         client_software_version="1"))
    if resp.error_code:
        raise RuntimeError(f"ApiVersions answered error {resp.error_code}")
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
