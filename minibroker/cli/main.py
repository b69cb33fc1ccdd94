"""``minibroker`` command line: serve (the default) and the offline tools."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from ..config.options import ConfigError, add_serve_options, load, plain_serve_args
from ..core import logs, startup_gc, stop_signals

if TYPE_CHECKING:
    import argparse
    from types import SimpleNamespace

# Each tool is imported only when asked for, so that serving starts without loading it.
TOOLS = {
    "dump-log": ("minibroker.cli.dump_log", "main"),
    "health": ("minibroker.cli.health", "main"),
    "audit": ("minibroker.spark.audit", "main"),
    "scrub": ("minibroker.cli.scrub", "main"),
    "faults": ("minibroker.cli.control", "faults_main"),
    "clock": ("minibroker.cli.control", "clock_main"),
    "requests": ("minibroker.cli.control", "requests_main"),
    "cluster": ("minibroker.cli.control", "cluster_main"),
    "txn": ("minibroker.cli.control", "txn_main"),
    "share": ("minibroker.cli.share", "main"),
    "certs": ("minibroker.security.certs", "main"),
}
SUBCOMMANDS = ("serve", *TOOLS)

USAGE = """\
minibroker [serve] [OPTIONS] [server.properties]
       minibroker {dump-log,health,audit,scrub} [ARGS]   ('minibroker COMMAND --help')
       minibroker {faults,clock,requests,cluster} ... --control HOST:PORT
       minibroker txn {explain,list,hanging,abort} ... (--control HOST:PORT | --data-dir DIR)
       minibroker share explain GROUP TOPIC PARTITION [--offset N] (--control HOST:PORT | --data-dir DIR)
       minibroker certs DIR [--host NAME ...]
       minibroker --version"""

DESCRIPTION = """\
A Kafka-protocol broker. Without a subcommand it serves on 127.0.0.1:9092 with data in
./minibroker-data.

commands:
  serve       run the broker (the default)
  dump-log    print a segment, index or snapshot the way kafka-dump-log.sh does
  health      one ApiVersions round trip; exit 0 when a broker answers
  audit       check a data directory for exactly-once violations (needs the [spark] extra)
  scrub       verify the checksums of every segment in a data directory
  faults      add, list, release and clear fault rules of a running broker (--control-listener)
  clock       advance a running broker's clock (transaction and session timeouts fire)
  requests    the requests a running broker served: API, version, client, latency, error
  cluster     stop/start virtual brokers, move partition leaders and coordinators (--brokers N)
  txn         explain a transactional id's history (why was it fenced?), list, find hanging, abort
  share       explain a share group's records: each delivery, and why it was delivered again
  certs       write a throw-away CA and broker/client certificates for SSL listeners (tests, compose)"""

EPILOG = """\
Every option can also be set by the environment variable named after it (MINIBROKER_PORT=9093),
by its Kafka property in a server.properties file or a KAFKA_* variable (KAFKA_NUM_PARTITIONS=4).
First source wins: command line, --wait-for-config file, KAFKA_*, MINIBROKER_*, server.properties,
default. Every value is checked before the broker starts; each problem is reported on one line."""


def _serve_parser(prog: str = "minibroker") -> argparse.ArgumentParser:
    import argparse

    class _Parser(argparse.ArgumentParser):
        def error(self, message: str):
            # A usage error: the (short) usage, then the one line.
            self.print_usage(sys.stderr)
            self.exit(2, f"{self.prog}: error: {message}\n")

    p = _Parser(prog=prog, usage=USAGE, description=DESCRIPTION, epilog=EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"minibroker {__version__}")
    p.add_argument("properties", nargs="?", metavar="server.properties",
                   help="a Kafka server.properties file, as kafka-server-start.sh takes it "
                        "(the same as --config)")
    add_serve_options(p)
    return p


def _fail(lines: list[str], code: int = 2) -> int:
    """Errors that are not about the command's syntax: no usage, one line each."""
    for line in lines:
        sys.stderr.write(f"minibroker: error: {line}\n")
    sys.stderr.flush()
    return code


def _listen_failed(config, e: OSError) -> int:
    if config.ready_file is not None:
        # One left by a broker that was killed would announce a dead address to a CI script.
        try:
            config.ready_file.unlink(missing_ok=True)
        except OSError:
            pass
    return _fail([e.strerror or str(e)], 1)


def _run_tool(name: str, argv: list[str]) -> int:
    import importlib
    module, func = TOOLS[name]
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:
            raise
        return _fail([f"'{name}' is not available in this installation ({module} is missing)"], 1)
    return getattr(mod, func)(argv)


class _Stop(Exception):
    pass


def _wait_for_file(path: Path, log) -> bool:
    """Block until ``path`` exists and has stopped changing; False when a signal asked to stop.

    A file copied in (``docker cp``, Testcontainers' copyFileToContainer) appears before it is
    whole, so it is read only once its size and mtime held still for one poll.
    """
    def stop(*_):
        raise _Stop
    # PID 1 in a container ignores a signal it has no handler for: without these, a container
    # still waiting could not be stopped.
    old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    log.info("config.waiting_for_file", path=str(path), pid=os.getpid())
    t0 = time.monotonic()
    try:
        last = None
        while True:
            try:
                st = path.stat()
                now = (st.st_size, st.st_mtime_ns)
            except FileNotFoundError:
                now = None
            if now is not None and now == last:
                break
            last = now
            time.sleep(0.1)
    except _Stop:
        log.info("config.wait_stopped", path=str(path), reason="signal")
        return False
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    log.info("config.file_arrived", path=str(path),
             waited_ms=round((time.monotonic() - t0) * 1000))
    return True


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in TOOLS:
        if stop_signals.requested:
            return 0
        stop_signals.release()
        startup_gc.release()
        return _run_tool(argv[0], argv[1:])
    if argv and argv[0] == "serve":
        argv = argv[1:]
    ns: argparse.Namespace | SimpleNamespace | None = plain_serve_args(argv)
    if ns is None:
        parser = _serve_parser()
        ns = parsed = parser.parse_args(argv)
        named = parsed.properties
        if named is not None and not Path(named).exists() and "." not in named:
            # "minibroker dumplog": a mistyped command, not a properties file.
            parser.error(f"unknown command {named!r} (commands: {', '.join(SUBCOMMANDS)})")
    # kio registers a hypothesis strategy for each of its types whenever hypothesis is
    # importable (kio/static/_phantom.py), which costs ~120 ms of start-up in a test venv;
    # a serving broker never uses them.
    # None in sys.modules makes an import fail, a documented use typeshed does not allow for.
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    try:
        loaded = load(ns)
    except ConfigError as e:
        return _fail(e.problems)
    logs.configure(loaded.config.log_level, loaded.config.log_format)
    if loaded.wait_for_config is not None:
        from minibroker_storage.lazylog import get_logger
        if not _wait_for_file(loaded.wait_for_config, get_logger("minibroker")):
            return 0
        try:
            loaded = load(ns, read_wait_file=True)
        except ConfigError as e:
            return _fail(e.problems)
        logs.configure(loaded.config.log_level, loaded.config.log_format)
    # Start-up's events wait until the broker is ready (app.serve releases them): structlog's
    # import is not on the way to the first answer.
    logs.hold()
    config = loaded.config
    if stop_signals.requested:  # a Ctrl-C while the modules loaded: nothing started yet
        return 0
    from .preflight import check_data_dir, problems
    found = problems(config, data_dir=False)
    if found:
        return _fail(found)
    # Every listener is bound before the data dir is created or written: a busy port is one
    # line naming it, and leaves the directory as it was.
    from ..net.binding import ListenError, bind_control, bind_listeners, bind_registry, close_all
    try:
        sockets = bind_listeners(config)
    except ListenError as e:
        return _listen_failed(config, e)
    try:
        control_sock = bind_control(config)
    except ListenError as e:
        close_all(sockets)
        return _listen_failed(config, e)
    try:
        registry_sock = bind_registry(config)
    except ListenError as e:
        close_all(sockets)
        if control_sock is not None:
            control_sock.close()
        return _listen_failed(config, e)
    why = None if config.ephemeral else check_data_dir(config.data_dir)
    if why is not None:
        close_all(sockets)
        for single in (control_sock, registry_sock):
            if single is not None:
                single.close()
        return _fail([why])
    if loaded.notes:
        from minibroker_storage.lazylog import get_logger
        log = get_logger("minibroker")
        for event, fields in loaded.notes:
            log.info(event, **fields)
    # The listeners are bound, the ready file written and ApiVersions answered before the
    # broker's modules are imported (minibroker/net/early.py says why and when not).
    from ..net import early as early_listener
    early = early_listener.start(config, sockets)
    from ..app import run
    try:
        run(config, started, early, sockets, control_sock, registry_sock=registry_sock)
    except KeyboardInterrupt:
        # A signal in the instant between the event loop's handlers and stop_signals' again
        # (app.run); the broker had stopped or never served.
        pass
    return 0


if __name__ == "__main__":
    # python -m minibroker.cli (tests, bench): the entry points' handlers, from here on
    stop_signals.catch()
    sys.exit(main())
