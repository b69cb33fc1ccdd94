"""Start the broker: storage, handlers, listener, signals; stop it gracefully."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import structlog

from .broker import Broker
from .config import Config
from .dispatch import Dispatcher
from .handlers.admin import AdminHandlers
from .handlers.coordinator import CoordinatorHandlers
from .handlers.fetch import FetchHandlers
from .handlers.metadata import MetadataHandlers
from .handlers.produce import ProduceHandlers
from .server import KafkaConnection

log = structlog.get_logger("minibroker")


def build_dispatcher(broker: Broker) -> Dispatcher:
    d = Dispatcher()
    for family in (ProduceHandlers, FetchHandlers, MetadataHandlers, AdminHandlers,
                   CoordinatorHandlers):
        for api in family(broker).apis():
            d.register(api)
    return d


async def serve(config: Config, started_at: float | None = None) -> None:
    started_at = started_at or time.perf_counter()
    loop = asyncio.get_running_loop()
    broker = Broker(config)
    dispatcher = build_dispatcher(broker)
    connections: set[KafkaConnection] = set()
    try:
        server = await loop.create_server(
            lambda: KafkaConnection(dispatcher, config.max_request_bytes, connections),
            config.host, config.port, reuse_address=True, backlog=1024,
        )
    except OSError as e:
        log.error("broker.listen_failed", host=config.host, port=config.port, error=str(e))
        await broker.stop()
        raise SystemExit(1) from None
    port = server.sockets[0].getsockname()[1]
    broker.set_bound_port(port)
    broker.start_background()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info("broker.started", listen=f"{config.host}:{port}", advertised=f"{broker.host}:{broker.port}",
             data_dir=str(config.data_dir.resolve()), fsync=str(config.fsync), pid=os.getpid(),
             startup_ms=round((time.perf_counter() - started_at) * 1000, 1))
    await stop.wait()
    log.info("broker.stopping", connections=len(connections))
    server.close()
    for conn in list(connections):
        if conn.transport is not None:
            conn.transport.close()
    await server.wait_closed()
    await broker.stop()
    log.info("broker.stopped")


def run(config: Config, started_at: float | None = None) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency except on Windows
        asyncio.run(serve(config, started_at))
    else:
        uvloop.run(serve(config, started_at))
