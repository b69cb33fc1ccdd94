"""The documentation cannot drift: README.md and docs/*.md are checked as a reader uses them.

1. Every relative link resolves: the file exists, and a ``#anchor`` (into a Markdown file, or
   into the same page) names a heading there, spelled as GitHub generates heading anchors.
2. Every snippet marked runnable runs against a real broker started here. The marker is an
   HTML comment on the line right before the opening fence (GitHub does not render it)::

       <!-- runnable -->
       ```sh
       kcat -L -b localhost:9092
       ```

   ``sh``/``bash`` fences run with ``bash -e`` (``minibroker`` and ``python3`` on the PATH are this
   checkout's venv's), ``python`` fences with this interpreter, ``java`` fences (a whole program,
   its main class first) as a single-file source launch with the kafka-clients jars on the
   classpath; each in a fresh temporary directory with a 60 s timeout. ``localhost:9092`` (and
   ``127.0.0.1:9092``) in the snippet become the test broker's address, ``127.0.0.1:9644``
   (``localhost:9644``) its control listener's (it runs with one, as ``--control-listener
   127.0.0.1:9644`` would); nothing else is changed, so a snippet that passes here works as
   printed against a broker started as the page says. A snippet fails on a non-zero exit; write
   the check into it (an ``assert``, ``grep -q``) when its output is what matters. A marked fence
   in any other language fails the test, so the marker always means "this runs".
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from minibroker.testing import MiniBroker

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARKER = "<!-- runnable -->"
RUNNERS = {"sh": "bash", "bash": "bash", "shell": "bash", "python": "python", "java": "java"}
SNIPPET_TIMEOUT = 60.0

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def _prose_lines(text: str):
    """(line number, line) outside fenced code blocks."""
    in_fence = False
    for no, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            yield no, line


def _strip_inline(text: str) -> str:
    """A heading's text as GitHub renders it: links by their text, no code ticks or emphasis."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("`", "").replace("**", "").replace("__", "")


def github_slug(heading: str) -> str:
    """GitHub's anchor of a heading (without the -1, -2 of repeats): lower case, punctuation
    dropped (letters, digits, marks, '-', '_' and spaces kept), spaces become hyphens."""
    out = []
    for ch in _strip_inline(heading).strip().lower():
        cat = unicodedata.category(ch)
        if ch in "-_" or cat[0] in "LNM":
            out.append(ch)
        elif ch == " ":
            out.append("-")
    return "".join(out)


def anchors(path: Path) -> set[str]:
    text = path.read_text()
    seen: dict[str, int] = {}
    result: set[str] = set()
    for _, line in _prose_lines(text):
        m = HEADING.match(line)
        if m:
            slug = github_slug(m.group(2))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            result.add(slug if n == 0 else f"{slug}-{n}")
        result.update(HTML_ANCHOR.findall(line))
    return result


def _code_spans_removed(line: str) -> str:
    return re.sub(r"`[^`]*`", "", line)


def links(path: Path):
    for no, line in _prose_lines(path.read_text()):
        for m in LINK.finditer(_code_spans_removed(line)):
            yield no, m.group(1)


def test_slug_matches_github():
    # Headings of these pages, and the anchors GitHub gives them.
    assert github_slug("Kafka's configuration names") == "kafkas-configuration-names"
    assert github_slug("Explaining transactions: `minibroker txn explain`") == \
        "explaining-transactions-minibroker-txn-explain"
    assert github_slug("What the broker checks on disk, and when") == "what-the-broker-checks-on-disk-and-when"
    assert github_slug("Client metrics (KIP-714 telemetry)") == "client-metrics-kip-714-telemetry"
    assert github_slug("SASL: PLAIN, SCRAM and OAUTHBEARER") == "sasl-plain-scram-and-oauthbearer"
    assert github_slug("Testing — the bad days") == "testing--the-bad-days"


def test_every_page_is_in_the_index():
    index = (REPO / "docs" / "index.md").read_text()
    linked = {t.split("#")[0] for _, t in links(REPO / "docs" / "index.md")}
    missing = [p.name for p in PAGES[1:] if p.name != "index.md" and p.name not in linked]
    assert not missing, f"docs/index.md does not link {missing}"
    assert index


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_links_resolve(page: Path):
    problems = []
    for no, target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        where = f"{page.relative_to(REPO)}:{no}: {target}"
        if not dest.exists():
            problems.append(f"{where}: no such file")
            continue
        if REPO not in dest.parents and dest != REPO:
            problems.append(f"{where}: outside the repository")
            continue
        if anchor:
            if dest.suffix != ".md":
                problems.append(f"{where}: an anchor into a file that is not Markdown")
            elif anchor not in anchors(dest):
                problems.append(f"{where}: no heading with anchor #{anchor} in {dest.relative_to(REPO)}")
    assert not problems, "\n".join(problems)


def runnable_snippets():
    """(id, language, code) of every fence right after the marker."""
    found = []
    for page in PAGES:
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.strip() != MARKER:
                continue
            rel = page.relative_to(REPO)
            opening = lines[i + 1] if i + 1 < len(lines) else ""
            m = re.match(r"^```(\w*)\s*$", opening)
            assert m, f"{rel}:{i + 1}: {MARKER} is not followed by a code fence"
            end = next((j for j in range(i + 2, len(lines)) if lines[j].startswith("```")), None)
            assert end is not None, f"{rel}:{i + 2}: the fence is never closed"
            found.append(pytest.param(m.group(1), "\n".join(lines[i + 2:end]) + "\n", id=f"{rel}:{i + 2}"))
    return found


SNIPPETS = runnable_snippets()


def test_the_readme_tour_runs():
    """The tour's snippets are marked: kcat, confluent-kafka, a transaction read back read_committed."""
    readme = [p for p in SNIPPETS if p.id.startswith("README.md:")]
    code = "".join(p.values[1] for p in readme)
    assert "kcat" in code
    assert "from confluent_kafka" in code
    assert "commit_transaction" in code and "read_committed" in code
    assert len(readme) >= 3


@pytest.fixture(scope="module")
def docs_broker():
    # The defaults a reader's `minibroker` has, except a free port and a fresh data dir.
    broker = MiniBroker(name="docs", control=True, group_initial_rebalance_delay_ms=None)
    with broker:
        yield broker


@pytest.mark.parametrize("lang, code", SNIPPETS)
def test_runnable_snippet(lang: str, code: str, docs_broker: MiniBroker, tmp_path: Path):
    runner = RUNNERS.get(lang)
    assert runner, f"a snippet marked runnable must be one of {sorted(RUNNERS)}, not {lang!r}"
    if runner == "bash" and re.search(r"^\s*kcat\b|\|\s*kcat\b", code, re.M):
        from tests.integration.clients import require_tool
        require_tool("kcat")
    address = docs_broker.bootstrap_servers
    code = code.replace("localhost:9092", address).replace("127.0.0.1:9092", address)
    control = f"127.0.0.1:{docs_broker.control_port}"
    code = code.replace("127.0.0.1:9644", control).replace("localhost:9644", control)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIBROKER_", "KAFKA_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if runner == "bash":
        argv = ["bash", "-e", "-c", code]
    elif runner == "python":
        argv = [sys.executable, "-c", code]
    else:
        from tests.integration.java_client import java_toolchain
        tc = java_toolchain()
        # A single-file program runs its first class, whatever the file's name.
        (tmp_path / "Snippet.java").write_text(code)
        argv = [tc.java, "-cp", os.pathsep.join(str(j) for j in tc.jars), "Snippet.java"]
    try:
        r = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=SNIPPET_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the snippet did not finish in {SNIPPET_TIMEOUT} s:\n{code}\nstdout: {e.stdout}\nstderr: {e.stderr}")
    assert r.returncode == 0, f"exit {r.returncode}\n--- snippet\n{code}--- stdout\n{r.stdout}--- stderr\n{r.stderr}"


# -- the API table and "What is not supported" stay true to the code ------------------------

COMPAT = REPO / "docs" / "clients-and-compatibility.md"
# Kafka 4.4 APIs that only controllers or brokers send each other: "no controller quorum" covers them.
INTER_BROKER = {"LeaderAndIsr", "StopReplica", "UpdateMetadata", "ControlledShutdown", "UnregisterBroker",
                "AddRaftVoter", "RemoveRaftVoter", "UnregisterController", "InitializeShareGroupState",
                "ReadShareGroupState", "WriteShareGroupState", "DeleteShareGroupState",
                "ReadShareGroupStateSummary", "StreamsGroupTopologyDescriptionUpdate"}


def _section(text: str, heading: str) -> str:
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def _served() -> dict[str, tuple[int, int]]:
    from minibroker.config.served_apis import SERVED, TELEMETRY
    from minibroker_protocol.api_keys import ApiKey
    return {ApiKey(k).name: (lo, hi) for k, lo, hi in SERVED + TELEMETRY}


def _kafka_44() -> dict[str, tuple[int, int]]:
    """Kafka 4.4's broker APIs by name, from the generated release table (``key: (lo, hi),  # Name``)."""
    from minibroker.config import kafka_releases
    source = Path(kafka_releases.__file__).read_text()
    block = source[source.index('"4.4": ('):]
    block = block[:block.index("}),")]
    return {name: (int(lo), int(hi)) for lo, hi, name in re.findall(r"\d+: \((\d+), (-?\d+)\),  # (\w+)", block)
            if int(hi) >= 0}


def test_the_api_table_is_what_is_served():
    documented: dict[str, tuple[int, int]] = {}
    for names, versions in re.findall(r"^\| ([A-Z][A-Za-z /]+?) \| ([0-9–/ ]+) \|",
                                      _section(COMPAT.read_text(), "What is supported"), re.M):
        ns = [n.strip() for n in names.split("/")]
        vs = [v.strip() for v in versions.split("/")]
        for name, v in zip(ns, vs if len(vs) == len(ns) else vs * len(ns)):
            lo, _, hi = v.partition("–")
            documented[name] = (int(lo), int(hi or lo))
    assert documented == _served()


def test_what_is_not_supported_names_every_missing_api():
    section = _section(COMPAT.read_text(), "What is not supported")
    served, kafka = _served(), _kafka_44()
    assert len(kafka) > 60 and "Produce" in kafka, "the 4.4 release table was not read"
    assert "KRaft controller APIs" in section
    missing = sorted(n for n in kafka if n not in served and n not in INTER_BROKER and n not in section)
    assert not missing, f"Kafka 4.4 serves {missing}; minibroker does not, and the section does not say so"
    older = sorted(n for n, (_, hi) in served.items() if n in kafka and hi < kafka[n][1]
                   and f"{n} ({hi}" not in section)
    assert not older, f"{older} stop below Kafka 4.4's newest version; the section does not say so"
