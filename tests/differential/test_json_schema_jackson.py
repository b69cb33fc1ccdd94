"""The JSON schema format's canonical and normalized strings against Jackson itself, configured as
Confluent's registry configures it (json-schema-provider's Jackson.java): JacksonCanonical.java
(tests/differential/jackson_json) on the jackson-databind the Java client's jars already bring.
One JVM answers every generated text of the test over stdin; the texts are JSON that Python's
reader accepts, with floats in every notation, big integers, control and non-ASCII characters,
repeated keys and nesting. Without java, javac or the jars the test skips (fails under
MINIBROKER_TEST_REQUIRE_TOOLS)."""
from __future__ import annotations

import json
import select
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker.registry.formats.json_schema_text import read, write
from tests.integration.java_client import (
    JavaToolchain,
    compile_drivers,
    driver_command,
    java_toolchain,
)

SRC_DIR = Path(__file__).resolve().parent / "jackson_json"


@pytest.fixture(scope="module")
def jackson():
    full = java_toolchain()
    jars = [j for j in full.jars if j.name.startswith("jackson-")]
    tc = JavaToolchain(full.java, full.javac, jars)
    classes = compile_drivers(tc, src_dir=SRC_DIR)
    proc = subprocess.Popen(driver_command(tc, classes, "JacksonCanonical", []),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, encoding="utf-8", bufsize=1)

    def ask(text: str) -> dict:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(text) + "\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "JacksonCanonical did not answer within 60 s"
        line = proc.stdout.readline()
        assert line, f"JacksonCanonical exited ({proc.poll()})"
        answer: dict = json.loads(line)
        return answer

    yield ask
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()  # this JVM only, by its PID
        proc.wait(timeout=30)


_numbers = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.builds(lambda i, f, e: f"{i}.{f}{e}", st.integers(-999, 999), st.from_regex(r"[0-9]{1,8}", fullmatch=True),
              st.sampled_from(["", "e3", "E-7", "e+2", "E0", "e-12", "e25"])),
    st.sampled_from(["0.0", "-0.0", "1E+2", "0.0000001", "123456789.000", "1e400", "-5e-3"]),
)
_strings = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_leaves = st.one_of(_numbers, _strings.map(json.dumps),
                    st.sampled_from(["true", "false", "null"]))


def _object(items: list[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{json.dumps(k)} : {v}" for k, v in items) + "}"


_json = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda xs: "[ " + ",\n".join(xs) + " ]"),
        # keys from a small set so that objects repeat keys now and then
        st.lists(st.tuples(st.one_of(st.sampled_from(["type", "a", "b", "$ref", "é", "\t"]),
                                     _strings), inner), max_size=5).map(_object),
    ),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_json)
def test_canonical_and_normalized_strings_are_jacksons(jackson, text):
    answer = jackson(text)
    assert "error" not in answer, (text, answer)
    node = read(text)
    assert write(node) == answer["canonical"], text
    assert write(node, sort_keys=True) == answer["normalized"], text


def test_hand_picked_texts(jackson):
    for text in ['{"minimum": 1.50, "maximum": 1e2, "x": -0.0, "y": 1E-7, "z": 123456789012345678901234567890}',
                 '{"description": "tab\\t nul\\u0000 esc\\u001b quote\\" slash\\/ \\u00e9 \\u2028 \\ud83d\\ude00"}',
                 '{"a": 1, "b": 2, "a": 3}', "true", "[]", '{"z": {"y": {"b": 1, "a": 2}}, "a": []}',
                 # UTF-16 order: U+FB01 sorts after the surrogates of U+1F600
                 '{"\\ufb01": 1, "\\ud83d\\ude00": 2, "a": 3}']:
        answer = jackson(text)
        node = read(text)
        assert (write(node), write(node, sort_keys=True)) == (answer["canonical"], answer["normalized"]), text
