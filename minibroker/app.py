"""Start the broker: storage, handlers, listener, signals; stop it gracefully."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from minibroker_storage.errors import StorageError
from minibroker_storage.lazylog import get_logger

from .broker import Broker
from .cluster import connection_node
from .config.listeners import BoundListener, Endpoint
from .config.options import Config, FsyncPolicy
from .control.request_counts import UNKNOWN
from .core import logs, startup_gc, stop_signals
from .core.clock import SYSTEM_CLOCK, Clock, ControlledClock
from .core.crash_points import CrashPoints
from .handlers.api import Api
from .handlers.quotas import QuotaEnforcer
from .net.binding import bind, bind_registry, node_port
from .net.dispatch import Dispatcher
from .net.early import EarlyListener, Handover, write_ready_file
from .net.server import Acceptor, KafkaConnection, RequestMemory

log = get_logger("minibroker")
# The start-up's held log events (logs.hold) are written once no request came for this long after
# the broker is ready, and at the latest LOG_RELEASE_MAX_S after it
LOG_RELEASE_S = 0.02
LOG_RELEASE_MAX_S = 1.0


# Which handler family answers which API keys (ApiVersions is the dispatcher's own). What is
# served, and in which version ranges, is minibroker/config/served_apis.py's table; a family's
# module is imported, and the family built, on the first request of one of its keys
# (Dispatcher.register_lazy), so a broker starts without the handlers (and the coordinators
# they are handed) of what no client asked for yet (issue 33). Loading a family checks that it
# serves exactly these keys in the table's ranges; tests/minibroker/test_early.py builds every
# family (eager=True) and compares the whole table.
FAMILY_KEYS: dict[str, tuple[int, ...]] = {
    "produce": (0,), "fetch": (1, 2), "metadata": (3, 60, 75),
    "group": (8, 9, 11, 12, 13, 14, 15, 16, 28, 42, 47), "coordinator": (10,),
    "sasl": (17, 36, 50, 51), "admin": (19, 20, 32), "log_admin": (21, 35, 37),
    "txn": (22, 24, 25, 26, 27), "leaders": (23, 43), "acls": (29, 30, 31),
    "configs": (33, 44, 74), "cluster_admin": (34, 45, 46, 55, 64), "tokens": (38, 39, 40, 41),
    "quotas": (48, 49), "features": (57,), "txn_admin": (61, 65, 66),
    "consumer_group": (68, 69), "telemetry": (71, 72), "share": (76, 77, 78, 79, 90, 91, 92),
    "streams_group": (88, 89, 93),
}


def build_dispatcher(broker: Broker, *, injector=None, request_log=None, eager: bool = False) -> Dispatcher:
    """Every handler family, each handed the broker's parts it uses (the broker owns them),
    built on its first request (FAMILY_KEYS), or all of them now with ``eager``."""
    from .config.served_apis import SERVED, TELEMETRY

    cluster = broker.cluster

    def endpoint() -> tuple[str, int]:
        # read per request: the port is known once the first listener is bound
        return broker.host, broker.port

    def node_endpoints() -> dict[int, tuple[str, int]]:
        return broker.node_endpoints
    # Virtual brokers only: who coordinates a key, and each node's address.
    coordinator_node = broker.coordinator_node if cluster is not None else None
    endpoints = node_endpoints if cluster is not None else None

    # client quotas: the dispatcher measures requests, Fetch caps its answers
    quotas = QuotaEnforcer(broker.client_quotas)
    families = _Families(broker, quotas, endpoint, coordinator_node, endpoints)
    d = Dispatcher(broker.features, broker.request_counts, injector=injector,
                   request_log=request_log, node_id=broker.node_id, coordinator_node=coordinator_node,
                   topic_name=broker.topic_name_by_id, quotas=quotas,
                   cluster_id=broker.cluster_id)
    table = SERVED + TELEMETRY if broker.config.telemetry_enabled else SERVED
    ranges = {key: (lo, hi) for key, lo, hi in table}
    for name, keys in FAMILY_KEYS.items():
        served = [k for k in keys if k in ranges]
        if not served:
            continue  # telemetry off
        if eager:
            for api in families.load(name):
                d.register(api)
            continue

        def load(name: str = name, served: tuple[int, ...] = tuple(served)) -> list[Api]:
            apis = families.load(name)
            got = {(int(a.key), a.min_version, a.max_version) for a in apis}
            if got != {(k, *ranges[k]) for k in served}:
                # A bug: a family's range changed without served_apis.py, or FAMILY_KEYS is wrong.
                log.error("dispatch.family_differs", family=name, registered=sorted(got),
                          served=sorted((k, *ranges[k]) for k in served))
            return apis
        for key in served:
            d.register_lazy(key, *ranges[key], load)
    # a closed connection's share session goes and its member's records are released
    d.on_disconnect.append(broker.share_connection_closed)
    if broker.config.as_version is not None:
        from .net.versions import cap
        cap(d.apis, broker.config.as_version)
    if broker.config.max_api_versions:
        from .net.versions import cap_versions
        cap_versions(d.apis, dict(broker.config.max_api_versions))
    return d


class _Families:
    """Builds each handler family once, on demand, handing it the broker's parts it uses."""

    def __init__(self, broker: Broker, quotas: QuotaEnforcer, endpoint: Any,
                 coordinator_node: Any, endpoints: Any) -> None:
        self.broker = broker
        self.quotas = quotas
        self.endpoint = endpoint
        self.coordinator_node = coordinator_node
        self.endpoints = endpoints
        self.built: dict[str, list[Api]] = {}
        self._authz: Any = None

    @property
    def authz(self) -> Any:
        # what each family asks of --authorizer (everything allowed without one)
        if self._authz is None:
            from .handlers.authz import Authz
            self._authz = Authz(self.broker.authorizer)
        return self._authz

    def load(self, name: str) -> list[Api]:
        apis = self.built.get(name)
        if apis is None:
            apis = self.built[name] = list(getattr(self, "_" + name)().apis())
        return apis

    # -- one method per family (FAMILY_KEYS' names) ----------------------------------------
    def _produce(self) -> Any:
        from .handlers.produce import ProduceHandlers
        b = self.broker
        return ProduceHandlers(logs=b.logs, verify_produce=b.txn_coordinator.verify_produce,
                               notify_append=b.notify_append,
                               max_message_bytes=b.max_message_bytes, record_rules=b.record_rules,
                               now_ms=b.clock.wall_ms, min_insync_replicas=b.min_insync_replicas,
                               crash=b.crash_points,
                               cluster=b.cluster, timeline=b.timeline, authz=self.authz)

    def _fetch(self) -> Any:
        from .handlers.fetch import FetchHandlers
        b = self.broker
        return FetchHandlers(logs=b.logs, wait_for_append=b.wait_for_append, cluster=b.cluster,
                             authz=self.authz, quota_bytes=self.quotas.max_fetch_bytes,
                             rack_of=b.config.rack_of if b.config.rack_aware else None)

    def _metadata(self) -> Any:
        from .handlers.metadata import MetadataHandlers
        b = self.broker
        return MetadataHandlers(logs=b.logs, config=b.config, cluster_id=b.cluster_id,
                                create_topic=b.create_topic, endpoint=self.endpoint, cluster=b.cluster,
                                node_endpoints=self.endpoints, authz=self.authz)

    def _admin(self) -> Any:
        from .handlers.admin import AdminHandlers
        b = self.broker
        return AdminHandlers(logs=b.logs, config=b.config, create_topic=b.create_topic,
                             delete_topic=b.delete_topic, client_metrics=b.client_metrics,
                             group_configs=b.group_configs, authz=self.authz, cluster=b.cluster)

    def _configs(self) -> Any:
        from .handlers.configs import ConfigHandlers
        b = self.broker
        return ConfigHandlers(logs=b.logs, config=b.config, client_metrics=b.client_metrics,
                              group_configs=b.group_configs, authz=self.authz)

    def _leaders(self) -> Any:
        from .handlers.leaders import LeaderHandlers
        return LeaderHandlers(logs=self.broker.logs, cluster=self.broker.cluster, authz=self.authz)

    def _quotas(self) -> Any:
        from .handlers.quotas import QuotaHandlers
        return QuotaHandlers(quotas=self.broker.client_quotas, authz=self.authz)

    def _cluster_admin(self) -> Any:
        from .handlers.cluster_admin import ClusterAdminHandlers
        b = self.broker
        return ClusterAdminHandlers(logs=b.logs, config=b.config, cluster=b.cluster, features=b.features,
                                    clock=b.clock, endpoint=self.endpoint, authz=self.authz)

    def _log_admin(self) -> Any:
        from .handlers.log_admin import LogAdminHandlers
        b = self.broker
        cluster = b.cluster
        return LogAdminHandlers(logs=b.logs, config=b.config, add_partitions=b.add_partitions,
                                notify_append=b.notify_append,
                                not_leader=(lambda ctx, t, p: cluster.not_leader(connection_node(ctx), t, p))
                                if cluster is not None else None, authz=self.authz, cluster=cluster)

    def _coordinator(self) -> Any:
        from .handlers.coordinator import CoordinatorHandlers
        b = self.broker
        return CoordinatorHandlers(node_id=b.node_id, endpoint=self.endpoint,
                                   coordinator_node=self.coordinator_node, node_endpoints=self.endpoints,
                                   coordinator_topic=b.coordinator_topic, authz=self.authz)

    def _txn(self) -> Any:
        from .handlers.txn import TxnHandlers
        b = self.broker
        return TxnHandlers(coordinator=b.txn_coordinator, logs=b.logs, producer_ids=b.producer_ids,
                           offsets_partition_for=b.offsets_partition_for, authz=self.authz)

    def _txn_admin(self) -> Any:
        from .handlers.txn_admin import TxnAdminHandlers
        return TxnAdminHandlers(coordinator=self.broker.txn_coordinator, logs=self.broker.logs,
                                authz=self.authz)

    def _group(self) -> Any:
        from .handlers.group import GroupHandlers
        b = self.broker
        return GroupHandlers(groups=b.group_coordinator, logs=b.logs, authz=self.authz,
                             share=b.share_coordinator, coordinator_node=self.coordinator_node)

    def _consumer_group(self) -> Any:
        from .handlers.consumer_group import ConsumerGroupHandlers
        b = self.broker
        return ConsumerGroupHandlers(groups=b.group_coordinator, logs=b.logs, features=b.features,
                                     authz=self.authz)

    def _streams_group(self) -> Any:
        from .handlers.streams_group import StreamsGroupHandlers
        b = self.broker
        return StreamsGroupHandlers(groups=b.group_coordinator, features=b.features, authz=self.authz)

    def _features(self) -> Any:
        from .handlers.features import FeatureHandlers
        b = self.broker
        return FeatureHandlers(features=b.features, node_id=b.node_id, authz=self.authz)

    def _acls(self) -> Any:
        from .handlers.acls import AclHandlers
        return AclHandlers(authorizer=self.broker.authorizer)

    def _share(self) -> Any:
        from .handlers.share import ShareHandlers
        b = self.broker
        return ShareHandlers(share=b.share_coordinator, logs=b.logs, features=b.features,
                             wait_for_append=b.wait_for_append, cluster=b.cluster, authz=self.authz,
                             node_endpoints=self.endpoints)

    def _sasl(self) -> Any:
        from .handlers.sasl import SaslHandlers
        b = self.broker
        return SaslHandlers(credentials=lambda: b.sasl_credentials, authz=self.authz)

    def _tokens(self) -> Any:
        from .handlers.tokens import TokenHandlers
        b = self.broker
        return TokenHandlers(tokens=lambda: b.delegation_tokens, authz=self.authz)

    def _telemetry(self) -> Any:
        from .handlers.telemetry import TelemetryHandlers
        return TelemetryHandlers(client_metrics=self.broker.client_metrics)


@dataclass
class _NodeListener:
    """A virtual broker's listener: what binding it again after a stop needs."""
    spec: Any
    factory: Any
    bound: BoundListener
    server: Acceptor
    tls: Any = None


@dataclass
class RunningBroker:
    """A started broker: its parts, acceptors, listeners and connections, and its optional servers."""
    broker: Broker
    servers: list[Acceptor]
    listeners: tuple[BoundListener, ...]
    connections: set = field(default_factory=set)
    control: Any = None  # control.http.ControlPlane, with --control-listener
    # --brokers N: each virtual broker's listener, to close and bind again
    nodes: dict[int, _NodeListener] = field(default_factory=dict)
    # registry.http.RegistryServer, with --schema-registry-listener: the task that starts it
    registry_task: asyncio.Task | None = None

    async def stop_node(self, node: int) -> list[str]:
        """Stop one virtual broker: its listener closes, its connections drop, its partitions'
        leadership and its coordinators move to the next in-sync replica."""
        cluster = self.broker.cluster
        assert cluster is not None  # only with --brokers N
        moved = cluster.stop(node)  # refuses an unknown, stopped or last broker
        n = self.nodes[node]
        n.server.close()
        self.servers.remove(n.server)
        for conn in list(self.connections):
            if conn.listener is n.bound and conn.transport is not None:
                conn.transport.close()
        return moved

    async def start_node(self, node: int) -> list[str]:
        cluster = self.broker.cluster
        assert cluster is not None  # only with --brokers N
        if node not in self.nodes or node in cluster.up:
            return cluster.start(node)  # refuses: no such broker, or already up
        n = self.nodes[node]
        n.server, _port = _bind_listener(n.spec, n.bound.port, n.factory, n.tls)
        await n.server.start_serving()
        self.servers.append(n.server)
        return cluster.start(node)

    @property
    def port(self) -> int:
        """The first listener's bound port."""
        return self.listeners[0].port

    async def close(self) -> None:
        log.info("broker.stopping", connections=len(self.connections))
        self.broker.request_counts.log_table()
        if self.control is not None:
            await self.control.close()
        if self.registry_task is not None:
            if not self.registry_task.done():
                self.registry_task.cancel()
            try:
                registry = await self.registry_task
            except asyncio.CancelledError:
                registry = None
            except Exception:  # it failed to start (logged then): the broker still stops cleanly
                registry = None
            if registry is not None:
                await registry.close()
        for server in self.servers:
            server.close()
        self.broker.share_stop_serving()
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        for server in self.servers:
            await server.wait_closed()
        await self.broker.stop()
        log.info("broker.stopped")


async def start(config: Config, early: EarlyListener | None = None,
                sockets: list[list[socket.socket]] | None = None,
                control_sock: socket.socket | None = None,
                registry_sock: socket.socket | None = None) -> RunningBroker:
    """The broker, serving; ``sockets``/``control_sock``/``registry_sock``: the listeners the CLI bound before
    the data dir was touched (binding.bind_listeners), bound here when None."""
    # The one place the test-only crash hooks are read from the environment.
    crash_points = CrashPoints.from_env()
    controlled = config.control_listener is not None or config.clock == "virtual"
    clock: Clock = ControlledClock(config.clock == "virtual") if controlled else SYSTEM_CLOCK
    injector = request_log = None
    if config.control_listener is not None or config.faults is not None:
        from .control.faults.actions import Injector
        from .control.faults.rules import FaultBook, read_rules_file
        injector = Injector(FaultBook(read_rules_file(config.faults) if config.faults else ()))
    if config.control_listener is not None:
        from .control.request_log import RequestLog
        request_log = RequestLog(broker=config.node_id)
    broker = Broker(config, clock=clock, crash_points=crash_points)
    # One write of the transaction history per event-loop turn, not one per event.
    broker.txn_history.schedule_flush = asyncio.get_running_loop().call_soon
    dispatcher = build_dispatcher(broker, injector=injector, request_log=request_log)
    connections: set[KafkaConnection] = set()
    # One budget for every listener's connections, as Kafka's SocketServer has one pool.
    memory = RequestMemory(config.queued_max_request_bytes)
    servers: list[Acceptor] = []
    bound: list[BoundListener] = []
    nodes: dict[int, _NodeListener] = {}  # with --brokers N
    tls = _tls_context(config)
    new_auth = _sasl(config, broker)
    given = early.sockets if early is not None else sockets
    try:
        # Bind every listener before any serves: a connection must never see a half-made
        # broker or a partial listener list (DescribeConfigs shows them all).
        for spec in config.effective_listeners():
            for i, node in enumerate(config.node_ids):
                slot: list[BoundListener] = []
                socks = given[len(servers)] if given is not None else None

                def factory(slot=slot, sasl=spec.sasl):
                    return KafkaConnection(dispatcher, config.max_request_bytes, connections,
                                           slot[0], everything, memory,
                                           auth=new_auth() if sasl else None,
                                           auth_timeout_s=config.sasl_authentication_timeout_ms / 1000)
                server, port = _bind_listener(spec, node_port(spec.port, i), factory, tls, socks)
                servers.append(server)
                host, adv_port = spec.advertised(port)
                slot.append(BoundListener(spec.name, spec.host, port, host, adv_port,
                                          node if config.brokers > 1 else None))
                bound.append(slot[0])
                if config.brokers > 1:
                    broker.node_endpoints[node] = (host, adv_port)
                    nodes[node] = _NodeListener(spec, factory, slot[0], server, tls)
    except OSError:
        for server in servers:
            server.close()
            await server.wait_closed()
        await broker.stop()
        raise
    everything = tuple(bound)
    broker.set_bound_port(bound[0].port)
    control = None
    if config.control_listener is not None:
        assert injector is not None and request_log is not None and isinstance(clock, ControlledClock)
        control = await _start_control(config.control_listener, broker, clock, injector, request_log,
                                       control_sock)
    if config.schema_registry_listener is not None and registry_sock is None:
        try:
            registry_sock = bind_registry(config)
        except OSError:
            for server in servers:
                server.close()
                await server.wait_closed()
            if control is not None:
                await control.close()
            await broker.stop()
            raise
    broker.start_background()
    # Crash rules fire from now on: not in the start-up's roll-forward of a prepared transaction.
    crash_points.arm(injector.book if injector is not None else None)
    handover = early.handover() if early is not None else None
    for server in servers:
        await server.start_serving()
    if handover is not None:
        assert early is not None
        _take_over(early, handover, servers, dispatcher, broker)
    running = RunningBroker(broker, servers, everything, connections, control, nodes)
    if registry_sock is not None:
        running.registry_task = asyncio.get_running_loop().create_task(
            _start_registry(config, broker, tls, registry_sock))
        running.registry_task.add_done_callback(_registry_started)
    if control is not None and broker.cluster is not None:
        control.cluster_ops = running
    return running


def _take_over(early: EarlyListener, handover: Handover, servers: list[Acceptor],
               dispatcher: Dispatcher, broker: Broker) -> None:
    """The early listener's connections and counts become the broker's (minibroker/net/early.py)."""
    for listener, sock, software in handover.connections:
        servers[listener].adopt(sock, software)
    for api_key, version, software, client_id in handover.answered:
        broker.request_counts.count(api_key, version, software or (UNKNOWN, UNKNOWN), client_id)
    table = dispatcher.version_table()
    features = broker.features
    if table != early.table or (early.features.epoch, early.features.finalized()) != (
            features.epoch, features.finalized()):
        # A bug: a handler's range changed without minibroker/config/served_apis.py, or the levels
        # were read differently; the clients answered early saw a table this broker does not serve.
        log.error("early.table_differs", early=early.table, broker=table,
                  early_features=early.features.finalized(), features=features.finalized())
    log.info("listener.early_served", answered=len(handover.answered),
             connections=len(handover.connections))


def _bind_listener(spec: Any, port: int, factory: Any, tls: Any = None,
                   socks: list[socket.socket] | None = None) -> tuple[Acceptor, int]:
    """An Acceptor for ``spec`` on ``port``, or on ``socks`` the early listener bound."""
    if socks is None:
        socks = bind(spec.host, port)
    return (Acceptor(socks, factory, spec.name, backlog=1024, ssl=tls if spec.tls else None),
            socks[0].getsockname()[1])


def _sasl(config: Config, broker: Broker) -> Any:
    """What makes a SASL connection's authenticator (None without a SASL listener)."""
    if not any(spec.sasl for spec in config.effective_listeners()):
        return None
    from .security.sasl.authenticator import Authenticator
    mechanisms = tuple(config.sasl_mechanisms.split(","))
    credentials = broker.sasl_credentials
    clock = broker.clock
    tokens = broker.delegation_tokens if config.delegation_token_secret_key is not None else None
    return lambda: Authenticator(mechanisms, credentials, clock.wall_ms,
                                 config.connections_max_reauth_ms, tokens=tokens)


def _tls_context(config: Config) -> Any:
    """The SSL listeners' server context (None without one): ``ssl`` is imported only then."""
    if not any(spec.tls for spec in config.effective_listeners()):
        return None
    return _server_context(config)


def _server_context(config: Config) -> Any:
    """A server context with the broker's certificate (SSL listeners, the registry's https)."""
    from .security.tls import server_context

    assert config.ssl_certfile is not None and config.ssl_keyfile is not None  # config checked
    return server_context(config.ssl_certfile, config.ssl_keyfile, config.ssl_cafile,
                          config.ssl_client_auth)


async def _start_control(address: tuple[str, int], broker: Broker, clock: ControlledClock,
                         injector: Any, request_log: Any, sock: socket.socket | None = None) -> Any:
    from .control.http import ControlPlane
    host, port = address
    if sock is None:
        socks = bind(host, port)
        for extra in socks[1:]:
            extra.close()
        sock = socks[0]
    plane = ControlPlane(node_id=broker.node_id, clock=clock, injector=injector,
                         request_log=request_log, counts=broker.request_counts,
                         clock_advanced=broker.clock_advanced, broker=broker)
    await plane.start(sock)
    log.info("control.listening", host=host, port=plane.port, clock="virtual" if clock.virtual else "system",
             faults=len(injector.book.rules))
    return plane


def _registry_started(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("registry.start_failed", error=str(task.exception()))


async def _start_registry(config: Config, broker: Broker, tls: Any, sock: socket.socket) -> Any:
    """The Schema Registry, serving on ``sock``; ``_schemas`` is then replayed on the loop
    meanwhile (requests wait for it, then get 50002). Started once the Kafka listeners serve,
    its imports (aiohttp) in a thread: the broker's own start does not wait for them. The thread
    starts once the Kafka clients' first requests pause (as the held log events do): an import
    running beside them would share the GIL with their first Metadata and Produce (issue 33; the
    registry's socket already listens, so an early registry client waits in its backlog)."""
    import importlib
    await _until_quiet(broker.request_counts, LOG_RELEASE_MAX_S)
    await asyncio.to_thread(importlib.import_module, "minibroker.registry.http")
    from .registry.http import RegistryServer
    from .registry.state import Registry
    from .registry.topic import CONFIGS, TOPIC, BrokerSchemasTopic

    assert config.schema_registry_listener is not None
    scheme, host, _port = config.schema_registry_listener
    topic = BrokerSchemasTopic(
        existing=lambda: broker.existing_log(TOPIC, 0),
        create=lambda: (broker.create_topic(TOPIC, 1, dict(CONFIGS), reason="schema_registry"),
                        broker.get_log(TOPIC, 0))[1],
        wall_ms=broker.clock.wall_ms, appended=lambda: broker.notify_append(TOPIC, 0))
    users = None
    if config.schema_registry_auth == "basic":
        users = broker.sasl_credentials.password
    server = RegistryServer(Registry(topic), users=users, cluster_id=broker.cluster_id)
    ssl_context = None
    if scheme == "https":
        ssl_context = tls if tls is not None else _server_context(config)
    await server.start(sock, ssl_context)
    server.start_replay()
    broker.schema_registry = server
    log.info("registry.listening", url=f"{scheme}://{host}:{server.port}",
             auth=config.schema_registry_auth)
    return server


async def serve(config: Config, started_at: float | None = None,
                early: EarlyListener | None = None, sockets: Any = None,
                control_sock: socket.socket | None = None,
                registry_sock: socket.socket | None = None) -> None:
    started_at = started_at or time.perf_counter()
    loop = asyncio.get_running_loop()
    # Handlers first: a SIGTERM during start-up (log recovery can take a while) must stop the
    # broker cleanly, and a container's PID 1 ignores signals it has no handler for.
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if (early is not None and early.stop_requested) or stop_signals.requested:
        stop.set()
    if config.ready_file is not None and early is None:
        # A file left by a broker that was killed would announce a dead address.
        try:
            config.ready_file.unlink(missing_ok=True)
        except OSError as e:
            log.error("broker.ready_file_failed", path=str(config.ready_file), error=str(e))
            raise SystemExit(1) from None
    scratch = None
    if config.ephemeral:
        import tempfile  # only here: it is not on a broker's way to its first answers
        scratch = tempfile.mkdtemp(prefix="minibroker-ephemeral-")
        config = replace(config, data_dir=Path(scratch), fsync=FsyncPolicy("never"))
    try:
        await _serve(config, started_at, stop, early, sockets, control_sock, registry_sock)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


async def _serve(config: Config, started_at: float, stop: asyncio.Event,
                 early: EarlyListener | None, sockets: Any, control_sock: socket.socket | None,
                 registry_sock: socket.socket | None = None) -> None:
    try:
        running = await start(config, early, sockets, control_sock, registry_sock)
    except OSError as e:
        log.error("broker.listen_failed",
                  listeners=[str(Endpoint(x.name, x.host, x.port)) for x in config.effective_listeners()],
                  error=str(e))
        raise SystemExit(1) from None
    except StorageError as e:
        log.error("broker.storage_failed", data_dir=str(config.data_dir), error=str(e))
        raise SystemExit(1) from None
    try:
        if stop.is_set():
            log.info("broker.stop_requested_during_startup")
            return
        if config.ready_file is not None and early is None:
            write_ready_file(config.ready_file, running.listeners)
        log.info("broker.started",
                 listeners=[x.config_value() for x in running.listeners],
                 advertised=[x.advertised_value() for x in running.listeners],
                 data_dir=str(config.data_dir.resolve()), ephemeral=config.ephemeral,
                 fsync=str(config.fsync), pid=os.getpid(),
                 startup_ms=round((time.perf_counter() - started_at) * 1000, 1))
        # The events held since start (minibroker/core/logs.py) are written once the first
        # clients' requests pause, so importing structlog (~20 ms) delays none of them: a
        # client's first requests come one after another (issue 33). The garbage collector
        # comes back on then too (core/startup_gc.py).
        counts = running.broker.request_counts
        asyncio.get_running_loop().call_later(LOG_RELEASE_S, _release_logs_when_quiet, counts,
                                              time.monotonic() + LOG_RELEASE_MAX_S, counts.bytes_in)
        await stop.wait()
    finally:
        if config.ready_file is not None:
            try:
                config.ready_file.unlink()
            except OSError:
                pass
        await running.close()


async def _until_quiet(counts: Any, max_s: float) -> None:
    """Returns once no request came for LOG_RELEASE_S, or after ``max_s``."""
    until, seen = time.monotonic() + max_s, counts.bytes_in
    while True:
        await asyncio.sleep(LOG_RELEASE_S)
        if counts.bytes_in == seen or time.monotonic() >= until:
            return
        seen = counts.bytes_in


def _release_logs_when_quiet(counts: Any, until: float, seen: int) -> None:
    if counts.bytes_in != seen and time.monotonic() < until:  # requests came meanwhile
        asyncio.get_running_loop().call_later(LOG_RELEASE_S, _release_logs_when_quiet, counts, until,
                                              counts.bytes_in)
        return
    logs.release()
    startup_gc.release()


def run(config: Config, started_at: float | None = None, early: EarlyListener | None = None,
        sockets: list[list[socket.socket]] | None = None, control_sock: socket.socket | None = None,
        registry_sock: socket.socket | None = None) -> None:
    """Serve until SIGINT/SIGTERM; ``early``: the listener the CLI started (minibroker/net/early.py),
    ``sockets``/``control_sock``/``registry_sock``: the listeners it bound (binding.bind_listeners)."""
    try:
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop is a dependency except on Windows
            asyncio.run(serve(config, started_at, early, sockets, control_sock, registry_sock))
        else:
            uvloop.run(serve(config, started_at, early, sockets, control_sock, registry_sock))
    finally:
        # The loop gave the signals back to Python's defaults: what is left of the stop is quiet.
        stop_signals.catch()
        if early is not None:
            early.close()
        logs.release()
        startup_gc.release()
