"""JSON text as Confluent's registry reads and writes it: Jackson's tree (json-schema-provider's
jackson/Jackson.java: exact BigDecimals for floats, non-numeric numbers allowed) and its compact
writer."""
from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

# Jackson's escapes (com.fasterxml.jackson.core.io.CharTypes): the short forms for these five,
# \\u00XX with upper-case hex for the other control characters; nothing else is escaped.
_ESCAPE = re.compile(r'[\x00-\x1f"\\]')
_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
          "\r": "\\r"}


def _escape(m: re.Match[str]) -> str:
    c = m.group(0)
    return _SHORT.get(c) or f"\\u{ord(c):04X}"


def _string(s: str) -> str:
    return '"' + _ESCAPE.sub(_escape, s) + '"'


def _number(d: Decimal) -> str:
    # Java's BigDecimal.toString() and Python's str(Decimal) follow the same rule (the General
    # Decimal Arithmetic "to-scientific-string"); BigDecimal has no negative zero.
    if d.is_zero() and d.is_signed():
        d = -d
    return str(d)


def write(node: Any, sort_keys: bool = False) -> str:
    """``node`` as Jackson's ``ObjectMapper.writeValueAsString`` writes a ``JsonNode``."""
    parts: list[str] = []
    _write(node, parts, sort_keys)
    return "".join(parts)


def _utf16_key(item: tuple[str, Any]) -> bytes:
    return item[0].encode("utf-16-be", "surrogatepass")


def _write(node: Any, out: list[str], sort_keys: bool) -> None:
    if isinstance(node, dict):
        out.append("{")
        # Java's TreeMap orders String keys by UTF-16 code unit, which UTF-16BE bytes keep
        # (a code point order would put U+E000..U+FFFF after the astral planes' surrogates).
        items = sorted(node.items(), key=_utf16_key) if sort_keys else node.items()
        for i, (k, v) in enumerate(items):
            if i:
                out.append(",")
            out.append(_string(k))
            out.append(":")
            _write(v, out, sort_keys)
        out.append("}")
    elif isinstance(node, list):
        out.append("[")
        for i, v in enumerate(node):
            if i:
                out.append(",")
            _write(v, out, sort_keys)
        out.append("]")
    elif isinstance(node, str):
        out.append(_string(node))
    elif node is True:
        out.append("true")
    elif node is False:
        out.append("false")
    elif node is None:
        out.append("null")
    elif isinstance(node, Decimal):
        out.append(_number(node))
    elif isinstance(node, float):  # NaN and the infinities (ALLOW_NON_NUMERIC_NUMBERS)
        out.append("NaN" if node != node else ("Infinity" if node > 0 else "-Infinity"))
    else:
        out.append(str(node))


def _constant(name: str) -> float:
    return float(name)


def read(text: str) -> Any:
    """Parse as Jackson reads a tree: floats exact, a repeated key's last value kept in the
    place of its first, NaN and Infinity accepted."""
    return json.loads(text, parse_float=Decimal, parse_constant=_constant)


