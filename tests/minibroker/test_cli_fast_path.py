"""The serve command line without argparse (options.plain_serve_args, issue 33's start-up):
where it answers, it answers what argparse's parser answers; everything else goes to argparse."""

from __future__ import annotations

import subprocess
import sys

import pytest

from minibroker.cli.main import _serve_parser
from minibroker.config.options import BY_FLAG, META_FLAGS, OPTIONS, plain_serve_args

TAKEN = [
    [],
    ["--host", "127.0.0.1", "--port", "0", "--data-dir", "/tmp/d", "--ready-file", "/tmp/r",
     "--log-level", "warning"],
    ["--port=9093", "--num-partitions", "3"],
    ["--port", "1", "--port", "2"],  # the last one wins, as in argparse
    ["--port="],
    ["--port=-1"],
    ["--ephemeral=false", "--config", "server.properties"],
    ["--wait-for-config", "/tmp/w", "--host", "::1"],
    ["--host", "a=b"],
]

LEFT_TO_ARGPARSE = [
    ["server.properties"],           # a positional
    ["--port", "1", "x.properties"],
    ["--help"], ["-h"], ["--version"],
    ["--por", "1"],                  # an abbreviation argparse accepts
    ["--port", "-1"],                # argparse's reading of a value like an option
    ["--port"],                      # a missing value: argparse's one-line usage error
    ["--ephemeral"],                 # an optional value
    ["--ephemeral", "true"],
    ["--", "--port"],
    ["--no-such-option", "1"],
]


@pytest.mark.parametrize("argv", TAKEN, ids=str)
def test_what_it_takes_argparse_reads_the_same(argv):
    fast = plain_serve_args(argv)
    assert fast is not None
    assert vars(fast) == vars(_serve_parser().parse_args(argv))


@pytest.mark.parametrize("argv", LEFT_TO_ARGPARSE, ids=str)
def test_the_rest_is_left_to_argparse(argv):
    assert plain_serve_args(argv) is None


def test_it_knows_every_option_of_the_parser_and_no_other():
    actions = [a for a in _serve_parser()._actions if a.option_strings]
    flags = {s for a in actions for s in a.option_strings if s.startswith("--")}
    assert flags - {"--help", "--version"} == set(BY_FLAG) | set(META_FLAGS)
    for o in OPTIONS:
        argv = [f"{o.flag}=v"]
        assert vars(plain_serve_args(argv)) == vars(_serve_parser().parse_args(argv)), o.flag


def test_a_plain_start_does_not_import_argparse(tmp_path):
    # A start that fails its config check after the command line: argparse was never needed.
    code = ("import sys; from minibroker.cli.main import main; "
            "rc = main(['--port', '70000', '--data-dir', sys.argv[1]]); "
            "print(rc, 'argparse' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "d")], capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.split() == ["2", "False"], out
    assert "--port" in out.stderr and "Traceback" not in out.stderr
