"""What `minibroker clock|requests|faults` print, run as a user runs them (the real CLI in a
subprocess, against a real broker's --control-listener): durations as people write them, the
broker's time as an ISO-8601 timestamp, tables with a header and Kafka's error names, a bad
fault rule refused before any broker is contacted."""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys
import time

from .test_txn_support import TXN_BROKER_ARGS, produce_sync


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minibroker", *args], capture_output=True, text=True,
                          timeout=60)


def _utc(ms: int) -> str:
    t = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _ok(r: subprocess.CompletedProcess) -> list[str]:
    assert r.returncode == 0 and r.stderr == "", r
    return r.stdout.splitlines()


SYSTEM = "(system clock: real time, plus every advance)"
VIRTUAL = "(virtual clock: it moves only when advanced)"
RAN = ("transactions aborted: 0, transactional ids expired: 0, producers expired: 0, "
       "segments deleted: 0, delegation tokens expired: 0")


def _clock(control: str) -> dict:
    return json.loads(_ok(_cli("clock", "show", "--json", "--control", control))[0])


def test_clock_speaks_durations_and_dates(broker_factory):
    b = broker_factory(TXN_BROKER_ARGS, control=True)
    control = b.control.address
    [line] = _ok(_cli("clock", "show", "--control", control))
    m = re.fullmatch(r"broker time (\S+) \((\d+) ms since the epoch\), (.*)", line)
    assert m is not None, line
    assert m.group(1) == _utc(int(m.group(2))) and m.group(3) == f"in step with the system clock {SYSTEM}"
    # A system clock's offset is exactly the sum of the advances: the words are exact.
    for duration, said, offset in (("1h", "1h", "1h"), ("90s", "1m 30s", "1h 1m"),
                                   ("250ms", "250 ms", "1h 1m"), ("1500", "1.5 s", "1h 1m")):
        [line] = _ok(_cli("clock", "advance", duration, "--control", control))
        now = _clock(control)
        m = re.fullmatch(r"advanced (.+?): broker time (\S+) \((\d+) ms since the epoch\), (.+?) "
                         r"\((system clock: .*)\); (.*)", line)
        assert m is not None, line
        assert m.group(1) == said, line
        assert m.group(2) == _utc(int(m.group(3))) and int(m.group(3)) <= now["wall_ms"], line
        assert m.group(4) == f"{offset} ahead of the system clock", line
        assert m.group(6) == RAN
    assert _clock(control)["offset_ms"] == 3_600_000 + 90_000 + 250 + 1500
    [line] = _ok(_cli("clock", "show", "--control", control))
    assert line.endswith(f"), 1h 1m ahead of the system clock {SYSTEM}"), line


def test_a_virtual_clock_is_behind_and_never_goes_back(broker_factory):
    b = broker_factory(TXN_BROKER_ARGS, control=True, clock="virtual")
    control = b.control.address
    time.sleep(1.2)  # the virtual clock stands still: the system clock gets ahead of it
    before = _clock(control)
    [line] = _ok(_cli("clock", "show", "--control", control))
    m = re.fullmatch(rf"broker time {re.escape(_utc(before['wall_ms']))} \({before['wall_ms']} ms since "
                     rf"the epoch\), (\d+(?:\.\d+)?) s behind the system clock {re.escape(VIRTUAL)}", line)
    assert m is not None and 1.2 <= float(m.group(1)) < 60, line
    for argv in (["advance", "-5s"], ["advance", "-5s", "--json"], ["advance", "-1"],
                 ["--control", control, "advance", "-90s"]):
        r = _cli("clock", *argv, "--control", control)
        assert r.returncode == 2 and r.stdout == "", r
        assert r.stderr == ("minibroker: error: a clock does not go back: the duration must be >= 0, "
                            f"not {argv[argv.index('advance') + 1]}\n"), r.stderr
    r = _cli("clock", "advance", "soon", "--control", control)
    assert r.returncode == 2 and r.stderr == ("minibroker: error: 'soon' is not a duration "
                                              "(write it as 90s, 1500ms, 2m, 1h, 1m 30s)\n"), r.stderr
    assert _clock(control)["wall_ms"] == before["wall_ms"]  # nothing moved it
    [line] = _ok(_cli("clock", "advance", "1m 30s", "--control", control))
    assert line.startswith(f"advanced 1m 30s: broker time {_utc(before['wall_ms'] + 90_000)} "
                           f"({before['wall_ms'] + 90_000} ms since the epoch), "), line
    assert re.search(r"\), 1m 2\d(\.\d+)?s ahead of the system clock", line), line


def test_requests_have_a_header_and_error_names(broker_factory, topic):
    from confluent_kafka import Producer

    b = broker_factory(TXN_BROKER_ARGS, control=True)
    control = b.control.address
    _ok(_cli("faults", "add", "--api", "Produce", "--action", "error", "--error", "NOT_LEADER_OR_FOLLOWER",
             "--topic", topic, "--control", control))
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "client.id": "cli-out", "retry.backoff.ms": 50})
    produce_sync(p, topic, [(0, b"r|1")])
    lines = _ok(_cli("requests", "--api", "Produce", "--control", control))
    assert lines[0].split() == ["Seq", "Api", "Version", "ClientId", "ClientSoftware", "Connection", "Latency",
                                "Outcome", "Error", "Fault", "Names"], lines
    row = re.compile(r" *(\d+)  Produce +(\d+)  cli-out +confluent-kafka-python +(\d+) +(\d+(?:\.\d+)? (?:µs|ms|s))  "
                     r"answered  (NOT_LEADER_OR_FOLLOWER \(6\)|- +)  (rule 1|- +)  " + re.escape(topic))
    matches = [row.fullmatch(line) for line in lines[1:]]
    assert all(matches), lines
    assert [(m.group(5).strip(), m.group(6).strip()) for m in matches][:2] == \
        [("NOT_LEADER_OR_FOLLOWER (6)", "rule 1"), ("-", "-")], lines
    # Every row is as wide as the header says: the columns line up.
    assert len({line.index("answered") for line in lines[1:]}) == 1
    records = json.loads(_cli("requests", "--api", "Produce", "--json", "--control", control).stdout)
    assert [(r["error_code"], r["error"]) for r in records][:2] == [(6, "NOT_LEADER_OR_FOLLOWER"), (0, "NONE")]
    assert _ok(_cli("requests", "--api", "EndTxn", "--control", control)) == ["no requests recorded that match"]

    counts = _ok(_cli("requests", "--counts", "--control", control))
    assert counts[0].split() == ["Api", "Version", "ClientSoftware", "ClientSoftwareVersion", "Requests"]
    table = json.loads(_cli("requests", "--counts", "--json", "--control", control).stdout)
    produce = next(r for r in table if r["api"] == "Produce")
    expected = re.compile(rf"Produce +{produce['api_version']}  confluent-kafka-python +"
                          rf"{re.escape(produce['client_software_version'])} +{produce['count']}")
    assert sum(1 for line in counts[1:] if expected.fullmatch(line)) == 1, counts
    assert len(counts) == len(table) + 1


def test_a_bad_fault_rule_is_refused_without_a_broker():
    nobody = "127.0.0.1:1"  # nothing listens: had the CLI asked, it would say it cannot reach it
    actions = "error, error-after-apply, drop-response, delay, disconnect, hold, crash, throttle"
    cases = [
        (["--api", "EndTxn", "--action", "explode"], f"action must be one of {actions}, not 'explode'"),
        (["--api", "EndTxn"], f"faults add needs --action (one of {actions})"),
        (["--api", "Nope", "--action", "hold"],
         "unknown API 'Nope' (names as Kafka spells them: EndTxn, Produce, ...)"),
        (["--api", "EndTxn", "--action", "error", "--error", "NOPE"],
         "unknown error 'NOPE' (Kafka's names: CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, ...)"),
        (["--api", "EndTxn", "--action", "delay"], "action delay needs delay_ms"),
        (["--action", "crash", "--point", "somewhere"], "unknown crash point 'somewhere' (points: "
         "before-apply, after-apply, txn.after_prepare, txn.after_first_marker, txn.before_complete, "
         "produce.after_append)"),
    ]
    for argv, message in cases:
        for control in (["--control", nobody], []):
            r = _cli("faults", "add", *argv, *control)
            assert r.returncode == 2 and r.stdout == "", (argv, r)
            assert r.stderr == f"minibroker: error: {message}\n", (argv, r.stderr)
    # A good rule does go to the broker, and says so when none is there.
    r = _cli("faults", "add", "--api", "EndTxn", "--action", "hold", "--control", nobody)
    assert r.returncode == 1 and r.stderr.startswith(f"minibroker: error: cannot reach the control plane at "
                                                     f"{nobody}: "), r


def test_counts_in_the_faults_cli_agree_in_number(broker_factory, tmp_path):
    b = broker_factory(TXN_BROKER_ARGS, control=True)
    control = b.control.address
    [added] = _ok(_cli("faults", "add", "--api", "EndTxn", "--action", "hold", "--control", control))
    assert added.startswith("added rule 1  hold ") and added.endswith("(matched 0, fired 0)"), added
    scenario = tmp_path / "one.json"
    scenario.write_text('{"rules": [{"api": "EndTxn", "action": "disconnect"}]}')
    assert _ok(_cli("faults", "load", str(scenario), "--control", control)) == ["added 1 rule"]
    scenario.write_text('{"rules": [{"api": "EndTxn", "action": "disconnect"}, {"api": "Produce", '
                        '"action": "delay", "delay_ms": 5}]}')
    assert _ok(_cli("faults", "load", str(scenario), "--control", control)) == ["added 2 rules"]
    assert _ok(_cli("faults", "remove", "1", "--control", control)) == ["removed rule 1 (fired 0 times)"]
    assert _ok(_cli("faults", "release", "--control", control)) == ["released 0 requests"]
    assert _ok(_cli("faults", "clear", "--control", control)) == ["removed 3 rules, released 0 held requests"]
    scenario.write_text('{"rules": [{"api": "EndTxn", "action": "explode"}]}')
    r = _cli("faults", "load", str(scenario), "--control", "127.0.0.1:1")
    assert r.returncode == 2 and r.stderr == (f"minibroker: error: --faults '{scenario}': rule 1: action must be "
                                              "one of error, error-after-apply, drop-response, delay, disconnect, "
                                              "hold, crash, throttle, not 'explode'\n"), r.stderr
