"""``minibroker`` command line: serve (the default) and the offline tools."""

from __future__ import annotations

import argparse
import sys
import time

from . import logs
from .config import add_serve_options, config_from_args
from .listeners import ListenerError

SUBCOMMANDS = ("serve", "dump-log", "health", "audit")

# Each tool is imported only when asked for, so that serving starts without loading it.
TOOLS = {
    "dump-log": ("minibroker.dump_log", "main"),
    "health": ("minibroker.health", "main"),
    "audit": ("minibroker.spark.audit", "main"),
}


def _serve_parser(prog: str = "minibroker") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="A Kafka-protocol broker. Without a subcommand it serves on "
                    "127.0.0.1:9092 with data in ./minibroker-data.",
        epilog="Other commands: 'minibroker dump-log FILE.log [--print-data-log]' prints a segment "
               "the way kafka-dump-log.sh does; 'minibroker health [--bootstrap HOST:PORT]' makes "
               "one ApiVersions round trip and exits 0 when a broker answers; 'minibroker audit "
               "DATA_DIR' checks a data directory for exactly-once violations (needs the [spark] "
               "extra). Every option can also be set by the environment variable named after it, "
               "e.g. MINIBROKER_PORT=9093.",
    )
    add_serve_options(p)
    return p


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in TOOLS:
        import importlib
        module, func = TOOLS[argv[0]]
        return getattr(importlib.import_module(module), func)(argv[1:])
    if argv and argv[0] == "serve":
        argv = argv[1:]
    parser = _serve_parser()
    ns = parser.parse_args(argv)
    # kio registers a hypothesis strategy for each of its types whenever hypothesis is
    # importable (kio/static/_phantom.py), which costs ~120 ms of start-up in a test venv;
    # a serving broker never uses them.
    sys.modules.setdefault("hypothesis", None)
    try:
        config = config_from_args(ns)
    except ListenerError as e:
        parser.error(str(e))
    if config.ready_file is not None and not config.ready_file.resolve().parent.is_dir():
        parser.error(f"--ready-file: directory {config.ready_file.parent} does not exist")
    logs.configure(config.log_level, config.log_format)
    from .app import run
    run(config, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
