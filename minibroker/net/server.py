"""The TCP side: one asyncio.BufferedProtocol per connection.

Every complete frame in a delivery is handled at once; answers leave strictly
in request order even when some of them wait (long-poll fetch), because a
client pipelines several requests and matches answers by order as well as by
correlation id. The answers ready once a delivery's frames are handled leave
with one transport write (KafkaConnection._flush).

All connections' large-frame buffers draw on one ``RequestMemory`` budget
(Kafka's queued.max.request.bytes); a connection whose frame cannot grow stops
reading its socket until memory frees.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import resource
import socket
import time
from collections import deque
from typing import Any

from minibroker_protocol.framing import UNBOUNDED, FrameDecoder, InvalidFrame, size_prefix
from minibroker_storage.lazylog import get_logger

from ..control.request_counts import RequestCounts
from ..handlers.api import NO_RESPONSE, Disconnect, Response
from ..security.sasl.common import ANONYMOUS, MAX_UNAUTHENTICATED_FRAME
from .binding import prepare_accepted
from .dispatch import Dispatcher

log = get_logger("minibroker.server")

_conn_ids = itertools.count(1)

# A large frame (a Produce request) arrives in many segments, and the loop would wake and
# read for each. Over TLS it does: librdkafka writes a TLS record per buffer segment
# (about one per 1 KiB message), each sent on its own, and the broker woke ~110 times per
# 256 KiB request (bench/tls_cost.py: 65,613 reads for 596 requests), each wake-up a socket
# read, a pass through uvloop's TLS layer and two Python callbacks. While such a frame is
# incomplete a TLS connection's socket has SO_RCVLOWAT set to the bytes still missing, up
# to _LOWAT_MAX, so the kernel reports it readable only once that many are there; back to 1
# between frames, so a small request is never kept waiting.
# A small cap, because unread bytes narrow the receive window the sender sees: under heavy
# load a 32 KiB cap once measured fewer MB/s than none, while 16 KiB (an eighth of tcp_rmem's
# default 128 KiB) cut the broker's CPU per GB over TLS by ~40 % with MB/s no lower in every
# interleaved run (bench/RESULTS.md, 2026-11-28). Linux also wakes the reader early under
# memory pressure or when the window is about to close (tcp_epollin_ready), so no frame
# waits for ever.
_LOWAT_MAX = 16 * 1024
# Over TLS the last bytes of a frame may be in a record whose first part the TLS layer
# already holds undecrypted, so the wait is for the missing bytes less one record at its
# largest (2^14 + 2048 bytes of ciphertext and a 5-byte header: RFC 5246 6.2.3, RFC 8446
# 5.2): more than that must still come through the socket.
_TLS_RECORD_MAX = 16384 + 2048 + 5
# A TLS batch of answers up to this size is joined into one buffer, so it goes out in as few
# records as it fills rather than one (and an encryption call) per piece; larger ones (Fetch
# answers with their record data) are written piece by piece, without the copy.
_TLS_JOIN_MAX = 64 * 1024


class RequestMemory:
    """The bytes all connections' partly received and not yet answered large
    requests may hold together (Kafka's queued.max.request.bytes).

    A decoder asks before every growth of a frame's buffer. Past the limit it is
    refused and its connection waits, first in first resumed, until buffers are
    given back. One frame at a time may still go past the limit, up to its own
    announced size (at most --max-request-bytes): without that, frames that each
    hold part of the budget and all wait for more would wait for ever, and a
    single frame larger than the budget could never arrive. This is Kafka's
    non-strict pool (SocketServer builds a SimpleMemoryPool with strict=false:
    "max allocated memory would be sizeBytes + maxSingleAllocationSize",
    clients/.../common/memory/SimpleMemoryPool.java), with one difference: Kafka
    takes the whole announced size at once, this takes what arrives.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit  # <= 0: no limit, as Kafka's queued.max.request.bytes=-1
        self.used = 0
        self.overdraft: tuple[FrameDecoder, int] | None = None  # (decoder, frame_seq) allowed past the limit
        self.holders: set[FrameDecoder] = set()
        self.waiting: dict[KafkaConnection, float] = {}  # insertion order: first paused, first resumed
        self._wake_scheduled = False

    def take(self, decoder: FrameDecoder, n: int, force: bool = False) -> bool:
        if not force and self.limit > 0 and self.used + n > self.limit:
            self.reclaim()
        if not force and self.limit > 0 and self.used + n > self.limit:
            frame = (decoder, decoder.frame_seq)
            if self.overdraft is None and not self._someone_waits_before(decoder):
                self.overdraft = frame
                log.info("connection.memory_overdraft", conn=decoder.tag, frame_bytes=decoder.pending_size,
                         used=self.used, asked=n, limit=self.limit,
                         reason="one frame at a time may pass the budget so the broker always progresses")
            elif self.overdraft != frame:
                return False
        self.used += n
        self.holders.add(decoder)
        return True

    def _someone_waits_before(self, decoder: FrameDecoder) -> bool:
        # The overdraft goes to the connection that has waited longest.
        for conn in self.waiting:
            return conn.decoder is not decoder
        return False

    def give(self, decoder: FrameDecoder, n: int) -> None:
        self.used -= n
        if decoder.held == 0:
            self.holders.discard(decoder)
        if self.overdraft is not None and self.used <= self.limit:
            self.overdraft = None
        self.wake_soon()

    def reclaim(self) -> None:
        """Give back every kept buffer nothing refers to: the budget is short."""
        for decoder in list(self.holders):
            decoder.release_idle(0)

    def wait(self, conn: KafkaConnection) -> None:
        self.waiting.setdefault(conn, time.monotonic())

    def forget(self, conn: KafkaConnection) -> None:
        self.waiting.pop(conn, None)

    def wake_soon(self) -> None:
        """Retry the waiting connections on the next loop turn, never from inside
        another connection's read."""
        if self.waiting and not self._wake_scheduled:
            self._wake_scheduled = True
            asyncio.get_running_loop().call_soon(self._wake)

    def _wake(self) -> None:
        self._wake_scheduled = False
        for conn, since in list(self.waiting.items()):
            if conn.closed:
                self.waiting.pop(conn, None)
                continue
            if not conn.retry_memory(since):
                break  # first paused, first resumed: no one overtakes the head
            self.waiting.pop(conn, None)


NO_LIMIT = RequestMemory(0)


_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})


def _out_of_resources(exc: BaseException) -> OSError | None:
    """The EMFILE/ENFILE/ENOMEM behind ``exc`` (itself, or what it was raised from), if any."""
    seen = 0
    e: BaseException | None = exc
    while e is not None and seen < 8:
        if isinstance(e, OSError) and e.errno in _RESOURCE_ERRNOS:
            return e
        e = e.__cause__ or e.__context__
        seen += 1
    return None


class _Slot:
    __slots__ = ("response", "done")

    def __init__(self) -> None:
        self.response = NO_RESPONSE
        self.done = False


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, dispatcher: Dispatcher, max_request_bytes: int, registry: set,
                 listener=None, listeners: tuple = (), memory: RequestMemory | None = None,
                 auth=None, auth_timeout_s: float = 10.0) -> None:
        self.dispatcher = dispatcher
        # Where the bytes read and written are added up (/metrics); a test's stand-in
        # dispatcher may have none.
        traffic = getattr(dispatcher, "counts", None)
        self.traffic = traffic if traffic is not None else RequestCounts()
        # The listener this connection came in on: Metadata and FindCoordinator answer with
        # its advertised address.
        self.listener = listener
        self.listeners = listeners
        self.conn_id = next(_conn_ids)
        self.client_software = ("unknown", "unknown")  # ApiVersions v3+ names it (KIP-511)
        self.memory = memory if memory is not None else NO_LIMIT
        self.decoder = FrameDecoder(max_request_bytes, self.memory if memory is not None else UNBOUNDED,
                                    tag=self.conn_id)
        self.registry = registry
        self.transport: asyncio.Transport | None = None
        self.peer = None
        self.pending: deque[_Slot] = deque()
        self.tasks: set[asyncio.Task] = set()
        self.closed = False
        # Why reading is paused: "write" (the client does not read its answers) and/or
        # "memory" (a frame waits for the request budget). Reading resumes when both clear.
        self.paused: set[str] = set()
        # A fault rule dropped an answer: the connection stays open but reads and answers
        # nothing more, as across a partition, until the client gives up on it.
        self.muted = False
        # Who sent the requests (Kafka's KafkaPrincipal as text): a SASL listener's user once
        # authenticated, an SSL client certificate's subject, else User:ANONYMOUS.
        self.principal = ANONYMOUS
        # A SASL listener's authentication (minibroker/security/sasl/authenticator.py); None elsewhere.
        # Until it completes, frames are bounded as Kafka's SaslServerAuthenticator bounds them
        # and the connection must authenticate within ``auth_timeout_s``.
        self.auth = auth
        self.auth_timeout_s = auth_timeout_s
        self._auth_timer: asyncio.TimerHandle | None = None
        self._max_request_bytes = max_request_bytes
        if auth is not None:
            self.decoder.max_size = min(max_request_bytes, MAX_UNAUTHENTICATED_FRAME)
        # Set when an answer is the last: the connection closes once it is written.
        self._closing: str | None = None
        # A quota throttled the client (minibroker/handlers/quotas.py): nothing more is read
        # until the loop time ``_throttled_until``; the frames that had already arrived behind
        # the throttled request wait in ``_deferred`` (Kafka reads one request at a time from a
        # channel, so they would still be in its socket).
        self._throttled_until = 0.0
        self._throttle_timer: asyncio.TimerHandle | None = None
        self._deferred: list[bytes] = []
        # The socket whose SO_RCVLOWAT follows the frame being read (None: not TLS over TCP,
        # or the option failed once) and the value set.
        self._rcv_sock: Any = None
        self._rcvlowat = 1
        # The answers of the frames being handled, written together once they are all handled
        # (None: outside such a batch, an answer is written at once). A write is one send()
        # and a wake-up of the client: with several requests in flight (librdkafka's default
        # window of 5) one read often completes more than one frame, and their answers now
        # leave in one send.
        self._out: list[Any] | None = None
        # Over TLS every piece handed to the transport becomes its own TLS record (uvloop's
        # SSLProtocol._do_write), so a batch of small pieces is joined first.
        self._tls = False

    def close_after(self, response: Response, reason: str) -> None:
        """``response`` is this connection's last answer (a failed authentication)."""
        self._closing = reason

    def authenticated(self, session_lifetime_ms: int) -> None:
        self.decoder.max_size = self._max_request_bytes
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None

    def _auth_timed_out(self) -> None:
        self._auth_timer = None
        if self.closed or self.auth is None or self.auth.authenticated:
            return
        log.warning("sasl.authentication_timeout", conn=self.conn_id, peer=self.peer,
                    listener=getattr(self.listener, "name", None), state=self.auth.state,
                    timeout_ms=int(self.auth_timeout_s * 1000))
        self._disconnect("sasl_authentication_timeout",
                         f"not authenticated within {int(self.auth_timeout_s * 1000)} ms")

    def throttle(self, ms: int) -> None:
        """Read nothing more for ``ms`` (Kafka mutes a throttled channel, KIP-219)."""
        if self.closed or ms <= 0:
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + ms / 1000
        if self._throttle_timer is not None:
            if until <= self._throttled_until:
                return
            self._throttle_timer.cancel()
        self._throttled_until = until
        self._pause("throttle")
        self._throttle_timer = loop.call_at(until, self._unthrottle)

    def _unthrottle(self) -> None:
        self._throttle_timer = None
        if self.closed:
            return
        deferred, self._deferred = self._deferred, []
        if deferred:
            self._handle(deferred)
        if self._throttle_timer is None:  # the deferred requests did not throttle it again
            self._resume("throttle")

    def mute(self, why: str) -> None:
        if self.muted or self.closed:
            return
        self.muted = True
        log.info("connection.muted", conn=self.conn_id, peer=self.peer, reason=why)
        self._pause("fault")

    # -- asyncio callbacks -------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        self.registry.add(self)
        # TLS only: a plaintext client writes a request in one go (librdkafka: 2 reads per
        # 256 KiB request), so there is nothing to save and a window to narrow.
        self._tls = transport.get_extra_info("sslcontext") is not None
        sock = transport.get_extra_info("socket")
        if self._tls and sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            self._rcv_sock = sock
        if self.auth is not None:
            self._auth_timer = asyncio.get_running_loop().call_later(self.auth_timeout_s,
                                                                     self._auth_timed_out)
        elif transport.get_extra_info("sslcontext") is not None:
            from ..security.tls import certificate_principal
            self.principal = certificate_principal(transport.get_extra_info("peercert"))
        log.debug("connection.opened", conn=self.conn_id, peer=self.peer)

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.registry.discard(self)
        if self._auth_timer is not None:
            self._auth_timer.cancel()
        if self._throttle_timer is not None:
            self._throttle_timer.cancel()
        self._deferred = []
        for task in self.tasks:
            task.cancel()
        self.pending.clear()
        self.memory.forget(self)
        self.decoder.close()
        for closed in getattr(self.dispatcher, "on_disconnect", ()):
            try:
                closed(str(self.conn_id))
            except Exception:
                log.exception("connection.close_hook_failed", conn=self.conn_id)
        log.debug("connection.closed", conn=self.conn_id, peer=self.peer, error=repr(exc) if exc else None)

    def pause_writing(self) -> None:
        # The client is not reading its answers: stop reading its requests.
        self._pause("write")

    def resume_writing(self) -> None:
        self._resume("write")

    def _pause(self, why: str) -> None:
        if not self.paused and not self.closed:
            assert self.transport is not None  # reads and writes begin after connection_made
            self.transport.pause_reading()
        self.paused.add(why)

    def _resume(self, why: str) -> None:
        self.paused.discard(why)
        if not self.paused and not self.closed:
            assert self.transport is not None  # reads and writes begin after connection_made
            self.transport.resume_reading()

    # BufferedProtocol: the transport reads straight into the decoder's buffers, so a 1 MiB
    # Produce request is copied once from the socket (protocol/framing.py says why).
    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self.traffic.bytes_in += nbytes
        self._decode(self.decoder.buffer_updated, nbytes)
        if self._rcv_sock is not None:
            self._wait_for_frame()

    def _wait_for_frame(self) -> None:
        """Set SO_RCVLOWAT to the bytes the frame being read still misses (see _LOWAT_MAX)."""
        missing = self.decoder.missing - _TLS_RECORD_MAX
        want = min(missing, _LOWAT_MAX) if missing > 1 and not self.closed else 1
        if want == self._rcvlowat:
            return
        try:
            self._rcv_sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, want)
        except OSError as e:
            # Only an optimisation: without it every segment wakes the loop, as before.
            log.info("connection.rcvlowat_failed", conn=self.conn_id, error=str(e))
            self._rcv_sock = None
            return
        self._rcvlowat = want

    def data_received(self, data: bytes) -> None:
        self.traffic.bytes_in += len(data)
        self._decode(self.decoder.feed, data)

    def _decode(self, step, arg) -> None:
        try:
            frames = step(arg)
        except InvalidFrame as e:
            self._disconnect("invalid_frame", str(e))
            return
        if self.decoder.blocked and "memory" not in self.paused:
            self._pause("memory")
            self.memory.wait(self)
            log.info("connection.reads_paused", conn=self.conn_id, peer=self.peer,
                     frame_bytes=self.decoder.pending_size, received=self.decoder.buffered,
                     held=self.decoder.held, used=self.memory.used, limit=self.memory.limit,
                     waiting=len(self.memory.waiting), reason="request memory budget exhausted")
        if frames:
            self._handle(frames)
            del frames
            self._handled()

    def retry_memory(self, since: float) -> bool:
        """The budget may have room again: grow the waiting frame and read on."""
        try:
            frames = self.decoder.resume()
        except InvalidFrame as e:  # a frame behind the one that waited
            self._disconnect("invalid_frame", str(e))
            return True
        if self.decoder.blocked:
            return False
        log.info("connection.reads_resumed", conn=self.conn_id, peer=self.peer,
                 waited_ms=round((time.monotonic() - since) * 1000, 1), held=self.decoder.held,
                 used=self.memory.used, limit=self.memory.limit, waiting=len(self.memory.waiting) - 1)
        self._resume("memory")
        if frames:
            self._handle(frames)
            del frames
            self._handled()
        return True

    def _handled(self) -> None:
        # A large frame handled at once is no longer referred to: its buffer may be
        # given back, and a waiting connection may now fit.
        self.decoder.release_idle()
        self.memory.wake_soon()

    def _handle(self, frames) -> None:
        if self._out is not None or len(frames) == 1:
            # already inside a batch (its end writes these answers too), or one frame: its
            # answer is written at once, with nothing to gather
            self._handle_each(frames)
            return
        self._out = []
        try:
            self._handle_each(frames)
        finally:
            self._flush()

    def _handle_each(self, frames) -> None:
        frames = list(frames)
        for i, frame in enumerate(frames):
            if self.closed:
                return
            if self._throttle_timer is not None:
                # copied: the decoder's buffers are reused once this delivery is handled
                self._deferred.extend(bytes(f) for f in frames[i:])
                return
            try:
                result = self.dispatcher.handle(frame, self)
            except Disconnect as e:
                self._disconnect(e.reason, e.detail, **e.fields)
                return
            except Exception as e:
                self._crashed(e)
                return
            if not isinstance(result, Response):
                slot = _Slot()
                self.pending.append(slot)
                task = asyncio.ensure_future(self._await(slot, result))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
            elif result.silent:
                continue  # acks=0 produce: Kafka sends nothing back
            elif not self.pending:
                self._write(result)
            else:
                slot = _Slot()
                slot.response = result
                slot.done = True
                self.pending.append(slot)

    def _crashed(self, exc: Exception) -> None:
        short = _out_of_resources(exc)
        if short is not None:
            # Out of descriptors or memory (a schema module imported on a request's first use
            # cannot be opened at the fd limit): the connection is closed and the client retries,
            # as after any broker-side failure; no traceback, the cause is the machine's.
            log.warning("request.failed", conn=self.conn_id, peer=self.peer,
                        errno=errno.errorcode.get(short.errno or 0, short.errno), error=str(short),
                        reason="out of resources")
            self._disconnect("resources_exhausted", str(short))
            return
        log.exception("request.crashed", conn=self.conn_id, peer=self.peer)
        self._disconnect("internal_error", "unexpected exception while handling a request")

    # -- answers -------------------------------------------------------------
    async def _await(self, slot: _Slot, coro) -> None:
        try:
            result = await coro
        except asyncio.CancelledError:
            raise
        except Disconnect as e:
            self._disconnect(e.reason, e.detail, **e.fields)
            return
        except Exception as e:
            self._crashed(e)
            return
        slot.response = result
        slot.done = True
        del coro, result
        self._drain()
        if not self.closed:
            self._handled()

    def _drain(self) -> None:
        pending = self.pending
        if not (pending and pending[0].done):
            return
        batch = self._out is None and len(pending) > 1 and pending[1].done
        if batch:
            self._out = []
        try:
            while self.pending and self.pending[0].done:
                slot = self.pending.popleft()
                if not slot.response.silent and not self.closed:
                    self._write(slot.response)
        finally:
            if batch:
                self._flush()

    def _write(self, response: Response) -> None:
        chunks, size = response.chunks, response.size
        if self.closed or self.muted:
            return
        assert self.transport is not None  # answers only follow requests, read after connection_made
        self.traffic.bytes_out += size + 4
        out = self._out
        if out is not None:
            out.append(size_prefix(size))
            out.extend(chunks)
        elif len(chunks) == 1:
            self.transport.write(size_prefix(size) + chunks[0])
        else:
            self.transport.writelines([size_prefix(size), *chunks])
        if self._closing is not None:
            # asyncio writes what is buffered before it closes (_disconnect flushes the batch)
            self._disconnect(self._closing, "closed after its last answer")

    def _flush(self) -> None:
        """Write the batch's answers, in the order they were given, with one transport call."""
        out, self._out = self._out, None
        if not out or self.transport is None:
            return
        if len(out) == 2:  # one answer in one piece: as before the batching
            self.transport.write(out[0] + out[1])
        elif self._tls and sum(map(len, out)) <= _TLS_JOIN_MAX:
            self.transport.write(b"".join(out))
        else:
            self.transport.writelines(out)

    def _disconnect(self, reason: str, detail: str, **fields) -> None:
        log.warning("connection.rejected", conn=self.conn_id, peer=self.peer, reason=reason,
                    detail=detail, **fields)
        self.closed = True
        if self.transport is not None:
            # the answers given before this one still leave, as when each was written at once
            self._flush()
            self.transport.close()


# accept() errors that mean "no file descriptor or buffer for one more connection now":
# asyncio's own accept loop pauses on these too (selector_events._accept_connection).
_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
# OSError.errno may be None; looking None up is fine, it just has no name.
_ERRNO_NAMES: dict[int | None, str] = {code: name for code, name in errno.errorcode.items()}


def _peer(conn: socket.socket) -> str | None:
    try:
        host, port = conn.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return None


class Acceptor:
    """Accepts the connections of one listener's bound sockets: what ``loop.create_server``
    does, and the same face (``sockets``, ``start_serving``, ``close``, ``wait_closed``).

    Its own because of the file-descriptor limit: libuv answers EMFILE by accepting and
    at once closing every waiting connection (its "EMFILE trick"), without a word, and
    uvloop closes the whole server if an accept error reaches it anyway. Here a refused
    accept is one rate-limited ``listener.accept_failed`` line; the listener then stops
    accepting for a moment, leaving the waiting connections in the kernel's backlog until
    descriptors free, as asyncio's own loop does.
    """

    RETRY_S = 0.2
    LOG_EVERY_S = 10.0

    def __init__(self, sockets: list[socket.socket], factory, name: str, backlog: int = 1024,
                 ssl=None) -> None:
        self.sockets = sockets
        self.ssl = ssl  # an SSL listener's server context (minibroker/security/tls.py)
        self.factory = factory
        self.name = name
        self.backlog = backlog
        self.closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task] = set()
        self._retry: dict[socket.socket, asyncio.TimerHandle] = {}
        self._refusals = 0
        self._logged_at = float("-inf")

    async def start_serving(self) -> None:
        self._loop = asyncio.get_running_loop()
        for sock in self.sockets:
            sock.setblocking(False)
            sock.listen(self.backlog)
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def _accept(self, sock: socket.socket) -> None:
        for _ in range(self.backlog):
            try:
                conn, _addr = sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as e:
                self._refused(sock, e)
                return
            if prepare_accepted(conn):
                self._spawn(conn, self.factory)

    def adopt(self, conn: socket.socket, software: tuple[str, str] | None) -> None:
        """A connection the early listener accepted (minibroker/net/early.py), with the client
        software it named in ApiVersions (KIP-511), set before its next request is read."""
        factory = self.factory
        if software is not None:
            def factory() -> Any:
                protocol = self.factory()
                protocol.client_software = software
                return protocol
        self._spawn(conn, factory)

    def _spawn(self, conn: socket.socket, factory: Any) -> None:
        assert self._loop is not None  # after start_serving
        task = self._loop.create_task(self._connect(conn, factory))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _connect(self, conn: socket.socket, factory: Any) -> None:
        assert self._loop is not None  # started by _accept
        peer = _peer(conn) if self.ssl is not None else None
        try:
            if self.ssl is None:
                await self._loop.connect_accepted_socket(factory, conn)
            else:
                from ..security.tls import HANDSHAKE_TIMEOUT_S
                await self._loop.connect_accepted_socket(
                    factory, conn, ssl=self.ssl, ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S)
        except (TimeoutError, OSError) as e:
            # ssl.SSLError is an OSError: an untrusted or missing client certificate, a
            # plaintext client on a TLS port, a timed-out handshake
            peer = peer or _peer(conn)
            conn.close()
            log.info("listener.connection_failed", listener=self.name, peer=peer,
                     error=str(e) or type(e).__name__)

    def _refused(self, sock: socket.socket, e: OSError) -> None:
        self._refusals += 1
        now = time.monotonic()
        if now - self._logged_at >= self.LOG_EVERY_S:
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            log.warning("listener.accept_failed", listener=self.name,
                        errno=_ERRNO_NAMES.get(e.errno, e.errno), error=e.strerror,
                        rlimit_nofile=soft, rlimit_nofile_hard=hard,
                        refusals=self._refusals, retry_ms=int(self.RETRY_S * 1000),
                        reason="out of file descriptors: connections wait in the backlog"
                        if e.errno in _OUT_OF_RESOURCES else "accept failed")
            self._logged_at = now
            self._refusals = 0
        # Stop accepting for a moment: the socket stays readable while the backlog holds
        # connections, and retrying at once would spin.
        assert self._loop is not None  # called from _accept
        self._loop.remove_reader(sock.fileno())
        self._retry[sock] = self._loop.call_later(self.RETRY_S, self._resume, sock)

    def _resume(self, sock: socket.socket) -> None:
        self._retry.pop(sock, None)
        if not self.closed:
            assert self._loop is not None  # a timer _refused set
            self._loop.add_reader(sock.fileno(), self._accept, sock)
            self._accept(sock)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for handle in self._retry.values():
            handle.cancel()
        self._retry.clear()
        for sock in self.sockets:
            if self._loop is not None:
                self._loop.remove_reader(sock.fileno())
            sock.close()

    async def wait_closed(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
