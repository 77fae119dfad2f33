// fairshared's page: the tree as an icicle, "Me" (standing, history, pending jobs, recovery) and a job
// box, all drawn from the daemon's read-only API (/api/v1/, docs/api-v1.md).  Plain DOM and hand-drawn
// SVG: no framework, no build step, nothing fetched from elsewhere (the page must work air-gapped).
// Text from the API only ever goes in through textContent, never as HTML.

const SVG = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);
const TREE_DEPTH = 3;      // levels below the zoomed-on association fetched at once (the API's max)
const TREE_LIMIT = 2000;   // rows per view: a tree of 100,000 associations is never fetched whole
const LEVEL_H = 40;        // pixels per tree level

// ---- small helpers -------------------------------------------------------------------------------

// An element with attributes (class, text, on<event>, data-*, anything else as an attribute) and children.
function h(tag, attrs = {}, ...kids) {
  const el = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const kid of kids.flat(Infinity)) if (kid !== null && kid !== undefined) el.append(kid);
  return el;
}

function show(id, ...nodes) { $(id).replaceChildren(...nodes.flat(Infinity).filter((n) => n !== null && n !== undefined)); }
const error = (e) => h("p", { class: "error", role: "alert", text: String(e.message || e) });
const note = (text) => h("p", { class: "muted", text });

// The API's numbers: null is a blank sshare column, "inf" is infinity (docs/api-v1.md).
function num(v) { return v === "inf" ? Infinity : v === null || v === undefined ? null : Number(v); }
function fmt(v, digits = 6) {
  const x = num(v);
  if (x === null || Number.isNaN(x)) return "–";
  if (x === Infinity) return "∞";
  return x.toFixed(digits);
}
const int = (v) => (num(v) === null ? "–" : Math.round(num(v)).toLocaleString("en-US"));
const signed = (v) => (v > 0 ? "+" : v < 0 ? "−" : "±") + Math.abs(Math.round(v)).toLocaleString("en-US");
const ordinal = (n) => n + (["th", "st", "nd", "rd"][(n % 100 - 20) % 10] || ["th", "st", "nd", "rd"][n % 100] || "th");
const when = (t, seconds = false) => new Date(t * 1000).toLocaleString("en-GB",
  { dateStyle: "medium", timeStyle: seconds ? "medium" : "short" });
const pathText = (path) => path.map((p) => (p.user || p.account) + (num(p.level_fs) === null ? "" : " " + fmt(p.level_fs, 3))).join(" › ");
const rowName = (r) => (r.user ? `${r.user} (${r.account}${r.partition ? ", " + r.partition : ""})` : r.account);

async function api(path) {
  const resp = await fetch(path, { headers: { Accept: "application/json" } });
  let body = null;
  try { body = await resp.json(); } catch { /* not JSON: the status says it */ }
  if (!resp.ok) throw new Error(body && body.error ? body.error : `${path}: HTTP ${resp.status}`);
  if (body && body.cycle) showCycle(body.cycle);
  return body;
}

function showCycle(c) {
  const age = num(c.age_seconds) === null ? "" : ` (${duration(c.age_seconds)} ago)`;
  $("cycle").textContent = `cycle ${c.number} · ${c.algorithm} · evaluated ${when(c.evaluated_at)}${age}` +
    (c.stale ? " · stale: the cycles since have failed" : "");
  $("cycle").classList.toggle("error", Boolean(c.stale));
}

// Fair share 0 → warm red, 0.5 → pale yellow, 1 → blue; all light enough for dark text (contrast > 7:1).
const STOPS = [[0, [226, 110, 92]], [0.5, [246, 226, 150]], [1, [115, 175, 222]]];
function colour(v) {
  if (v === null || Number.isNaN(v)) return "rgb(210,210,210)";
  v = Math.max(0, Math.min(1, v));
  const i = v <= 0.5 ? 0 : 1;
  const [a, ca] = STOPS[i], [b, cb] = STOPS[i + 1];
  const t = (v - a) / (b - a);
  return `rgb(${ca.map((c, k) => Math.round(c + t * (cb[k] - c))).join(",")})`;
}
// A user's colour is its factor; an account's is its LevelFS folded into 0..1 (1 → 0.5, ∞ → 1).
function rowColour(r) {
  if (r.user) return colour(num(r.fairshare));
  const lfs = num(r.level_fs);
  return colour(lfs === null ? null : lfs === Infinity ? 1 : lfs / (1 + lfs));
}

// ---- the tree ------------------------------------------------------------------------------------

let crumbs = [{ id: 0, account: "root", user: null, children: null }];   // the zoom path, root first
let firstDraw = true;

// The deepest view (3 levels, then 2, then 1) whose rows all fit in one page, so every band drawn is
// whole: a one-row probe of each depth says how many rows it has.  At one level a page may still not
// hold every child: the rest is drawn as one "+N more" block.
async function showTree() {
  const top = crumbs[crumbs.length - 1];
  const url = (depth, limit, offset = 0) => `api/v1/tree?parent=${top.id}&depth=${depth}&limit=${limit}&offset=${offset}`;
  try {
    let depth = TREE_DEPTH;
    while (depth > 1 && (await api(url(depth, 1))).total > TREE_LIMIT) depth--;
    // only a one-level view is paged (a deeper one fits a page whole): the top's children from offset
    const data = await api(url(depth, TREE_LIMIT, depth === 1 ? top.offset || 0 : 0));
    if (data.parent && data.parent.account !== top.account) {
      // ids hold within a cycle only (docs/api-v1.md): the tree changed under a zoomed view; start over
      crumbs = [crumbs[0]];
      return showTree();
    }
    if (data.parent) top.children = data.parent.children;   // the top's own row: how many below it
    if (depth === 1) top.children = data.total;
    drawTree(top, data, depth);
  } catch (e) { show("tree", error(e)); }
  drawCrumbs();
}

function drawCrumbs() {
  show("crumbs", crumbs.map((c, i) => i === crumbs.length - 1
    ? h("span", { "aria-current": "location", text: c.account })
    : [h("button", { class: "link", text: c.account, onclick: () => { crumbs = crumbs.slice(0, i + 1); showTree(); } }),
      h("span", { class: "muted", "aria-hidden": "true", text: "›" })]));
}

// Lay the rows out as an icicle: each level a band, each association a rectangle as wide as its share
// of its parent (85 % by share, 15 % shared equally, so that a 0-share association can still be
// clicked), and the top's children on other pages as hatched blocks either side ("← N", "+N more").
function layout(top, items, width, depth) {
  const kids = new Map();
  for (const r of items) (kids.get(r.parent) || kids.set(r.parent, []).get(r.parent)).push(r);
  const boxes = [];
  const place = (node, x0, x1, level) => {
    const rows = kids.get(node.id) || [];
    const total = node.children ?? rows.length;
    if (!rows.length && !total) return;
    // the rows of other pages (only the top's children are paged): a block each side, 90 px at most
    const before = node === top ? top.offset || 0 : 0, after = Math.max(0, total - before - rows.length);
    const room = (n) => (n ? (rows.length ? Math.min(90, (x1 - x0) * 0.3) : x1 - x0) : 0);
    if (before) boxes.push({ more: before, back: true, parent: node, x: x0, w: room(before), level });
    let x = x0 + room(before);
    const span = x1 - x - room(after);
    const shares = rows.map((r) => Math.max(0, num(r.norm_shares) || 0));
    const sum = shares.reduce((a, b) => a + b, 0);
    rows.forEach((r, i) => {
      const w = span * (0.85 * (sum > 0 ? shares[i] / sum : 1 / rows.length) + 0.15 / rows.length);
      boxes.push({ row: r, x, w, level });
      place(r, x, x + w, level + 1);
      x += w;
    });
    if (after && level <= depth) boxes.push({ more: after, parent: node, x, w: x1 - x, level });
  };
  boxes.push({ row: top, x: 0, w: width, level: 0, top: true });
  place(top, 0, width, 1);
  return boxes;
}

function drawTree(top, data, depth) {
  const width = Math.max(600, $("tree").clientWidth);
  const boxes = layout(top, data.items, width, depth);
  const levels = Math.max(...boxes.map((b) => b.level)) + 1;
  const svg = h("svg:svg", { width, height: levels * LEVEL_H, viewBox: `0 0 ${width} ${levels * LEVEL_H}`,
    class: "icicle" });
  for (const b of boxes) {
    if (b.w < 0.2) continue;   // too thin to see or hit (thinner ones still blend into a band's colour)
    const g = h("svg:g", { class: b.more ? "more" : b.row.user ? "user" : "account", tabindex: -1, role: "button",
      "data-level": b.level, "data-x": b.x + b.w / 2 });
    const thin = b.w < 3;   // no white gap around a sliver: it would be all gap
    if (thin) g.classList.add("thin");
    const r = h("svg:rect", { x: b.x + (thin ? 0 : 0.5), y: b.level * LEVEL_H + 0.5, width: thin ? b.w : b.w - 1, height: LEVEL_H - 2,
      rx: 3, fill: b.more ? "url(#hatch)" : rowColour(b.row) });
    let label, title, act;
    if (b.more) {
      const paged = b.parent === top;
      label = b.back ? `← ${b.more.toLocaleString("en-US")}` : `+${b.more.toLocaleString("en-US")} more`;
      title = `${label} under ${b.parent.account}: ${paged ? (b.back ? "the previous page" : "the next page") : "zoom in to see them"}`;
      act = !paged ? () => zoom(b.parent) : () => {
        top.offset = b.back ? Math.max(0, (top.offset || 0) - TREE_LIMIT) : (top.offset || 0) + (data.items.length);
        showTree();
      };
    } else if (b.top) {
      label = crumbs.map((c) => c.account).join(" › ");
      title = crumbs.length > 1 ? `${label}: back up one level` : "root";
      act = crumbs.length > 1 ? () => { crumbs.pop(); showTree(); } : null;
    } else {
      const row = b.row;
      label = row.user || row.account;
      title = row.user
        ? `${rowName(row)}: factor ${fmt(row.fairshare)}, rank ${row.rank ?? "–"}, LevelFS ${fmt(row.level_fs, 3)}`
        : `${row.account}: LevelFS ${fmt(row.level_fs, 3)}, ${row.children} below; shares ${row.raw_shares}`;
      act = row.user ? () => pick(row) : () => zoom(row);
      g.dataset.id = row.id;
      if (row.user) g.dataset.user = row.user;
    }
    g.setAttribute("aria-label", title);
    g.append(h("svg:title", { text: title }), r);
    if (b.w > 8 * Math.min(label.length, 4) + 8) {
      const room = Math.floor((b.w - 8) / 6.6);   // characters that fit at 12 px (about 6.6 px each)
      g.append(h("svg:text", { x: b.x + 6, y: b.level * LEVEL_H + LEVEL_H / 2 + 4,
        text: label.length > room ? label.slice(0, Math.max(1, room - 1)) + "…" : label }));
    }
    if (act) {
      g.addEventListener("click", act);
      g.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); act(); } });
    } else { g.removeAttribute("tabindex"); g.removeAttribute("role"); }
    svg.append(g);
  }
  svg.prepend(h("svg:defs", {}, h("svg:pattern", { id: "hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse",
    patternTransform: "rotate(45)" }, h("svg:rect", { width: 6, height: 6, fill: "#eee" }),
    h("svg:line", { x1: 0, y1: 0, x2: 0, y2: 6, stroke: "#999", "stroke-width": 2 }))));
  const stops = [...svg.querySelectorAll("g[tabindex]")];
  const first = stops.find((g) => g.dataset.level === "1") || stops[0];
  if (first) first.setAttribute("tabindex", "0");
  svg.addEventListener("keydown", (ev) => arrowKey(ev, stops));
  const hadFocus = $("tree").contains(document.activeElement);   // a zoom by keyboard keeps the focus
  show("tree", svg);
  if (hadFocus && first) first.focus();
  const n = (x) => x.toLocaleString("en-US");
  $("tree-note").textContent = (data.total > data.items.length
    ? `${n(data.offset + 1)}–${n(data.offset + data.items.length)} of ${n(data.total)} associations` : `${n(data.total)} associations`) +
    ` in this view (${depth} level${depth > 1 ? "s" : ""} down)` +
    (boxes.some((b) => b.level === depth && b.row && b.row.children) ? "; zoom in for the rest." : ".");
  if (firstDraw) {   // what the browser test times: navigation start → the first tree on screen
    firstDraw = false;
    performance.mark("fairshared:tree-drawn");
    document.body.dataset.treeDrawn = String(performance.now());
  }
}

// One tab stop for the whole tree (a roving tabindex): the arrows move between rectangles, Left and
// Right along a band, Up and Down to the band above or below, nearest to the one left.
function arrowKey(ev, stops) {
  const moves = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
  const at = stops.indexOf(document.activeElement);
  if (!(ev.key in moves) || at < 0) return;
  ev.preventDefault();
  const [dl, dx] = moves[ev.key], here = stops[at];
  const level = Number(here.dataset.level) + dl, x = Number(here.dataset.x);
  const band = stops.filter((g) => Number(g.dataset.level) === level);
  let next;
  if (dx) next = band[band.indexOf(here) + dx];
  else next = band.reduce((best, g) => (!best || Math.abs(g.dataset.x - x) < Math.abs(best.dataset.x - x) ? g : best), null);
  if (!next) return;
  here.setAttribute("tabindex", "-1");
  next.setAttribute("tabindex", "0");
  next.focus();
}

function zoom(row) { crumbs.push({ id: row.id, account: row.account, user: null, children: row.children, offset: 0 }); showTree(); }

// A user association clicked in the tree: its row at once, then that user's whole standing.
function pick(row) {
  show("picked", h("dl", { class: "facts", id: "picked-facts" },
    fact("association", rowName(row)), fact("factor", fmt(row.fairshare), "fairshare"),
    fact("rank", row.rank ?? "–", "rank"), fact("LevelFS", fmt(row.level_fs, 4)),
    fact("shares", `${row.raw_shares} (${fmt(row.norm_shares, 4)} of parent)`),
    fact("usage", `${int(row.raw_usage)} (effective ${fmt(row.effective_usage, 4)})`)));
  $("user-input").value = row.user;
  showUser(row.user);
}
const fact = (k, v, key) => [h("dt", { text: k }), h("dd", { text: String(v), "data-k": key })];

// ---- Me ------------------------------------------------------------------------------------------

let current = null;   // the user shown in "Me"

async function showUser(user) {
  current = user;
  show("me", note(`loading ${user}…`));
  let s;
  try { s = await api(`api/v1/users/${encodeURIComponent(user)}`); } catch (e) {
    show("me", error(e)); show("jobs"); show("history"); show("recovery"); return;
  }
  if (current !== user) return;
  show("me", standing(s));
  $("me-more").hidden = false;
  show("jobs", pendingJobs(s.pending_jobs || []),
    s.pending_total > (s.pending_jobs || []).length ? note(`The first ${s.pending_jobs.length} of ${s.pending_total} pending jobs, by job id.`) : null);
  show("rec-account", s.associations.map((a) => h("option", { value: a.account, text: rowName(a) })));
  show("recovery");
  showHistory(user);
}

function standing(s) {
  if (!s.associations.length) return note(`${s.user} has no associations.`);
  return h("table", { id: "standing" },
    h("caption", { text: `${s.user}: ${s.associations.length} association${s.associations.length > 1 ? "s" : ""}` }),
    h("thead", {}, h("tr", {}, ["account", "factor", "rank", "LevelFS from root down"].map((t) => h("th", { scope: "col", text: t })))),
    h("tbody", {}, s.associations.map((a) => h("tr", { "data-account": a.account },
      h("td", { text: a.account + (a.partition ? ` (${a.partition})` : "") }),
      h("td", { class: "num", "data-k": "fairshare", text: fmt(a.fairshare) }),
      h("td", { class: "num", "data-k": "rank", text: `${a.rank ?? "–"} of ${a.of}` }),
      h("td", { class: "path", text: pathText(a.path || []) })))));
}

// The user's factor over time: one line per association, points where the history has them.
async function showHistory(user) {
  let hist;
  try { hist = await api(`api/v1/history?user=${encodeURIComponent(user)}`); } catch (e) { show("history", error(e)); return; }
  if (current !== user) return;
  const series = hist.series.filter((s) => s.points.length);
  if (!series.length) { show("history", note("No history yet: it grows by one point a cycle.")); return; }
  const W = Math.max(320, $("history").clientWidth), H = 170, L = 40, R = 10, T = 10, B = 24;
  const ts = series.flatMap((s) => s.points.map((p) => p[0]));
  let t0 = Math.min(...ts), t1 = Math.max(...ts);
  if (t1 === t0) { t0 -= 60; t1 += 60; }
  const X = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R), Y = (f) => T + (1 - f) * (H - T - B);
  const svg = h("svg:svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: "plot", role: "img",
    "aria-label": `${user}'s fair-share factor from ${when(t0)} to ${when(t1)}, one line per association` });
  for (const f of [0, 0.25, 0.5, 0.75, 1]) {
    svg.append(h("svg:line", { x1: L, x2: W - R, y1: Y(f), y2: Y(f), class: "grid" }),
      h("svg:text", { x: L - 6, y: Y(f) + 4, "text-anchor": "end", text: f.toFixed(2) }));
  }
  const short = t1 - t0 < 7200;   // minutes apart: show the seconds
  svg.append(h("svg:text", { x: L, y: H - 6, text: when(t0, short) }),
    h("svg:text", { x: W - R, y: H - 6, "text-anchor": "end", text: when(t1, short) }));
  const legend = h("ul", { class: "keys" });
  series.forEach((s, i) => {
    const cls = `s${i % 4}`;
    const pts = s.points.filter((p) => num(p[1]) !== null);
    svg.append(h("svg:polyline", { class: `line ${cls}`, points: pts.map((p) => `${X(p[0])},${Y(num(p[1]))}`).join(" ") }));
    for (const p of pts) {
      svg.append(h("svg:circle", { class: `pt ${cls}`, cx: X(p[0]), cy: Y(num(p[1])), r: 2.5 },
        h("svg:title", { text: `${s.account}: ${fmt(p[1])} (rank ${p[2] ?? "–"}) at ${when(p[0])}` })));
    }
    legend.append(h("li", { class: cls, text: `${s.account}${s.partition ? ` (${s.partition})` : ""} · ${pts.length} point${pts.length === 1 ? "" : "s"}, by ${s.resolution}` }));
  });
  show("history", svg, legend);
}

function pendingJobs(jobs) {
  if (!jobs.length) return note("No pending jobs.");
  return jobs.map((j) => {
    const body = h("div", { class: "why" });
    const d = h("details", { "data-job": j.job_id },
      h("summary", { text: `job ${j.display_id} · ${j.account} · ${j.partition} · priority ${int(j.priority)} · factor ${fmt(j.fairshare, 4)}${j.reason ? ` · ${j.reason}` : ""}` }),
      body);
    d.addEventListener("toggle", () => { if (d.open && !body.childElementCount) explainInto(body, j.job_id); });
    return d;
  });
}

async function showRecovery(ev) {
  ev.preventDefault();
  if (!current) { show("recovery", note("Pick a user first.")); return; }
  const account = $("rec-account").value, target = $("rec-target").value, others = $("rec-others").value;
  try {
    const w = await api(`api/v1/users/${encodeURIComponent(current)}/recovery?account=${encodeURIComponent(account)}&target=${encodeURIComponent(target)}&others=${encodeURIComponent(others)}`);
    const r = w.recovery || w;   // the API answers whatif's "recovery" object itself
    const lines = [`Now: factor ${fmt(r.fairshare_now)}, rank ${r.rank_now}. Target: ${r.target !== null ? "factor " + fmt(r.target) : "rank " + r.target_rank}.`];
    if (r.periods === 0) {
      lines.push("Already there: the factor (or rank) is at or better than the target now.");
    } else if (r.seconds === null || r.seconds === undefined) {
      lines.push(`Not within ${int(r.horizon_periods)} periods (factor then ${fmt(r.fairshare_at_horizon)})` +
        (r.others === "decay" ? ": when everyone's usage decays alike its ratios, and the factor, stay as they are." : "."));
    } else {
      lines.push(`In about ${duration(r.seconds)} (${int(r.periods)} periods of ${duration(r.calc_period_seconds)}), if ${current} runs nothing more.`);
    }
    lines.push(`Half-life ${duration(r.half_life_seconds)}; others' usage ${r.others === "hold" ? "held as it is" : "decaying as " + current + "'s"}.`);
    show("recovery", lines.map((t) => h("p", { text: t })));
  } catch (e) { show("recovery", error(e)); }
}

function duration(s) {
  s = num(s);
  if (s === null) return "–";
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} days`;
}

// ---- a job's explanation -------------------------------------------------------------------------

async function explainInto(box, id, vs) {
  box.replaceChildren(note("loading…"));
  try {
    const q = `api/v1/jobs/${encodeURIComponent(id)}${vs ? `?vs=${encodeURIComponent(vs)}` : ""}`;
    const e = await api(q);
    const back = vs && h("button", { class: "link", text: `← job ${id} alone`, onclick: () => explainInto(box, id) });
    box.replaceChildren(...(vs ? [back, ...explainVs(e)] : explainJob(e, box)));
  } catch (e) { box.replaceChildren(error(e)); }
}

function explainJob(e, box) {
  const j = e.job, out = [];
  out.push(h("p", { class: "lead", text: `Job ${j.display_id}: ${j.user} in ${j.account}, ${j.partitions.join(",")}, QOS ${j.qos}; ${j.state}${j.reason ? ` (${j.reason})` : ""}` }));
  for (const p of e.priorities) {
    const rows = Object.keys(p.weighted).map((k) => h("tr", {},
      h("td", { text: k }), h("td", { class: "num", text: fmt(p.factors[k], 4) }),
      h("td", { class: "num", text: int(p.weights[k]) }), h("td", { class: "num", text: int(p.weighted[k]) })));
    out.push(h("table", { class: "compact" },
      h("caption", { text: `priority ${int(p.priority)} in ${p.partition}` }),
      h("thead", {}, h("tr", {}, ["factor", "value", "weight", "points"].map((t) => h("th", { scope: "col", text: t })))),
      h("tbody", {}, rows)));
  }
  const fs = e.fairshare;
  if (fs) {
    out.push(h("p", { text: `Fair share ${fmt(fs.factor)}: rank ${fs.rank ?? "–"} of ${fs.user_associations} user associations. LevelFS on the way down: ` +
      pathText(fs.path) }));
  }
  const q = e.queue;
  if (q) {
    out.push(h("p", { class: "lead", text: `${ordinal(q.place)} of ${q.of} in ${q.partition}'s queue.` }));
    const who = (list, label) => list.length ? [h("p", { text: label }), h("ul", { class: "against" }, list.map((o) => h("li", {},
      `job ${o.job_id} (${o.user}, ${o.account}): priority ${int(o.priority)} (${signed(o.difference)}): ${o.why} `,
      h("button", { class: "link", text: "compare", onclick: () => explainInto(box, j.job_id, o.job_id) }))))] : [];
    out.push(...who(q.ahead, "Just ahead of it:"), ...who(q.behind, "Just behind it:"));
  }
  return out;
}

function explainVs(v) {
  const name = (x) => `job ${x.ref} (${x.user}, ${x.account})`;
  const Name = (x) => "J" + name(x).slice(1);
  const [hi, lo] = v.higher === "a" ? [v.a, v.b] : [v.b, v.a];
  const out = [h("p", { class: "lead", text: v.higher ? `${Name(hi)} is ahead of ${name(lo)} by ${int(Math.abs(v.points.total))} points.` : `${Name(v.a)} and ${name(v.b)} tie.` })];
  const d = v.detail;
  if (d) {
    out.push(h("p", { text: `Fair share: ${fmt(v.a.fairshare, 4)} (rank ${v.a.rank}) against ${fmt(v.b.fairshare, 4)} (rank ${v.b.rank}), ` +
      `${signed(v.fairshare.points)} points for ${name(v.a)}. ` + (d.same_association ? "Same association." :
      `They part under ${d.common_ancestor}: ${d.a_child.name} LevelFS ${fmt(d.a_child.level_fs, 3)} against ${d.b_child.name} ${fmt(d.b_child.level_fs, 3)}` +
      (d.reasons && d.reasons.length ? ` (${d.reasons.join(", ")}).` : ".")) }));
  }
  out.push(h("table", { class: "compact" }, h("caption", { text: "points, a − b" }),
    h("thead", {}, h("tr", {}, ["factor", `a ${v.a.ref}`, `b ${v.b.ref}`, "a − b"].map((t) => h("th", { scope: "col", text: t })))),
    h("tbody", {}, v.points.factors.filter((f) => f.a || f.b).map((f) => h("tr", {},
      h("td", { text: f.factor }), h("td", { class: "num", text: int(f.a) }), h("td", { class: "num", text: int(f.b) }),
      h("td", { class: "num", text: signed(f.points) }))),
      h("tr", { class: "total" }, h("td", { text: "priority" }), h("td", { class: "num", text: int(v.points.a_priority) }),
        h("td", { class: "num", text: int(v.points.b_priority) }), h("td", { class: "num", text: signed(v.points.total) })))));
  return out;
}

// ---- start ---------------------------------------------------------------------------------------

function wire() {
  $("user-form").addEventListener("submit", (ev) => { ev.preventDefault(); const u = $("user-input").value.trim(); if (u) showUser(u); });
  $("recovery-form").addEventListener("submit", showRecovery);
  $("job-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const id = $("job-input").value.trim(), vs = $("vs-input").value.trim();
    if (id) explainInto($("job-out"), id, vs || null);
  });
  let resized;
  window.addEventListener("resize", () => { clearTimeout(resized); resized = setTimeout(showTree, 200); });
}

async function start() {
  wire();
  showTree();
  try {
    const me = await api("api/v1/whoami");
    if (me.user) { $("user-input").value = me.user; showUser(me.user); }
    else show("me", note(me.admin ? "Admin view: click a user in the tree or type a name." : "Type a user name."));
  } catch (e) { show("me", error(e)); }
}

start();
