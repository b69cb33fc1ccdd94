"""The control plane's own edges: bad requests get one JSON line, the CLI one line and an exit
code, and nothing an operator sends stops the broker."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

from .test_txn_support import TXN_BROKER_ARGS


def _raw(address: str, method: str, path: str, body: bytes | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(f"http://{address}{path}", data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _cli(*args: str, control: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minibroker", *args, "--control", control],
                          capture_output=True, text=True, timeout=60)


def test_bad_requests_are_one_json_line(broker_factory):
    b = broker_factory(TXN_BROKER_ARGS, control=True)
    address = b.control.address
    cases = [
        ("POST", "/v1/faults", b"{not json", 400, "not JSON"),
        ("POST", "/v1/faults", b"[]", 400, "post a rule"),
        ("POST", "/v1/faults", json.dumps({"rules": [{"api": "EndTxn", "action": "hold"},
                                                      {"api": "EndTxn", "action": "nope"}]}).encode(),
         400, "rule 2: action must be one of"),
        ("DELETE", "/v1/faults/99", None, 404, "no fault rule 99"),
        ("DELETE", "/v1/faults/x", None, 404, "no such rule"),
        ("POST", "/v1/clock/advance", b'{"duration": "-5s"}', 400, "a clock does not go back"),
        ("POST", "/v1/clock/advance", b'{"duration": "soon"}', 400, "is not a duration"),
        ("POST", "/v1/clock/advance", b'{"ms": -1}', 400, "does not go back"),
        ("POST", "/v1/clock/advance", b'{}', 400, "duration"),
        ("GET", "/v1/requests?api=Nope", None, 400, "unknown API"),
        ("GET", "/v1/requests?limit=x", None, 400, "must be integers"),
        ("GET", "/v1/nowhere", None, 404, "Not Found"),
    ]
    for method, path, body, status, words in cases:
        got, answer = _raw(address, method, path, body)
        assert got == status and words in answer["error"] and "\n" not in answer["error"], (path, got, answer)
    assert b.control.faults() == []  # the half-bad batch added nothing
    assert b.running and "Traceback" not in b.log_text()


def test_the_cli(broker_factory):
    b = broker_factory(TXN_BROKER_ARGS, control=True)
    control = b.control.address
    r = _cli("faults", "add", "--api", "EndTxn", "--action", "error", "--error", "CONCURRENT_TRANSACTIONS",
             "--count", "3", control=control)
    assert r.returncode == 0 and r.stdout.startswith("added rule 1"), r
    r = _cli("faults", "list", "--json", control=control)
    assert json.loads(r.stdout)[0]["error"] == "CONCURRENT_TRANSACTIONS"
    # refused by the CLI itself, with the server's rule parser (test_cli_output.py has more)
    r = _cli("faults", "add", "--api", "EndTxn", "--action", "error", "--error", "NOPE", control=control)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "unknown error 'NOPE'" in r.stderr, r
    r = _cli("clock", "advance", "90s", control=control)
    assert r.returncode == 0 and r.stdout.startswith("advanced 1m 30s: "), r
    r = _cli("clock", "advance", "soon", control=control)
    assert r.returncode == 2 and "is not a duration" in r.stderr, r
    r = _cli("requests", "--counts", control=control)
    assert r.returncode == 0, r
    r = _cli("faults", "clear", control=control)
    assert r.returncode == 0 and r.stdout == "removed 1 rule, released 0 held requests\n", r
    r = _cli("faults", "list", control="127.0.0.1:1")
    assert r.returncode == 1 and "cannot reach the control plane" in r.stderr and r.stderr.count("\n") == 1, r


def test_a_bad_faults_file_is_one_line_at_start(tmp_path):
    bad = tmp_path / "faults.json"
    bad.write_text('{"rules": [{"api": "EndTxn", "action": "error"}]}')
    r = subprocess.run([sys.executable, "-m", "minibroker", "--ephemeral", "--port", "0", "--faults", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r
    assert r.stderr.strip() == (f"minibroker: error: --faults '{bad}': rule 1: action error needs an error "
                                "(a Kafka error name or code)"), r.stderr
