// The console's pages. Each is `{ el, update(changedKeys) }`; every agent-written string goes
// in through `h`, i.e. as text (CONSOLE-5).

import { ApiError, download, get, projectPath } from "./api.js";
import { bytes, countdown, h, replace, when } from "./dom.js";
import { handoffColumn } from "./state.js";

const COLUMNS = [
  ["sent", "Sent"],
  ["claimed", "Claimed"],
  ["expired", "Lease expired"],
  ["released", "Failed, awaiting a new claim"],
  ["completed", "Completed"],
];

function sessionLink(id) {
  return h("a", { href: "#/session/" + encodeURIComponent(id) }, id);
}

// -- overview --------------------------------------------------------------------------------

export function overview(ctx) {
  const el = h("section", { "aria-labelledby": "overview-title" });
  const members = h("div", {}, "Loading members…");
  const ready = h("div", {});
  get(projectPath(ctx.project, "/members")).then(
    (answer) => replace(members, membersTable(answer.members)),
    (error) => replace(members, h("p", { class: "error" }, error.message)),
  );
  get("/ready").then(
    (answer) => replace(ready, readiness(answer, ctx)),
    (error) => replace(ready, readiness(error.body || {}, ctx)),
  );
  const stats = h("div", { class: "stats" });
  const bars = h("div", { class: "bars", role: "img", "aria-label": "commits per minute" });
  function update() {
    const s = ctx.state;
    const count = (k) => s.ofKind(k).length;
    replace(
      stats,
      stat("Head sequence", s.head, "head"),
      stat("Sessions", count("session")),
      stat("Facts", count("fact")),
      stat("Handoffs", count("handoff")),
      stat("Artifacts", count("artifact")),
    );
    const counts = s.activity(ctx.now(), 60, 60_000);
    const top = Math.max(1, ...counts);
    bars.replaceChildren(
      ...counts.map((n) => {
        const bar = h("span", { class: "bar", title: n + " commits" });
        bar.style.height = Math.round((n / top) * 100) + "%";
        return bar;
      }),
    );
    bars.setAttribute("aria-label", `commits per minute, last hour: ${counts.reduce((a, b) => a + b, 0)} in all`);
  }
  replace(
    el,
    h("h1", { id: "overview-title" }, "Project ", ctx.project),
    h("p", { class: "meta" }, `You are ${ctx.identity.actor_id} (${ctx.identity.role}) in tenant ${ctx.identity.tenant_id}.`),
    stats,
    h("h2", {}, "Activity (commits per minute, last hour)"),
    bars,
    h("h2", {}, "Members"),
    members,
    h("h2", {}, "Service"),
    ready,
  );
  update();
  return { el, update };
}

function stat(label, value, name) {
  return h("div", { class: "stat", "data-stat": name || label.toLowerCase() }, h("b", {}, String(value)), label);
}

function membersTable(rows) {
  return h(
    "table",
    {},
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Actor"), h("th", { scope: "col" }, "Kind"),
      h("th", { scope: "col" }, "Role"), h("th", { scope: "col" }, "Status"))),
    h("tbody", {}, rows.map((m) => h("tr", {}, h("td", {}, m.actor_id), h("td", {}, m.kind),
      h("td", {}, m.role), h("td", {}, m.status)))),
  );
}

// `/ready` and any index figures it carries (an index's lag appears once a derived index exists).
function readiness(answer, ctx) {
  const rows = Object.entries(answer).map(([k, v]) =>
    h("tr", {}, h("th", { scope: "row" }, k), h("td", {}, typeof v === "object" ? JSON.stringify(v) : String(v))));
  if (ctx.lastSearch && typeof ctx.lastSearch.index_seq === "number") {
    rows.push(h("tr", {}, h("th", { scope: "row" }, "search index lag (last search)"),
      h("td", {}, String(Math.max(0, ctx.state.head - ctx.lastSearch.index_seq)) + " commits")));
  }
  return h("table", {}, h("tbody", {}, rows));
}

// -- handoff board -----------------------------------------------------------------------------

// Each column shows its most recently changed cards first, PAGE at a time ("Show more"), so the
// page's size (and the browser's layout work per commit) stays bounded however many handoffs
// the project holds; the counts are always the whole project's.
const PAGE = 100;

export function board(ctx) {
  const lists = new Map(); // column -> <ol>
  const members = new Map(); // column -> Set of handoff ids
  const limits = new Map(); // column -> how many cards it shows
  const heads = new Map(); // column -> {count, more}
  const cards = new Map(); // handoff id -> {el (made when first shown), column, record}
  const dirty = new Set(); // columns to redraw
  const el = h(
    "section",
    { "aria-labelledby": "board-title" },
    h("h1", { id: "board-title" }, "Handoffs"),
    h("div", { class: "board" }, COLUMNS.map(([key, title]) => {
      const list = h("ol", { "aria-label": title });
      const count = h("span", { class: "meta", "data-count": key });
      const more = h("button", { type: "button", class: "quiet", hidden: true,
        onclick: () => { limits.set(key, limits.get(key) + PAGE); dirty.add(key); flush(); } });
      lists.set(key, list);
      members.set(key, new Set());
      limits.set(key, PAGE);
      heads.set(key, { count, more });
      return h("div", { class: "column", "data-column": key }, h("h2", {}, title, " ", count), list, more);
    })),
  );

  function place(record) {
    const id = record.body.handoff_id;
    const column = handoffColumn(record.body, ctx.now(), ctx.state.expired.has(id));
    const old = cards.get(id);
    if (old) {
      members.get(old.column).delete(id);
      dirty.add(old.column);
    }
    cards.set(id, { el: null, column, record });
    members.get(column).add(id);
    dirty.add(column);
  }

  function forget(id) {
    const old = cards.get(id);
    if (!old) return;
    members.get(old.column).delete(id);
    dirty.add(old.column);
    cards.delete(id);
  }

  function flush() {
    const now = ctx.now();
    for (const column of dirty) {
      const all = [...members.get(column)].map((id) => cards.get(id));
      all.sort((a, b) => b.record.seq - a.record.seq);
      const shown = all.slice(0, limits.get(column));
      for (const card of shown) {
        if (!card.el) card.el = handoffCard(ctx, card.record, column, now);
      }
      reorder(lists.get(column), shown.map((card) => card.el));
      const { count, more } = heads.get(column);
      count.textContent = `(${all.length})`;
      const rest = all.length - shown.length;
      more.hidden = rest <= 0;
      more.textContent = `Show ${Math.min(PAGE, rest)} more of ${rest}`;
    }
    dirty.clear();
    el.dataset.boardTotal = String(cards.size);
  }

  function update(changed) {
    if (!changed) {
      cards.clear();
      for (const [key] of COLUMNS) { members.get(key).clear(); dirty.add(key); }
      for (const record of ctx.state.ofKind("handoff")) place(record);
    } else {
      for (const key of changed) {
        if (!key.startsWith("handoff/")) continue;
        const id = key.slice(8);
        const record = ctx.state.get("handoff", id);
        if (record) place(record);
        else forget(id);
      }
    }
    flush();
  }

  // The lease countdowns, once a second; a lease that ran out moves its card.
  function tick() {
    const now = ctx.now();
    for (const id of [...members.get("claimed")]) {
      const card = cards.get(id);
      const body = card.record.body;
      if (handoffColumn(body, now, ctx.state.expired.has(id)) !== "claimed") {
        place(card.record);
        continue;
      }
      const left = card.el && card.el.querySelector("[data-lease]");
      if (left) left.textContent = "lease " + countdown(body.claim_expires_at_ms - now) + " left";
    }
    if (dirty.size) flush();
  }

  update(null);
  return { el, update, tick, incremental: true };
}

// Makes `list`'s children exactly `els`, in order, moving only what differs (a new card at the
// top is one insertion and one removal, not a hundred re-inserted nodes to restyle).
function reorder(list, els) {
  const wanted = new Set(els);
  for (const child of [...list.children]) if (!wanted.has(child)) child.remove();
  for (let i = 0; i < els.length; i++) {
    const at = list.children[i];
    if (at !== els[i]) list.insertBefore(els[i], at || null);
  }
  while (list.children.length > els.length) list.lastElementChild.remove();
}

function handoffCard(ctx, record, column, now) {
  const b = record.body;
  const lines = [
    h("div", { class: "focus" }, b.focus || "(no focus)"),
    h("div", { class: "meta" }, `${b.from_actor} → ${b.to_actor}`),
  ];
  if (column === "claimed") {
    lines.push(h("div", { class: "meta" }, "claimed by ", b.to_actor));
    lines.push(h("div", { class: "lease-live", "data-lease": "" }, "lease " + countdown(b.claim_expires_at_ms - now) + " left"));
  } else if (column === "released") {
    lines.push(h("div", { class: "meta" }, `released by ${b.to_actor}; a new claim may take it`));
  } else if (column === "expired") {
    lines.push(h("div", { class: "lease-expired", "data-lease-expired": "" }, `lease of ${b.to_actor} expired ${when(b.claim_expires_at_ms)}`));
  }
  lines.push(h("div", { class: "meta" }, `attempts: ${b.attempt_count}`));
  if (b.outcome) lines.push(h("div", { class: "outcome-" + b.outcome, "data-outcome": b.outcome }, "outcome: " + b.outcome));
  if (b.done_when) lines.push(h("div", { class: "meta" }, "done when: ", b.done_when));
  if (b.result_fact_id) {
    lines.push(h("div", {}, h("a", { href: `#/session/${encodeURIComponent(b.session_id)}?fact=${encodeURIComponent(b.result_fact_id)}` }, "result fact ", b.result_fact_id)));
  }
  if (b.result_artifact_id) {
    lines.push(h("div", {}, h("a", { href: "#/artifacts?id=" + encodeURIComponent(b.result_artifact_id) }, "result artifact ", b.result_artifact_id)));
  }
  lines.push(h("div", { class: "meta" }, "session ", sessionLink(b.session_id)));
  return h("li", { class: "card", "data-handoff": b.handoff_id, "data-column": column, tabindex: "0",
    "aria-label": `handoff ${b.focus || b.handoff_id}, ${column}` }, lines);
}

// -- sessions and a session's timeline ----------------------------------------------------------

export function sessions(ctx) {
  const el = h("section", { "aria-labelledby": "sessions-title" });
  function update() {
    const rows = ctx.state.ofKind("session").sort((a, b) => b.firstSeq - a.firstSeq);
    replace(
      el,
      h("h1", { id: "sessions-title" }, "Sessions"),
      rows.length === 0 ? h("p", {}, "No sessions yet.") : h("table", {},
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Topic"), h("th", { scope: "col" }, "Created by"),
          h("th", { scope: "col" }, "Source"), h("th", { scope: "col" }, "Sequence"))),
        h("tbody", {}, rows.map((r) => h("tr", {},
          h("td", {}, h("a", { href: "#/session/" + encodeURIComponent(r.id) }, r.body.topic || r.id)),
          h("td", {}, r.body.created_by), h("td", {}, r.body.source_id), h("td", {}, String(r.firstSeq)))))),
    );
  }
  update();
  return { el, update };
}

function inSession(entry, sessionId, handoffs) {
  const body = entry.body;
  if (entry.kind === "session") return entry.id === sessionId;
  if (!body) return false;
  if (body.session_id === sessionId) return true;
  if (entry.kind === "artifact" && typeof body.path === "string") {
    if (body.path.startsWith(`sessions/${sessionId}/`)) return true;
    const m = /^handoffs\/([^/]+)\//.exec(body.path);
    return m !== null && handoffs.has(m[1]);
  }
  return false;
}

export function timeline(ctx, sessionId, focusFact) {
  const el = h("section", { "aria-labelledby": "timeline-title" });
  function update() {
    const session = ctx.state.get("session", sessionId);
    const handoffs = new Set(ctx.state.ofKind("handoff").filter((r) => r.body.session_id === sessionId).map((r) => r.id));
    const entries = ctx.state.history.filter((e) => inSession(e, sessionId, handoffs));
    replace(
      el,
      h("h1", { id: "timeline-title" }, "Session ", session ? session.body.topic : sessionId),
      h("p", { class: "meta" }, `id ${sessionId}; ${entries.length} commits in sequence order`),
      h("ol", { class: "timeline" }, entries.map((e) => timelineItem(e, focusFact))),
    );
    const target = focusFact && el.querySelector(`[data-fact="${CSS.escape(focusFact)}"]`);
    if (target) target.scrollIntoView({ block: "center" });
  }
  update();
  return { el, update };
}

function timelineItem(e, focusFact) {
  const b = e.body || {};
  let text;
  if (e.op === "delete") text = "(deleted)";
  else if (e.kind === "fact") text = b.content;
  else if (e.kind === "session") text = b.topic;
  else if (e.kind === "handoff") text = `${b.from_actor} → ${b.to_actor}: ${b.focus || ""} [${b.status}${b.outcome ? ", " + b.outcome : ""}]`;
  else if (e.kind === "handoff_context") text = JSON.stringify(b);
  else if (e.kind === "artifact") text = `${b.path} (${bytes(b.size_bytes)}, revision ${e.revision})`;
  else text = JSON.stringify(b);
  return h("li", { "data-seq": String(e.seq), "data-fact": e.kind === "fact" ? e.id : undefined,
    "aria-current": focusFact && focusFact === e.id ? "true" : undefined },
    h("span", { class: "kind" }, e.kind), h("span", { class: "meta" }, `#${e.seq} r${e.revision} by ${e.actor} at ${when(e.at)}`),
    h("div", { class: "content" }, text));
}

// -- search ----------------------------------------------------------------------------------

const BASIC_RESULT = new Set(["fact_id", "session_id", "source_id", "actor_id", "content"]);

export function search(ctx, initial) {
  const input = h("input", { id: "q", name: "q", type: "search", value: initial || "", required: true });
  const limit = h("input", { id: "limit", name: "limit", type: "number", min: "1", max: "100", value: "20" });
  const mode = h("select", { id: "mode", name: "mode" });
  const modeLabel = h("label", { for: "mode", hidden: true }, "Mode", mode);
  const out = h("div", { "aria-live": "polite" });
  const form = h("form", { class: "toolbar", role: "search" },
    h("label", { for: "q" }, "Query", input), h("label", { for: "limit" }, "Results", limit),
    modeLabel, h("button", { type: "submit" }, "Search"));
  searchModes().then((modes) => {
    if (modes.length < 2) return;
    mode.replaceChildren(...modes.map((m) => h("option", { value: m }, m)));
    modeLabel.hidden = false;
  });
  async function run() {
    const params = new URLSearchParams({ q: input.value, limit: limit.value || "20" });
    if (!modeLabel.hidden && mode.value) params.set("mode", mode.value);
    replace(out, h("p", {}, "Searching…"));
    try {
      const answer = await get(projectPath(ctx.project, "/search?" + params));
      ctx.lastSearch = answer;
      replace(out, searchResults(answer));
    } catch (error) {
      replace(out, h("p", { class: "error" }, error.message));
    }
  }
  form.addEventListener("submit", (event) => { event.preventDefault(); history.replaceState(null, "", "#/search?q=" + encodeURIComponent(input.value)); run(); });
  const el = h("section", { "aria-labelledby": "search-title" }, h("h1", { id: "search-title" }, "Search"), form, out);
  if (initial) run();
  return { el, update() {} };
}

// The search modes this server offers, from its own OpenAPI document (one fetch a page load).
let modesOnce = null;
function searchModes() {
  if (!modesOnce) {
    modesOnce = get("/openapi.json").then((doc) => {
      const op = doc.paths["/v1/projects/{project_id}/search"].get;
      const param = (op.parameters || []).find((p) => p.name === "mode");
      return (param && param.schema && param.schema.enum) || [];
    }, () => []);
  }
  return modesOnce;
}

function searchResults(answer) {
  const head = Object.entries(answer).filter(([k]) => k !== "results")
    .map(([k, v]) => `${k}: ${v === null ? "null" : typeof v === "object" ? JSON.stringify(v) : v}`).join(" · ");
  return [
    h("p", { class: "meta", "data-search-head": "" }, head),
    answer.results.length === 0 ? h("p", {}, "No fact matches.") : h("ol", { class: "results" }, answer.results.map((r, i) =>
      h("li", { "data-result": r.fact_id },
        h("div", { class: "content" }, r.content),
        h("div", { class: "explain", "data-explain": "" }, explain(r, i)),
        h("div", { class: "meta" }, `by ${r.actor_id} · source ${r.source_id} · `, sessionLink(r.session_id),
          " · ", h("a", { href: `#/session/${encodeURIComponent(r.session_id)}?fact=${encodeURIComponent(r.fact_id)}` }, "in timeline"))))),
  ];
}

// A result's explanation: its place and every score or rank the answer gives it.
function explain(result, index) {
  const parts = [`#${index + 1}`];
  for (const [k, v] of Object.entries(result)) {
    if (BASIC_RESULT.has(k)) continue;
    parts.push(`${k} ${typeof v === "number" && !Number.isInteger(v) ? v.toFixed(4) : JSON.stringify(v)}`);
  }
  return parts.join(" · ");
}

// -- artifacts -------------------------------------------------------------------------------

export function artifacts(ctx, selected) {
  const el = h("section", { "aria-labelledby": "artifacts-title" });
  const status = h("p", { role: "status" });
  async function fetchBody(record, revision) {
    try {
      const blob = await download(ctx.project, record.id, revision);
      const url = URL.createObjectURL(blob);
      const a = h("a", {});
      a.href = url;
      a.download = record.body.path.split("/").pop() || record.id;
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
      status.textContent = `downloaded ${a.download}, revision ${revision}`;
    } catch (error) {
      status.textContent = error instanceof ApiError ? `${error.code}: ${error.message}` : String(error);
    }
  }
  function update() {
    const rows = ctx.state.ofKind("artifact").sort((a, b) => b.seq - a.seq);
    replace(el, h("h1", { id: "artifacts-title" }, "Artifacts"), status,
      rows.length === 0 ? h("p", {}, "No artifacts yet.") : h("table", {},
        h("thead", {}, h("tr", {}, ["Path", "Size", "SHA-256", "Type", "Revisions", "Download"].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, rows.map((r) => {
          const revs = ctx.state.revisions("artifact", r.id).filter((e) => e.body);
          const b = r.body;
          return h("tr", { "data-artifact": r.id, "aria-current": selected === r.id ? "true" : undefined },
            h("td", { class: "mono" }, b.path), h("td", {}, bytes(b.size_bytes)), h("td", { class: "mono" }, b.sha256),
            h("td", {}, b.content_type),
            h("td", {}, revs.map((e) => `r${e.revision} (${bytes(e.body.size_bytes)}, #${e.seq})`).join(", ")),
            h("td", {}, h("button", { type: "button", class: "quiet", onclick: () => fetchBody(r, r.revision),
              "aria-label": "download " + b.path }, "Download")));
        }))));
  }
  update();
  return { el, update };
}
