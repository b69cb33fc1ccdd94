"""Start the broker: storage, handlers, listener, signals; stop it gracefully."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import dataclass, field

import structlog

from storage.errors import StorageError

from .broker import Broker
from .config import Config
from .dispatch import Dispatcher
from .handlers.admin import AdminHandlers
from .handlers.coordinator import CoordinatorHandlers
from .handlers.fetch import FetchHandlers
from .handlers.group import GroupHandlers
from .handlers.metadata import MetadataHandlers
from .handlers.produce import ProduceHandlers
from .handlers.txn import TxnHandlers
from .handlers.txn_admin import TxnAdminHandlers
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
    server: asyncio.base_events.Server
    port: int
    connections: set = field(default_factory=set)

    async def close(self) -> None:
        log.info("broker.stopping", connections=len(self.connections))
        self.server.close()
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        await self.server.wait_closed()
        await self.broker.stop()
        log.info("broker.stopped")


async def start(config: Config) -> RunningBroker:
    loop = asyncio.get_running_loop()
    broker = Broker(config)
    dispatcher = build_dispatcher(broker)
    connections: set[KafkaConnection] = set()
    try:
        server = await loop.create_server(
            lambda: KafkaConnection(dispatcher, config.max_request_bytes, connections),
            config.host, config.port, reuse_address=True, backlog=1024,
        )
    except OSError:
        await broker.stop()
        raise
    port = server.sockets[0].getsockname()[1]
    broker.set_bound_port(port)
    broker.start_background()
    return RunningBroker(broker, server, port, connections)


async def serve(config: Config, started_at: float | None = None) -> None:
    started_at = started_at or time.perf_counter()
    loop = asyncio.get_running_loop()
    try:
        running = await start(config)
    except OSError as e:
        log.error("broker.listen_failed", host=config.host, port=config.port, error=str(e))
        raise SystemExit(1) from None
    except StorageError as e:
        log.error("broker.storage_failed", data_dir=str(config.data_dir), error=str(e))
        raise SystemExit(1) from None
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    b = running.broker
    log.info("broker.started", listen=f"{config.host}:{running.port}", advertised=f"{b.host}:{b.port}",
             data_dir=str(config.data_dir.resolve()), fsync=str(config.fsync), pid=os.getpid(),
             startup_ms=round((time.perf_counter() - started_at) * 1000, 1))
    await stop.wait()
    await running.close()


def run(config: Config, started_at: float | None = None) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency except on Windows
        asyncio.run(serve(config, started_at))
    else:
        uvloop.run(serve(config, started_at))
