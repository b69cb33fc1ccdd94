"""A raw Kafka connection for reference tests: kio entities in, kio entities out.

Requests are encoded with the project's codec (minibroker_protocol.codec) and responses
decoded with kio's schemas, so a test sees every field either broker sent. Every call is
bounded by the socket timeout.
"""

from __future__ import annotations

import socket
import struct

from kio.serial import entity_reader

from minibroker_protocol.build import build, nested
from minibroker_protocol.codec import encode_request, is_flexible_response, request_type, response_type

API_VERSIONS = 18


class ConnectionClosed(Exception):
    """The broker closed the connection before a whole answer arrived."""


def req(key: int, version: int, /, **fields):
    """A request entity of ``key``/``version`` from the fields that version has (kio's schema, or
    the project's where kio has none: minibroker_protocol.schemas)."""
    return build(request_type(key, version), **fields)


def part(api: tuple[int, int], name: str, /, **fields):
    """A nested entity (e.g. ``"AddPartitionsToTxnTopic"``) of request ``api`` = (key, version)."""
    return build(nested(request_type(*api), name), **fields)


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


def _describe_transactions_v0(buf: bytes):
    """DescribeTransactions v0 by hand: kio refuses the -1 start time of a transaction not yet begun."""
    import datetime
    import struct as _s

    from kio.schema.describe_transactions.v0.response import (
        DescribeTransactionsResponse,
        TopicData,
        TransactionState,
    )
    from kio.schema.errors import ErrorCode

    def string(pos):
        n, pos = _uvarint(buf, pos)
        return buf[pos:pos + n - 1].decode(), pos + n - 1

    (throttle,) = _s.unpack_from(">i", buf, 0)
    pos = 4
    n, pos = _uvarint(buf, pos)
    states = []
    for _ in range(n - 1):
        (err,) = _s.unpack_from(">h", buf, pos)
        tid, pos = string(pos + 2)
        state, pos = string(pos)
        timeout, start, pid, epoch = _s.unpack_from(">iqqh", buf, pos)
        pos += 22
        nt, pos = _uvarint(buf, pos)
        topics = []
        for _ in range(nt - 1):
            name, pos = string(pos)
            np_, pos = _uvarint(buf, pos)
            parts = _s.unpack_from(f">{np_ - 1}i", buf, pos)
            pos = _skip_tagged_fields(buf, pos + 4 * (np_ - 1))
            topics.append(TopicData(topic=name, partitions=tuple(parts)))
        pos = _skip_tagged_fields(buf, pos)
        states.append(TransactionState(
            error_code=ErrorCode(err), transactional_id=tid, transaction_state=state,
            transaction_timeout=datetime.timedelta(milliseconds=timeout),
            transaction_start_time=start if start >= 0 else None, producer_id=pid, producer_epoch=epoch,
            topics=tuple(topics)))
    return DescribeTransactionsResponse(throttle_time=datetime.timedelta(milliseconds=throttle),
                                        transaction_states=tuple(states)), len(buf)


def _token_answer(key: int, version: int):
    """Create/Renew/ExpireDelegationToken answers by hand: kio refuses the -1 timestamps of a
    refusal (DelegationTokenManager.ErrorTimestamp). Timestamps come back as int milliseconds."""
    import struct as _s
    from types import SimpleNamespace

    flexible = version >= 2

    def decode(buf: bytes):
        pos = 0

        def i(fmt: str):
            nonlocal pos
            (v,) = _s.unpack_from(fmt, buf, pos)
            pos += _s.calcsize(fmt)
            return v

        def blob(wide: bool) -> bytes:
            nonlocal pos
            if flexible:
                n, pos = _uvarint(buf, pos)
                n -= 1
            else:
                n = i(">i" if wide else ">h")
            out = buf[pos:pos + n]
            pos += n
            return out

        f: dict = {"error_code": i(">h")}
        if key == 38:
            f["principal_type"], f["principal_name"] = blob(False).decode(), blob(False).decode()
            if version >= 3:
                f["token_requester_principal_type"] = blob(False).decode()
                f["token_requester_principal_name"] = blob(False).decode()
            f["issue_timestamp"], f["expiry_timestamp"], f["max_timestamp"] = i(">q"), i(">q"), i(">q")
            f["token_id"], f["hmac"] = blob(False).decode(), blob(True)
        else:
            f["expiry_timestamp"] = i(">q")
        f["throttle_time"] = i(">i")
        return SimpleNamespace(**f), len(buf)

    return decode


HAND_DECODED = {(65, 0): _describe_transactions_v0,
                **{(k, v): _token_answer(k, v) for k, hi in ((38, 3), (39, 2), (40, 2))
                   for v in range(1, hi + 1)}}


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

    def __enter__(self) -> Connection:
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

    def pipeline(self, entities: list) -> list:
        """Send all of ``entities`` before reading any answer; their answers in order."""
        sock = self._connect()
        frames, corrs = [], []
        for e in entities:
            self._corr += 1
            payload = encode_request(e, self._corr, self.client_id)
            frames.append(struct.pack(">i", len(payload)) + payload)
            corrs.append(self._corr)
        try:
            sock.sendall(b"".join(frames))
            return [self._read_answer(e, c) for e, c in zip(entities, corrs)]
        except BaseException:
            self.close()
            raise

    def call(self, entity, timeout: float | None = None):
        """Send ``entity`` and return the decoded response entity (the connection is dropped on error)."""
        sock = self._connect()
        sock.settimeout(timeout or self.timeout)
        self._corr += 1
        corr = self._corr
        payload = encode_request(entity, corr, self.client_id)
        try:
            sock.sendall(struct.pack(">i", len(payload)) + payload)
            return self._read_answer(entity, corr)
        except BaseException:
            self.close()
            raise

    def _read_answer(self, entity, corr: int):
        (size,) = struct.unpack(">i", self._recv_exact(4))
        frame = self._recv_exact(size)
        (got,) = struct.unpack_from(">i", frame, 0)
        if got != corr:
            self.close()
            raise ValueError(f"{self.address}: correlation id {got}, expected {corr}")
        key, version = entity.__api_key__, entity.__version__
        pos = 4
        if is_flexible_response(key, version):
            pos = _skip_tagged_fields(frame, pos)
        reader = HAND_DECODED.get((key, version)) or entity_reader(response_type(key, version))
        answer, _size = reader(frame[pos:], 0) if (key, version) not in HAND_DECODED else reader(frame[pos:])
        return answer


def api_versions(conn: Connection) -> dict[int, tuple[int, int]]:
    """api key -> (min, max) version the broker serves (ApiVersions v3)."""
    resp = conn.call(req(API_VERSIONS, 3, client_software_name="differential",
                         client_software_version="1"))
    if resp.error_code:
        raise RuntimeError(f"ApiVersions answered error {resp.error_code}")
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


class SaslPlainConnection(Connection):
    """A Connection to a SASL_PLAINTEXT listener that logs in with PLAIN on every (re)connect:
    SaslHandshake v1 "PLAIN", then SaslAuthenticate v2 with ``\\0user\\0password``."""

    def __init__(self, host: str, port: int, user: str, password: str, **kw):
        super().__init__(host, port, **kw)
        self.user, self.password = user, password

    def _connect(self) -> socket.socket:
        if self._sock is not None:
            return self._sock
        sock = super()._connect()
        try:
            hs = self._login_call(req(SASL_HANDSHAKE, 1, mechanism="PLAIN"))
            if hs.error_code:
                raise RuntimeError(f"{self.address}: SaslHandshake error {hs.error_code}")
            auth = self._login_call(req(SASL_AUTHENTICATE, 2,
                                        auth_bytes=f"\0{self.user}\0{self.password}".encode()))
            if auth.error_code:
                raise RuntimeError(f"{self.address}: SaslAuthenticate error {auth.error_code} "
                                   f"{auth.error_message}")
        except BaseException:
            self.close()
            raise
        return sock

    def _login_call(self, entity):
        self._corr += 1
        payload = encode_request(entity, self._corr, self.client_id)
        self._sock.sendall(struct.pack(">i", len(payload)) + payload)
        return self._read_answer(entity, self._corr)
