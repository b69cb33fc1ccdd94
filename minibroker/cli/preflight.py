"""Checks made before anything starts, so that a wrong path is named for what it is.

Without them a data directory that is a file, or one the broker may not write, surfaced
later as ``broker.listen_failed`` or a storage traceback, naming neither the path nor the
real cause. Each problem is one line naming the option and the path. The data dir's check
creates the directory, so the CLI runs it only once every listener is bound (cli.main): a busy
port leaves no directory behind.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from ..config.options import Config


def _why(e: OSError) -> str:
    return e.strerror or str(e)


def check_data_dir(path: Path) -> str | None:
    """Make sure ``path`` is (or can be made) a directory the broker can write in."""
    label = f"--data-dir {str(path)!r}"
    try:
        if path.exists() and not path.is_dir():
            return f"{label}: exists and is not a directory"
    except OSError as e:   # a parent this user may not enter
        return f"{label}: cannot reach it: {_why(e)}"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        # mkdir met a file where a parent directory should be.
        return f"{label}: cannot create it: a parent is not a directory"
    except OSError as e:
        return f"{label}: cannot create it: {_why(e)}"
    # A real write, not os.access: root passes access() on a read-only file system.
    probe = path / f".minibroker-preflight-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
    except OSError as e:
        return f"{label}: cannot write in it: {_why(e)}"
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError as e:
        return f"{label}: cannot remove files in it: {_why(e)}"
    try:
        os.listdir(path)
    except OSError as e:
        return f"{label}: cannot list it: {_why(e)}"
    return None


def check_ready_file(path: Path) -> str | None:
    parent = path.absolute().parent
    if not parent.is_dir():
        return f"--ready-file {str(path)!r}: directory {str(parent)!r} does not exist"
    if path.is_dir():
        return f"--ready-file {str(path)!r}: is a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"--ready-file {str(path)!r}: cannot write in {str(parent)!r}"
    return None


def check_listen_host(name: str, host: str) -> str | None:
    """A bind address that does not resolve fails the bind later, logged as a listen failure
    with the resolver's words only; name the listener and the host instead."""
    if host in ("", "0.0.0.0", "::"):
        return None
    try:
        socket.getaddrinfo(host, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as e:
        return f"listener {name}: cannot listen on host {host!r}: {getattr(e, 'strerror', None) or e}"
    return None


def problems(config: Config, data_dir: bool = True) -> list[str]:
    """One line per problem; empty when the broker can start. ``data_dir=False``: all but the
    data dir's check, which creates it (the CLI makes it once the listeners are bound)."""
    out = [check_listen_host(x.name, x.host) for x in config.effective_listeners()]
    if data_dir and not config.ephemeral:
        out.append(check_data_dir(config.data_dir))
    if config.ready_file is not None:
        out.append(check_ready_file(config.ready_file))
    if config.control_listener is not None:
        out.append(check_listen_host("--control-listener", config.control_listener[0]))
    if config.schema_registry_listener is not None:
        out.append(check_listen_host("--schema-registry-listener", config.schema_registry_listener[1]))
    if config.brokers > 1:
        if len(config.effective_listeners()) > 1:
            out.append(f"--brokers {config.brokers}: virtual brokers take one listener (--host/--port "
                       "or a single --listeners entry), each broker on the next port")
        elif config.effective_listeners()[0].advertised_port is not None:
            out.append(f"--brokers {config.brokers}: each virtual broker advertises its own port; "
                       "a fixed --advertised-port cannot be")
    if config.sasl_users is not None:
        from ..security.sasl.credentials import UsersFileError, read_users_file
        try:
            read_users_file(config.sasl_users)
        except UsersFileError as e:
            out.append(str(e))
    if config.faults is not None:
        from ..control.faults.rules import FaultError, read_rules_file
        try:
            read_rules_file(config.faults)
        except FaultError as e:
            out.append(str(e))
    return [p for p in out if p]
