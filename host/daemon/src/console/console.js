// The wazoo web console: follows /console/events (server-sent events, one JSON snapshot of the
// host this viewer may see whenever it changes) and draws it. Every value from the daemon goes
// into the page as text (textContent), never as markup: a claim's data is any client's.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
let skew = 0; // the browser's clock minus the daemon's, in ms
let snapshots = 0;
let source = null;
let prefix = "/"; // the claims followed are under this path

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.dataset[k.slice(5).replace(/-(.)/g, (_, c) => c.toUpperCase())] = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
  return e;
}

function age(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
  if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
  return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
}

// An element that shows how long ago `since` (ms since the epoch, the daemon's clock) was.
function since(ms) {
  const e = el("span", { class: "age", "data-since": String(ms) });
  e.textContent = ms ? age(Date.now() - skew - ms) : "";
  return e;
}

function tickAges() {
  for (const e of document.querySelectorAll("[data-since]")) {
    const ms = Number(e.dataset.since);
    if (ms) e.textContent = age(Date.now() - skew - ms);
  }
}

function fill(parent, children) {
  parent.replaceChildren(...children);
}

function renderClaims(view) {
  const err = $("claims-error");
  err.hidden = !view.claims_error;
  err.textContent = view.claims_error || "";
  const total = view.claims.length + (view.claims_more || 0);
  $("claims-count").textContent = "(" + total + (view.prefix && view.prefix !== "/" ? " under " + view.prefix : "") + ")";
  if (view.claims.length === 0) {
    fill($("claims"), [el("p", { class: "muted empty" }, view.claims_error ? "" : "No claim is held or waited for.")]);
    return;
  }
  const shown = view.claims.map((c) => {
    const holders = c.contenders.filter((k) => k.holds).length;
    const waiting = c.contenders.length - holders + (c.more || 0);
    const rows = c.contenders.map((k, i) =>
      el("tr", { class: k.holds ? "holds" : "waits", "data-holds": String(k.holds), "data-node": k.node },
        el("td", {}, String(i + 1)),
        el("td", {}, el("span", { class: "role" }, (k.holds ? "holds" : "waits") + (k.mode ? " (" + k.mode + ")" : ""))),
        el("td", { class: "identity" }, k.identity || "—"),
        el("td", { class: "mono" }, k.session),
        el("td", { class: "mono" }, k.token),
        el("td", {}, since(k.since_ms))));
    if (c.more) rows.push(el("tr", {}, el("td", { colspan: "6", class: "muted" }, "… and " + c.more + " more waiting")));
    return el("div", { class: "claim", "data-path": c.path, "data-kind": c.kind },
      el("div", { class: "claim-head" },
        el("code", { class: "path" }, c.path),
        el("span", { class: "badge kind" }, c.kind),
        el("span", { class: "muted" }, holders + " holding, " + waiting + " waiting")),
      el("table", {},
        el("thead", {}, el("tr", {}, ...["#", "", "identity", "ZooKeeper session", "token", "for"].map((h) => el("th", {}, h)))),
        el("tbody", {}, ...rows)));
  });
  if (view.claims_more) {
    shown.push(el("p", { class: "muted", id: "claims-more" },
      "… and " + view.claims_more + " more claims: show those under a narrower path."));
  }
  fill($("claims"), shown);
}

function renderSessions(view) {
  $("sessions-count").textContent = "(" + view.sessions.length + ")";
  if (view.sessions.length === 0) {
    fill($("sessions"), [el("tr", {}, el("td", { colspan: "5", class: "muted" }, "No client session is open."))]);
    return;
  }
  fill($("sessions"), view.sessions.map((s) => {
    const claims = s.claims.length
      ? s.claims.map((c) => el("div", { class: c.holds ? "holds" : "waits" },
        c.holds ? "holds " : "waits for ", el("code", {}, c.path), " (" + c.family + ") ", since(c.since_ms)))
      : [el("span", { class: "muted" }, "nothing")];
    return el("tr", { "data-session": s.session, "data-name": s.name },
      el("td", { class: "mono" }, s.session),
      el("td", {}, s.name),
      el("td", { class: "mono" }, s.peer || "—"),
      el("td", {}, since(s.opened_ms)),
      el("td", {}, ...claims));
  }));
}

function renderRecipes(view) {
  $("swaps").textContent = (view.registry ? "follows the recipe registry · " : "") + view.swaps + " swap" + (view.swaps === 1 ? "" : "s") + " since start";
  fill($("recipes"), view.recipes.map((r) =>
    el("tr", { "data-recipe": r.name },
      el("td", {}, r.name),
      el("td", { class: "mono" }, r.version || "—"),
      el("td", { class: "mono digest", title: r.digest || "" }, r.digest ? r.digest.slice(0, 16) + "…" : (r.refused ? "refused: " + r.refused : "—")),
      el("td", { class: "mono" }, r.world || ""),
      el("td", {}, r.source),
      el("td", {}, r.loaded_ms ? since(r.loaded_ms) : "", r.loaded_ms ? " ago" : ""))));
}

function renderQueues(view) {
  const queues = view.queues || [];
  $("queues-count").textContent = "(" + queues.length + ")";
  if (queues.length === 0) {
    fill($("queues"), [el("tr", {}, el("td", { colspan: "2", class: "muted" }, "No queue is in use through this daemon."))]);
    return;
  }
  fill($("queues"), queues.map((q) =>
    el("tr", { "data-queue": q.path }, el("td", { class: "mono" }, q.path), el("td", {}, String(q.depth)))));
}

function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

function bars(target, values, cls) {
  const max = Math.max(1, ...values);
  const h = 60;
  const shapes = [];
  values.forEach((v, i) => {
    if (v > 0) {
      const bh = Math.max(1, (v / max) * (h - 4));
      shapes.push(svg("rect", { x: i, y: h - bh, width: 1, height: bh, class: cls }));
    }
  });
  target.replaceChildren(...shapes);
  return max;
}

function lines(target, series) {
  const max = Math.max(1, ...series.flatMap((s) => s.values));
  const h = 60;
  target.replaceChildren(...series.map((s) =>
    svg("polyline", { class: s.cls, fill: "none", points: s.values.map((v, i) => i + "," + (h - (v / max) * (h - 4)).toFixed(1)).join(" ") })));
  return max;
}

function renderPulse(view) {
  const p = view.pulse;
  const peak = bars($("chart-acquired"), p.acquired, "bar");
  const last = p.acquired.slice(-10).reduce((a, b) => a + b, 0) / 10;
  $("acq-now").textContent = "· last 10 s " + last.toFixed(1) + "/s · peak " + (Math.max(...p.acquired)) + "/s";
  const top = lines($("chart-wait"), [{ cls: "max", values: p.wait_max_ms }, { cls: "mean", values: p.wait_mean_ms }]);
  $("wait-now").textContent = "· top " + (Math.max(...p.wait_max_ms) >= 1000 ? (Math.max(...p.wait_max_ms) / 1000).toFixed(1) + " s" : Math.max(...p.wait_max_ms) + " ms");
  void peak; void top;
}

function render(message) {
  skew = Date.now() - message.now_ms;
  const view = message.view;
  $("tenant").textContent = view.tenant ? "tenant " + view.tenant : "single host";
  const zk = $("zookeeper");
  zk.textContent = "ZooKeeper: " + view.zookeeper;
  zk.className = "badge " + (view.zookeeper === "serving" ? "ok" : "bad");
  renderClaims(view);
  renderSessions(view);
  renderRecipes(view);
  renderQueues(view);
  renderPulse(view);
  snapshots += 1;
  document.body.dataset.snapshots = String(snapshots);
  $("updated").textContent = "updated " + new Date().toLocaleTimeString();
}

function live(on) {
  const b = $("live");
  b.textContent = on ? "live" : "reconnecting";
  b.className = "badge " + (on ? "ok" : "warn");
  document.body.dataset.state = on ? "live" : "reconnecting";
}

function showLogin(refused) {
  if (source) source.close();
  source = null;
  $("main").hidden = true;
  $("login").hidden = false;
  $("refused").hidden = !refused;
  $("live").textContent = "logged out";
  document.body.dataset.state = "login";
  $("token").focus();
}

async function whoami() {
  const r = await fetch("/console/whoami", { cache: "no-store", credentials: "same-origin" });
  return r.ok ? r.json() : null;
}

async function start() {
  const refused = new URLSearchParams(location.search).has("refused");
  if (location.search) history.replaceState(null, "", "/");
  let me = null;
  try {
    me = await whoami();
  } catch (e) {
    live(false);
    setTimeout(start, 2000);
    return;
  }
  if (!me) return showLogin(refused);
  $("login").hidden = true;
  $("main").hidden = false;
  $("logout").hidden = !me.guarded;
  follow();
}

// Follows the claims under `prefix`, from a new event stream.
function follow() {
  if (source) source.close();
  source = new EventSource("/console/events?prefix=" + encodeURIComponent(prefix));
  // Live once a snapshot is on the page, not when the stream opens: a page that says "live"
  // shows what the daemon sent.
  source.addEventListener("snapshot", (e) => { render(JSON.parse(e.data)); live(true); });
  source.onerror = async () => {
    // EventSource opens the next stream by itself; a viewer whose token no longer shows
    // anything (a tenant removed, a token changed) is asked to log in again.
    live(false);
    const closed = source.readyState === EventSource.CLOSED;
    try {
      if (!(await whoami())) showLogin(false);
      else if (closed) {
        // Refused for good (a prefix the daemon does not take): said, and not tried again.
        $("claims-error").hidden = false;
        $("claims-error").textContent = "The daemon refused to show the claims under " + prefix + ".";
      }
    } catch (e) { /* the daemon is away: EventSource keeps trying */ }
  };
}

// A script error is kept on the page, where a test (or a curious reader) can find it.
window.addEventListener("error", (e) => { document.body.dataset.error = String(e.message); });
setInterval(tickAges, 1000);
document.addEventListener("DOMContentLoaded", () => {
  $("under").addEventListener("submit", (e) => {
    e.preventDefault();
    const wanted = $("prefix").value.trim() || "/";
    prefix = wanted.startsWith("/") ? wanted : "/" + wanted;
    $("prefix").value = prefix;
    document.body.dataset.state = "reconnecting";
    follow();
  });
  start();
});
