"""The web console in a real headless browser: Debian's chromium driven by Playwright.

The page loads on a broker with no topics, then shows an open transaction and the partition
whose last stable offset it holds back; after the coordinator aborts the transaction by
timeout, the timeline view draws the incident. Screenshots go to the test's tmp dir (the path is
printed), and with MINIBROKER_UPDATE_SCREENSHOTS=1 to docs/ too (docs/explaining-transactions.md shows them): a test
run leaves the checkout as it found it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import pytest

from .clients import create_topic
from .test_txn_support import TXN_BROKER_ARGS, open_transaction, txn_id

DOCS = Path(__file__).resolve().parents[2] / "docs"
UPDATE_DOCS = os.environ.get("MINIBROKER_UPDATE_SCREENSHOTS") == "1"
WAIT_MS = 15_000
VIEWPORT = {"width": 1280, "height": 860}


def _missing(msg: str):
    if os.environ.get("MINIBROKER_TEST_REQUIRE_TOOLS"):
        pytest.fail(msg)
    pytest.skip(msg)


def chromium() -> str:
    """Debian's chromium (tests/run.sh installs it): Playwright drives it, never a download."""
    path = os.environ.get("MINIBROKER_TEST_CHROMIUM") or shutil.which("chromium") or (
        "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if path is None:
        _missing("chromium is not installed (tests/run.sh installs Debian's chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _missing("playwright is not installed (pip install -e '.[test]')")
    return path


# A fenced zombie, as /v1/transactions/{id}/timeline tells it: drawn without a broker's history.
FENCED_FIXTURE = {
    "transactional_id": "orders-tx",
    "events": [
        {"ts": 1_700_000_000_000, "kind": "init", "client_id": "orders-6", "address": "10.0.0.4",
         "producer_id": 7, "epoch": 3},
        {"ts": 1_700_000_000_020, "kind": "add_partitions", "partitions": [["orders", 0], ["orders", 1]]},
        {"ts": 1_700_000_004_000, "kind": "fenced", "by_client_id": "orders-7", "by_address": "10.0.0.5"},
        {"ts": 1_700_000_004_000, "kind": "prepare", "commit": False},
        {"ts": 1_700_000_004_001, "kind": "marker", "topic": "orders", "partition": 0, "offset": 42,
         "commit": False},
        {"ts": 1_700_000_004_001, "kind": "marker", "topic": "orders", "partition": 1, "offset": 17,
         "commit": False},
        {"ts": 1_700_000_004_002, "kind": "complete", "commit": False},
        {"ts": 1_700_000_005_000, "kind": "refused", "api": "EndTxn", "error": "PRODUCER_FENCED"},
    ],
    "story": [], "diagnosis": "Fenced by a new instance (client orders-7, 10.0.0.5)",
}


@contextlib.contextmanager
def console_page(problems: list[str]):
    """A page of Debian's chromium in Playwright; page errors and console errors and warnings
    are added to ``problems`` (a test asserts it stays empty)."""
    path = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, headless=True,
                                     args=["--no-sandbox", "--disable-gpu"], timeout=60_000)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(WAIT_MS)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
                    if m.type in ("error", "warning") else None)
            yield page
        finally:
            browser.close()


def test_the_console_shows_an_open_transaction_and_its_timeline(broker_factory, topic, tmp_path):
    from playwright.sync_api import expect

    b = broker_factory(TXN_BROKER_ARGS + ["--clock", "virtual"], control=True)
    control, bootstrap = b.control.address, b.bootstrap_servers
    DOCS.mkdir(exist_ok=True)
    problems: list[str] = []

    with console_page(problems) as page:
        # a broker with no topics
        page.goto(f"http://{control}/", timeout=WAIT_MS)
        page.wait_for_selector("body[data-loaded=overview]")
        expect(page.locator("#partitions-empty")).to_be_visible()
        expect(page.locator("#open-txns-empty")).to_be_visible()

        # a transaction left open: records produced, not committed
        create_topic(bootstrap, topic, 1)
        tid = txn_id("console")
        producer = open_transaction(bootstrap, tid, topic, [(0, b"a|1"), (0, b"a|2"), (0, b"a|3")],
                                    **{"transaction.timeout.ms": 60_000})
        row = page.locator(f'#partitions tr[data-topic="{topic}"][data-partition="0"]')
        expect(row.locator("td.held")).to_contain_text(tid)  # the LSO is held back by it
        expect(row.locator("td.held")).to_contain_text("3 records")
        expect(page.locator(f'#open-txns tr[data-transactional-id="{tid}"]')).to_contain_text("Ongoing")
        expect(page.locator("#producers")).to_contain_text(tid)
        b.control.advance("45s")  # the age bar turns amber: 45 s of 60 s
        expect(page.locator(f'#open-txns tr[data-transactional-id="{tid}"] .bar.warn')).to_be_visible()
        if UPDATE_DOCS:
            page.screenshot(path=str(DOCS / "console.png"))
        page.screenshot(path=str(tmp_path / "console.png"), full_page=True)

        # the incident: the transaction outlives its timeout and the coordinator aborts it
        b.control.advance("16s")
        from confluent_kafka import KafkaException
        with pytest.raises(KafkaException):
            producer.commit_transaction(10)  # the stalled producer learns it was fenced
        page.goto(f"http://{control}/#/txn/{tid}", timeout=WAIT_MS)
        page.wait_for_selector("body[data-loaded=timeline]")
        svg = page.locator("#tl-picture svg")
        expect(svg.locator(f'.marker.abort[data-partition="{topic}-0"]')).to_have_count(1)
        expect(svg.locator(".incident.timeout_abort text")).to_contain_text("TIMED OUT")
        expect(svg.locator(".span-abort").first).to_be_visible()
        expect(page.locator("#tl-diagnosis")).not_to_be_empty()
        expect(page.locator("#tl-story li").first).to_be_visible()
        if UPDATE_DOCS:
            page.screenshot(path=str(DOCS / "console-timeline.png"))
        page.screenshot(path=str(tmp_path / "console-timeline.png"), full_page=True)

        # back to the overview: the partition is no longer held
        page.click("text=← all transactions")
        expect(row.locator("td.held")).to_have_count(0)
        expect(row).to_be_visible()

        # a fenced zombie's history, drawn from data alone
        drawn = page.evaluate("""(data) => {
            const svg = window.minibrokerConsole.drawTimeline(data, data.events[0].ts + 6000);
            return {html: svg.outerHTML, markers: svg.querySelectorAll('.marker').length,
                    fenced: svg.querySelector('.incident.fenced text').textContent};
        }""", FENCED_FIXTURE)
        assert drawn["markers"] == 2
        assert drawn["fenced"] == "FENCED by client orders-7 (10.0.0.5)"
        assert "PRODUCER_FENCED" in drawn["html"]
    assert problems == []
    assert (DOCS / "console.png").stat().st_size < 1_000_000


# Every text of the timeline's picture against every other: boxes as the browser laid them out.
LAYOUT = """() => {
    const svg = document.querySelector('#tl-picture svg');
    const texts = [...svg.querySelectorAll('text')].filter((t) => t.textContent.trim());
    const boxes = texts.map((t) => { const r = t.getBoundingClientRect();
                                     return {text: t.textContent, l: r.left, r: r.right, t: r.top, b: r.bottom}; });
    const overlaps = [];
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
        const a = boxes[i], b = boxes[j];
        if (Math.min(a.r, b.r) - Math.max(a.l, b.l) > 0.5 && Math.min(a.b, b.b) - Math.max(a.t, b.t) > 0.5)
            overlaps.push(a.text + ' | ' + b.text);
    }
    const outside = boxes.filter((b) => b.l < svg.getBoundingClientRect().left - 0.5 ||
                                        b.r > svg.getBoundingClientRect().right + 0.5).map((b) => b.text);
    return {overlaps, outside, texts: boxes.length,
            ticks: [...svg.querySelectorAll('.tick-label[data-unit]')].map((t) => [t.dataset.unit, t.textContent]),
            breaks: [...svg.querySelectorAll('.break-label')].map((t) => t.textContent),
            events: svg.querySelectorAll('.event').length, markers: svg.querySelectorAll('.marker').length,
            legend: svg.querySelectorAll('.legend').length};
}"""


def _transactions(b, tid: str, topic: str, gap_ms: float, n: int, *, inside: bool) -> None:
    """A producer's InitProducerId and n committed transactions on two partitions, the broker's
    virtual clock moved gap_ms between steps (inside a transaction too, when ``inside``)."""
    from .test_txn_support import produce_sync, txn_producer

    p = txn_producer(b.bootstrap_servers, tid)
    p.init_transactions(20)
    for k in range(n):
        b.control.advance(gap_ms)
        p.begin_transaction()
        produce_sync(p, topic, [(0, b"a|%d" % k), (1, b"b|%d" % k)])
        if inside:
            b.control.advance(gap_ms)
        p.commit_transaction(20)


# (name, gap between steps in ms, transactions, a step inside each, the tick labels' unit)
SCALES = [("50us", 0.01, 3, True, "us"), ("88ms", 14.6, 3, True, "ms"),
          ("30s", 5000, 3, True, "s"), ("2h", 1_200_000, 6, False, "min")]


def test_the_timeline_stays_readable_from_microseconds_to_hours(broker_factory, topic, tmp_path):
    """Transactions whose events span ~50 µs, ~88 ms (19 events), ~30 s and ~2 h on the virtual
    clock: no two texts of the picture overlap, and the ticks are in the span's unit. Then a
    history drawn from data alone: bursts an hour apart, the gaps cut out as breaks."""
    from playwright.sync_api import expect

    b = broker_factory(TXN_BROKER_ARGS + ["--clock", "virtual"], control=True)
    create_topic(b.bootstrap_servers, topic, 2)
    problems: list[str] = []
    with console_page(problems) as page:
        for name, gap, n, inside, unit in SCALES:
            tid = txn_id("scale-" + name)
            _transactions(b, tid, topic, gap, n, inside=inside)
            page.goto(f"http://{b.control.address}/#/txn/{tid}", timeout=WAIT_MS)
            page.wait_for_selector("body[data-loaded=timeline]")
            expect(page.locator("#tl-id")).to_have_text(tid)
            expect(page.locator("#tl-picture svg .marker")).to_have_count(2 * n)
            layout = page.evaluate(LAYOUT)
            shot = tmp_path / f"timeline-{name}.png"
            page.locator("#tl-figure").screenshot(path=str(shot))
            print(f"{name}: {layout['texts']} texts, {layout['events']} decisions, "
                  f"legend {layout['legend']}, ticks {[t for _, t in layout['ticks']]}; screenshot {shot}")
            assert layout["overlaps"] == [] and layout["outside"] == [], (name, layout)
            assert layout["ticks"] and {u for u, _ in layout["ticks"]} == {unit}, (name, layout["ticks"])
            if name == "88ms":
                events = page.evaluate("""(tid) => fetch('/v1/transactions/' + encodeURIComponent(tid) +
                                          '/timeline').then((r) => r.json()).then((d) => d.events)""", tid)
                took_ms = (events[-1]["ts_us"] - events[0]["ts_us"]) / 1000
                assert len(events) >= 19 and 70 <= took_ms <= 100, (len(events), took_ms)
            if name == "2h":
                assert any(t.startswith("+1 h") for _, t in layout["ticks"]), layout["ticks"]

        # bursts of a few ms each, an hour apart: two breaks, each burst drawn at its own scale
        base, events = 1_700_000_000_000, []
        for burst in range(3):
            t = base + burst * 3_600_000
            events += [{"ts": t, "ts_us": t * 1000, "kind": "add_partitions", "partitions": [["orders", 0]]},
                       {"ts": t + 2, "ts_us": (t + 2) * 1000 + 400, "kind": "end_txn", "commit": True},
                       {"ts": t + 3, "ts_us": (t + 3) * 1000, "kind": "prepare", "commit": True},
                       {"ts": t + 4, "ts_us": (t + 4) * 1000, "kind": "marker", "topic": "orders",
                        "partition": 0, "offset": burst * 2, "commit": True},
                       {"ts": t + 5, "ts_us": (t + 5) * 1000, "kind": "complete", "commit": True}]
        page.evaluate("""(data) => document.getElementById('tl-picture').replaceChildren(
            window.minibrokerConsole.drawTimeline(data, data.events[data.events.length - 1].ts))""",
                      {"transactional_id": "bursts", "events": events})
        layout = page.evaluate(LAYOUT)
        page.locator("#tl-figure").screenshot(path=str(tmp_path / "timeline-breaks.png"))
        print(f"breaks: {layout['breaks']}, ticks {[t for _, t in layout['ticks']]}")
        assert layout["overlaps"] == [] and layout["outside"] == [], layout
        assert layout["breaks"] == ["1 h", "1 h"], layout["breaks"]
        assert {u for u, _ in layout["ticks"]} == {"ms"}, layout["ticks"]

        # 40 decisions in 4 ms: too many rows of labels, so numbered points and a list under the axis
        dense = [{"ts": base + i // 10, "ts_us": base * 1000 + i * 100, "kind": "refused", "api": "Produce",
                  "error": "INVALID_TXN_STATE"} for i in range(40)]
        page.evaluate("""(data) => document.getElementById('tl-picture').replaceChildren(
            window.minibrokerConsole.drawTimeline(data, 0))""", {"transactional_id": "dense", "events": dense})
        layout = page.evaluate(LAYOUT)
        page.locator("#tl-figure").screenshot(path=str(tmp_path / "timeline-dense.png"))
        assert layout["overlaps"] == [] and layout["outside"] == [], layout
        assert layout["legend"] == layout["events"] == 40
        assert {u for u, _ in layout["ticks"]} == {"ms"}, layout["ticks"]

        # a transaction begun in a burst and open for 45 s since; and a lone event
        t = base
        burst = [{"ts": t, "ts_us": t * 1000, "kind": "init", "producer_id": 1, "epoch": 0},
                 {"ts": t + 1, "ts_us": t * 1000 + 1500, "kind": "add_partitions",
                  "partitions": [["orders", 0], ["orders", 1]]},
                 {"ts": t + 3, "ts_us": t * 1000 + 3100, "kind": "add_offsets", "group": "billing"}]
        for name, data, now, breaks in [("open", burst, t + 45_000, ["45 s"]), ("one-event", burst[:1], t, [])]:
            page.evaluate("""([data, now]) => document.getElementById('tl-picture').replaceChildren(
                window.minibrokerConsole.drawTimeline(data, now))""", [{"transactional_id": "open", "events": data}, now])
            layout = page.evaluate(LAYOUT)
            assert layout["overlaps"] == [] and layout["outside"] == [], layout
            assert layout["breaks"] == breaks, layout["breaks"]
            page.locator("#tl-figure").screenshot(path=str(tmp_path / f"timeline-{name}.png"))
    assert problems == []
