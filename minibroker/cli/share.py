"""``minibroker share explain``: why a share group's record was delivered again, told record by
record, from a running broker's control plane or from a data directory (read-only: the broker
may be running on it, or may never start again after a crash).

    minibroker share explain GROUP TOPIC PARTITION [--offset N] [--json]
                             (--control HOST:PORT | --data-dir DIR)

Offline there is no live state: the story ends with the last event the history kept (an
acquisition still held at a kill -9 is told as held; the next start gives it back). Exit 1 with
one line when neither the broker nor the history knows the partition (or the offset).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any


def _fail(message: str, code: int = 1) -> int:
    sys.stderr.write(f"minibroker: error: {message}\n")
    return code


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="minibroker share")
    sub = p.add_subparsers(dest="command", required=True)
    exp = sub.add_parser("explain", help="each record's deliveries and why it was redelivered, "
                                         "ending with a diagnosis")
    exp.add_argument("group")
    exp.add_argument("topic")
    exp.add_argument("partition", type=int)
    exp.add_argument("--offset", type=int, help="only this record's story")
    exp.add_argument("--control", default=os.environ.get("MINIBROKER_CONTROL"), metavar="HOST:PORT",
                     help="a running broker's --control-listener (default: $MINIBROKER_CONTROL)")
    exp.add_argument("--data-dir", metavar="DIR", help="read a data directory instead of a running broker")
    exp.add_argument("--json", action="store_true")
    ns = p.parse_args(argv)
    if ns.partition < 0:
        p.error(f"the partition is a number from 0, not {ns.partition}")
    if ns.control and ns.data_dir:
        p.error("give --control or --data-dir, not both")
    if not ns.control and not ns.data_dir:
        p.error("--control HOST:PORT (a running broker) or --data-dir DIR is required")
    if ns.data_dir:
        if not os.path.isdir(ns.data_dir):
            return _fail(f"no data directory {ns.data_dir}")
        data = _offline(ns)
        where = f"data directory {ns.data_dir}"
    else:
        from ..testing.control import ControlError
        try:
            data = _live(ns)
        except ControlError as e:
            return _fail(str(e))
        where = f"the broker at {ns.control}"
    if not data.get("known", True):
        what = f"offset {ns.offset} of " if ns.offset is not None else ""
        return _fail(data.get("error") or f"no share history for {what}group {ns.group!r} on "
                     f"{ns.topic}-{ns.partition} in {where}: never delivered there, or expired from "
                     "the history")
    print(json.dumps(data, indent=2) if ns.json else data["text"])
    return 0


def _offline(ns: argparse.Namespace) -> dict[str, Any]:
    from ..coordinator.share import history
    from ..coordinator.share.explain import explain

    parts, starts = history.read(ns.data_dir)
    events = history.select(parts.get((ns.group, ns.topic, ns.partition), []), ns.offset)
    x = explain(ns.group, ns.topic, ns.partition, events, broker_starts=starts, offset=ns.offset)
    out = x.as_dict()
    out["text"] = x.text()
    return out


def _live(ns: argparse.Namespace) -> dict[str, Any]:
    from urllib.parse import quote

    from ..testing.control import ControlError, call

    path = f"/v1/share/{quote(ns.group, safe='')}/{quote(ns.topic, safe='')}/{ns.partition}"
    if ns.offset is not None:
        path += f"?offset={ns.offset}"
    try:
        return call(ns.control, "GET", path)
    except ControlError as e:
        # the route's 404 says what it lacks; the rest (unreachable, 503) is an error as it is
        _, found, reason = str(e).partition(": no share history for")
        if found:
            return {"known": False, "error": f"no share history for{reason}"}
        raise
