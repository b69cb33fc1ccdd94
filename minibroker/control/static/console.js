// The minibroker console: plain DOM and fetch, polling the control plane about once a second.
// Every value from the broker goes into the page as text (textContent), never as HTML: topic
// names and transactional ids are whatever clients chose.
"use strict";

(function () {
  const POLL_MS = 1000;
  const SVG_NS = "http://www.w3.org/2000/svg";
  const OPEN_STATES = new Set(["Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"]);

  const state = { showInternal: false, timer: null, busy: false, unfolded: {} };

  // -- small helpers ------------------------------------------------------------------------
  function $(id) { return document.getElementById(id); }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined) continue;
      if (k === "class") node.className = v;
      else if (k === "dataset") Object.assign(node.dataset, v);
      else node.setAttribute(k, v);
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      node.append(c instanceof Node ? c : String(c));
    }
    return node;
  }

  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== null && v !== undefined) node.setAttribute(k, v);
    }
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function td(value, cls) { return el("td", { class: cls }, value === null || value === undefined ? "–" : value); }
  function num(value) { return td(value === null || value === undefined ? null : Number(value).toLocaleString("en"), "num"); }

  function bytes(n) {
    if (n < 1024) return n + " B";
    const units = ["KiB", "MiB", "GiB", "TiB"];
    let v = n / 1024, i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return v.toFixed(v < 10 ? 1 : 0) + " " + units[i];
  }

  function seconds(ms) {
    if (ms === null || ms === undefined) return "–";
    const s = ms / 1000;
    if (Math.abs(s) < 120) return (Math.round(s * 10) / 10) + " s";
    if (Math.abs(s) < 7200) return (Math.round(s / 6) / 10) + " min";
    return (Math.round(s / 360) / 10) + " h";
  }

  function times(n) { return n === 1 ? "once" : n + " times"; }

  function pad(n, w) { return String(n).padStart(w || 2, "0"); }
  function clockTime(ms) {
    if (ms === null || ms === undefined || ms < 0) return "–";
    const d = new Date(ms);
    return pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + "." + pad(d.getMilliseconds(), 3);
  }

  function timelineHref(tid) { return "#/txn/" + encodeURIComponent(tid); }
  function txnLink(tid) {
    if (tid === null || tid === undefined) return document.createTextNode("–");
    return el("a", { href: timelineHref(tid), class: "txn-link" }, tid);
  }

  function fill(tbody, rows, emptyId) {
    tbody.replaceChildren(...rows);
    const empty = $(emptyId);
    if (empty) empty.hidden = rows.length > 0;
  }

  async function getJSON(path) {
    const resp = await fetch(path, { cache: "no-store" });
    let body = null;
    try { body = await resp.json(); } catch (e) { body = null; }
    return { ok: resp.ok, status: resp.status, body: body };
  }

  function setStatus(text, down) {
    const s = $("status");
    s.textContent = text;
    s.classList.toggle("down", !!down);
  }

  // -- the overview ---------------------------------------------------------------------------
  function renderHeader(ov, now) {
    $("broker-info").textContent = "node " + ov.node_id + " · cluster " + ov.cluster_id;
    $("clock").textContent = "broker clock " + clockTime(now);
  }

  function renderPartitions(parts) {
    const rows = [];
    for (const p of parts) {
      if (p.internal && !state.showInternal) continue;
      const held = p.held_by;
      let heldCell;
      if (held) {
        const who = held.transactional_id !== null && held.transactional_id !== undefined
          ? txnLink(held.transactional_id)
          : document.createTextNode("producer " + held.producer_id);
        heldCell = el("td", { class: "held" }, who,
          el("span", { class: "records" }, "(" + p.lso_lag + " records from offset " + held.first_offset + ")"));
      } else {
        heldCell = td(null);
      }
      rows.push(el("tr", { class: p.internal ? "internal" : null,
                           dataset: { topic: p.topic, partition: String(p.partition) } },
        td(p.topic), num(p.partition), num(p.log_start_offset), num(p.high_watermark),
        num(p.last_stable_offset), heldCell, td(bytes(p.size_bytes), "num"), num(p.segments),
        num(p.producers.length)));
    }
    fill($("partitions").tBodies[0], rows, "partitions-empty");
  }

  function renderProducers(parts) {
    const rows = [];
    for (const p of parts) {
      if (p.internal && !state.showInternal) continue;
      for (const pr of p.producers) {
        rows.push(el("tr", {},
          td(p.topic + "-" + p.partition), num(pr.producer_id), num(pr.epoch),
          el("td", {}, txnLink(pr.transactional_id)), num(pr.last_sequence), num(pr.last_offset),
          td(clockTime(pr.last_timestamp)),
          td(pr.txn_first_offset >= 0 ? "from offset " + pr.txn_first_offset : null)));
      }
    }
    fill($("producers").tBodies[0], rows, "producers-empty");
  }

  function ageBar(t) {
    const ratio = t.timeout_ms > 0 ? t.age_ms / t.timeout_ms : 0;
    const bar = el("div", { class: "bar" + (ratio >= 1 ? " over" : ratio >= 0.75 ? " warn" : ""),
                            title: Math.round(ratio * 100) + "% of transaction.timeout.ms" });
    const fillDiv = el("div", { class: "fill" });
    fillDiv.style.width = Math.min(100, Math.max(0, ratio * 100)).toFixed(1) + "%";
    bar.append(fillDiv, el("span", { class: "label" }, seconds(t.age_ms) + " of " + seconds(t.timeout_ms)));
    return bar;
  }

  function renderTransactions(data) {
    const note = $("txns-unavailable");
    if (!data) {
      note.hidden = false;
      note.textContent = "The broker does not answer /v1/transactions.";
      fill($("open-txns").tBodies[0], [], "open-txns-empty");
      fill($("txn-ids").tBodies[0], [], "txn-ids-empty");
      return;
    }
    note.hidden = true;
    const txns = data.transactions || [];
    const open = txns.filter((t) => t.age_ms !== null && t.age_ms !== undefined && OPEN_STATES.has(t.state))
      .sort((a, b) => b.age_ms - a.age_ms);
    fill($("open-txns").tBodies[0], open.map((t) => el("tr", { dataset: { transactionalId: t.transactional_id } },
      el("td", {}, txnLink(t.transactional_id)), num(t.producer_id), num(t.epoch), td(t.state),
      td((t.partitions || []).map((tp) => tp[0] + "-" + tp[1]).join(", ") || null),
      el("td", {}, ageBar(t)))), "open-txns-empty");
    fill($("txn-ids").tBodies[0], txns.map((t) => el("tr", { dataset: { transactionalId: t.transactional_id } },
      el("td", {}, txnLink(t.transactional_id)), td(t.state), num(t.producer_id), num(t.epoch),
      td(seconds(t.timeout_ms), "num"), td(clockTime(t.last_update_ms)),
      el("td", {}, el("a", { href: timelineHref(t.transactional_id) }, "timeline")))), "txn-ids-empty");
  }

  function renderGroups(groups) {
    const boxes = [];
    for (const g of groups) {
      const box = el("div", { class: "group", dataset: { group: g.group_id } });
      box.append(el("div", {},
        el("span", { class: "title" }, g.group_id),
        el("span", { class: "tag" }, g.type === "consumer" ? "consumer (KIP-848)" : "classic"),
        el("span", { class: "meta" }, g.state + " · epoch " + g.epoch + " · " + g.members.length +
          " member(s) · lag " + g.lag)));
      if (g.members.length) {
        box.append(el("div", { class: "members" }, "members: " + g.members.map((m) => {
          const where = (m.client_id || "?") + "@" + (m.client_host || "?");
          const parts = m.assigned ? " [" + m.assigned.map((tp) => tp[0] + "-" + tp[1]).join(", ") + "]" : "";
          return where + parts;
        }).join("; ")));
      }
      if (g.offsets.length) {
        const table = el("table", {}, el("thead", {}, el("tr", {},
          el("th", {}, "Partition"), el("th", { class: "num" }, "Committed"),
          el("th", { class: "num" }, "Last stable"), el("th", { class: "num" }, "High watermark"),
          el("th", { class: "num" }, "Lag"), el("th", {}, ""))));
        const body = el("tbody");
        for (const o of g.offsets) {
          body.append(el("tr", { dataset: { topic: o.topic, partition: String(o.partition) } },
            td(o.topic + "-" + o.partition), num(o.committed), num(o.last_stable_offset),
            num(o.high_watermark), num(o.lag),
            el("td", {}, o.pending_transaction ? el("span", { class: "tag" }, "transactional commit pending") : "")));
        }
        table.append(body);
        box.append(table);
      } else {
        box.append(el("p", { class: "empty" }, "No committed offsets."));
      }
      boxes.push(box);
    }
    $("groups").replaceChildren(...boxes);
    $("groups-empty").hidden = boxes.length > 0;
  }

  function metricValue(m) {
    if (m.kind === "histogram" || m.kind === "summary" || m.kind === "exponential_histogram") {
      return "count " + m.count + (m.value !== null && m.value !== undefined ? ", sum " + m.value : "");
    }
    return m.value === null || m.value === undefined ? "–" : number(m.value);
  }

  function number(v) {
    return Number.isInteger(v) ? v.toLocaleString("en") : Number(v.toPrecision(6)).toLocaleString("en", { maximumFractionDigits: 6 });
  }

  function renderClients(t) {
    const note = $("telemetry-note");
    const subs = Object.entries((t && t.subscriptions) || {});
    if (!t || !t.served) {
      note.hidden = false;
      note.textContent = "Client telemetry is not served: start the broker with --client-telemetry on " +
        "(it is on by default with --control-listener).";
    } else if (!subs.length) {
      note.hidden = false;
      note.textContent = "No client metrics subscription: clients push nothing until one asks, e.g. " +
        "kafka-client-metrics.sh --bootstrap-server HOST:PORT --alter --name all --metrics '*' --interval 5000";
    } else {
      note.hidden = true;
    }
    $("subscriptions").textContent = subs.length ? "subscriptions: " + subs.map(([name, c]) =>
      name + " (" + Object.entries(c).map(([k, v]) => k + "=" + v).join(", ") + ")").join("; ") : "";
    const boxes = [];
    for (const c of (t && t.clients) || []) {
      const box = el("div", { class: "client", dataset: { clientInstanceId: c.client_instance_id,
                                                           clientId: c.client_id || "" } });
      box.append(el("div", {},
        el("span", { class: "title" }, c.client_id || "(no client id)"),
        el("span", { class: "tag" }, c.software || "unknown software"),
        el("span", { class: "meta" }, (c.address || "?") + " · instance " + c.client_instance_id + " · " +
          (c.asks !== null && c.asks !== undefined ? "asked " + times(c.asks) + ", " : "") +
          c.pushes + " push(es), " + bytes(c.bytes) + (c.last_push_ms ? " · last " + clockTime(c.last_push_ms) : "") +
          (c.terminated ? " · terminated" : "")),
        c.live ? null : el("span", { class: "tag gone" }, "gone" + (c.gone && c.gone !== "forgotten" ? " (" + c.gone +
          (c.gone_ms ? " " + clockTime(c.gone_ms) : "") + ")" : ""))));
      if (c.requested_metrics) {
        // asked while no subscription matched it: told to push nothing (every 5 min, Kafka's default)
        box.append(el("div", { class: "members" }, "asked for: " +
          (c.requested_metrics.length ? c.requested_metrics.join(", ") : "nothing (no subscription matches it)") +
          " every " + seconds(c.push_interval_ms) +
          (Object.keys(c.refused || {}).length ? " · refused: " + Object.entries(c.refused).map(([k, v]) => k + " ×" + v).join(", ") : "")));
      }
      if (c.metrics.length) {
        const table = el("table", { class: "client-metrics" }, el("thead", {}, el("tr", {},
          el("th", {}, "Metric"), el("th", {}, "Attributes"), el("th", { class: "num" }, "Last value"),
          el("th", { class: "num" }, "Total (delta sums)"))));
        const body = el("tbody");
        for (const m of c.metrics) {
          body.append(el("tr", { dataset: { metric: m.name } }, td(m.name),
            td(Object.entries(m.attributes).map(([k, v]) => k + "=" + v).join(" ") || null),
            td(metricValue(m), "num"), td(m.total === null || m.total === undefined ? null : number(m.total), "num")));
        }
        table.append(body);
        // a long list starts folded (and stays as the reader left it across polls)
        const key = c.client_instance_id;
        const open = key in state.unfolded ? state.unfolded[key] : c.metrics.length <= 25;
        const details = el("details", { open: open ? "" : null },
          el("summary", {}, c.metrics.length + " metric series"), table);
        details.addEventListener("toggle", () => { state.unfolded[key] = details.open; });
        box.append(details);
      }
      boxes.push(box);
    }
    $("clients").replaceChildren(...boxes);
    $("clients-empty").hidden = boxes.length > 0;
  }

  async function pollOverview() {
    const [ov, tx] = await Promise.all([getJSON("/v1/console/overview"), getJSON("/v1/transactions")]);
    if (!ov.ok || !ov.body) throw new Error((ov.body && ov.body.error) || "HTTP " + ov.status);
    renderHeader(ov.body, ov.body.now_ms);
    renderPartitions(ov.body.partitions);
    renderProducers(ov.body.partitions);
    renderGroups(ov.body.groups);
    renderClients(ov.body.telemetry);
    renderTransactions(tx.ok && tx.body ? tx.body : null);
  }

  // -- the timeline ---------------------------------------------------------------------------
  function tpKey(tp) { return tp[0] + "-" + tp[1]; }

  // The transactions of a history: each from its first partition to its completion.
  function spansOf(events) {
    const spans = [];
    let cur = null;
    const open = (ts) => { if (!cur) cur = { start: ts, parts: new Map(), end: null, commit: null, incident: null }; };
    for (const e of events) {
      switch (e.kind) {
        case "add_partitions":
          open(e.ts);
          for (const tp of e.partitions || []) if (!cur.parts.has(tpKey(tp))) cur.parts.set(tpKey(tp), e.ts);
          break;
        case "add_offsets":
          open(e.ts);
          break;
        case "timeout_abort":
        case "fenced":
          if (cur) cur.incident = e;
          break;
        case "complete":
          if (cur) { cur.end = e.ts; cur.commit = !!e.commit; spans.push(cur); cur = null; }
          break;
        default:
          break;
      }
    }
    if (cur) spans.push(cur);
    return spans;
  }

  function lanesOf(events) {
    const lanes = [];
    const add = (k) => { if (!lanes.includes(k)) lanes.push(k); };
    for (const e of events) {
      if (e.kind === "add_partitions") (e.partitions || []).forEach((tp) => add(tpKey(tp)));
      if (e.kind === "marker") add(e.topic + "-" + e.partition);
    }
    return lanes;
  }

  function eventLabel(e) {
    switch (e.kind) {
      case "init": return "InitProducerId → epoch " + e.epoch;
      case "add_partitions": return "AddPartitions " + (e.partitions || []).map(tpKey).join(", ");
      case "add_offsets": return "+offsets " + (e.group || "");
      case "end_txn": return "EndTxn " + (e.commit ? "commit" : "abort");
      case "prepare": return "Prepare" + (e.commit ? "Commit" : "Abort");
      case "complete": return e.commit ? "committed" : "aborted";
      case "refused": return (e.api || "request") + " refused: " + (e.error || "?");
      case "expired": return "id expired";
      case "epoch_fence": return "epoch fence";
      default: return e.kind;
    }
  }

  function incidentLabel(e) {
    if (e.kind === "timeout_abort") {
      const late = e.late_ms !== undefined && e.late_ms !== null ? ", " + seconds(e.late_ms) + " late" : "";
      return "TIMED OUT: aborted after transaction.timeout.ms " + seconds(e.timeout_ms) + late;
    }
    const who = e.by_client_id ? "client " + e.by_client_id : "a new instance";
    return "FENCED by " + who + (e.by_address ? " (" + e.by_address + ")" : "");
  }

  function niceStep(range) {
    const raw = range / 6;
    const pow = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (raw <= m * pow) return m * pow;
    return 10 * pow;
  }

  const CHAR_W = 6.4; // an 11px label's average character width, in the picture's units

  function shorten(text, max) {
    if (text.length <= max) return text;
    const tail = Math.floor((max - 1) / 2);
    return text.slice(0, max - 1 - tail) + "…" + text.slice(text.length - tail);
  }

  // Labels beside their points without overlapping: to the right of the point, or to its
  // left near the picture's right edge, in the first row where they fit.
  function placeLabels(items, maxX, maxRows) {
    const rows = [];
    for (const it of items) {
      const w = it.text.length * CHAR_W;
      it.anchorEnd = it.x + 6 + w > maxX;
      const lo = it.anchorEnd ? it.x - 6 - w : it.x + 6;
      const hi = it.anchorEnd ? it.x - 6 : it.x + 6 + w;
      let row = rows.findIndex((busy) => busy.every(([a, b]) => hi + 8 < a || lo > b + 8));
      if (row < 0) {
        row = rows.length < maxRows ? rows.length : maxRows - 1;
        if (row === rows.length) rows.push([]);
      }
      rows[row].push([lo, hi]);
      it.row = row;
    }
    return Math.max(1, rows.length);
  }

  // The picture: time on x; a lane for the coordinator's decisions and one per partition;
  // each transaction as a span on its partitions, markers as ticks, the incident in red.
  function drawTimeline(data, nowMs) {
    const events = (data.events || []).slice(-400).filter((e) => typeof e.ts === "number")
      .sort((a, b) => a.ts - b.ts);
    if (!events.length) return el("p", { class: "empty" }, "No history is recorded for this transactional id.");
    const spans = spansOf(events);
    const lanes = ["coordinator", ...lanesOf(events)];
    const incidents = events.filter((e) => e.kind === "timeout_abort" || e.kind === "fenced");
    const stillOpen = spans.length && spans[spans.length - 1].end === null;
    let t0 = events[0].ts, t1 = events[events.length - 1].ts;
    if (stillOpen && typeof nowMs === "number") t1 = Math.max(t1, nowMs);
    if (t1 - t0 < 1000) { const mid = (t0 + t1) / 2; t0 = mid - 500; t1 = mid + 500; }
    const pad0 = (t1 - t0) * 0.03;
    t0 -= pad0; t1 += pad0;

    const W = 1100, LEFT = 160, RIGHT = 16, LANE = 46, ROW = 14;
    const plotW = W - LEFT - RIGHT;
    const x = (ts) => LEFT + ((ts - t0) / (t1 - t0)) * plotW;

    const decisions = events.filter((e) => !["marker", "timeout_abort", "fenced"].includes(e.kind))
      .map((e) => ({ e: e, x: x(e.ts), text: shorten(eventLabel(e), 44) }));
    const labelRows = placeLabels(decisions, W - 4, 8);
    const incidentLabels = incidents.map((e) => ({ e: e, x: x(e.ts), text: incidentLabel(e) }));
    const incidentRows = incidentLabels.length ? placeLabels(incidentLabels, W - 4, 4) : 0;
    const TOP = 12 + 16 * incidentRows;
    const coordH = 34 + ROW * labelRows;
    const laneY = (i) => (i === 0 ? TOP : TOP + coordH + (i - 1) * LANE);
    const laneH = (i) => (i === 0 ? coordH : LANE);
    const H = laneY(lanes.length) + 30;
    const root = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img", class: "timeline",
                              "aria-label": "timeline of " + data.transactional_id });

    lanes.forEach((name, i) => {
      root.append(svg("rect", { class: "lane-bg", x: LEFT, y: laneY(i) + 3, width: plotW, height: laneH(i) - 6 }));
      const label = svg("text", { class: "lane-label", x: 8, y: laneY(i) + laneH(i) / 2 + 4 },
                        i === 0 ? "coordinator" : shorten(name, 24));
      label.append(svg("title", {}, name));
      root.append(label);
    });

    // the time axis
    const axisY = laneY(lanes.length) + 4;
    root.append(svg("line", { class: "axis", x1: LEFT, x2: W - RIGHT, y1: axisY, y2: axisY }));
    const step = niceStep(t1 - t0);
    const origin = events[0].ts;
    for (let t = Math.ceil((t0 - origin) / step) * step + origin; t <= t1; t += step) {
      root.append(svg("line", { class: "axis", x1: x(t), x2: x(t), y1: axisY, y2: axisY + 5 }));
      const rel = t - origin;
      root.append(svg("text", { class: "tick-label", x: x(t), y: axisY + 18, "text-anchor": "middle" },
                      rel === 0 ? clockTime(origin) : (rel > 0 ? "+" : "") + seconds(rel)));
    }

    // transactions: a span on the coordinator lane and on each of their partitions
    const laneIndex = new Map(lanes.map((n, i) => [n, i]));
    for (const s of spans) {
      const end = s.end !== null ? s.end : t1;
      const cls = s.end === null ? "span-open" : s.commit ? "span-commit" : "span-abort";
      const extra = s.incident ? " span-incident" : "";
      root.append(svg("rect", { class: "span " + cls + extra, x: x(s.start), y: laneY(0) + 8,
                                width: Math.max(2, x(end) - x(s.start)), height: 10, rx: 3 }));
      for (const [key, from] of s.parts) {
        const i = laneIndex.get(key);
        if (i === undefined) continue;
        root.append(svg("rect", { class: "span " + cls + extra, x: x(from), y: laneY(i) + 12,
                                  width: Math.max(2, x(end) - x(from)), height: LANE - 24, rx: 3,
                                  "data-partition": key }));
      }
    }

    // the coordinator's decisions
    for (const d of decisions) {
      const g = svg("g", { class: "event " + d.e.kind });
      g.append(svg("circle", { cx: d.x, cy: laneY(0) + 13, r: 4 }));
      g.append(svg("text", { x: d.x + (d.anchorEnd ? -6 : 6), y: laneY(0) + 34 + ROW * d.row,
                             "text-anchor": d.anchorEnd ? "end" : "start" }, d.text));
      g.append(svg("title", {}, clockTime(d.e.ts) + " " + eventLabel(d.e)));
      root.append(g);
    }

    // markers: a tick on their partition's lane
    for (const e of events) {
      if (e.kind !== "marker") continue;
      const i = laneIndex.get(e.topic + "-" + e.partition);
      if (i === undefined) continue;
      const kind = e.commit ? "commit" : "abort";
      const text = (e.commit ? "COMMIT" : "ABORT") + " marker @" + e.offset;
      const right = x(e.ts) + 6 + text.length * CHAR_W > W - 4;
      const g = svg("g", { class: "marker " + kind, "data-partition": e.topic + "-" + e.partition });
      g.append(svg("line", { x1: x(e.ts), x2: x(e.ts), y1: laneY(i) + 5, y2: laneY(i) + LANE - 5 }));
      g.append(svg("text", { x: x(e.ts) + (right ? -6 : 6), y: laneY(i) + LANE / 2 + 4,
                             "text-anchor": right ? "end" : "start" }, text));
      g.append(svg("title", {}, clockTime(e.ts) + " " + kind + " marker at offset " + e.offset));
      root.append(g);
    }

    // the incident: across every lane, in red, with its label
    for (const d of incidentLabels) {
      const g = svg("g", { class: "incident " + d.e.kind });
      const y = 12 + 16 * d.row;
      g.append(svg("line", { x1: d.x, x2: d.x, y1: y - 10, y2: laneY(lanes.length) }));
      g.append(svg("text", { x: d.x + (d.anchorEnd ? -6 : 6), y: y,
                             "text-anchor": d.anchorEnd ? "end" : "start" }, d.text));
      root.append(g);
    }

    if (stillOpen && typeof nowMs === "number" && nowMs >= t0 && nowMs <= t1) {
      const g = svg("g", { class: "now" });
      g.append(svg("line", { x1: x(nowMs), x2: x(nowMs), y1: TOP, y2: laneY(lanes.length) }));
      g.append(svg("text", { x: x(nowMs) - 4, y: TOP + 12, "text-anchor": "end" }, "now"));
      root.append(g);
    }
    return root;
  }

  function eventDetails(e) {
    const skip = new Set(["ts", "kind"]);
    return Object.entries(e).filter(([k]) => !skip.has(k))
      .map(([k, v]) => k + "=" + (typeof v === "object" ? JSON.stringify(v) : v)).join(" ");
  }

  function renderTimeline(tid, data, nowMs) {
    $("tl-id").textContent = tid;
    if (!data) {
      $("tl-summary").textContent = "";
      $("tl-picture").replaceChildren(el("p", { class: "empty" }, "No timeline for this transactional id."));
      $("tl-diagnosis").textContent = "";
      $("tl-story").replaceChildren();
      $("tl-events").tBodies[0].replaceChildren();
      return;
    }
    const events = data.events || [];
    $("tl-summary").textContent = events.length + " event(s)" +
      (events.length ? ", " + clockTime(events[0].ts) + " – " + clockTime(events[events.length - 1].ts) : "");
    $("tl-picture").replaceChildren(drawTimeline(data, nowMs));
    const diag = $("tl-diagnosis");
    diag.textContent = data.diagnosis || "";
    diag.classList.toggle("bad", events.some((e) => e.kind === "timeout_abort" || e.kind === "fenced"));
    $("tl-story").replaceChildren(...(data.story || []).map((line) => el("li", {}, line)));
    $("tl-events").tBodies[0].replaceChildren(...events.slice().reverse().slice(0, 500).map((e) =>
      el("tr", {}, td(clockTime(e.ts)), td(e.kind), el("td", { class: "mono" }, eventDetails(e)))));
  }

  async function pollTimeline(tid) {
    const path = "/v1/transactions/" + encodeURIComponent(tid) + "/timeline";
    const [tl, clock] = await Promise.all([getJSON(path), getJSON("/v1/clock")]);
    const nowMs = clock.ok && clock.body ? clock.body.wall_ms : Date.now();
    $("clock").textContent = "broker clock " + clockTime(nowMs);
    if (tl.ok && tl.body) renderTimeline(tid, tl.body, nowMs);
    else if (tl.status === 404) renderTimeline(tid, null, nowMs);
    else throw new Error((tl.body && tl.body.error) || "HTTP " + tl.status);
  }

  // -- routing and the poll loop -----------------------------------------------------------
  function route() {
    const m = /^#\/txn\/(.+)$/.exec(location.hash);
    return m ? { view: "timeline", tid: decodeURIComponent(m[1]) } : { view: "overview" };
  }

  async function tick() {
    if (state.busy) return;
    state.busy = true;
    const r = route();
    $("overview-view").hidden = r.view !== "overview";
    $("timeline-view").hidden = r.view !== "timeline";
    try {
      if (r.view === "timeline") await pollTimeline(r.tid);
      else await pollOverview();
      setStatus("updated " + new Date().toLocaleTimeString(), false);
      document.body.dataset.loaded = r.view;
    } catch (e) {
      setStatus("broker unreachable: " + (e && e.message ? e.message : e), true);
    } finally {
      state.busy = false;
    }
  }

  function schedule() {
    clearTimeout(state.timer);
    state.timer = setTimeout(async () => { await tick(); schedule(); }, POLL_MS);
  }

  function now() { clearTimeout(state.timer); tick().finally(schedule); }

  window.addEventListener("hashchange", () => { delete document.body.dataset.loaded; now(); });
  document.addEventListener("DOMContentLoaded", () => {
    const box = $("show-internal");
    box.checked = state.showInternal;
    box.addEventListener("change", () => { state.showInternal = box.checked; now(); });
    now();
  });

  // for tests and curious people: the drawing from data alone
  window.minibrokerConsole = { drawTimeline: drawTimeline, spansOf: spansOf };
})();
