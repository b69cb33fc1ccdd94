"""Broker configuration: command-line options, each also read from MINIBROKER_<NAME>."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from .listeners import Listener, resolve

DEFAULT_PORT = 9092


@dataclass(frozen=True)
class FsyncPolicy:
    mode: str  # "always" | "interval" | "never"
    interval_ms: int = 0

    @classmethod
    def parse(cls, text: str) -> "FsyncPolicy":
        text = text.strip().lower()
        if text in ("always", "never"):
            return cls(text)
        if text.endswith("ms"):
            text = text[:-2]
        try:
            ms = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"--fsync must be 'always', 'never' or a number of milliseconds, not {text!r}"
            ) from None
        if ms <= 0:
            raise argparse.ArgumentTypeError("--fsync interval must be > 0 ms")
        return cls("interval", ms)

    def __str__(self) -> str:
        return self.mode if self.mode != "interval" else f"{self.interval_ms}ms"


@dataclass(frozen=True)
class Config:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    advertised_host: str | None = None
    advertised_port: int | None = None
    data_dir: Path = Path("minibroker-data")
    node_id: int = 1
    num_partitions: int = 1
    auto_create_topics: bool = True
    fsync: FsyncPolicy = FsyncPolicy("interval", 1000)
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    retention_check_interval_ms: int = 300_000
    message_max_bytes: int = 1_048_588
    producer_id_expiration_ms: int = 86_400_000
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    transaction_abort_check_interval_ms: int = 10_000
    transactional_id_expiration_check_interval_ms: int = 3_600_000
    transaction_state_partitions: int = 1
    offsets_topic_partitions: int = 1
    group_initial_rebalance_delay_ms: int = 3000
    producer_id_expiration_check_interval_ms: int = 600_000
    max_request_bytes: int = 104_857_600
    # Kafka's queued.max.request.bytes idea: the bytes every connection's unfinished or unhandled
    # requests may hold together; past it the broker stops reading sockets until memory frees.
    queued_max_request_bytes: int = 104_857_600
    # Background checksum scrub of closed segments, bytes per second; 0 = off.
    scrub_bytes_per_sec: int = 0
    log_level: str = "info"
    log_format: str = "console"
    # Empty: one PLAINTEXT listener from host/port/advertised_host/advertised_port.
    listeners: tuple[Listener, ...] = ()
    ready_file: Path | None = None
    ephemeral: bool = False

    def effective_listeners(self) -> tuple[Listener, ...]:
        if self.listeners:
            return self.listeners
        return (Listener("PLAINTEXT", self.host, self.port, self.advertised_host,
                         self.advertised_port),)

    def advertised(self, bound_port: int) -> tuple[str, int]:
        """The first listener's advertised address (what a bootstrap client is told)."""
        return self.effective_listeners()[0].advertised(bound_port)


def _env(name: str, default):
    return os.environ.get("MINIBROKER_" + name.upper().replace("-", "_"), default)


def _bool(text) -> bool:
    if isinstance(text, bool):
        return text
    v = str(text).strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def add_serve_options(p: argparse.ArgumentParser) -> None:
    d = Config()
    opt = p.add_argument
    opt("--host", default=_env("host", d.host),
        help="address to listen on (env MINIBROKER_HOST; default %(default)s)")
    opt("--port", type=int, default=int(_env("port", d.port)),
        help="TCP port to listen on; 0 picks a free one (env MINIBROKER_PORT; default %(default)s)")
    opt("--advertised-host", default=_env("advertised_host", None),
        help="host name clients are told to connect to in Metadata answers "
             "(env MINIBROKER_ADVERTISED_HOST; default: --host, or localhost when listening on all addresses)")
    opt("--advertised-port", type=int, default=_env("advertised_port", None),
        help="port clients are told to connect to (env MINIBROKER_ADVERTISED_PORT; default: the bound port)")
    opt("--listeners", default=_env("listeners", None), metavar="NAME://HOST:PORT,...",
        help="sockets to listen on, Kafka's listeners syntax, e.g. "
             "INTERNAL://0.0.0.0:29092,EXTERNAL://0.0.0.0:9092; an empty host means every "
             "interface, port 0 a free port; replaces --host/--port and the --advertised-host/"
             "--advertised-port shorthand; every listener is PLAINTEXT (env MINIBROKER_LISTENERS)")
    opt("--advertised-listeners", default=_env("advertised_listeners", None),
        metavar="NAME://HOST:PORT,...",
        help="the address each listener gives its clients in Metadata and FindCoordinator "
             "answers, e.g. INTERNAL://minibroker:29092,EXTERNAL://localhost:9092; a listener "
             "left out advertises its own host (localhost for every-interface) and port; port 0 "
             "means the bound port (env MINIBROKER_ADVERTISED_LISTENERS)")
    opt("--data-dir", type=Path, default=Path(_env("data_dir", d.data_dir)),
        help="where topics, segments and broker state live (env MINIBROKER_DATA_DIR; default ./%(default)s)")
    opt("--ephemeral", type=_bool, nargs="?", const=True,
        default=_bool(_env("ephemeral", d.ephemeral)), metavar="BOOL",
        help="keep data in a new temporary directory, removed when the broker stops, and never "
             "fsync: a throw-away broker for CI; --data-dir is ignored (env MINIBROKER_EPHEMERAL; "
             "default false)")
    opt("--ready-file", type=Path, default=_env("ready_file", None), metavar="FILE",
        help="once every listener accepts connections, write FILE (atomically) with one line per "
             "listener, its advertised host:port, the first listener first "
             "(env MINIBROKER_READY_FILE)")
    opt("--node-id", type=int, default=int(_env("node_id", d.node_id)),
        help="broker id reported in Metadata (env MINIBROKER_NODE_ID; default %(default)s)")
    opt("--num-partitions", type=int, default=int(_env("num_partitions", d.num_partitions)),
        help="partitions of auto-created topics, Kafka's num.partitions (env MINIBROKER_NUM_PARTITIONS; default %(default)s)")
    opt("--auto-create-topics", type=_bool, default=_bool(_env("auto_create_topics", d.auto_create_topics)),
        metavar="BOOL",
        help="create unknown topics on Metadata requests, Kafka's auto.create.topics.enable "
             "(env MINIBROKER_AUTO_CREATE_TOPICS; default true)")
    opt("--fsync", type=FsyncPolicy.parse, default=FsyncPolicy.parse(str(_env("fsync", "1000"))),
        metavar="always|never|MS",
        help="when appended data is forced to disk: 'always' before every produce answer, "
             "every MS milliseconds in the background, or 'never' (leave it to the OS) "
             "(env MINIBROKER_FSYNC; default 1000)")
    opt("--segment-bytes", type=int, default=int(_env("segment_bytes", d.segment_bytes)),
        help="roll a new segment at this size, Kafka's log.segment.bytes (env MINIBROKER_SEGMENT_BYTES; default %(default)s)")
    opt("--segment-ms", type=int, default=int(_env("segment_ms", d.segment_ms)),
        help="roll a new segment after this age, Kafka's log.roll.ms (env MINIBROKER_SEGMENT_MS; default %(default)s)")
    opt("--retention-ms", type=int, default=int(_env("retention_ms", d.retention_ms)),
        help="delete segments older than this, -1 keeps forever, Kafka's log.retention.ms "
             "(env MINIBROKER_RETENTION_MS; default %(default)s = 7 days)")
    opt("--retention-bytes", type=int, default=int(_env("retention_bytes", d.retention_bytes)),
        help="delete old segments while a partition is larger than this, -1 = no limit "
             "(env MINIBROKER_RETENTION_BYTES; default %(default)s)")
    opt("--retention-check-interval-ms", type=int,
        default=int(_env("retention_check_interval_ms", d.retention_check_interval_ms)),
        help="how often retention runs (env MINIBROKER_RETENTION_CHECK_INTERVAL_MS; default %(default)s)")
    opt("--producer-id-expiration-ms", type=int,
        default=int(_env("producer_id_expiration_ms", d.producer_id_expiration_ms)),
        help="forget an idempotent producer's state after this long without a write, Kafka's "
             "producer.id.expiration.ms (env MINIBROKER_PRODUCER_ID_EXPIRATION_MS; default %(default)s = 1 day)")
    opt("--producer-id-expiration-check-interval-ms", type=int,
        default=int(_env("producer_id_expiration_check_interval_ms",
                         d.producer_id_expiration_check_interval_ms)),
        help="how often expired producer state is removed "
             "(env MINIBROKER_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS; default %(default)s)")
    opt("--transaction-max-timeout-ms", type=int,
        default=int(_env("transaction_max_timeout_ms", d.transaction_max_timeout_ms)),
        help="largest transaction.timeout.ms a producer may ask for, Kafka's "
             "transaction.max.timeout.ms (env MINIBROKER_TRANSACTION_MAX_TIMEOUT_MS; default %(default)s)")
    opt("--transactional-id-expiration-ms", type=int,
        default=int(_env("transactional_id_expiration_ms", d.transactional_id_expiration_ms)),
        help="forget a transactional id idle this long, Kafka's transactional.id.expiration.ms "
             "(env MINIBROKER_TRANSACTIONAL_ID_EXPIRATION_MS; default %(default)s = 7 days)")
    opt("--transaction-abort-check-interval-ms", type=int,
        default=int(_env("transaction_abort_check_interval_ms", d.transaction_abort_check_interval_ms)),
        help="how often transactions past their timeout are aborted, Kafka's "
             "transaction.abort.timed.out.transaction.cleanup.interval.ms "
             "(env MINIBROKER_TRANSACTION_ABORT_CHECK_INTERVAL_MS; default %(default)s)")
    opt("--transactional-id-expiration-check-interval-ms", type=int,
        default=int(_env("transactional_id_expiration_check_interval_ms",
                         d.transactional_id_expiration_check_interval_ms)),
        help="how often expired transactional ids are removed, Kafka's "
             "transaction.remove.expired.transaction.cleanup.interval.ms "
             "(env MINIBROKER_TRANSACTIONAL_ID_EXPIRATION_CHECK_INTERVAL_MS; default %(default)s)")
    opt("--group-initial-rebalance-delay-ms", type=int,
        default=int(_env("group_initial_rebalance_delay_ms", d.group_initial_rebalance_delay_ms)),
        help="how long a new group waits for more members before its first rebalance, Kafka's "
             "group.initial.rebalance.delay.ms (env MINIBROKER_GROUP_INITIAL_REBALANCE_DELAY_MS; "
             "default %(default)s)")
    opt("--message-max-bytes", type=int, default=int(_env("message_max_bytes", d.message_max_bytes)),
        help="largest record batch accepted, Kafka's message.max.bytes (env MINIBROKER_MESSAGE_MAX_BYTES; default %(default)s)")
    opt("--max-request-bytes", type=int, default=int(_env("max_request_bytes", d.max_request_bytes)),
        help="largest request frame accepted before the connection is closed, Kafka's "
             "socket.request.max.bytes (env MINIBROKER_MAX_REQUEST_BYTES; default %(default)s)")
    opt("--queued-max-request-bytes", type=int,
        default=int(_env("queued_max_request_bytes", d.queued_max_request_bytes)),
        help="bytes that all connections' partly received and not yet answered requests may hold "
             "together; beyond it the broker stops reading from sockets until memory frees, Kafka's "
             "queued.max.request.bytes (env MINIBROKER_QUEUED_MAX_REQUEST_BYTES; default %(default)s)")
    opt("--scrub-bytes-per-sec", type=int,
        default=int(_env("scrub_bytes_per_sec", d.scrub_bytes_per_sec)),
        help="verify the checksums of closed segments in the background at this many bytes per "
             "second; 0 turns the background scrub off (env MINIBROKER_SCRUB_BYTES_PER_SEC; "
             "default %(default)s)")
    opt("--log-level", default=_env("log_level", d.log_level),
        choices=["debug", "info", "warning", "error"],
        help="(env MINIBROKER_LOG_LEVEL; default %(default)s)")
    opt("--log-format", default=_env("log_format", d.log_format), choices=["console", "json"],
        help="structured log output style (env MINIBROKER_LOG_FORMAT; default %(default)s)")


def config_from_args(ns: argparse.Namespace) -> Config:
    """Raises ``listeners.ListenerError`` for a listener list Kafka would refuse."""
    advertised_port = int(ns.advertised_port) if ns.advertised_port else None
    listeners = resolve(ns.listeners, ns.advertised_listeners, host=ns.host, port=ns.port,
                        advertised_host=ns.advertised_host, advertised_port=advertised_port)
    return Config(
        listeners=listeners if ns.listeners else (),
        ready_file=Path(ns.ready_file) if ns.ready_file else None,
        ephemeral=ns.ephemeral,
        host=ns.host,
        port=ns.port,
        advertised_host=ns.advertised_host,
        advertised_port=advertised_port,
        data_dir=ns.data_dir,
        node_id=ns.node_id,
        num_partitions=ns.num_partitions,
        auto_create_topics=ns.auto_create_topics,
        fsync=ns.fsync,
        segment_bytes=ns.segment_bytes,
        segment_ms=ns.segment_ms,
        retention_ms=ns.retention_ms,
        retention_bytes=ns.retention_bytes,
        retention_check_interval_ms=ns.retention_check_interval_ms,
        message_max_bytes=ns.message_max_bytes,
        producer_id_expiration_ms=ns.producer_id_expiration_ms,
        group_initial_rebalance_delay_ms=ns.group_initial_rebalance_delay_ms,
        transaction_max_timeout_ms=ns.transaction_max_timeout_ms,
        transactional_id_expiration_ms=ns.transactional_id_expiration_ms,
        transaction_abort_check_interval_ms=ns.transaction_abort_check_interval_ms,
        transactional_id_expiration_check_interval_ms=ns.transactional_id_expiration_check_interval_ms,
        producer_id_expiration_check_interval_ms=ns.producer_id_expiration_check_interval_ms,
        max_request_bytes=ns.max_request_bytes,
        queued_max_request_bytes=ns.queued_max_request_bytes,
        scrub_bytes_per_sec=ns.scrub_bytes_per_sec,
        log_level=ns.log_level,
        log_format=ns.log_format,
    )
