"""Raw Kafka wire helpers for integration tests: frames over a plain socket.

These talk to the broker without any client library, so a test can send
exactly the bytes it wants (bad sizes, truncated bodies, unknown api keys,
corrupt batches) and see exactly what comes back. Every call is bounded by a
socket timeout.
"""

from __future__ import annotations

import datetime
import socket
import struct
import time

API_VERSIONS = 18
PRODUCE = 0
LIST_OFFSETS = 2

LATEST = -1
EARLIEST = -2


class ConnectionClosed(Exception):
    """The peer closed the connection before a whole frame arrived."""


def connect(port: int, host: str = "127.0.0.1", timeout: float = 5.0) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.settimeout(timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionClosed(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def send_frame(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(struct.pack(">i", len(payload)) + payload)


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    if size < 0 or size > 256 * 1024 * 1024:
        raise ValueError(f"broker sent a frame of nonsense size {size}")
    return recv_exact(sock, size)


def wait_closed(sock: socket.socket, timeout: float = 5.0) -> bytes:
    """Read until the broker closes the connection; return whatever came first.

    Raises AssertionError if the connection is still open after ``timeout``.
    A reset counts as closed.
    """
    deadline = time.monotonic() + timeout
    got = bytearray()
    for _ in range(10_000):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            break
        except (ConnectionResetError, BrokenPipeError):
            return bytes(got)
        if not chunk:
            return bytes(got)
        got += chunk
    raise AssertionError(
        f"the broker did not close the connection within {timeout} s "
        f"(received {len(got)} bytes: {bytes(got[:64])!r})"
    )


# -- ApiVersions v0, hand-written so the harness does not depend on the code under test --

def api_versions_request(correlation_id: int, client_id: str = "it-harness") -> bytes:
    cid = client_id.encode()
    return struct.pack(">hhih", API_VERSIONS, 0, correlation_id, len(cid)) + cid


def parse_api_versions_v0(frame: bytes, correlation_id: int) -> dict[int, tuple[int, int]]:
    """Correlation id check + error code 0 + the (min, max) range per api key."""
    if len(frame) < 10:
        raise ValueError(f"ApiVersions answer too short: {frame!r}")
    corr, error, count = struct.unpack_from(">ihi", frame, 0)
    if corr != correlation_id:
        raise ValueError(f"ApiVersions answer has correlation id {corr}, expected {correlation_id}")
    if error != 0:
        raise ValueError(f"ApiVersions answered error {error}")
    if count < 0 or len(frame) < 10 + 6 * count:
        raise ValueError(f"ApiVersions answer with {count} keys does not fit in {len(frame)} bytes")
    out = {}
    for i in range(count):
        key, lo, hi = struct.unpack_from(">hhh", frame, 10 + 6 * i)
        out[key] = (lo, hi)
    return out


def api_versions(port: int, timeout: float = 5.0, sock: socket.socket | None = None,
                 correlation_id: int = 7) -> dict[int, tuple[int, int]]:
    """One real ApiVersions v0 round trip (on ``sock`` or a new connection)."""
    own = sock is None
    if own:
        sock = connect(port, timeout=timeout)
    try:
        sock.settimeout(timeout)
        send_frame(sock, api_versions_request(correlation_id))
        return parse_api_versions_v0(recv_frame(sock), correlation_id)
    finally:
        if own:
            sock.close()


# -- kio-based requests (the project's own codec: protocol.codec) ---------------------------

def _kio_request(api_key: int, version: int):
    from kio.index import load_request_schema

    return load_request_schema(api_key, version)


def _decode_response(api_key: int, version: int, frame: bytes, correlation_id: int):
    from kio.index import load_response_schema
    from kio.serial import entity_reader

    (corr,) = struct.unpack_from(">i", frame, 0)
    if corr != correlation_id:
        raise ValueError(f"answer has correlation id {corr}, expected {correlation_id}")
    cls = load_response_schema(api_key, version)
    pos = 4
    if cls.__flexible__:
        raise NotImplementedError("flexible response headers are not needed by these helpers")
    entity, _size = entity_reader(cls)(frame[pos:], 0)
    return entity


def encode_request(entity, correlation_id: int) -> bytes:
    from minibroker_protocol.codec import encode_request as _encode

    return _encode(entity, correlation_id)


def list_offsets(port: int, topic: str, partitions, timestamp: int = LATEST,
                 timeout: float = 5.0) -> dict[int, int]:
    """ListOffsets v1 for ``partitions`` of ``topic``: partition → offset.

    Raises if any partition answers an error.
    """
    Req = _kio_request(LIST_OFFSETS, 1)
    import kio.schema.list_offsets.v1.request as m

    req = Req(
        replica_id=-1,
        topics=(m.ListOffsetsTopic(
            name=topic,
            partitions=tuple(m.ListOffsetsPartition(partition_index=p, timestamp=timestamp)
                             for p in partitions),
        ),),
    )
    corr = 4242
    with connect(port, timeout=timeout) as sock:
        send_frame(sock, encode_request(req, corr))
        resp = _decode_response(LIST_OFFSETS, 1, recv_frame(sock), corr)
    out = {}
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code != 0:
                raise AssertionError(f"ListOffsets {topic}[{p.partition_index}] error {p.error_code}")
            out[p.partition_index] = p.offset
    return out


def high_watermarks(port: int, topic: str, partitions) -> dict[int, int]:
    return list_offsets(port, topic, partitions, LATEST)


def produce_request_v8(topic: str, batches: dict[int, bytes], correlation_id: int,
                       acks: int = -1, timeout_ms: int = 5000) -> bytes:
    """Header + body of a Produce v8 request carrying one record blob per partition."""
    Req = _kio_request(PRODUCE, 8)
    import kio.schema.produce.v8.request as m

    req = Req(
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=(m.TopicProduceData(
            name=topic,
            partition_data=tuple(m.PartitionProduceData(index=p, records=blob)
                                 for p, blob in sorted(batches.items())),
        ),),
    )
    return encode_request(req, correlation_id)


def produce_v8(sock: socket.socket, topic: str, batches: dict[int, bytes],
               correlation_id: int = 99) -> dict[int, tuple[int, int]]:
    """Send a Produce v8 on ``sock``; partition → (error_code, base_offset)."""
    send_frame(sock, produce_request_v8(topic, batches, correlation_id))
    resp = _decode_response(PRODUCE, 8, recv_frame(sock), correlation_id)
    out = {}
    for t in resp.responses:
        assert t.name == topic, t.name
        for p in t.partition_responses:
            out[p.index] = (p.error_code, p.base_offset)
    return out
