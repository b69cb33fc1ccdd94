"""The TCP side: one asyncio.BufferedProtocol per connection.

Every complete frame in a delivery is handled at once; answers leave strictly
in request order even when some of them wait (long-poll fetch), because a
client pipelines several requests and matches answers by order as well as by
correlation id.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque

import structlog

from minibroker_protocol.framing import FrameDecoder, InvalidFrame, size_prefix

from .dispatch import Disconnect, Dispatcher

log = structlog.get_logger("minibroker.server")

_conn_ids = itertools.count(1)


class _Slot:
    __slots__ = ("chunks", "size", "done")

    def __init__(self) -> None:
        self.chunks = None
        self.size = 0
        self.done = False


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, dispatcher: Dispatcher, max_request_bytes: int, registry: set,
                 listener=None, listeners: tuple = ()) -> None:
        self.dispatcher = dispatcher
        # The listener this connection came in on: Metadata and FindCoordinator answer with
        # its advertised address.
        self.listener = listener
        self.listeners = listeners
        self.decoder = FrameDecoder(max_request_bytes)
        self.registry = registry
        self.transport: asyncio.Transport | None = None
        self.peer = None
        self.conn_id = next(_conn_ids)
        self.pending: deque[_Slot] = deque()
        self.tasks: set[asyncio.Task] = set()
        self.closed = False

    # -- asyncio callbacks -------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        self.registry.add(self)
        log.debug("connection.opened", conn=self.conn_id, peer=self.peer)

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.registry.discard(self)
        for task in self.tasks:
            task.cancel()
        self.pending.clear()
        log.debug("connection.closed", conn=self.conn_id, peer=self.peer, error=repr(exc) if exc else None)

    def pause_writing(self) -> None:
        # The client is not reading its answers: stop reading its requests.
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        if not self.closed:
            self.transport.resume_reading()

    # BufferedProtocol: the transport reads straight into the decoder's buffers, so a 1 MiB
    # Produce request is copied once from the socket (protocol/framing.py says why).
    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self._decode(self.decoder.buffer_updated, nbytes)

    def data_received(self, data: bytes) -> None:
        self._decode(self.decoder.feed, data)

    def _decode(self, step, arg) -> None:
        try:
            frames = step(arg)
        except InvalidFrame as e:
            self._disconnect("invalid_frame", str(e))
            return
        if frames:
            self._handle(frames)

    def _handle(self, frames) -> None:
        for frame in frames:
            if self.closed:
                return
            try:
                result = self.dispatcher.handle(frame, self)
            except Disconnect as e:
                self._disconnect(e.reason, e.detail, **e.fields)
                return
            except Exception:
                log.exception("request.crashed", conn=self.conn_id, peer=self.peer)
                self._disconnect("internal_error", "unexpected exception while handling a request")
                return
            if result is None:
                continue  # acks=0 produce: Kafka sends nothing back
            if asyncio.iscoroutine(result):
                slot = _Slot()
                self.pending.append(slot)
                task = asyncio.ensure_future(self._await(slot, result))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
            elif not self.pending:
                self._write(result)
            else:
                slot = _Slot()
                slot.chunks, slot.size = result
                slot.done = True
                self.pending.append(slot)

    # -- answers -------------------------------------------------------------
    async def _await(self, slot: _Slot, coro) -> None:
        try:
            result = await coro
        except asyncio.CancelledError:
            raise
        except Disconnect as e:
            self._disconnect(e.reason, e.detail, **e.fields)
            return
        except Exception:
            log.exception("request.crashed", conn=self.conn_id, peer=self.peer)
            self._disconnect("internal_error", "unexpected exception while handling a request")
            return
        if result is None:
            slot.chunks, slot.size = [], -1
        else:
            slot.chunks, slot.size = result
        slot.done = True
        self._drain()

    def _drain(self) -> None:
        while self.pending and self.pending[0].done:
            slot = self.pending.popleft()
            if slot.size >= 0 and not self.closed:
                self._write((slot.chunks, slot.size))

    def _write(self, result) -> None:
        chunks, size = result
        if self.closed:
            return
        if len(chunks) == 1:
            self.transport.write(size_prefix(size) + chunks[0])
        else:
            self.transport.writelines([size_prefix(size), *chunks])

    def _disconnect(self, reason: str, detail: str, **fields) -> None:
        log.warning("connection.rejected", conn=self.conn_id, peer=self.peer, reason=reason,
                    detail=detail, **fields)
        self.closed = True
        if self.transport is not None:
            self.transport.close()
