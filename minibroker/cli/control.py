"""``minibroker faults|clock|requests|cluster|txn``: the control plane from a shell.

    minibroker faults add --api EndTxn --action drop-response --control 127.0.0.1:9644
    minibroker faults add --api EndTxn --action error --error CONCURRENT_TRANSACTIONS --count 3 ...
    minibroker faults list|clear|remove ID|release [ID] --control HOST:PORT
    minibroker clock advance 90s --control HOST:PORT     (also 1500ms, 2m, 1h, 1m 30s)
    minibroker clock show --control HOST:PORT            (ISO-8601 UTC, and how far from real time)
    minibroker requests [--api EndTxn] [--transactional-id ID] [--json] --control HOST:PORT
    minibroker txn explain ID|list|hanging|abort ... (--control HOST:PORT | --data-dir DIR) [--json]

``--control`` defaults to ``$MINIBROKER_CONTROL``. Errors are one line on stderr, exit 1 (the
broker refused, or has no such transactional id) or 2 (the command line is wrong: a fault rule
is checked here, with the broker's own parser, before any broker is asked). Durations print as
people write them (``1h``, ``1m 30s``, ``250 ms``), error codes by Kafka's names. Standard
library only at module level; what a command needs beyond it is imported when it runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ..testing.control import ControlError, call


def _parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog)
    p.add_argument("--control", default=os.environ.get("MINIBROKER_CONTROL"), metavar="HOST:PORT",
                   help="the broker's --control-listener (default: $MINIBROKER_CONTROL)")
    return p


def _need_control(p: argparse.ArgumentParser, ns: argparse.Namespace) -> str:
    if not ns.control:
        p.error("--control HOST:PORT is required (or set MINIBROKER_CONTROL)")
    return ns.control


def _n(count: int, word: str, plural: str | None = None) -> str:
    """``1 rule``, ``3 rules``."""
    return f"{count} {word if count == 1 else plural or word + 's'}"


def _fail(message: str, code: int = 1) -> int:
    sys.stderr.write(f"minibroker: error: {message}\n")
    return code


# -- faults ------------------------------------------------------------------------------------
_RULE_OPTIONS = (
    ("--api", str, "API name as Kafka spells it (EndTxn, Produce, ...) or key"),
    ("--action", str, "error, error-after-apply, drop-response, delay, disconnect, hold, crash, "
                      "throttle (required)"),
    ("--error", str, "the error code to answer (name like CONCURRENT_TRANSACTIONS, or number)"),
    ("--message", str, "the error message, where the answer has one"),
    ("--count", str, "fire on the next N matching requests ('all' or -1: every one; default 1)"),
    ("--nth", int, "fire on the Nth matching request (1 = the first)"),
    ("--probability", float, "fire on each match with this probability (with --seed: replayable)"),
    ("--seed", int, "seed of --probability's generator"),
    ("--min-version", int, "lowest request version matched"),
    ("--max-version", int, "highest request version matched"),
    ("--client-id", str, "only requests with this client id"),
    ("--client-software", str, "only clients naming this software (KIP-511), e.g. apache-kafka-java"),
    ("--transactional-id", str, "only requests naming this transactional id"),
    ("--group", str, "only requests naming this group"),
    ("--topic", str, "only requests naming this topic"),
    ("--partition", int, "with --topic: only this partition"),
    ("--broker", int, "only requests to this (virtual) broker"),
    ("--delay-ms", int, "for delay: how long"),
    ("--throttle-ms", int, "for throttle: the throttle_time_ms answered, and how long the connection "
                           "then reads nothing"),
    ("--when", str, "for disconnect: before or after applying (default before)"),
    ("--point", str, "for crash: before-apply, after-apply, txn.after_prepare, "
                     "txn.after_first_marker, txn.before_complete, produce.after_append"),
)


def _rule_from(ns: argparse.Namespace) -> dict[str, Any]:
    rule: dict[str, Any] = {}
    for flag, _kind, _help in _RULE_OPTIONS:
        name = flag[2:].replace("-", "_")
        value = getattr(ns, name)
        if value is None:
            continue
        if name == "count":
            value = -1 if str(value).lower() == "all" else value
        rule[name] = value
    return rule


def _rule_line(r: dict[str, Any]) -> str:
    skip = {"id", "action", "matched", "fired", "held", "error_code"}
    what = " ".join(f"{k}={v}" for k, v in r.items() if k not in skip)
    return f"{r['id']:>3}  {r['action']:<17} {what}  (matched {r['matched']}, fired {r['fired']}" + (
        f", holding {r['held']})" if r.get("held") else ")")


def faults_main(argv: list[str]) -> int:
    p = _parser("minibroker faults")
    sub = p.add_subparsers(dest="command", required=True)
    add = sub.add_parser("add", help="add a rule")
    for flag, kind, help_text in _RULE_OPTIONS:
        add.add_argument(flag, type=kind, default=None, help=help_text)
    add.add_argument("--json", action="store_true", help="print the rule as JSON")
    for name in ("list", "clear"):
        s = sub.add_parser(name)
        s.add_argument("--json", action="store_true")
    rm = sub.add_parser("remove")
    rm.add_argument("id", type=int)
    rel = sub.add_parser("release", help="let held requests go on")
    rel.add_argument("id", type=int, nargs="?")
    load = sub.add_parser("load", help="add the rules of a scenario file (as --faults takes it)")
    load.add_argument("file")
    for s in (add, rm, rel, load, *(sub.choices[n] for n in ("list", "clear"))):
        s.add_argument("--control", default=argparse.SUPPRESS)
    ns = p.parse_args(argv)
    if ns.command in ("add", "load"):
        # The server's own rule parser, run here first: a bad rule is refused without a broker.
        # Imported only now: it brings minibroker_protocol (and kio), which list/clear need not.
        from ..control.faults.rules import ACTIONS, FaultError, parse_rule, read_rules_file
        if ns.command == "add" and ns.action is None:
            return _fail(f"faults add needs --action (one of {', '.join(ACTIONS)})", 2)
        try:
            if ns.command == "add":
                parse_rule(_rule_from(ns), 1)
            else:
                specs = read_rules_file(ns.file)
        except FaultError as e:
            return _fail(str(e), 2)
    control = _need_control(p, ns)
    try:
        if ns.command == "add":
            out = call(control, "POST", "/v1/faults", _rule_from(ns))
            rule = out["rules"][0]
            print(json.dumps(rule) if ns.json else f"added rule {_rule_line(rule).strip()}")
        elif ns.command == "list":
            rules = call(control, "GET", "/v1/faults")["rules"]
            if ns.json:
                print(json.dumps(rules, indent=2))
            else:
                print("\n".join(_rule_line(r) for r in rules) if rules else "no fault rules")
        elif ns.command == "clear":
            out = call(control, "DELETE", "/v1/faults")
            print(json.dumps(out) if ns.json else
                  f"removed {_n(out['removed'], 'rule')}, released {_n(out['released'], 'held request')}")
        elif ns.command == "remove":
            out = call(control, "DELETE", f"/v1/faults/{ns.id}")
            print(f"removed rule {ns.id} (fired {_n(out['removed']['fired'], 'time')})")
        elif ns.command == "release":
            path = "/v1/faults/release" if ns.id is None else f"/v1/faults/{ns.id}/release"
            print(f"released {_n(call(control, 'POST', path)['released'], 'request')}")
        elif ns.command == "load":
            out = call(control, "POST", "/v1/faults", {"rules": specs})
            print(f"added {_n(len(out['rules']), 'rule')}")
    except ControlError as e:
        return _fail(str(e))
    return 0


# -- clock -------------------------------------------------------------------------------------
_MODES = {"virtual": "virtual clock: it moves only when advanced",
          "system": "system clock: real time, plus every advance"}


def _utc(ms: int) -> str:
    """ISO-8601 UTC to the millisecond, computed in integers (no float rounding)."""
    import datetime
    t = datetime.datetime.fromtimestamp(ms // 1000, datetime.UTC).replace(microsecond=ms % 1000 * 1000)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _offset_words(offset_ms: float) -> str:
    from ..control.durations import format_duration
    if round(offset_ms) == 0:
        return "in step with the system clock"
    return f"{format_duration(abs(offset_ms))} {'ahead of' if offset_ms > 0 else 'behind'} the system clock"


def _clock_line(out: dict[str, Any]) -> str:
    return (f"broker time {_utc(out['wall_ms'])} ({out['wall_ms']} ms since the epoch), "
            f"{_offset_words(out['offset_ms'])} ({_MODES.get(out['mode'], out['mode'])})")


def _negative_advance(argv: list[str]) -> str | None:
    """``clock advance -5s``: argparse would take -5s for an option; say what is wrong instead."""
    from ..control.durations import DurationError, parse_duration_ms
    if "advance" not in argv:
        return None
    after = argv[argv.index("advance") + 1:]
    for arg in after[:1]:
        try:
            if arg.startswith("-") and parse_duration_ms(arg) < 0:
                return arg
        except DurationError:
            return None
    return None


# The control plane's answer to a negative advance, said before contacting it.
BACKWARDS = "a clock does not go back: the duration must be >= 0"


def clock_main(argv: list[str]) -> int:
    p = _parser("minibroker clock")
    sub = p.add_subparsers(dest="command", required=True)
    adv = sub.add_parser("advance", help="move the broker's clock forward")
    adv.add_argument("duration", help="90s, 1500ms, 2m, 1h, 1m 30s")
    show = sub.add_parser("show", help="the broker's time, and how far it is from the system clock")
    for s in (adv, show):
        s.add_argument("--json", action="store_true")
        s.add_argument("--control", default=argparse.SUPPRESS)
    backwards = _negative_advance(argv)
    if backwards is not None:
        return _fail(f"{BACKWARDS}, not {backwards}", 2)
    ns = p.parse_args(argv)
    control = _need_control(p, ns)
    try:
        if ns.command == "advance":
            from ..control.durations import DurationError, format_duration, parse_duration_ms
            try:
                parse_duration_ms(ns.duration)
            except DurationError as e:
                return _fail(str(e), 2)
            out = call(control, "POST", "/v1/clock/advance", {"duration": ns.duration})
            if ns.json:
                print(json.dumps(out))
            else:
                ran = ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in out["ran"].items())
                print(f"advanced {format_duration(out['advanced_ms'])}: {_clock_line(out)}; {ran}")
        else:
            out = call(control, "GET", "/v1/clock")
            print(json.dumps(out) if ns.json else _clock_line(out))
    except ControlError as e:
        return _fail(str(e))
    return 0


# -- requests ----------------------------------------------------------------------------------
def requests_main(argv: list[str]) -> int:
    p = _parser("minibroker requests")
    p.add_argument("--api", help="only this API (EndTxn, Produce, ...)")
    p.add_argument("--client", help="only this client id or client software name")
    p.add_argument("--transactional-id")
    p.add_argument("--group")
    p.add_argument("--topic")
    p.add_argument("--limit", type=int, help="only the last N")
    p.add_argument("--counts", action="store_true",
                   help="requests per API, version and client software since the broker started")
    p.add_argument("--json", action="store_true")
    ns = p.parse_args(argv)
    control = _need_control(p, ns)
    import urllib.parse
    try:
        if ns.counts:
            rows = call(control, "GET", "/v1/requests/counts")["counts"]
            if ns.json:
                print(json.dumps(rows, indent=2))
            elif not rows:
                print("no requests counted")
            else:
                header = ("Api", "Version", "ClientSoftware", "ClientSoftwareVersion", "Requests")
                print("\n".join(_table(header,
                                       [(r["api"], r["api_version"], r["client_software_name"],
                                         r["client_software_version"], r["count"]) for r in rows],
                                       right=(1, 4))))
            return 0
        query = {k: v for k, v in (("api", ns.api), ("client", ns.client),
                                   ("transactional_id", ns.transactional_id), ("group", ns.group),
                                   ("topic", ns.topic), ("limit", ns.limit)) if v is not None}
        path = "/v1/requests" + ("?" + urllib.parse.urlencode(query) if query else "")
        records = call(control, "GET", path)["requests"]
    except ControlError as e:
        return _fail(str(e))
    if ns.json:
        print(json.dumps(records, indent=2))
        return 0
    if not records:
        print("no requests recorded" + (" that match" if query else ""))
        return 0
    from ..control.durations import format_duration
    rows = []
    for r in records:
        error = "-" if not r["error_code"] else f"{r.get('error') or 'error'} ({r['error_code']})"
        latency = "-" if r["latency_ms"] is None else format_duration(r["latency_ms"])
        named = " ".join(r["transactional_ids"] + r["groups"] + r["topics"]) or "-"
        rows.append((r["seq"], r["api"], r["api_version"], r["client_id"] or "-", r["client_software_name"],
                     r["connection"], latency, r["outcome"], error,
                     "-" if r["fault"] is None else f"rule {r['fault']}", named))
    print("\n".join(_table(("Seq", "Api", "Version", "ClientId", "ClientSoftware", "Connection", "Latency",
                            "Outcome", "Error", "Fault", "Names"), rows, right=(0, 2, 5, 6))))
    return 0


def _table(header: tuple[str, ...], rows: list[tuple[Any, ...]], right: tuple[int, ...] = ()) -> list[str]:
    """Columns as wide as their widest cell, numbers (``right``) aligned right, two spaces apart."""
    cells = [header, *(tuple("-" if c is None else str(c) for c in row) for row in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return ["  ".join(c.rjust(w) if i in right else c.ljust(w)
                      for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in cells]


# -- cluster (--brokers N) ---------------------------------------------------------------------
def cluster_main(argv: list[str]) -> int:
    p = _parser("minibroker cluster")
    sub = p.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", help="the virtual brokers, up or stopped")
    stop = sub.add_parser("stop", help="stop a virtual broker (its leaders and coordinators move)")
    stop.add_argument("broker", type=int)
    start = sub.add_parser("start", help="start a stopped virtual broker again")
    start.add_argument("broker", type=int)
    lead = sub.add_parser("move-leader", help="make BROKER the leader of TOPIC's PARTITION")
    lead.add_argument("topic")
    lead.add_argument("partition", type=int)
    lead.add_argument("broker", type=int)
    coord = sub.add_parser("move-coordinator", help="move a transactional id's or group's coordinator")
    coord.add_argument("broker", type=int)
    who = coord.add_mutually_exclusive_group(required=True)
    who.add_argument("--transactional-id")
    who.add_argument("--group")
    coord.add_argument("--load-in-progress", type=int, default=0, metavar="N",
                       help="the new coordinator answers its next N requests of each coordinator API "
                            "with COORDINATOR_LOAD_IN_PROGRESS, as while it loads")
    for s in (show, stop, start, lead, coord):
        s.add_argument("--control", default=argparse.SUPPRESS)
        s.add_argument("--json", action="store_true")
    ns = p.parse_args(argv)
    control = _need_control(p, ns)
    try:
        if ns.command == "show":
            out = call(control, "GET", "/v1/cluster")
            lines = [f"broker {b['node_id']} at {b['host']}:{b['port']} "
                     f"{'up' if b['up'] else 'stopped'}" for b in out["brokers"]]
        elif ns.command in ("stop", "start"):
            out = call(control, "POST", f"/v1/brokers/{ns.broker}/{ns.command}")
            lines = [f"broker {ns.broker} {'started' if out['up'] else 'stopped'}; leaders moved: "
                     f"{', '.join(out['leaders_moved']) or 'none'}"]
        elif ns.command == "move-leader":
            out = call(control, "POST", "/v1/partitions/leader",
                       {"topic": ns.topic, "partition": ns.partition, "broker": ns.broker})
            lines = [f"{ns.topic}-{ns.partition} led by broker {ns.broker}"]
        else:
            body = {"broker": ns.broker, "transactional_id": ns.transactional_id, "group": ns.group,
                    "load_in_progress": ns.load_in_progress}
            out = call(control, "POST", "/v1/coordinators/move", body)
            lines = [f"coordinator ({out['partition']}) moved to broker {out['coordinator']}"]
    except ControlError as e:
        return _fail(str(e))
    print(json.dumps(out) if ns.json else "\n".join(lines))
    return 0


# -- txn (kafka-transactions.sh's list / find-hanging / abort, and the story of one id) ----------
def txn_main(argv: list[str]) -> int:
    p = _parser("minibroker txn")
    p.add_argument("--data-dir", metavar="DIR", help="read a data directory instead of a running broker")
    sub = p.add_subparsers(dest="command", required=True)
    exp = sub.add_parser("explain", help="the history of a transactional id, ending with a diagnosis")
    exp.add_argument("transactional_id", nargs="?")
    exp.add_argument("--producer-id", type=int, help="an idempotent producer id's history instead")
    lst = sub.add_parser("list", help="every transactional id the coordinator knows, with its state")
    hang = sub.add_parser("hanging", help="transactions open in a partition that no coordinator will end")
    hang.add_argument("--max-age", metavar="DURATION",
                      help="also report transactions open longer than this "
                           "(default: transaction.max.timeout.ms)")
    ab = sub.add_parser("abort", help="write the abort marker of a hanging transaction (live broker only)")
    ab.add_argument("--topic", required=True)
    ab.add_argument("--partition", type=int, required=True)
    ab.add_argument("--start-offset", type=int)
    ab.add_argument("--producer-id", type=int)
    ab.add_argument("--producer-epoch", type=int)
    for s in (exp, lst, hang, ab):
        s.add_argument("--control", default=argparse.SUPPRESS)
        s.add_argument("--data-dir", default=argparse.SUPPRESS)
        s.add_argument("--json", action="store_true")
    ns = p.parse_args(argv)
    if ns.command == "explain" and (ns.transactional_id is None) == (ns.producer_id is None):
        p.error("explain needs a TRANSACTIONAL_ID or --producer-id N (one of them)")
    if ns.control and ns.data_dir:
        p.error("give --control or --data-dir, not both")
    if not ns.control and not ns.data_dir:
        p.error("--control HOST:PORT (a running broker) or --data-dir DIR is required")
    if ns.data_dir and not os.path.isdir(ns.data_dir):
        return _fail(f"no data directory {ns.data_dir}")
    try:
        out = _txn_offline(ns) if ns.data_dir else _txn_live(ns)
    except ControlError as e:
        return _fail(str(e))
    if isinstance(out, int):
        return out
    data, lines = out
    if ns.command == "explain" and not data.get("known", True):
        # kafka-transactions.sh describe fails the same way on an id the coordinator lacks.
        where = f"the broker at {ns.control}" if ns.control else f"data directory {ns.data_dir}"
        what = (f"transactional id {ns.transactional_id!r}" if ns.producer_id is None
                else f"producer id {ns.producer_id}")
        return _fail(f"no {what} in {where}: never used there, or expired and gone from the history")
    print(json.dumps(data, indent=None if ns.command != "explain" else 2) if ns.json else "\n".join(lines))
    return 0


def _txn_table(txns: list[dict[str, Any]]) -> list[str]:
    rows = [("TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState", "TimeoutMs", "Partitions")]
    for t in txns:
        rows.append((t["transactional_id"], str(t["producer_id"]), str(t["epoch"]), t["state"],
                     str(t["timeout_ms"]), ",".join(f"{tp}-{p}" for tp, p in t["partitions"]) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def _hanging_lines(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return ["no hanging transactions"]
    return [f"{h['topic']}-{h['partition']} producer {h['producer_id']} from offset {h['start_offset']} "
            f"(transactional id {h.get('transactional_id') or 'unknown'}): {h['reason']}" for h in rows]


def _txn_live(ns: argparse.Namespace):
    from ..control.durations import DurationError, parse_duration_ms

    control = ns.control
    if ns.command == "explain" and ns.producer_id is not None:
        data = call(control, "GET", f"/v1/producers/{ns.producer_id}/timeline")
        return data, [data["text"]]
    if ns.command == "explain":
        from urllib.parse import quote
        data = call(control, "GET", f"/v1/transactions/{quote(ns.transactional_id, safe='')}/timeline")
        return data, [data["text"]]
    if ns.command == "list":
        data = call(control, "GET", "/v1/transactions")
        return data, _txn_table(data["transactions"])
    if ns.command == "hanging":
        query = ""
        if ns.max_age:
            try:
                max_age = parse_duration_ms(ns.max_age)
            except DurationError as e:
                return _fail(str(e), 2)
            if max_age < 0:
                return _fail(f"--max-age must be >= 0, not {ns.max_age}", 2)
            query = f"?max_age_ms={int(max_age)}"
        data = call(control, "GET", "/v1/transactions/hanging" + query)
        return data, _hanging_lines(data["hanging"])
    if ns.start_offset is None and ns.producer_id is None:
        return _fail("abort needs --start-offset, or --producer-id (and --producer-epoch)")
    body = {"topic": ns.topic, "partition": ns.partition, "start_offset": ns.start_offset,
            "producer_id": ns.producer_id, "producer_epoch": ns.producer_epoch}
    data = call(control, "POST", "/v1/transactions/abort", body)
    return data, [f"aborted producer {data['producer_id']} (epoch {data['producer_epoch']}) in "
                  f"{data['topic']}-{data['partition']}: marker at offset {data['marker_offset']}"]


def _txn_offline(ns: argparse.Namespace):
    from . import txn_offline

    if ns.command == "explain" and ns.producer_id is not None:
        x = txn_offline.producer_timeline(ns.data_dir, ns.producer_id)
        return x.as_dict(), [x.text()]
    if ns.command == "explain":
        x = txn_offline.timeline(ns.data_dir, ns.transactional_id)
        return x.as_dict(), [x.text()]
    if ns.command == "list":
        txns = txn_offline.list_transactions(ns.data_dir)
        return {"transactions": txns}, _txn_table(txns)
    if ns.command == "hanging":
        rows = txn_offline.hanging(ns.data_dir)
        return {"hanging": rows}, _hanging_lines(rows)
    return _fail("abort writes a marker: it needs a running broker (--control HOST:PORT)")
