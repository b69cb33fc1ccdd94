"""Which process listens on a TCP port, read from Linux's /proc (standard library only).

A broker that failed to bind while another process held its port must not be mistaken for a
running one: ``MiniBroker`` checks that the listening socket belongs to the process it started.
"""

from __future__ import annotations

import os

__all__ = ["listening_ports", "listens_on"]

_LISTEN = "0A"  # TCP state in /proc/net/tcp


def _socket_inodes(pid: int) -> set[str] | None:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    inodes = set()
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    return inodes


def listening_ports(pid: int) -> set[int] | None:
    """The TCP ports process ``pid`` listens on; None when /proc cannot tell (not Linux, gone)."""
    inodes = _socket_inodes(pid)
    if inodes is None:
        return None
    ports: set[int] = set()
    seen_table = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        seen_table = True
        for line in lines:
            parts = line.split()
            if len(parts) >= 10 and parts[3] == _LISTEN and parts[9] in inodes:
                ports.add(int(parts[1].rsplit(":", 1)[1], 16))
    return ports if seen_table else None


def listens_on(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` owns a TCP socket listening on ``port``; None when /proc cannot tell."""
    ports = listening_ports(pid)
    return None if ports is None else port in ports
