"""Every structlog event the product code logs is named ``area.event`` (issue 15).

Operators grep and alert on event names, and tests match them: one convention
(``segment.rolled``, ``topic.created``, ``txn.fenced``) keeps them guessable. This walks the
source of the three product packages and fails on any logging call whose event is a string
literal of another shape.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("minibroker", "protocol", "storage")
METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "msg"}
LOGGERS = {"log", "_log", "logger", "_logger"}
EVENT = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")


def _logger_name(node: ast.expr) -> str | None:
    # log.info(...), self._logger.info(...), self.log.info(...), log.bind(...).info(...)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "bind":
        return _logger_name(node.func.value)
    return None


def events() -> list[tuple[str, int, str]]:
    found = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in METHODS and _logger_name(node.func.value) in LOGGERS):
                    continue
                if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                    found.append((str(path.relative_to(ROOT)), node.lineno, node.args[0].value))
    return found


def test_the_walk_finds_the_product_events():
    names = {e for _, _, e in events()}
    # A walk that matched nothing would pass vacuously.
    assert {"segment.rolled", "topic.created", "broker.stopped"} <= names


def test_every_event_is_area_dot_event():
    bad = [f"{path}:{line}: {name!r}" for path, line, name in events() if not EVENT.match(name)]
    assert not bad, "log events not named area.event:\n" + "\n".join(bad)
