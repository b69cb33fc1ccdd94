"""The first answers of a starting broker, given before the broker is built (issue 21).

Theory of operation
-------------------
Building the broker (asyncio and uvloop, kio's codecs, the handlers, storage recovery) is most
of start-up, yet a client's first request, ApiVersions, needs none of it: its answer is the
table of served versions (minibroker/config/served_apis.py) and the finalized feature levels, a small
file in the data dir. So the CLI, before it imports the broker, calls ``start``, which

1. listens on every listener the CLI bound before touching the data dir
   (binding.bind_listeners; the ready file names their ports);
2. writes the ready file;
3. starts a thread that accepts the connections of the PLAINTEXT listeners and answers
   their ApiVersions requests (protocol/api_versions.py, no kio).

Each accepted connection is in one of three states::

    watched ──a whole ApiVersions frame in the socket──▶ answered, still watched
    watched ──anything else: another API, a frame not whole yet, one it cannot read,
              a client software name Kafka would refuse──▶ left (no longer watched)
    watched ──the peer closed──▶ dropped

A frame is read out of the socket only once all of it is there (``MSG_PEEK``), so every
connection is handed over on a frame boundary, its unread bytes still in the kernel: the full
broker reads it as if it had accepted it itself, and answers (or refuses, with its usual log
line) whatever the early listener left. The listeners of other protocols (SSL, SASL) are bound
and listening; their connections wait in the kernel's backlog.

When the broker's acceptors exist, ``handover`` stops the thread and gives them the listening
sockets, the accepted connections with the client software each one named (KIP-511), and the
requests answered, for the request counts. The broker then checks that the table and the
feature levels it would have answered with are the ones the early listener used.

``start`` returns None, and the broker starts as before, whenever the early answer could differ
from the full broker's or nothing could use it: ``--as-version``/``--max-api-versions`` (they
reshape the table), ``--control-listener``/``--faults`` (requests are recorded and open to
fault rules), no PLAINTEXT listener, or a data dir another broker holds: the broker then
serves the same bound sockets itself. A listener that cannot be bound never gets here: the CLI
reports it in one line.
"""

from __future__ import annotations

import fcntl
import os
import selectors
import signal
import socket
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minibroker_protocol import api_versions as wire
from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.header import HeaderError
from minibroker_storage.lazylog import get_logger

from ..config.listeners import BoundListener, host_port
from .binding import bind_listeners, close_all, prepare_accepted

__all__ = ["EarlyListener", "Handover", "start", "write_ready_file"]

log = get_logger("minibroker.early")

# An ApiVersions frame larger than this is left to the broker (real ones are ~60 bytes).
PEEK_BYTES = 64 * 1024
BACKLOG = 1024  # the Acceptor's (server.py)
LOCK_FILE = ".lock"  # storage/manager.py's data-dir lock


@dataclass
class Handover:
    """What the early listener hands the broker: its sockets, the connections it accepted, what it
    answered."""
    # per bound listener address, in Config.effective_listeners() × node_ids order
    sockets: list[list[socket.socket]]
    # (index into ``sockets``, accepted connection, client software it named or None)
    connections: list[tuple[int, socket.socket, tuple[str, str] | None]]
    # (api key, version, client software or None, client id) of each request answered
    answered: list[tuple[int, int, tuple[str, str] | None, str | None]]


@dataclass
class _Conn:
    """A connection the early listener accepted: its listener and the client software it named."""
    listener: int
    sock: socket.socket
    software: tuple[str, str] | None = None


@dataclass
class EarlyListener:
    """The thread that answers ApiVersions while the broker's modules load."""
    sockets: list[list[socket.socket]]
    bound: list[BoundListener]
    table: tuple[tuple[int, int, int], ...]
    features: Any  # minibroker.config.features.Features
    served: list[bool]  # per entry of ``sockets``: answered early (PLAINTEXT) or only listening
    ready_file: Path | None = None
    stop_requested: bool = False  # a SIGINT/SIGTERM before the event loop took the signals
    _conns: list[_Conn] = field(default_factory=list)
    _answered: list[tuple[int, int, tuple[str, str] | None, str | None]] = field(default_factory=list)
    _thread: threading.Thread | None = None
    _wake: tuple[socket.socket, socket.socket] | None = None
    _handed: bool = False
    _failure: str | None = None  # what stopped the thread, if not handover (a bug)

    # -- the thread ------------------------------------------------------------------------
    def _run(self) -> None:
        assert self._wake is not None
        sel = selectors.DefaultSelector()
        sel.register(self._wake[0], selectors.EVENT_READ, None)
        for i, socks in enumerate(self.sockets):
            if self.served[i]:
                for s in socks:
                    sel.register(s, selectors.EVENT_READ, i)
        try:
            while True:
                for key, _ in sel.select():
                    if key.data is None:
                        return
                    if isinstance(key.data, int):
                        self._accept(sel, key.fileobj, key.data)  # type: ignore[arg-type]
                    elif not self._serve(key.data):
                        sel.unregister(key.fileobj)
        except Exception as e:  # noqa: BLE001 - a bug: the broker answers everything from here on
            self._failure = f"{type(e).__name__}: {e}"
        finally:
            sel.close()

    def _accept(self, sel: selectors.BaseSelector, sock: socket.socket, listener: int) -> None:
        for _ in range(BACKLOG):
            try:
                conn, _addr = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of descriptors: the broker's Acceptor deals with it later
                return
            if not prepare_accepted(conn):
                continue
            c = _Conn(listener, conn)
            self._conns.append(c)
            sel.register(conn, selectors.EVENT_READ, c)

    def _serve(self, c: _Conn) -> bool:
        """Answer the ApiVersions requests whole in ``c``'s socket; False once ``c`` is left
        or dropped."""
        while True:
            try:
                head = c.sock.recv(PEEK_BYTES, socket.MSG_PEEK)
            except (BlockingIOError, InterruptedError):
                return True
            except OSError:
                head = b""
            if not head:
                self._conns.remove(c)
                c.sock.close()
                return False
            if len(head) < 12:
                return False
            size, api_key, version, corr = struct.unpack_from(">ihhi", head)
            if api_key != ApiKey.ApiVersions or not 8 <= size <= len(head) - 4:
                return False
            answer = self._answer(head[4:4 + size], version, corr, c)
            if answer is None:
                return False
            taken = c.sock.recv(4 + size)
            assert len(taken) == 4 + size  # peeked whole: the kernel hands all of it over
            try:
                c.sock.settimeout(5.0)  # blocking, bounded: the answer is a few hundred bytes
                c.sock.sendall(answer)
                c.sock.setblocking(False)
            except OSError:
                self._conns.remove(c)
                c.sock.close()
                return False

    def _answer(self, frame: bytes, version: int, corr: int, c: _Conn) -> bytes | None:
        if version > wire.MAX_VERSION:
            # As Dispatcher: v0's layout, UNSUPPORTED_VERSION, not counted.
            return wire.unsupported_version_response(corr)
        try:
            req = wire.read_request(frame)
        except HeaderError:
            return None
        if req.cluster_id is not None or req.node_id != -1:
            return None  # v5 naming the broker it means (KIP-1242): the broker checks it
        if req.version >= 3:
            if not (wire.valid_software(req.software_name) and wire.valid_software(req.software_version)):
                return None  # the broker answers INVALID_REQUEST and logs it
            assert req.software_name is not None and req.software_version is not None
            c.software = (req.software_name, req.software_version)
        self._answered.append((int(ApiKey.ApiVersions), req.version, c.software, req.client_id))
        f = self.features
        if req.version < 3:
            return wire.encode_response(corr, req.version, 0, self.table)
        return wire.encode_response(corr, req.version, 0, self.table, 0, f.supported(req.version),
                                    f.epoch, f.finalized())

    # -- the main thread -------------------------------------------------------------------
    def _catch_signals(self) -> None:
        """From the ready file on, a SIGINT or SIGTERM must stop the broker cleanly (and take the
        file back) even before the event loop takes the signals over: app.serve reads the flag."""
        def stop_requested(_sig: int, _frame: object) -> None:
            self.stop_requested = True
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, stop_requested)

    def _release_signals(self) -> None:
        """Back to stop_signals' handlers, a signal caught meanwhile passed on to them."""
        from ..core import stop_signals
        if self.stop_requested:
            stop_signals.requested = True
        stop_signals.catch()

    def _start_thread(self) -> None:
        self._wake = socket.socketpair()
        self._thread = threading.Thread(target=self._run, name="minibroker-early", daemon=True)
        self._thread.start()

    def _stop_thread(self) -> None:
        if self._thread is None:
            return
        assert self._wake is not None
        try:
            self._wake[1].send(b"x")
        except OSError:
            pass
        self._thread.join()
        self._thread = None
        for s in self._wake:
            s.close()

    def handover(self) -> Handover:
        """Stop answering; what the broker's acceptors take over from here."""
        self._stop_thread()
        self._handed = True
        if self._failure is not None:
            log.error("early.failed", error=self._failure, answered=len(self._answered))
        return Handover(self.sockets, [(c.listener, c.sock, c.software) for c in self._conns],
                        list(self._answered))

    def close(self) -> None:
        """After the broker ended, or failed to start: stop, close what was not handed over,
        and take back the ready file, which announced a broker that is no longer there."""
        self._stop_thread()
        if not self._handed:
            for c in self._conns:
                c.sock.close()
            for socks in self.sockets:
                for s in socks:
                    s.close()
        if self.ready_file is not None:
            try:
                self.ready_file.unlink(missing_ok=True)
            except OSError:
                pass


def write_ready_file(path: Path, listeners: list[BoundListener] | tuple[BoundListener, ...]) -> None:
    # Written whole then renamed, so a CI script polling for the file never reads half of it.
    text = "".join(host_port(*b.advertised) + "\n" for b in listeners)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _held_by_another(data_dir: Path) -> bool:
    """Whether another broker holds the data dir: then the full broker refuses to start, and
    nothing may have announced it ready."""
    try:
        fd = os.open(data_dir / LOCK_FILE, os.O_RDWR)
    except OSError:
        return False  # no lock file yet (or none readable): the broker decides
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def start(config: Any, sockets: list[list[socket.socket]] | None = None) -> EarlyListener | None:
    """Start answering ApiVersions on ``sockets`` (binding.bind_listeners'; bound here when
    None) and announce them; None where that is not possible (the module docstring lists when),
    the given sockets then left to the broker as they are."""
    from ..config.features import load_features
    from ..config.served_apis import served

    table = served(config)
    listeners = config.effective_listeners()
    if (table is None or config.control_listener is not None or config.faults is not None
            or not any(not (spec.tls or spec.sasl) for spec in listeners)
            or (not config.ephemeral and _held_by_another(config.data_dir))):
        return None
    owned = sockets is None
    if sockets is None:
        try:
            sockets = bind_listeners(config)
        except OSError:
            return None  # the broker binds again and reports the failure
    bound: list[BoundListener] = []
    served_early: list[bool] = []
    try:
        slots = iter(sockets)
        for spec in listeners:
            for node in config.node_ids:
                port = next(slots)[0].getsockname()[1]
                host, adv_port = spec.advertised(port)
                bound.append(BoundListener(spec.name, spec.host, port, host, adv_port,
                                           node if config.brokers > 1 else None))
                served_early.append(not (spec.tls or spec.sasl))
        for socks in sockets:
            for s in socks:
                s.setblocking(False)
                s.listen(BACKLOG)
    except OSError:
        if owned:
            close_all(sockets)
        return None  # the broker listens again and reports the failure
    features = load_features(config, dry_run=True)
    early = EarlyListener(sockets, bound, table, features, served_early)
    early._catch_signals()
    if config.ready_file is not None:
        try:
            config.ready_file.unlink(missing_ok=True)
            write_ready_file(config.ready_file, bound)
        except OSError:
            early._release_signals()
            if owned:
                close_all(sockets)
            return None  # the broker writes it and reports why it cannot
        early.ready_file = config.ready_file
    early._start_thread()
    return early
