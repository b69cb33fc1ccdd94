"""The option table of docs/configuration.md names every option `minibroker --help` has, and no other."""

import argparse
import re
from pathlib import Path

from minibroker.config.options import add_serve_options

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_option_table_matches_the_parser():
    p = argparse.ArgumentParser()
    add_serve_options(p)
    options = {s for a in p._actions for s in a.option_strings if s.startswith("--") and s != "--help"}
    table = set(re.findall(r"^\| `(--[a-z-]+)`", PAGE.read_text(), re.M))
    assert table == options
