"""Start the broker: storage, handlers, listener, signals; stop it gracefully."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import structlog

from storage.errors import StorageError

from .broker import Broker
from .config import Config, FsyncPolicy
from .dispatch import Dispatcher
from .handlers.admin import AdminHandlers
from .handlers.coordinator import CoordinatorHandlers
from .handlers.fetch import FetchHandlers
from .handlers.group import GroupHandlers
from .handlers.metadata import MetadataHandlers
from .handlers.produce import ProduceHandlers
from .handlers.txn import TxnHandlers
from .handlers.txn_admin import TxnAdminHandlers
from .listeners import BoundListener, Endpoint
from .server import KafkaConnection

log = structlog.get_logger("minibroker")


def build_dispatcher(broker: Broker) -> Dispatcher:
    d = Dispatcher()
    for family in (ProduceHandlers, FetchHandlers, MetadataHandlers, AdminHandlers,
                   CoordinatorHandlers, TxnHandlers, TxnAdminHandlers, GroupHandlers):
        for api in family(broker).apis():
            d.register(api)
    return d


@dataclass
class RunningBroker:
    broker: Broker
    servers: list[asyncio.base_events.Server]
    listeners: tuple[BoundListener, ...]
    connections: set = field(default_factory=set)

    @property
    def port(self) -> int:
        """The first listener's bound port."""
        return self.listeners[0].port

    async def close(self) -> None:
        log.info("broker.stopping", connections=len(self.connections))
        for server in self.servers:
            server.close()
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        for server in self.servers:
            await server.wait_closed()
        await self.broker.stop()
        log.info("broker.stopped")


async def start(config: Config) -> RunningBroker:
    loop = asyncio.get_running_loop()
    broker = Broker(config)
    dispatcher = build_dispatcher(broker)
    connections: set[KafkaConnection] = set()
    servers: list[asyncio.base_events.Server] = []
    bound: list[BoundListener] = []
    # Every connection reads the tuple of all bound listeners (DescribeConfigs lists them),
    # which is complete only once every socket is bound.
    everything: list[tuple[BoundListener, ...]] = [()]
    try:
        for spec in config.effective_listeners():
            slot: list[BoundListener] = []
            server = await loop.create_server(
                lambda slot=slot: KafkaConnection(dispatcher, config.max_request_bytes,
                                                  connections, slot[0], everything[0]),
                spec.host or None, spec.port, reuse_address=True, backlog=1024,
            )
            servers.append(server)
            port = server.sockets[0].getsockname()[1]
            host, adv_port = spec.advertised(port)
            slot.append(BoundListener(spec.name, spec.host, port, host, adv_port))
            bound.append(slot[0])
    except OSError:
        for server in servers:
            server.close()
        await broker.stop()
        raise
    everything[0] = tuple(bound)
    broker.set_bound_port(bound[0].port)
    broker.start_background()
    return RunningBroker(broker, servers, tuple(bound), connections)


def _write_ready_file(path: Path, listeners: tuple[BoundListener, ...]) -> None:
    # Written whole then renamed, so a CI script polling for the file never reads half of it.
    text = "".join(f"{host}:{port}\n" for host, port in (b.advertised for b in listeners))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


async def serve(config: Config, started_at: float | None = None) -> None:
    started_at = started_at or time.perf_counter()
    loop = asyncio.get_running_loop()
    scratch = None
    if config.ephemeral:
        scratch = tempfile.mkdtemp(prefix="minibroker-ephemeral-")
        config = replace(config, data_dir=Path(scratch), fsync=FsyncPolicy("never"))
    try:
        await _serve(config, started_at, loop)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


async def _serve(config: Config, started_at: float, loop) -> None:
    try:
        running = await start(config)
    except OSError as e:
        log.error("broker.listen_failed",
                  listeners=[str(Endpoint(x.name, x.host, x.port)) for x in config.effective_listeners()],
                  error=str(e))
        raise SystemExit(1) from None
    except StorageError as e:
        log.error("broker.storage_failed", data_dir=str(config.data_dir), error=str(e))
        raise SystemExit(1) from None
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        if config.ready_file is not None:
            _write_ready_file(config.ready_file, running.listeners)
        log.info("broker.started",
                 listeners=[x.config_value() for x in running.listeners],
                 advertised=[x.advertised_value() for x in running.listeners],
                 data_dir=str(config.data_dir.resolve()), ephemeral=config.ephemeral,
                 fsync=str(config.fsync), pid=os.getpid(),
                 startup_ms=round((time.perf_counter() - started_at) * 1000, 1))
        await stop.wait()
    finally:
        if config.ready_file is not None:
            try:
                config.ready_file.unlink()
            except OSError:
                pass
        await running.close()


def run(config: Config, started_at: float | None = None) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency except on Windows
        asyncio.run(serve(config, started_at))
    else:
        uvloop.run(serve(config, started_at))
