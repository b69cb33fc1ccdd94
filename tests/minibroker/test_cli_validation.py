"""Bad configuration is one line naming its source, exit 2, never a traceback (issue 13).

Each case runs ``python -m minibroker`` as a user would, in a scratch working directory and
with no MINIBROKER_*/KAFKA_* variable but the ones under test, bounded by a timeout: a value
that slipped through validation would start a broker, which the timeout turns into a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import minibroker

TIMEOUT = 20


def run(args: list[str], env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    child_env = {k: v for k, v in os.environ.items()
                 if not k.startswith(("MINIBROKER_", "KAFKA_"))}
    child_env.update(env or {})
    try:
        return subprocess.run([sys.executable, "-m", "minibroker", *args], env=child_env, cwd=cwd,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"minibroker {args} env={env} started instead of refusing")


def one_line_error(r: subprocess.CompletedProcess, *needles: str) -> str:
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("minibroker: error: "), lines
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.mark.parametrize("var, value, why", [
    ("MINIBROKER_PORT", "abc", "not an integer"),
    ("MINIBROKER_LOG_LEVEL", "trace", "must be one of debug, info, warning, error"),
    ("MINIBROKER_FSYNC", "sometimes", "'always', 'never' or a number of milliseconds"),
    ("MINIBROKER_NUM_PARTITIONS", "0", "at least 1"),
    ("MINIBROKER_EPHEMERAL", "maybe", "not true or false"),
    ("MINIBROKER_SEGMENT_BYTES", "1e6", "not an integer"),
    ("KAFKA_NUM_PARTITIONS", "0", "at least 1"),
    ("KAFKA_LOG_SEGMENT_BYTES", "13", "at least 14"),
    ("KAFKA_MESSAGE_MAX_BYTES", "-1", "at least 0"),
    ("KAFKA_LOG_DIRS", "/a,/b", "one directory"),
])
def test_bad_environment_variable_is_one_line(tmp_path, var, value, why):
    r = run([], env={var: value}, cwd=tmp_path)
    line = one_line_error(r, why)
    assert line.startswith(f"minibroker: error: {var}={value!r}: "), line
    assert not (tmp_path / "minibroker-data").exists()   # refused before anything started


@pytest.mark.parametrize("args, why", [
    (["--port", "70000"], "between 0 and 65535"),
    (["--port", "-1"], "between 0 and 65535"),
    (["--advertised-port", "65536"], "between 0 and 65535"),
    (["--num-partitions", "0"], "at least 1"),
    (["--segment-bytes", "13"], "at least 14"),
    (["--segment-ms", "0"], "at least 1"),
    (["--retention-ms", "-2"], "-1 (forever)"),
    (["--retention-bytes", "-2"], "at least -1"),
    (["--retention-check-interval-ms", "0"], "at least 1"),
    (["--message-max-bytes", "-1"], "at least 0"),
    (["--max-request-bytes", "0"], "at least 1"),
    (["--queued-max-request-bytes", "0"], "at least 1"),
    (["--scrub-bytes-per-sec", "-1"], "at least 0"),
    (["--transaction-max-timeout-ms", "0"], "at least 1"),
    (["--group-initial-rebalance-delay-ms", "-1"], "at least 0"),
    (["--node-id", "-1"], "at least 0"),
    (["--node-id", "2147483648"], "at most 2147483647"),
    (["--fsync", "0"], "> 0 ms"),
    (["--log-format", "xml"], "console, json"),
])
def test_out_of_range_option_is_one_line(tmp_path, args, why):
    one_line_error(run(args, cwd=tmp_path), args[0], why)
    assert not (tmp_path / "minibroker-data").exists()


def test_every_problem_is_reported_each_on_its_line(tmp_path):
    r = run(["--num-partitions", "0"], env={"MINIBROKER_PORT": "abc", "MINIBROKER_FSYNC": "x"},
            cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 3 and all(x.startswith("minibroker: error: ") for x in lines), lines
    assert "usage" not in r.stderr   # a bad value is not a syntax error: no usage


def test_help_and_version_work_with_a_bad_environment(tmp_path):
    env = {"MINIBROKER_PORT": "abc", "MINIBROKER_LOG_LEVEL": "trace"}
    r = run(["--help"], env=env, cwd=tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    for command in ("serve", "dump-log", "health", "audit", "scrub"):
        assert command in r.stdout
    assert "--wait-for-config" in r.stdout and "MINIBROKER_PORT" in r.stdout
    r = run(["--version"], env=env, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == f"minibroker {minibroker.__version__}"
    assert minibroker.__version__ == "0.1.0"


def test_usage_only_for_usage_errors(tmp_path):
    r = run(["--no-such-option"], cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("usage: minibroker [serve]"), r.stderr
    assert "{dump-log,health,audit,scrub}" in r.stderr
    r = run(["dumplog"], cwd=tmp_path)
    assert r.returncode == 2 and "unknown command 'dumplog'" in r.stderr
    # A problem with the environment, not the syntax: the line, no usage.
    (tmp_path / "f").write_text("x")
    one_line_error(run(["--data-dir", str(tmp_path / "f")], cwd=tmp_path), "not a directory")


def test_data_dir_problems_are_named_before_anything_starts(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    one_line_error(run(["--data-dir", str(afile)], cwd=tmp_path), str(afile),
                   "exists and is not a directory")
    one_line_error(run(["--data-dir", str(afile / "sub")], cwd=tmp_path), "cannot create it")
    one_line_error(run(["--ready-file", str(tmp_path / "no" / "ready")], cwd=tmp_path),
                   "--ready-file", "does not exist")


@pytest.mark.skipif(os.geteuid() != 0, reason="drops to another user: needs root")
def test_data_dir_without_write_permission(tmp_path):
    """As root every directory is writable: the check runs in a child that became nobody, as
    a container user would be against a volume owned by someone else. (A fork, not an exec:
    nobody may not be allowed to run this venv's interpreter.)"""
    import shutil
    import tempfile

    from minibroker.cli.preflight import check_data_dir

    # pytest's own tmp dirs are root's alone (0700): nobody could not even look in them.
    top = Path(tempfile.mkdtemp(prefix="minibroker-preflight-"))
    top.chmod(0o755)
    data = top / "data"
    data.mkdir(mode=0o755)
    unreachable = tmp_path / "data"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(read)
            os.setgid(65534)
            os.setuid(65534)
            lines = [check_data_dir(data) or "ok", check_data_dir(unreachable) or "ok"]
            os.write(write, "\n".join(lines).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        problem = f.read()
    os.waitpid(pid, 0)
    try:
        assert problem.splitlines() == [
            f"--data-dir {str(data)!r}: cannot write in it: Permission denied",
            f"--data-dir {str(unreachable)!r}: cannot reach it: Permission denied"]
        assert check_data_dir(data) is None   # root may
    finally:
        shutil.rmtree(top)


def test_unresolvable_listen_host_is_named(tmp_path):
    one_line_error(run(["--host", "no-such-host.invalid", "--port", "0"], cwd=tmp_path),
                   "listener PLAINTEXT: cannot listen on host 'no-such-host.invalid'")
    one_line_error(run(["--port", "0"], env={"KAFKA_LISTENERS": "PLAINTEXT://bad host:0"},
                       cwd=tmp_path), "cannot listen on host 'bad host'")


def test_bad_properties_file_is_one_line(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("# a comment\nnum.partitions=4\nlog.segment.bytes=10\n")
    one_line_error(run([str(props)], cwd=tmp_path), f"{props}:3: log.segment.bytes='10'", "at least 14")
    one_line_error(run(["--config", str(tmp_path / "missing.properties")], cwd=tmp_path), "no such file")
    props.write_text("listeners=SSL://:9093\n")
    one_line_error(run(["serve", str(props)], cwd=tmp_path), "an SSL listener needs --ssl-certfile")
    props.write_text("listeners=PLAINTEXT://:9092,SECURE://:9093\n"
                     "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL\n")
    one_line_error(run(["serve", str(props)], cwd=tmp_path), "an SSL listener needs --ssl-certfile")
    props.write_text("listeners=PLAINTEXT://:9092,SECURE://:9093\n"
                     "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT\n"
                     "sasl.enabled.mechanisms=GSSAPI\n")
    one_line_error(run(["serve", str(props)], cwd=tmp_path), "--sasl-mechanisms: GSSAPI")
