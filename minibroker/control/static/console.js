// The minibroker console: plain DOM and fetch, polling the control plane about once a second.
// Every value from the broker goes into the page as text (textContent), never as HTML: topic
// names and transactional ids are whatever clients chose.
"use strict";

(function () {
  const POLL_MS = 1000;
  const SVG_NS = "http://www.w3.org/2000/svg";
  const OPEN_STATES = new Set(["Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"]);

  const state = { showInternal: false, timer: null, busy: false, again: false, unfolded: {} };

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
  // hh:mm:ss.mmm, or to the microsecond ("us") for a time with a fraction of a millisecond
  function clockTime(ms, precision) {
    if (ms === null || ms === undefined || ms < 0) return "–";
    const whole = Math.floor(ms);
    const d = new Date(whole);
    const us = Math.round((ms - whole) * 1000);
    return pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + "." + pad(d.getMilliseconds(), 3) +
      (precision === "us" && us > 0 ? pad(Math.min(us, 999), 3) : "");
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
          el("span", { class: "records" }, "(" + p.lso_lag + (p.lso_lag === 1 ? " record" : " records") +
            " from offset " + held.first_offset + ")"));
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
          c.pushes + (c.pushes === 1 ? " push, " : " pushes, ") + bytes(c.bytes) + (c.last_push_ms ? " · last " + clockTime(c.last_push_ms) : "") +
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
    const [ov, tx, sh, sr] = await Promise.all([getJSON("/v1/console/overview"), getJSON("/v1/transactions"),
                                                getJSON("/v1/share/groups"), getJSON("/v1/console/registry")]);
    if (!ov.ok || !ov.body) throw new Error((ov.body && ov.body.error) || "HTTP " + ov.status);
    renderHeader(ov.body, ov.body.now_ms);
    renderPartitions(ov.body.partitions);
    renderProducers(ov.body.partitions);
    renderGroups(ov.body.groups);
    renderClients(ov.body.telemetry);
    renderTransactions(tx.ok && tx.body ? tx.body : null);
    renderShareGroups(sh.ok && sh.body ? sh.body : null);
    renderRegistry(sr.ok && sr.body ? sr.body : null);
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

  // -- time on the picture's axis: from microseconds to hours -------------------------------
  const MS = { us: 0.001, ms: 1, s: 1000, min: 60000, h: 3600000 };
  // nice steps, in ms: 1-2-5 below a minute, then clock-friendly minutes and hours
  const STEPS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500,
    1000, 2000, 5000, 10000, 15000, 30000, 60000, 120000, 300000, 600000, 900000, 1800000,
    3600000, 7200000, 10800000, 21600000, 43200000, 86400000, 172800000, 604800000];

  function stepUnit(step) {
    return step < 1 ? "us" : step < 1000 ? "ms" : step < 60000 ? "s" : step < 3600000 ? "min" : "h";
  }

  // the unit of a step, or the next one up where the span would count thousands of it
  function spanUnit(step, span) {
    const unit = stepUnit(step);
    if (unit === "us" && span >= 2) return "ms";
    if (unit === "ms" && span >= 2000) return "s";
    return unit;
  }

  function trim(v, decimals) { return String(Number(v.toFixed(decimals))); }

  // A duration in the unit a step calls for, with the decimals the step needs: "+250 µs",
  // "+1.5 ms", "+30 s", "+45 min", "+1 h 30 min", "+2 h".
  function durationLabel(ms, unit, step) {
    const per = step / MS[unit];
    const decimals = per >= 1 ? 0 : Math.min(3, Math.ceil(-Math.log10(per) - 1e-9));
    if (unit === "min" && ms >= 60 * MS.min) {
      const h = Math.floor(ms / MS.h + 1e-9), m = Math.round((ms - h * MS.h) / MS.min);
      return h + " h" + (m ? " " + m + " min" : "");
    }
    return trim(ms / MS[unit], decimals) + " " + (unit === "us" ? "µs" : unit);
  }

  // A gap as people say it: "50 µs", "88 ms", "12 s", "4.5 min", "1.9 h".
  function gapLabel(ms) {
    const units = ["us", "ms", "s", "min", "h"], next = { us: 1000, ms: 1000, s: 60, min: 60 };
    let i = 0;
    const shown = (u) => { const v = ms / MS[u]; return Number(v.toFixed(v < 10 ? 1 : 0)); };
    while (i < units.length - 1 && shown(units[i]) >= next[units[i]]) i++;  // 59.99 min: "1 h"
    return String(shown(units[i])) + " " + (units[i] === "us" ? "µs" : units[i]);
  }

  // The width of a label as the browser draws it (same font as the picture's CSS), in the
  // picture's units (its text scales with it); an estimate where there is no canvas.
  let measureCtx = null;
  function textWidth(text, px, bold) {
    if (measureCtx === null) {
      const c = document.createElement("canvas");
      measureCtx = (c.getContext && c.getContext("2d")) || false;
    }
    if (!measureCtx) return text.length * px * 0.62;
    measureCtx.font = (bold ? "700 " : "") + px + "px " + getComputedStyle(document.documentElement).fontFamily;
    return measureCtx.measureText(text).width;
  }

  function shortenTo(text, px, maxW) {
    if (textWidth(text, px) <= maxW) return text;
    let n = text.length;
    while (n > 4 && textWidth(shorten(text, n), px) > maxW) n--;
    return shorten(text, n);
  }

  function shorten(text, max) {
    if (text.length <= max) return text;
    const tail = Math.floor((max - 1) / 2);
    return text.slice(0, max - 1 - tail) + "…" + text.slice(text.length - tail);
  }

  // Labels beside their points in rows, never overlapping: to the right of the point, or to
  // its left near the right edge (the picture's, or the stretch of the axis it belongs to), in
  // the first row where they fit; as many rows as that takes (the caller decides when that is
  // too many).
  function placeLabels(items, minX, maxX, px) {
    const rows = [];
    for (const it of items) {
      const w = textWidth(it.text, px, it.bold);
      const right = it.seg ? Math.min(maxX, it.seg.x1) : maxX, left = it.seg ? Math.max(minX, it.seg.x0) : minX;
      it.anchorEnd = it.x + 6 + w > right && it.x - 6 - w >= left;
      const lo = it.anchorEnd ? it.x - 6 - w : it.x + 6;
      const hi = it.anchorEnd ? it.x - 6 : it.x + 6 + w;
      let row = rows.findIndex((busy) => busy.every(([a, b]) => hi + 6 < a || lo > b + 6));
      if (row < 0) { row = rows.length; rows.push([]); }
      rows[row].push([lo, hi]);
      it.row = row;
    }
    return rows.length;
  }

  // The x scale: linear, except that a long quiet gap between bursts of events (a transaction
  // an hour after the last) is cut out and drawn as a break, so each burst keeps its width.
  function timeScale(times, left, width) {
    const ts = [...new Set(times)].sort((a, b) => a - b);
    const span = ts[ts.length - 1] - ts[0];
    const MIN_SEG = 96, BREAK_W = 72;
    let cuts = [];
    if (span > 0 && ts.length > 2) {
      const long = [];
      for (let i = 1; i < ts.length; i++) if (ts[i] - ts[i - 1] > 0.3 * span) long.push(i);
      const rest = span - long.reduce((s, i) => s + ts[i] - ts[i - 1], 0);
      // cut only where the linear picture would crowd the bursts: what is left is under 5 %
      const crowded = ts.some((t, i) => i > 0 && t > ts[i - 1] && (t - ts[i - 1]) / span * width < 8);
      if (long.length && rest < 0.05 * span && crowded) cuts = long;
    }
    const segs = [];
    let from = 0;
    for (const i of [...cuts, ts.length]) { segs.push({ t0: ts[from], t1: ts[i - 1] }); from = i; }
    const usable = width - BREAK_W * (segs.length - 1);
    const total = segs.reduce((s, g) => s + (g.t1 - g.t0), 0);
    const extra = Math.max(0, usable - MIN_SEG * segs.length);
    let x0 = left;
    segs.forEach((g, i) => {
      const dur = g.t1 - g.t0;
      g.w = segs.length === 1 ? width : MIN_SEG + (total > 0 ? extra * dur / total : extra / segs.length);
      g.x0 = x0; g.x1 = x0 + g.w;
      const pad = segs.length === 1 ? 0.03 * g.w : 14;
      g.a = g.x0 + pad; g.b = g.x1 - pad;
      if (dur === 0) { g.a = g.b = (g.x0 + g.x1) / 2; }
      x0 = g.x1 + (i < segs.length - 1 ? BREAK_W : 0);
    });
    const segOf = (t) => {
      let g = segs[0];
      for (const s of segs) if (t >= s.t0) g = s;
      return g;
    };
    const x = (t) => {
      const g = segOf(t);
      if (g.t1 === g.t0) return g.a;
      return g.a + (Math.min(t, g.t1) - g.t0) / (g.t1 - g.t0) * (g.b - g.a) +
        (t > g.t1 ? (t - g.t1) / (g.t1 - g.t0) * (g.b - g.a) : 0);
    };
    return { x: x, segs: segs, segOf: segs.length > 1 ? segOf : () => null };
  }

  // Ticks of one stretch of the axis: the first at its start with the clock time, then at a
  // nice step, in the step's unit, far enough apart for their labels.
  function ticksOf(seg, pxFrom, pxTo) {
    const out = [{ t: seg.t0, text: clockTime(seg.t0, seg.t1 - seg.t0 < 1 ? "us" : "ms"), first: true }];
    const dur = seg.t1 - seg.t0;
    if (dur <= 0) return out;
    const perMs = (seg.b - seg.a) / dur;
    const firstW = textWidth(out[0].text, 11);
    for (const step of STEPS) {
      // fractions of the next unit up rather than thousands of this one: "+1.5 ms", not "+1500 µs"
      const unit = spanUnit(step, dur);
      const far = durationLabel(Math.floor(dur / step) * step, unit, step);
      const w = Math.max(textWidth("+" + far, 11), textWidth("+" + durationLabel(step, unit, step), 11));
      if (step * perMs < w + 14 || step * perMs < firstW / 2 + w / 2 + 14) continue;
      if (dur / step > 12) continue;
      for (let k = 1; k * step <= dur + 1e-9; k++) {
        out.push({ t: seg.t0 + k * step, text: "+" + durationLabel(k * step, unit, step), unit: unit });
      }
      break;
    }
    return out;
  }

  function tOf(e) { return typeof e.ts_us === "number" ? e.ts_us / 1000 : e.ts; }

  // The picture: time on x; a lane for the coordinator's decisions and one per partition;
  // each transaction as a span on its partitions, markers as ticks, the incident in red.
  // Labels never overlap: they stack in rows, and when the coordinator's would need more than
  // MAX_ROWS (a fast transaction: 19 events in 88 ms), its points carry numbers and the labels
  // go to a numbered list under the axis.
  function drawTimeline(data, nowMs) {
    const events = (data.events || []).slice(-400).filter((e) => typeof e.ts === "number")
      .sort((a, b) => tOf(a) - tOf(b));
    if (!events.length) return el("p", { class: "empty" }, "No history is recorded for this transactional id.");
    const spans = spansOf(events.map((e) => Object.assign({}, e, { ts: tOf(e) })));
    const lanes = ["coordinator", ...lanesOf(events)];
    const incidents = events.filter((e) => e.kind === "timeout_abort" || e.kind === "fenced");
    const stillOpen = spans.length && spans[spans.length - 1].end === null;
    const times = events.map(tOf);
    if (stillOpen && typeof nowMs === "number" && nowMs > times[times.length - 1]) times.push(nowMs);

    const W = 1100, LEFT = 160, RIGHT = 16, LANE = 46, ROW = 14, MAX_ROWS = 6;
    const plotW = W - LEFT - RIGHT;
    const scale = timeScale(times, LEFT, plotW);
    const x = scale.x;
    const t0 = times[0], t1 = times[times.length - 1];

    // the coordinator's decisions: labelled in rows, or numbered when that is too many rows
    const decisions = events.filter((e) => !["marker", "timeout_abort", "fenced"].includes(e.kind))
      .map((e, i) => ({ e: e, n: i + 1, x: x(tOf(e)), seg: scale.segOf(tOf(e)),
                        text: shortenTo(eventLabel(e), 11, 300) }));
    let labelRows = placeLabels(decisions, LEFT, W - 4, 11);
    let legend = [];
    let pointLabels = decisions;
    if (labelRows > MAX_ROWS) {
      const clusters = [];
      for (const d of decisions) {
        const last = clusters[clusters.length - 1];
        if (last && d.x - last.items[last.items.length - 1].x < 10) last.items.push(d);
        else clusters.push({ items: [d] });
      }
      pointLabels = clusters.map((c) => {
        const a = c.items[0].n, b = c.items[c.items.length - 1].n;
        return { e: c.items[0].e, x: c.items[0].x, seg: c.items[0].seg, text: a === b ? String(a) : a + "–" + b,
                 numbered: true, bold: true };
      });
      labelRows = placeLabels(pointLabels, LEFT, W - 4, 11);
      legend = decisions;
    }
    const incidentLabels = incidents.map((e) => ({ e: e, x: x(tOf(e)), text: incidentLabel(e), bold: true }));
    const incidentRows = incidentLabels.length ? placeLabels(incidentLabels, 4, W - 4, 12) : 0;

    // markers: labelled on their partition's lane, in rows of their own
    const laneIndex = new Map(lanes.map((n, i) => [n, i]));
    const markersOf = lanes.map(() => []);
    for (const e of events) {
      if (e.kind !== "marker") continue;
      const i = laneIndex.get(e.topic + "-" + e.partition);
      if (i === undefined) continue;
      markersOf[i].push({ e: e, x: x(tOf(e)), seg: scale.segOf(tOf(e)), text: (e.commit ? "COMMIT" : "ABORT") + " marker @" + e.offset });
    }
    const markerRows = markersOf.map((items) => {
      if (!items.length) return 0;
      let rows = placeLabels(items, LEFT, W - 4, 11);
      if (rows > 2) {  // crowded: the offset alone says which marker it is
        items.forEach((m) => { m.text = (m.e.commit ? "C" : "A") + "@" + m.e.offset; });
        rows = placeLabels(items, LEFT, W - 4, 11);
      }
      return rows;
    });

    const showNow = stillOpen && typeof nowMs === "number" && nowMs >= t0 && nowMs <= t1;
    const TOP = 12 + 16 * incidentRows + (showNow ? 12 : 0);  // "now" above the lanes, not on a span
    const coordH = 34 + ROW * Math.max(1, labelRows);
    const heights = lanes.map((_, i) => (i === 0 ? coordH : Math.max(LANE, 22 + ROW * markerRows[i])));
    const laneY = (i) => TOP + heights.slice(0, i).reduce((a, b) => a + b, 0);
    const laneH = (i) => heights[i];
    const axisY = laneY(lanes.length) + 4;
    const legendCols = legend.length ? Math.max(1, Math.min(3, Math.floor((W - 16) / 340))) : 0;
    const legendRows = legend.length ? Math.ceil(legend.length / legendCols) : 0;
    const H = axisY + 30 + (legend.length ? 10 + ROW * legendRows : 0);
    const root = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img", class: "timeline",
                              "aria-label": "timeline of " + data.transactional_id });

    lanes.forEach((name, i) => {
      root.append(svg("rect", { class: "lane-bg", x: LEFT, y: laneY(i) + 3, width: plotW, height: laneH(i) - 6 }));
      const label = svg("text", { class: "lane-label", x: 8, y: laneY(i) + laneH(i) / 2 + 4 },
                        i === 0 ? "coordinator" : shortenTo(name, 12, LEFT - 16));
      label.append(svg("title", {}, name));
      root.append(label);
    });

    // the time axis: each stretch with its ticks; a cut-out gap as a break with its length
    const segs = scale.segs;
    segs.forEach((g, si) => {
      root.append(svg("line", { class: "axis", x1: g.x0, x2: g.x1, y1: axisY, y2: axisY }));
      const limit = si === segs.length - 1 ? W - 2 : g.x1 + 4;
      let busyTo = -Infinity;
      for (const tk of ticksOf(g)) {
        const tx = x(tk.t);
        const w = textWidth(tk.text, 11);
        // the clock time starts at its tick, or ends at the edge where it would run past it
        const lo = tk.first ? Math.max(g.x0 - 2, Math.min(tx - 3, limit - w)) : tx - w / 2, hi = lo + w;
        if (!tk.first && (lo < busyTo + 6 || hi > limit)) continue;
        busyTo = hi;
        root.append(svg("line", { class: "axis", x1: tx, x2: tx, y1: axisY, y2: axisY + 5 }));
        root.append(svg("text", { class: "tick-label" + (tk.first ? " tick-clock" : ""), x: tk.first ? lo : tx,
                                  y: axisY + 18, "text-anchor": tk.first ? "start" : "middle",
                                  "data-unit": tk.unit || null }, tk.text));
      }
      if (si < segs.length - 1) {
        const bx0 = g.x1, bx1 = segs[si + 1].x0, mid = (bx0 + bx1) / 2;
        const gb = svg("g", { class: "axis-break" });
        for (const dx of [-4, 4]) {
          gb.append(svg("line", { x1: mid + dx - 3, x2: mid + dx + 3, y1: axisY + 6, y2: axisY - 6 }));
        }
        const gap = gapLabel(segs[si + 1].t0 - g.t1);
        gb.append(svg("text", { class: "break-label", x: mid, y: axisY + 18, "text-anchor": "middle" }, gap));
        gb.append(svg("title", {}, gap + " with nothing recorded, left out"));
        root.append(gb);
        root.append(svg("rect", { class: "lane-break", x: bx0 + 8, y: TOP, width: Math.max(0, bx1 - bx0 - 16),
                                  height: laneY(lanes.length) - TOP }));
      }
    });

    // transactions: a span on the coordinator lane and on each of their partitions
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
                                  width: Math.max(2, x(end) - x(from)), height: laneH(i) - 24, rx: 3,
                                  "data-partition": key }));
      }
    }

    // the coordinator's decisions
    for (const d of decisions) {
      const g = svg("g", { class: "event " + d.e.kind });
      g.append(svg("circle", { cx: d.x, cy: laneY(0) + 13, r: 4 }));
      g.append(svg("title", {}, clockTime(tOf(d.e), "us") + " " + eventLabel(d.e)));
      root.append(g);
    }
    for (const d of pointLabels) {
      root.append(svg("text", { class: "event-label" + (d.numbered ? " numbered" : ""),
                                x: d.x + (d.anchorEnd ? -6 : 6), y: laneY(0) + 34 + ROW * d.row,
                                "text-anchor": d.anchorEnd ? "end" : "start" }, d.text));
    }

    // markers: a tick on their partition's lane
    markersOf.forEach((items, i) => {
      for (const m of items) {
        const kind = m.e.commit ? "commit" : "abort";
        const g = svg("g", { class: "marker " + kind, "data-partition": m.e.topic + "-" + m.e.partition });
        g.append(svg("line", { x1: m.x, x2: m.x, y1: laneY(i) + 5, y2: laneY(i) + laneH(i) - 5 }));
        g.append(svg("text", { x: m.x + (m.anchorEnd ? -6 : 6), y: laneY(i) + 18 + ROW * m.row + (markerRows[i] === 1 ? 9 : 0),
                               "text-anchor": m.anchorEnd ? "end" : "start" }, m.text));
        g.append(svg("title", {}, clockTime(tOf(m.e), "us") + " " + kind + " marker at offset " + m.e.offset));
        root.append(g);
      }
    });

    // the incident: across every lane, in red, with its label
    for (const d of incidentLabels) {
      const g = svg("g", { class: "incident " + d.e.kind });
      const y = 12 + 16 * d.row;
      g.append(svg("line", { x1: d.x, x2: d.x, y1: y - 10, y2: laneY(lanes.length) }));
      g.append(svg("text", { x: d.x + (d.anchorEnd ? -6 : 6), y: y,
                             "text-anchor": d.anchorEnd ? "end" : "start" }, d.text));
      root.append(g);
    }

    if (showNow) {
      const g = svg("g", { class: "now" });
      g.append(svg("line", { x1: x(nowMs), x2: x(nowMs), y1: TOP - 12, y2: laneY(lanes.length) }));
      g.append(svg("text", { x: x(nowMs) - 4, y: TOP - 3, "text-anchor": "end" }, "now"));
      root.append(g);
    }

    // the numbered list, when the labels did not fit beside their points
    if (legend.length) {
      const legendUnit = spanUnit(Math.max(0.001, (t1 - t0) / 8), t1 - t0);
      const colW = (W - 16) / legendCols;
      legend.forEach((d, k) => {
        const col = Math.floor(k / legendRows), row = k % legendRows;
        const text = d.n + " · +" + durationLabel(tOf(d.e) - t0, legendUnit, Math.max(0.001, (t1 - t0) / 1000)) +
          " · " + eventLabel(d.e);
        root.append(svg("text", { class: "legend", x: 8 + col * colW, y: axisY + 40 + ROW * row },
                        shortenTo(text, 11, colW - 12)));
      });
    }
    return root;
  }

  function eventDetails(e) {
    const skip = new Set(["ts", "ts_us", "kind"]);
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
    $("tl-summary").textContent = events.length + (events.length === 1 ? " event" : " events") +
      (events.length ? ", " + clockTime(events[0].ts) + " – " + clockTime(events[events.length - 1].ts) : "");
    $("tl-picture").replaceChildren(drawTimeline(data, nowMs));
    const diag = $("tl-diagnosis");
    diag.textContent = data.diagnosis || "";
    // Red when the headline is bad news now (txn_explain's diagnosis), not for a fence an
    // id has since recovered from by committing.
    diag.classList.toggle("bad", /^(Fenced|Aborted by the coordinator)/.test(data.diagnosis || ""));
    $("tl-story").replaceChildren(...(data.story || []).map((line) => el("li", {}, line)));
    $("tl-events").tBodies[0].replaceChildren(...events.slice().reverse().slice(0, 500).map((e) =>
      el("tr", {}, td(clockTime(tOf(e), "us")), td(e.kind), el("td", { class: "mono" }, eventDetails(e)))));
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

  // -- share groups (/v1/share, control/share_routes.py) -----------------------------------------
  function shareHref(g, t, p) {
    return "#/share/" + encodeURIComponent(g) + "/" + encodeURIComponent(t) + "/" + p;
  }

  function renderShareGroups(data) {
    const note = $("share-note");
    note.hidden = !!(data && data.served);
    note.textContent = !data ? "Share groups are not available from this broker." :
      data.served ? "" : "No share coordinator runs on this broker: only the kept history is shown.";
    const rows = [];
    for (const g of (data && data.groups) || []) {
      for (const p of g.partitions) {
        const f = p.in_flight || {};
        rows.push(el("tr", { dataset: { group: g.group_id, topic: p.topic, partition: String(p.partition) } },
          td(g.group_id), td(p.topic + "-" + p.partition), num(f.acquired), num(f.available),
          num(f.acknowledged), num(f.archived), num(p.deliveries),
          td(Number(p.redeliveries).toLocaleString("en"), p.redeliveries ? "num redelivered" : "num"),
          num(p.archived), el("td", {}, el("a", { href: shareHref(g.group_id, p.topic, p.partition) }, "explain"))));
      }
    }
    fill($("share-partitions").tBodies[0], rows, "share-empty");
  }

  function offsetsText(first, last) { return first === last ? "offset " + first : "offsets " + first + "–" + last; }

  function renderShare(r, data) {
    $("sh-title").textContent = r.group + " · " + r.topic + "-" + r.partition;
    if (!data) {
      $("sh-summary").textContent = "No share history and no live state for this partition.";
      fill($("sh-in-flight").tBodies[0], [], "sh-in-flight-empty");
      $("sh-records").replaceChildren();
      return;
    }
    $("sh-summary").textContent = data.summary || "";
    fill($("sh-in-flight").tBodies[0], (data.in_flight || []).map((f) =>
      el("tr", { dataset: { first: String(f.first_offset), state: f.state } },
        td(offsetsText(f.first_offset, f.last_offset)), td(f.state),
        td(f.delivery_count + (data.delivery_limit ? " of " + data.delivery_limit : ""), "num"), td(f.member),
        td(f.member ? clockTime(f.lock_deadline_ms) : null))),
      "sh-in-flight-empty");
    $("sh-records").replaceChildren(...(data.records || []).map((rec) => {
      const bad = /^(Archived|Rejected)/.test(rec.diagnosis || "");
      return el("div", { class: "share-record", dataset: { first: String(rec.first_offset), last: String(rec.last_offset) } },
        el("h4", {}, offsetsText(rec.first_offset, rec.last_offset) + " · " + (rec.state || "?") +
          (rec.deliveries ? " · delivered " + times(rec.deliveries) : "")),
        el("ol", {}, ...(rec.story || []).map((line) => el("li", {}, line))),
        el("p", { class: "diagnosis" + (bad ? " bad" : "") }, rec.diagnosis || ""));
    }));
  }

  async function pollShare(r) {
    const path = "/v1/share/" + encodeURIComponent(r.group) + "/" + encodeURIComponent(r.topic) + "/" + r.partition;
    const sh = await getJSON(path);
    if (sh.ok && sh.body) renderShare(r, sh.body);
    else if (sh.status === 404) renderShare(r, null);
    else throw new Error((sh.body && sh.body.error) || "HTTP " + sh.status);
  }

  // -- the Schema Registry (/v1/console/registry, control/registry_views.py) ---------------------
  function registryHref(subject, a, b) {
    return "#/registry/" + encodeURIComponent(subject) + (a && b ? "/" + a + "/" + b : "");
  }

  function renderRegistry(data) {
    const on = !!(data && data.enabled);
    const note = $("registry-note");
    note.hidden = on;
    note.textContent = on ? "" : "No Schema Registry on this broker (start it with --schema-registry-listener).";
    $("registry-subjects").hidden = !on;
    const c = on ? data.counts : null;
    $("registry-counts").textContent = c ? c.subjects + " subjects · " + c.versions + " versions · " +
      c.schemas + " schemas" + (c.deleted_versions ? " · " + c.deleted_versions + " soft-deleted versions" : "") : "";
    const rows = (on ? data.subjects : []).map((s) => {
      const live = s.versions.filter((v) => !v.deleted);
      const latest = (live.length ? live : s.versions)[(live.length ? live : s.versions).length - 1];
      return el("tr", { dataset: { subject: s.subject }, class: s.deleted ? "deleted" : null },
        td(s.subject + (s.deleted ? " (deleted)" : "")), td(latest.type),
        td(s.versions.map((v) => v.version + (v.deleted ? "†" : "")).join(", ")), num(latest.id),
        td(s.compatibility), td(s.mode), el("td", {}, el("a", { href: registryHref(s.subject) }, "versions")));
    });
    fill($("registry-subjects").tBodies[0], on ? rows : [], "registry-empty");
    if (!on) $("registry-empty").hidden = true;
  }

  function options(select, versions, chosen) {
    select.replaceChildren(...versions.map((v) => {
      const o = el("option", { value: String(v.version) }, "v" + v.version + " (id " + v.id + ")" + (v.deleted ? " deleted" : ""));
      o.selected = v.version === chosen;
      return o;
    }));
  }

  async function pollRegistry(r) {
    $("sr-subject").textContent = r.subject;
    const sr = await getJSON("/v1/console/registry");
    if (!sr.ok || !sr.body) throw new Error((sr.body && sr.body.error) || "HTTP " + sr.status);
    const s = (sr.body.subjects || []).find((x) => x.subject === r.subject);
    const versions = s ? s.versions : [];
    fill($("sr-versions").tBodies[0], versions.map((v) =>
      el("tr", { dataset: { version: String(v.version) } }, num(v.version), num(v.id), td(v.type),
        td(v.deleted ? "soft-deleted" : "live"))), null);
    if (versions.length === 0) {
      $("sr-summary").textContent = "No such subject.";
      $("sr-diff").replaceChildren();
      return;
    }
    // by default the latest version against the one before it
    const last = versions[versions.length - 1].version;
    const b = r.b || last;
    const a = r.a || (versions.length > 1 ? versions[versions.length - 2].version : last);
    options($("sr-a"), versions, a);
    options($("sr-b"), versions, b);
    const d = await getJSON("/v1/console/registry/diff?subject=" + encodeURIComponent(r.subject) + "&a=" + a + "&b=" + b);
    if (!d.ok || !d.body) {
      $("sr-summary").textContent = (d.body && d.body.error) || "HTTP " + d.status;
      $("sr-diff").replaceChildren();
      return;
    }
    const changed = d.body.diff.length > 0;
    // the "---"/"+++" header lines name the versions, they are not changes
    const added = d.body.diff.filter((l) => /^\+(?!\+\+)/.test(l)).length;
    const removed = d.body.diff.filter((l) => /^-(?!--)/.test(l)).length;
    $("sr-summary").textContent = "v" + a + " (id " + d.body.a.id + ") → v" + b + " (id " + d.body.b.id + "): " +
      (changed ? added + " lines added, " + removed + " removed" : "the same schema");
    const lines = changed ? d.body.diff : d.body.b.schema.split("\n").map((l) => " " + l);
    $("sr-diff").replaceChildren(...lines.map((l) => el("span", {
      class: /^@@/.test(l) ? "hunk" : /^\+(?!\+\+)/.test(l) ? "add" : /^-(?!--)/.test(l) ? "del" : null,
    }, l + "\n")));
  }

  function chooseVersions() {
    const r = route();
    if (r.view !== "registry") return;
    location.hash = registryHref(r.subject, $("sr-a").value, $("sr-b").value);
  }

  // -- routing and the poll loop -----------------------------------------------------------
  function route() {
    const g = /^#\/registry\/([^/]+)(?:\/(\d+)\/(\d+))?$/.exec(location.hash);
    if (g) {
      return { view: "registry", subject: decodeURIComponent(g[1]), a: g[2] ? Number(g[2]) : null, b: g[3] ? Number(g[3]) : null };
    }
    const s = /^#\/share\/([^/]+)\/([^/]+)\/(\d+)$/.exec(location.hash);
    if (s) {
      return { view: "share", group: decodeURIComponent(s[1]), topic: decodeURIComponent(s[2]), partition: Number(s[3]) };
    }
    const m = /^#\/txn\/(.+)$/.exec(location.hash);
    return m ? { view: "timeline", tid: decodeURIComponent(m[1]) } : { view: "overview" };
  }

  async function tick() {
    if (state.busy) { state.again = true; return; }
    state.busy = true;
    const hash = location.hash;
    const r = route();
    $("overview-view").hidden = r.view !== "overview";
    $("timeline-view").hidden = r.view !== "timeline";
    $("share-view").hidden = r.view !== "share";
    $("registry-view").hidden = r.view !== "registry";
    try {
      if (r.view === "timeline") await pollTimeline(r.tid);
      else if (r.view === "share") await pollShare(r);
      else if (r.view === "registry") await pollRegistry(r);
      else await pollOverview();
      setStatus("updated " + new Date().toLocaleTimeString(), false);
      // the reader moved on while this poll was out: the page shows the new place only next time
      if (location.hash === hash) document.body.dataset.loaded = r.view;
    } catch (e) {
      setStatus("broker unreachable: " + (e && e.message ? e.message : e), true);
    } finally {
      state.busy = false;
    }
    if (state.again || location.hash !== hash) { state.again = false; await tick(); }
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
    $("sr-a").addEventListener("change", chooseVersions);
    $("sr-b").addEventListener("change", chooseVersions);
    now();
  });

  // for tests and curious people: the drawing from data alone
  window.minibrokerConsole = { drawTimeline: drawTimeline, spansOf: spansOf };
})();
