// sessionwatch dashboard. Read-only: every call is a GET; nothing drains, acknowledges or writes.
// Text from the gateway is always put into the page with textContent, never as HTML.
"use strict";

const KINDS = ["human_direct_message", "goal_changed", "upstream_missing", "child_spawned", "run_completed",
  "run_failed", "compacted", "created", "adopted", "imported", "session_working", "session_waiting", "session_idle",
  "session_ended", "session_lost", "session_back"];
// Lifecycle states in the order the Sessions view puts them: who waits on a person first.
const STATES = ["waiting", "lost", "working", "idle", "ended"];
const TOKEN_KEY = "sessionwatch.token"; // sessionStorage: this tab only, gone when it closes
const LOG_KEEP = 1000;

const state = {
  overview: null, logRows: [], lastId: null, streamAbort: null, refreshTimer: null, authNeeded: false,
  session: null,
};

// -- small helpers -------------------------------------------------------------------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}
function svg(tag, attrs, text) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}
function when(ms) {
  if (!ms) return "—";
  const d = new Date(ms);
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}
function ago(ms) {
  if (!ms) return "never";
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  if (s < 86400) return Math.round(s / 3600) + " h ago";
  return Math.round(s / 86400) + " d ago";
}
function seg(key) { return encodeURIComponent(key); }
function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }
function headers(extra) {
  const h = Object.assign({ "Accept": "application/json" }, extra || {});
  if (token()) h["Authorization"] = "Bearer " + token();
  return h;
}
function setStatus(text, cls) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.className = "status " + (cls || "");
}

class AuthError extends Error {}

async function api(path) {
  const res = await fetch(path, { headers: headers(), cache: "no-store", credentials: "omit" });
  if (res.status === 401) { needToken("This gateway needs a token (or the one given was refused)."); throw new AuthError(); }
  let body = null;
  try { body = await res.json(); } catch (e) { body = null; }
  if (!res.ok) {
    const msg = body && body.error ? body.error.code + ": " + body.error.message : "HTTP " + res.status;
    throw new Error(msg);
  }
  return body;
}

// -- the token -----------------------------------------------------------------------------------
function needToken(reason) {
  state.authNeeded = true;
  const form = document.getElementById("token-form");
  if (reason) document.getElementById("token-reason").firstChild.textContent = reason + " ";
  form.hidden = false;
  setStatus("token needed", "down");
}
function setupToken() {
  const form = document.getElementById("token-form");
  document.getElementById("token-button").addEventListener("click", () => { form.hidden = !form.hidden; });
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = document.getElementById("token-input");
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    input.value = "";
    form.hidden = true;
    state.authNeeded = false;
    restart();
  });
  document.getElementById("token-forget").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    location.reload();
  });
}

// -- views ---------------------------------------------------------------------------------------
function showView() {
  const hash = location.hash.replace(/^#/, "") || "sessions";
  const [name, ...rest] = hash.split("/");
  const view = ["sessions", "graph", "log", "session", "health"].includes(name) ? name : "sessions";
  for (const sec of document.querySelectorAll(".view")) sec.hidden = sec.id !== "view-" + view;
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.view === view);
  if (view === "session" && rest.length) {
    const key = decodeURIComponent(rest.join("/"));
    document.getElementById("session-input").value = key;
    loadSession(key).catch(report);
  }
  if (view === "health") loadHealth().catch(report);
}
function report(err) {
  if (err instanceof AuthError) return;
  setStatus(String(err.message || err), "down");
}

// A session's lifecycle badge (nothing for a session that never reported a state).
function stateBadge(lc) {
  if (!lc) return null;
  const outcome = lc.outcome && lc.outcome !== "ok" ? " (" + lc.outcome + ")" : "";
  return el("span", { class: "badge state state-" + lc.state, "data-state": lc.state,
    title: lc.state + outcome + " since " + when(lc.since), text: lc.state + outcome + " " + ago(lc.since) });
}
// Waiting sessions first, then lost, working, idle, ended, then those without a state; stable otherwise.
function stateRank(s) {
  const i = s.lifecycle ? STATES.indexOf(s.lifecycle.state) : -1;
  return i < 0 ? STATES.length : i;
}

// Sessions: a tree of spawn parents and children, grouped by agent.
function renderSessions(ov) {
  const box = document.getElementById("sessions-tree");
  const wanted = document.getElementById("filter-lifecycle").value;
  const shown = ov.sessions
    .filter((s) => !wanted || (wanted === "none" ? !s.lifecycle : s.lifecycle && s.lifecycle.state === wanted))
    .map((s, i) => [s, i]).sort((a, b) => stateRank(a[0]) - stateRank(b[0]) || a[1] - b[1]).map((p) => p[0]);
  const byKey = new Map(shown.map((s) => [s.sessionKey + "\u0000" + s.agentId, s]));
  const children = new Map();
  const roots = [];
  for (const s of shown) {
    const parent = s.spawnedBy ? byKey.get(s.spawnedBy + "\u0000" + s.agentId) : null;
    if (parent) {
      const k = parent.sessionKey + "\u0000" + parent.agentId;
      if (!children.has(k)) children.set(k, []);
      children.get(k).push(s);
    } else roots.push(s);
  }
  const agents = [...new Set(shown.map((s) => s.agentId))].sort();
  const node = (s) => {
    const link = s.link;
    const li = el("li", { "data-session": s.sessionKey },
      el("span", { class: "node" },
        el("a", { class: "key mono", href: "#session/" + seg(s.sessionKey), text: s.sessionKey }),
        el("span", { class: "badge kind-" + s.kind, text: s.kind }),
        stateBadge(s.lifecycle),
        s.label ? el("span", { class: "meta", text: "“" + s.label + "”" }) : null,
        el("span", { class: "meta", text: "stateVersion " + s.stateVersion }),
        el("span", { class: "meta", title: when(s.lastActivity), text: "active " + ago(s.lastActivity) }),
        link ? el("span", { class: "badge link-" + link.state,
          title: link.catalogId + " " + link.threadId + (link.lastScannedAt ? ", scanned " + when(link.lastScannedAt) : ""),
          text: "upstream " + link.state + (link.missCount ? " ×" + link.missCount : "") }) : null));
    const kids = children.get(s.sessionKey + "\u0000" + s.agentId);
    if (kids) li.append(el("ul", { class: "tree" }, ...kids.map(node)));
    return li;
  };
  box.replaceChildren(...(agents.length ? agents.map((agent) => el("div", { class: "agent-group", "data-agent": agent },
    el("h3", {}, "agent ", el("code", { text: agent })),
    el("ul", { class: "tree root" }, ...roots.filter((s) => s.agentId === agent).map(node)))) :
    [el("p", { class: "empty", text: ov.sessions.length ? "No session in this state." : "No sessions yet." })]));
  const counts = STATES.map((st) => [st, ov.sessions.filter((s) => s.lifecycle && s.lifecycle.state === st).length])
    .filter((c) => c[1]).map((c) => c[1] + " " + c[0]);
  document.getElementById("sessions-count").textContent =
    ov.sessions.length + " session" + (ov.sessions.length === 1 ? "" : "s") + (ov.truncated ? " (first page)" : "") +
    (counts.length ? " · " + counts.join(", ") : "") + (wanted ? " · showing " + shown.length : "");
}

// Watch graph: watchers -> targets; stale pairs in red with their pending notice.
function renderGraph(ov) {
  const pairs = ov.watches;
  const watchers = [...new Set(pairs.map((p) => p.watcher))].sort();
  const targets = [...new Set(pairs.map((p) => p.target))].sort();
  const rowH = 28, width = 900, top = 24;
  const height = Math.max(watchers.length, targets.length, 1) * rowH + top + 10;
  const g = svg("svg", { width: width, height: height, viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": "watch graph" });
  g.append(svg("text", { x: 10, y: 14, class: "col" }, "watchers"), svg("text", { x: width - 310, y: 14 }, "targets"));
  const wy = new Map(watchers.map((w, i) => [w, top + i * rowH + rowH / 2]));
  const ty = new Map(targets.map((t, i) => [t, top + i * rowH + rowH / 2]));
  for (const p of pairs) {
    const line = svg("line", { x1: 300, y1: wy.get(p.watcher), x2: width - 320, y2: ty.get(p.target),
      class: "edge" + (p.stale ? " stale" : ""), "data-watcher": p.watcher, "data-target": p.target });
    line.append(svg("title", {}, `${p.watcher} → ${p.target}: lastSeen ${p.lastSeen}, material ${p.material}` +
      (p.stale ? " (stale)" : "")));
    g.append(line);
  }
  for (const [w, y] of wy) g.append(svg("circle", { cx: 300, cy: y, r: 4 }), svg("text", { x: 10, y: y + 4 }, w));
  for (const [t, y] of ty) g.append(svg("circle", { cx: width - 320, cy: y, r: 4 }), svg("text", { x: width - 310, y: y + 4 }, t));
  document.getElementById("graph").replaceChildren(pairs.length ? g : el("p", { class: "empty", text: "Nobody watches anybody yet." }));
  const stale = pairs.filter((p) => p.stale);
  const body = document.querySelector("#stale-table tbody");
  body.replaceChildren(...(stale.length ? stale.map((p) => el("tr", { class: "stale stale-pair", "data-watcher": p.watcher, "data-target": p.target },
    el("td", { class: "key" }, el("a", { class: "key", href: "#session/" + seg(p.watcher), text: p.watcher })),
    el("td", { class: "key" }, el("a", { class: "key", href: "#session/" + seg(p.target), text: p.target })),
    el("td", { class: "num", text: p.lastSeen }), el("td", { class: "num", text: p.material }),
    el("td", { class: "stale-text", text: p.notice || "(notice delivered or not queued)" }))) :
    [el("tr", {}, el("td", { colspan: 5, class: "empty", text: "No stale pairs: every watcher is up to date." }))]));
  document.getElementById("graph-count").textContent = pairs.length + " pairs, " + stale.length + " stale";
}

async function refreshOverview() {
  const ov = await api("/v1/ui/overview");
  state.overview = ov;
  renderSessions(ov);
  renderGraph(ov);
  return ov;
}
// At most one overview read per REFRESH_MS while events stream in (the first soon after a quiet spell),
// so a busy log costs the gateway one overview a second, not one per batch.
const REFRESH_MS = 1000;
let lastRefresh = 0;
function scheduleRefresh(delay) {
  if (state.refreshTimer) return;
  const wait = Math.max(delay, lastRefresh + REFRESH_MS - Date.now());
  state.refreshTimer = setTimeout(() => {
    state.refreshTimer = null;
    lastRefresh = Date.now();
    refreshOverview().catch(report);
  }, wait);
}

// Live log: the resumable log stream, read with fetch (so the token goes in a header, not the URL).
function logRow(e, fresh) {
  const actor = e.actorType + (e.actorId ? " " + e.actorId : "");
  return el("tr", { class: "log-row" + (fresh ? " fresh" : ""), "data-seq": e.sequence, "data-session": e.sessionKey,
    "data-agent": e.agentId, "data-kind": e.kind },
  el("td", { class: "num", text: e.sequence }), el("td", { class: "mono", text: when(e.occurredAt) }),
  el("td", { class: "key" }, el("a", { class: "key", href: "#session/" + seg(e.sessionKey), text: e.sessionKey })),
  el("td", {}, el("span", { class: "badge", text: e.kind })), el("td", { text: actor }), el("td", { text: e.summary }));
}
function passes(e) {
  const s = document.getElementById("filter-session").value.trim();
  const a = document.getElementById("filter-agent").value.trim();
  const k = document.getElementById("filter-kind").value;
  return (!s || e.sessionKey.includes(s)) && (!a || e.agentId === a) && (!k || e.kind === k);
}
function renderLog() {
  const body = document.querySelector("#log-table tbody");
  const rows = state.logRows.filter(passes).slice(-300).reverse();
  body.replaceChildren(...(rows.length ? rows.map((e) => logRow(e, false)) :
    [el("tr", {}, el("td", { colspan: 6, class: "empty", text: "Nothing yet; new events appear here as they are recorded." }))]));
}
function addEvents(events) {
  if (!events.length) return;
  const body = document.querySelector("#log-table tbody");
  const empty = body.querySelector("td.empty");
  if (empty) empty.parentElement.remove();
  for (const e of events) {
    state.logRows.push(e);
    if (passes(e)) body.prepend(logRow(e, true));
  }
  if (state.logRows.length > LOG_KEEP) state.logRows.splice(0, state.logRows.length - LOG_KEEP);
  while (body.children.length > 300) body.lastElementChild.remove();
}

async function follow() {
  const ctl = new AbortController();
  state.streamAbort = ctl;
  let retry = 2000;
  while (!ctl.signal.aborted) {
    try {
      const h = headers({ "Accept": "text/event-stream" });
      if (state.lastId !== null) h["Last-Event-ID"] = String(state.lastId);
      const res = await fetch("/v1/events/stream", { headers: h, signal: ctl.signal, cache: "no-store", credentials: "omit" });
      if (res.status === 401) { needToken("This gateway needs a token (or the one given was refused)."); return; }
      if (!res.ok || !res.body) throw new Error("log stream: HTTP " + res.status);
      setStatus("live", "live");
      document.getElementById("log-state").textContent = "following";
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let cut;
        const batch = [];
        while ((cut = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          let event = "message", id = null;
          const data = [];
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) continue;
            const i = line.indexOf(":");
            const name = i < 0 ? line : line.slice(0, i);
            const val = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
            if (name === "event") event = val;
            else if (name === "data") data.push(val);
            else if (name === "id" && /^\d+$/.test(val)) id = Number(val);
            else if (name === "retry" && /^\d+$/.test(val)) retry = Number(val);
          }
          if (id !== null) state.lastId = id;
          if (!data.length) continue;
          const payload = JSON.parse(data.join("\n"));
          if (event === "log") batch.push(payload);
          else if (event === "gap") {
            document.getElementById("log-state").textContent =
              `events after ${payload.after} were pruned; resumed at ${payload.earliestAvailableSequence}`;
          }
        }
        if (batch.length) { addEvents(batch); scheduleRefresh(100); }
      }
    } catch (err) {
      if (ctl.signal.aborted) return;
      report(err);
    }
    setStatus("reconnecting…", "down");
    document.getElementById("log-state").textContent = "reconnecting";
    await new Promise((r) => setTimeout(r, retry));
  }
}

// A session's page: timeline, changesSince N, watchers and cursors, queue (peeked, never drained).
function table(cols, rows, rowFn, emptyText) {
  return el("table", {}, el("thead", {}, el("tr", {}, ...cols.map((c) => el("th", { text: c })))),
    el("tbody", {}, ...(rows.length ? rows.map(rowFn) : [el("tr", {}, el("td", { colspan: cols.length, class: "empty", text: emptyText }))])));
}
function pairRow(p) {
  return el("tr", { class: p.stale ? "stale" : "" }, el("td", { class: "key", text: p.watcher }),
    el("td", { class: "key", text: p.target }), el("td", { class: "num", text: p.lastSeen }),
    el("td", { class: "num", text: p.notified }), el("td", { class: "num", text: p.material }),
    el("td", { text: p.provenance }), el("td", { class: "stale-text", text: p.stale ? (p.notice || "stale") : "" }));
}
async function loadSession(key) {
  const since = Number(document.getElementById("since-input").value || 0);
  const data = await api(`/v1/sessions/${seg(key)}/inspect?after=${since}`);
  state.session = key;
  document.getElementById("session-key").textContent = key;
  const s = data.session, ch = data.changesSince;
  const pairCols = ["watcher", "target", "lastSeen", "notified", "material", "provenance", "pending notice"];
  document.getElementById("session-body").replaceChildren(
    el("div", { class: "grid" },
      el("div", { class: "card" }, el("h3", { text: "Session" }), el("dl", {},
        el("dt", { text: "agent" }), el("dd", { text: s.agentId }),
        el("dt", { text: "kind" }), el("dd", { text: s.kind }),
        el("dt", { text: "stateVersion" }), el("dd", { text: s.stateVersion }),
        el("dt", { text: "lifecycle" }), el("dd", { id: "session-lifecycle" }, stateBadge(s.lifecycle) || "—"),
        el("dt", { text: "spawned by" }), el("dd", { class: "mono", text: s.spawnedBy || "—" }),
        el("dt", { text: "active run" }), el("dd", { text: s.activeRunId || "—" }),
        el("dt", { text: "updated" }), el("dd", { text: when(s.updatedAt) }),
        el("dt", { text: "upstream" }), el("dd", { text: data.link ? data.link.catalogId + " " + data.link.threadId : "—" }))),
      el("div", { class: "card", id: "changes-card" }, el("h3", { text: `changesSince ${ch.after}` }),
        el("p", { class: "meta", text: `${ch.events.length} events, truncated ${ch.truncated}, historyGap ${ch.historyGap}, ` +
          `earliestAvailableSequence ${ch.earliestAvailableSequence}` }),
        el("pre", { id: "changes-json", text: JSON.stringify(ch, null, 2) }))),
    el("h3", { text: "Timeline" + (data.timeline.partial ? " (newest of the first pages read)" : "") }),
    table(["seq", "time", "kind", "actor", "summary"], data.timeline.events.slice().reverse(), (e) => el("tr", {},
      el("td", { class: "num", text: e.sequence }), el("td", { class: "mono", text: when(e.occurredAt) }),
      el("td", {}, el("span", { class: "badge", text: e.kind })), el("td", { text: e.actorType + (e.actorId ? " " + e.actorId : "") }),
      el("td", { text: e.summary })), "No events."),
    el("h3", { text: "Watchers of this session" }),
    table(pairCols, data.watchers, pairRow, "Nobody watches this session."),
    el("h3", { text: "Cursors of this session (what it watches)" }),
    table(pairCols, data.watching, pairRow, "This session watches nothing."),
    el("h3", { text: "Queue (peeked: shown, never acknowledged)" }),
    table(["id", "time", "context", "text"], data.queue, (q) => el("tr", {},
      el("td", { class: "num", text: q.id }), el("td", { class: "mono", text: when(q.ts) }),
      el("td", { class: "mono", text: q.contextKey || "" }), el("td", { text: q.text })), "The queue is empty."));
}

// Health: readiness (open route), store, sweep, prune, monitor ticks per link.
async function loadHealth() {
  let ready;
  try {
    const res = await fetch("/v1/health/ready", { cache: "no-store", credentials: "omit" });
    ready = await res.json();
  } catch (e) { ready = { status: "unreachable", message: String(e) }; }
  const h = await api("/v1/ui/health");
  const dl = (pairs) => el("dl", {}, ...pairs.flatMap(([k, v, cls]) => [el("dt", { text: k }), el("dd", { class: cls || "", text: v })]));
  const drops = h.droppedRecordings || { total: 0, byCause: {} };
  document.getElementById("health-body").replaceChildren(el("div", { class: "grid" },
    el("div", { class: "card", id: "health-ready" }, el("h3", { text: "Readiness" }), dl([
      ["status", ready.status, ready.status === "ok" ? "ok" : "bad"],
      ["writable", String(ready.writable)], ["sweep ran", String(ready.sweepRan)],
      ["message", ready.message || "—"], ["version", ready.version || "—"]])),
    el("div", { class: "card" }, el("h3", { text: "Store" }), dl([
      ["backend", h.store.backend], ["url", h.store.url], ["read-only", String(h.store.readOnly)],
      ["log", `sequences ${h.log.earliest}…${h.log.last}`], ["SSE streams", String(h.streams)],
      ["dropped recordings", String(drops.total), drops.total ? "warn" : "ok"]])),
    el("div", { class: "card" }, el("h3", { text: "Sweep and prune" }), dl([
      ["restart sweep", h.sweep.ran ? "ran " + ago(h.sweep.at) + (h.sweep.swept == null ? "" : " (" + h.sweep.swept + " re-materialized)") : "not yet", h.sweep.ran ? "ok" : "bad"],
      ["sweep error", h.sweep.error || "—"],
      ["last prune", h.prune.lastAt ? ago(h.prune.lastAt) + " (" + when(h.prune.lastAt) + ")" : "never"],
      ["pruned through", "sequence " + h.prune.prunedThrough],
      ["prune interval", Math.round(h.prune.intervalMs / 1000) + " s"],
      ["retention", Math.round(h.prune.retentionMs / 86400000) + " days, at most " + h.prune.maxEvents + " events"]]))),
  el("h3", { text: "Upstream monitor" }),
  el("p", { class: "meta", text: `last tick #${h.monitor.tick || 0}: ${h.monitor.status || "never"}` +
    (h.monitor.startedAt ? ", " + ago(h.monitor.startedAt) : "") }),
  table(["session", "catalog", "thread", "state", "last scanned", "misses", "last tick"], h.monitor.links, (l) => el("tr", {},
    el("td", { class: "key", text: l.sessionKey }), el("td", { text: l.catalogId }), el("td", { class: "mono", text: l.threadId }),
    el("td", {}, el("span", { class: "badge link-" + l.state, text: l.state })), el("td", { text: ago(l.lastScannedAt) }),
    el("td", { class: "num", text: l.missCount }), el("td", { text: l.lastTick && l.lastTick.status ? l.lastTick.status : "—" })),
  "No adopted upstream threads."));
}

// -- start ---------------------------------------------------------------------------------------
async function restart() {
  if (state.streamAbort) state.streamAbort.abort();
  state.logRows = [];
  state.lastId = null;
  try {
    const ov = await refreshOverview();
    state.logRows = ov.recent.slice();
    // the stream resumes right after what the overview showed
    state.lastId = Math.max(ov.head, ...ov.recent.map((e) => e.sequence));
    renderLog();
    setStatus("live", "live");
    follow();
    showView();
  } catch (err) { report(err); }
}

document.addEventListener("DOMContentLoaded", () => {
  const kind = document.getElementById("filter-kind");
  for (const k of KINDS) kind.append(el("option", { value: k, text: k }));
  for (const id of ["filter-session", "filter-agent", "filter-kind"]) {
    document.getElementById(id).addEventListener("input", renderLog);
  }
  const lifecycle = document.getElementById("filter-lifecycle");
  for (const st of STATES) lifecycle.append(el("option", { value: st, text: st }));
  lifecycle.append(el("option", { value: "none", text: "never reported" }));
  lifecycle.addEventListener("input", () => { if (state.overview) renderSessions(state.overview); });
  document.getElementById("session-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const key = document.getElementById("session-input").value.trim();
    if (key) {
      if (location.hash === "#session/" + seg(key)) loadSession(key).catch(report);
      else location.hash = "#session/" + seg(key);
    }
  });
  window.addEventListener("hashchange", showView);
  setupToken();
  showView();
  restart();
  setInterval(() => { if (!state.authNeeded) scheduleRefresh(0); }, 5000); // relative times, and a safety net
});
