"""A fault-injecting TCP proxy for Kafka traffic, for integration tests.

``FaultProxy`` listens on 127.0.0.1:<port> and forwards every connection to
the broker (127.0.0.1:<upstream port>). It runs an asyncio loop in a
background thread of the test process. Both directions are parsed into Kafka
frames (4-byte big-endian size + payload), so faults always hit whole
requests/responses; the request headers (api key, correlation id) are
remembered per connection, so every response is known by its api key.

Faults, all on the broker → client direction, decided per response frame by
a seeded RNG:

- **drop**: the response is not forwarded, and neither is anything after it
  on that connection (the connection goes silent: TCP never loses a single
  frame, and a client that got a later response first would see a
  correlation-id mismatch rather than a lost answer). The client times out
  (request.timeout.ms / socket.timeout.ms), closes the connection and
  retries. The broker had already appended the batch: the retry is a
  duplicate, and so is every batch that was in flight behind it.
- **delay**: the response (and so everything after it on the connection) is
  held for a random time.
- **cut**: a random prefix of the response (possibly nothing, never all of it) is forwarded,
  then both sides are closed with a reset.

``faults_enabled`` switches faults on and off at run time; ``max_*`` bound
the number of each fault and ``min_gap`` spaces drops and cuts (in responses), so
a test's running time stays bounded; ``drop_every`` forces a drop of a Produce
response when none happened for that many of them. ``stats()`` returns the counters (a test asserts
that faults happened, so it cannot pass vacuously). ``stop()`` closes the
listener and every connection and joins the thread.

Only loopback addresses are used. The broker must advertise the proxy's
address (``--advertised-port proxy.port``), or clients would connect to the
broker directly after bootstrap; so the proxy binds its port first
(``FaultProxy(...).start()``) and learns the broker's port later
(``set_upstream``).
"""

from __future__ import annotations

import asyncio
import collections
import random
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

HOST = "127.0.0.1"
MAX_FRAME = 256 * 1024 * 1024

# Kafka api keys by name, for readable counters.
API_NAMES = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
             10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 18: "ApiVersions", 19: "CreateTopics",
             22: "InitProducerId", 32: "DescribeConfigs", 60: "DescribeCluster"}


@dataclass
class FaultConfig:
    """Probabilities are per response frame, checked in the order drop, cut, delay."""

    drop: float = 0.0
    cut: float = 0.0
    delay: float = 0.0
    delay_range: tuple[float, float] = (0.05, 0.5)  # seconds
    max_drops: int = 1_000_000
    max_cuts: int = 1_000_000
    max_delays: int = 1_000_000
    # At least this many eligible responses pass between two drops/cuts (counted, not timed,
    # so a fast broker does not slip through the gaps and a seed replays the same schedule).
    min_gap: int = 0
    # Only responses to these api keys are eligible for faults (None: all of them).
    api_keys: frozenset[int] | None = None
    # The first ``warmup`` eligible responses pass untouched.
    warmup: int = 0
    # If set: after this many responses to ``drop_every_api_keys`` without a drop of one of
    # them, the next one is dropped (still within max_drops and min_gap), so a short run
    # cannot escape the faults by luck of the draw.
    drop_every: int = 0
    drop_every_api_keys: frozenset[int] = frozenset({0})


@dataclass
class _Conn:
    cid: int
    client_w: asyncio.StreamWriter
    upstream_w: asyncio.StreamWriter | None = None
    inflight: dict = field(default_factory=dict)  # corr -> api key
    silent: bool = False
    closed: bool = False
    tasks: list = field(default_factory=list)


class FaultProxy:
    def __init__(self, upstream_port: int | None = None, *, seed: int = 1, config: FaultConfig | None = None,
                 port: int = 0, name: str = "faultproxy") -> None:
        self.upstream_port = upstream_port
        self.config = config or FaultConfig()
        self.rng = random.Random(seed)
        self.name = name
        self.faults_enabled = True
        self._lock = threading.Lock()
        self._counters: collections.Counter = collections.Counter()
        self._events: list[str] = []
        self._last_disruption = -1_000_000_000  # index of the eligible response
        self._eligible_seen = 0
        self._since_drop = 0
        self._conns: dict[int, _Conn] = {}
        self._next_cid = 0
        # Bind now, so the port is ours before the broker is told to advertise it.
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((HOST, port))
        self._sock.listen(128)
        self._sock.setblocking(False)
        self.port = self._sock.getsockname()[1]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopped = False
        self._start_error: BaseException | None = None

    # -- public API ---------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def set_upstream(self, port: int) -> None:
        self.upstream_port = port

    def start(self) -> "FaultProxy":
        self._thread = threading.Thread(target=self._run, name=f"{self.name}:{self.port}", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fault proxy did not start within 10 s")
        if self._start_error is not None:
            raise RuntimeError(f"fault proxy failed to start: {self._start_error!r}")
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        loop = self._loop
        if loop is not None and self._thread is not None and self._thread.is_alive():
            fut = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
            try:
                fut.result(timeout)
            except Exception:
                pass
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(timeout)
        try:
            self._sock.close()
        except OSError:
            pass

    def stats(self) -> dict:
        """A copy of the counters: connections, frames, drops, cuts, delays, per api too."""
        with self._lock:
            return dict(self._counters)

    def events(self) -> list[str]:
        with self._lock:
            return list(self._events)

    def summary(self) -> str:
        s = self.stats()
        keys = ("connections", "upstream_refused", "requests", "responses", "forwarded", "drops",
                "silenced", "cuts", "delays")
        main = ", ".join(f"{k}={s.get(k, 0)}" for k in keys)
        per_api = ", ".join(f"{k}={v}" for k, v in sorted(s.items()) if k.startswith(("drops.", "cuts.")))
        return f"{main}" + (f" ({per_api})" if per_api else "")

    def drops_of(self, api_key: int) -> int:
        return self.stats().get(f"drops.{API_NAMES.get(api_key, api_key)}", 0)

    def cuts_of(self, api_key: int) -> int:
        return self.stats().get(f"cuts.{API_NAMES.get(api_key, api_key)}", 0)

    def close_all_connections(self) -> None:
        """Reset every proxied connection now (as if the network dropped them all)."""
        loop = self._loop
        if loop is None:
            return
        fut = asyncio.run_coroutine_threadsafe(self._close_all(), loop)
        fut.result(10)

    def silence_all(self) -> int:
        """Drop every further response on every open connection (as a drop does for one);
        returns how many connections were silenced. New connections are not affected."""
        loop = self._loop
        if loop is None:
            return 0

        async def _silence() -> int:
            n = 0
            for conn in self._conns.values():
                if not conn.silent:
                    conn.silent = True
                    n += 1
            return n

        n = asyncio.run_coroutine_threadsafe(_silence(), loop).result(10)
        self._count("silence_all")
        self._event(f"silence_all: {n} connections")
        return n

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- internals ----------------------------------------------------------------------
    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._counters[key] += n

    def _event(self, text: str) -> None:
        with self._lock:
            if len(self._events) < 10_000:
                self._events.append(f"{time.monotonic():.3f} {text}")

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            self._server = loop.run_until_complete(asyncio.start_server(self._handle, sock=self._sock))
        except BaseException as e:  # pragma: no cover - reported by start()
            self._start_error = e
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            try:
                pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
                for t in pending:
                    t.cancel()
                if pending:
                    loop.run_until_complete(asyncio.wait(pending, timeout=5))
            except Exception:
                pass
            loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._close_all()

    async def _close_all(self) -> None:
        for conn in list(self._conns.values()):
            self._abort(conn, "close_all")

    def _abort(self, conn: _Conn, why: str) -> None:
        """Close both sides of a connection with a reset (SO_LINGER 0)."""
        if conn.closed:
            return
        conn.closed = True
        self._conns.pop(conn.cid, None)
        for w in (conn.client_w, conn.upstream_w):
            if w is None:
                continue
            try:
                sock = w.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
            try:
                w.transport.abort()
            except Exception:
                pass
        current = asyncio.current_task()
        for t in conn.tasks:
            if t is not current and not t.done():
                t.cancel()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self._next_cid += 1
        conn = _Conn(self._next_cid, client_w)
        self._count("connections")
        if self._stopped or self.upstream_port is None:
            self._count("upstream_refused")
            self._abort(conn, "no upstream")
            return
        try:
            upstream_r, upstream_w = await asyncio.wait_for(
                asyncio.open_connection(HOST, self.upstream_port), timeout=5)
        except (OSError, asyncio.TimeoutError):
            # The broker is down (e.g. killed): refuse the client as the broker itself would.
            self._count("upstream_refused")
            self._abort(conn, "upstream refused")
            return
        conn.upstream_w = upstream_w
        for w in (client_w, upstream_w):
            s = w.get_extra_info("socket")
            if s is not None:
                try:
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                except OSError:
                    pass
        self._conns[conn.cid] = conn
        t1 = asyncio.ensure_future(self._pump_requests(conn, client_r, upstream_w))
        t2 = asyncio.ensure_future(self._pump_responses(conn, upstream_r, client_w))
        conn.tasks = [t1, t2]
        try:
            await asyncio.wait(conn.tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._abort(conn, "pump ended")

    @staticmethod
    async def _read_frame(reader: asyncio.StreamReader) -> tuple[bytes, bytes] | None:
        try:
            head = await reader.readexactly(4)
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        (size,) = struct.unpack(">i", head)
        if size < 0 or size > MAX_FRAME:
            return None
        try:
            body = await reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        return head, body

    async def _pump_requests(self, conn: _Conn, reader, writer) -> None:
        """client → broker: forwarded untouched; headers remembered to name the responses."""
        for _ in range(100_000_000):
            frame = await self._read_frame(reader)
            if frame is None:
                return
            head, body = frame
            if len(body) >= 8:
                api_key, _ver, corr = struct.unpack_from(">hhi", body, 0)
                # acks=0 produce requests get no response; anything else does.
                if not (api_key == 0 and _produce_acks_zero(body)):
                    conn.inflight[corr] = api_key
            self._count("requests")
            try:
                writer.write(head + body)
                await writer.drain()
            except (ConnectionError, RuntimeError):
                return
        return

    async def _pump_responses(self, conn: _Conn, reader, writer) -> None:
        """broker → client: where faults happen, one whole response at a time."""
        for _ in range(100_000_000):
            frame = await self._read_frame(reader)
            if frame is None:
                return
            head, body = frame
            corr = struct.unpack_from(">i", body, 0)[0] if len(body) >= 4 else None
            api_key = conn.inflight.pop(corr, None)
            api = API_NAMES.get(api_key, str(api_key))
            self._count("responses")
            if conn.silent:
                self._count("silenced")
                continue
            action, arg = self._decide(api_key, 4 + len(body))
            if action == "drop":
                conn.silent = True
                self._count("drops")
                self._count(f"drops.{api}")
                self._event(f"conn {conn.cid}: drop {api} response corr={corr} ({len(body)} B); silent from now on")
                continue
            if action == "cut":
                self._count("cuts")
                self._count(f"cuts.{api}")
                prefix = (head + body)[:arg]
                self._event(f"conn {conn.cid}: cut at {api} response corr={corr} after {len(prefix)} B")
                if prefix:
                    try:
                        writer.write(prefix)
                        await asyncio.wait_for(writer.drain(), timeout=2)
                    except (ConnectionError, RuntimeError, asyncio.TimeoutError):
                        pass
                self._abort(conn, "cut")
                return
            if action == "delay":
                self._count("delays")
                self._count(f"delays.{api}")
                await asyncio.sleep(arg)
            self._count("forwarded")
            try:
                writer.write(head + body)
                await writer.drain()
            except (ConnectionError, RuntimeError):
                return
        return

    def _decide(self, api_key: int | None, frame_len: int) -> tuple[str, float | int]:
        cfg = self.config
        if not self.faults_enabled:
            return "pass", 0
        if cfg.api_keys is not None and api_key not in cfg.api_keys:
            return "pass", 0
        self._eligible_seen += 1
        if self._eligible_seen <= cfg.warmup:
            return "pass", 0
        stats = self._counters
        r = self.rng.random()
        now = self._eligible_seen
        gap_ok = now - self._last_disruption > cfg.min_gap
        forced = False
        if cfg.drop_every and api_key in cfg.drop_every_api_keys:
            self._since_drop += 1
            forced = self._since_drop > cfg.drop_every
        if r < cfg.drop or forced:
            if gap_ok and stats["drops"] < cfg.max_drops:
                self._last_disruption = now
                if api_key in cfg.drop_every_api_keys:
                    self._since_drop = 0
                return "drop", 0
            return "pass", 0
        r -= cfg.drop
        if r < cfg.cut:
            if gap_ok and stats["cuts"] < cfg.max_cuts:
                self._last_disruption = now
                return "cut", self.rng.randrange(0, min(frame_len, 64))  # never the whole frame
            return "pass", 0
        r -= cfg.cut
        if r < cfg.delay and stats["delays"] < cfg.max_delays:
            return "delay", self.rng.uniform(*cfg.delay_range)
        return "pass", 0


def _produce_acks_zero(body: bytes) -> bool:
    """Whether a Produce request (header v1/v2 + body) carries acks=0.

    Layout: api_key, api_version, correlation_id, client_id (nullable int16 string),
    [tagged fields for header v2 = produce v9+], [transactional_id for v3+], acks.
    """
    try:
        version = struct.unpack_from(">h", body, 2)[0]
        pos = 8
        (n,) = struct.unpack_from(">h", body, pos)
        pos += 2 + max(n, 0)
        flexible = version >= 9
        if flexible:
            pos = _skip_tagged(body, pos)
        if version >= 3:
            if flexible:
                length, pos = _uvarint(body, pos)  # compact nullable string: length + 1
                pos += max(length - 1, 0)
            else:
                (n,) = struct.unpack_from(">h", body, pos)
                pos += 2 + max(n, 0)
        (acks,) = struct.unpack_from(">h", body, pos)
        return acks == 0
    except (struct.error, ValueError):
        return False


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    for _ in range(5):
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    raise ValueError("varint too long")


def _skip_tagged(buf: bytes, pos: int) -> int:
    count, pos = _uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        pos += size
    return pos
