"""The console's share-group page in a real headless browser (Debian's chromium, Playwright),
served by a real broker process.

The broker runs its share coordinator with no share group yet: the overview shows the empty
table and no note. A story with a lock expiry and a delivery limit takes minutes of real time, so
the share answers are the control plane's own computation (control/share_views.py over a
SharePartition driven here) served through Playwright's request routing: the page's drawing of
in-flight records, stories and diagnoses is checked on the exact JSON the routes give. Then a real
share consumer reads through the broker and its group appears on the overview from the broker's
own routes."""

from __future__ import annotations

import json
from types import SimpleNamespace

from minibroker.control import share_views
from minibroker.coordinator.share.history import ShareHistory
from minibroker.coordinator.share.partition import AckBatch, LogBatch, LogRead, ShareConfig, SharePartition

from .test_console import WAIT_MS, console_page

T = 1_700_000_000_000
LOCK = 30_000


def _answers(tmp_path) -> tuple[dict, dict]:
    hist = ShareHistory(tmp_path)
    hist.open(T - 1000)
    sp = SharePartition("readers/eu", "orders", 0, ShareConfig(delivery_count_limit=2))

    def keep(events):
        hist.record("readers/eu", "orders", 0, events, delivery_limit=2)

    read = LogRead([LogBatch(0, 9)])
    keep(sp.acquire("A", read, max_records=500, batch_size=500, now_ms=T).events)
    keep(sp.expire(T + LOCK).events)
    keep(sp.acquire("B", read, max_records=500, batch_size=500, now_ms=T + LOCK + 1000).events)
    out = sp.acknowledge("B", [AckBatch(0, 4, (1,)), AckBatch(5, 8, (2,))], T + LOCK + 2000)
    keep(out.events)
    hist.close()
    # what share_views reads of a broker: its lookups and its history
    broker = SimpleNamespace(share_history=hist, share_groups=lambda: ["readers/eu"],
                             share_partition=lambda g, t, p: sp if (g, t, p) == ("readers/eu", "orders", 0) else None,
                             topics=lambda: [SimpleNamespace(name="orders", partitions=1)],
                             get_log=lambda t, p: SimpleNamespace(closed=False))
    return share_views.groups(broker), share_views.partition(broker, "readers/eu", "orders", 0)


def test_the_share_page_tells_each_record(broker_factory, tmp_path):
    from playwright.sync_api import expect

    b = broker_factory(["--clock", "virtual"], control=True)
    control = b.control.address
    groups, detail = _answers(tmp_path)
    problems: list[str] = []
    with console_page(problems) as page:
        page.goto(f"http://{control}/", timeout=WAIT_MS)
        page.wait_for_selector("body[data-loaded=overview]")
        expect(page.locator("#share-note")).to_be_hidden()  # served: nothing to excuse
        expect(page.locator("#share-empty")).to_be_visible()

        page.route("**/v1/share/groups", lambda route: route.fulfill(
            status=200, content_type="application/json", body=json.dumps(groups)))
        page.route("**/v1/share/readers%2Feu/orders/0", lambda route: route.fulfill(
            status=200, content_type="application/json", body=json.dumps(detail)))
        row = page.locator('#share-partitions tr[data-group="readers/eu"][data-partition="0"]')
        expect(row).to_contain_text("orders-0")
        expect(row.locator("td.redelivered")).to_have_text("10")
        expect(page.locator("#share-note")).to_be_hidden()

        row.locator("text=explain").click()
        page.wait_for_selector("body[data-loaded=share]")
        expect(page.locator("#sh-title")).to_have_text("readers/eu · orders-0")
        held = page.locator('#sh-in-flight tr[data-state="ACQUIRED"]')
        expect(held).to_contain_text("offset 9")
        expect(held).to_contain_text("2 of 2")
        released = page.locator('.share-record[data-first="5"]')
        expect(released.locator("h4")).to_have_text("offsets 5–8 · ARCHIVED · delivered 2 times")
        expect(released.locator("ol li")).to_have_count(4)
        expect(released.locator(".diagnosis.bad")).to_contain_text("Archived: delivery limit 2 reached")
        accepted = page.locator('.share-record[data-first="0"] .diagnosis')
        expect(accepted).to_contain_text("Accepted by member B on delivery 2 of 2")
        expect(page.locator("#sh-summary")).to_have_text(detail["summary"])
        page.screenshot(path=str(tmp_path / "console-share.png"), full_page=True)
        print(f"screenshot: {tmp_path / 'console-share.png'}")

        page.unroute("**/v1/share/readers%2Feu/orders/0")
        page.goto(f"http://{control}/#/share/nobody/orders/0", timeout=WAIT_MS)
        expect(page.locator("#sh-summary")).to_have_text("No share history and no live state for this partition.")
        # a real share consumer through the broker: its group is on the overview, from the
        # broker's own /v1/share/groups
        page.unroute("**/v1/share/groups")
        from .test_share_groups import _consumer, _group_configs, _poll_until, _produce, _topic
        bs = b.bootstrap_servers
        topic = _topic(bs, partitions=1)
        _group_configs(bs, "real-readers", share_auto_offset_reset="earliest")
        _produce(bs, topic, 5, partitions=1)
        c = _consumer(bs, "real-readers", topic)
        try:
            got = []
            for _ in range(40):  # the broker's clock is virtual: the assignment interval passes
                b.control.advance("1s")  # only when it is moved
                got += _poll_until([c], 5 - len(got), 0.5)
                if len(got) >= 5:
                    break
            assert len(got) == 5
            c.commit_sync(15)
        finally:
            c.close()
        page.goto(f"http://{control}/", timeout=WAIT_MS)
        page.wait_for_selector("body[data-loaded=overview]")
        real = page.locator('#share-partitions tr[data-group="real-readers"][data-partition="0"]')
        expect(real).to_contain_text(f"{topic}-0")
    # the 404 of the unknown partition is an answer the page expects, not an error
    assert [p for p in problems if "404" not in p] == [], problems
