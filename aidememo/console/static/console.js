// The console's start: sign-in, the live feed, the pages by URL fragment (#/page).

import { ApiError, get, openLive, projectPath, signIn, signOut } from "./api.js";
import { replace } from "./dom.js";
import { ProjectState } from "./state.js";
import * as views from "./views.js";

const $ = (id) => document.getElementById(id);
const PROJECT_KEY = "aidememo-console-project"; // the project id only; never a token

const ctx = {
  project: null, identity: null, state: new ProjectState(), socket: null, view: null,
  lastSearch: null, now: () => Date.now(),
};
const dirty = new Set();
let frame = 0;
let fullRender = false;

function showSignIn(message) {
  closeFeed();
  ctx.identity = null;
  $("nav").hidden = true;
  $("sign-out").hidden = true;
  $("who").textContent = "";
  $("live").textContent = "";
  replace($("page"));
  $("sign-in").hidden = false;
  $("sign-in-error").textContent = message || "";
  $("project").value = ctx.project || localStorage.getItem(PROJECT_KEY) || "";
  document.body.dataset.state = "signed-out";
}

async function start(project) {
  ctx.project = project;
  ctx.identity = await get(projectPath(project, "/identity"));
  localStorage.setItem(PROJECT_KEY, project);
  $("sign-in").hidden = true;
  $("nav").hidden = false;
  $("sign-out").hidden = false;
  $("who").textContent = `${ctx.identity.actor_id} · ${ctx.identity.role} · ${project}`;
  ctx.state = new ProjectState();
  openFeed(0);
  route();
  document.body.dataset.state = "signed-in";
}

function openFeed(afterSeq) {
  closeFeed();
  $("live").textContent = "connecting…";
  const socket = openLive(ctx.project, ctx.identity.project_epoch, afterSeq, {
    onBatch(batch) {
      for (const key of ctx.state.apply(batch)) dirty.add(key);
      $("live").textContent = `live · seq ${ctx.state.head}`;
      document.body.dataset.head = String(ctx.state.head);
      schedule();
    },
    onNotice(message) {
      if (message.type === "lease_expired") {
        ctx.state.expired.add(message.handoff_id);
        dirty.add("handoff/" + message.handoff_id);
        schedule();
      }
    },
    onClose(code, reason) {
      if (ctx.socket !== socket) return;
      ctx.socket = null;
      document.body.dataset.feed = "closed";
      if (code === 4401 || code === 4403) {
        showSignIn(code === 4401 ? "Your session ended: the token is no longer valid." : "You are no longer a member of this project.");
        return;
      }
      $("live").textContent = "reconnecting…";
      setTimeout(() => { if (ctx.identity && !ctx.socket) resume(); }, 1000);
    },
  });
  socket.addEventListener("open", () => { document.body.dataset.feed = "open"; });
  ctx.socket = socket;
}

// After a dropped feed: check the session first (a revoked token signs the console out).
async function resume() {
  try {
    await get(projectPath(ctx.project, "/identity"));
    openFeed(ctx.state.head);
  } catch (error) {
    if (error instanceof ApiError && (error.status === 401 || error.status === 403)) showSignIn("Please sign in again.");
    else setTimeout(resume, 2000);
  }
}

function closeFeed() {
  if (ctx.socket) {
    const socket = ctx.socket;
    ctx.socket = null;
    socket.close();
  }
}

function schedule() {
  if (!frame) frame = requestAnimationFrame(render);
}

// One render a frame, whatever the number of commits that arrived in it; a page that redraws
// whole (all but the board) at most every REDRAW_MS, so a burst of commits stays cheap.
const REDRAW_MS = 300;
let lastRedraw = 0;
let redrawTimer = 0;

function render() {
  frame = 0;
  if (!ctx.view) return;
  if (!ctx.view.incremental) {
    const wait = lastRedraw + REDRAW_MS - performance.now();
    if (wait > 0) {
      if (!redrawTimer) redrawTimer = setTimeout(() => { redrawTimer = 0; schedule(); }, wait);
      return;
    }
    lastRedraw = performance.now();
  }
  const changed = fullRender ? null : [...dirty];
  dirty.clear();
  fullRender = false;
  ctx.view.update(changed);
  document.body.dataset.rendered = String(ctx.state.head);
}

function route() {
  if (!ctx.identity) return;
  const [path, query] = (location.hash.slice(1) || "/handoffs").split("?");
  const params = new URLSearchParams(query || "");
  const [, page, arg] = path.split("/");
  let view;
  if (page === "overview") view = views.overview(ctx);
  else if (page === "sessions") view = views.sessions(ctx);
  else if (page === "session" && arg) view = views.timeline(ctx, decodeURIComponent(arg), params.get("fact"));
  else if (page === "search") view = views.search(ctx, params.get("q"));
  else if (page === "artifacts") view = views.artifacts(ctx, params.get("id"));
  else view = views.board(ctx);
  ctx.view = view;
  dirty.clear();
  replace($("page"), view.el);
  const current = page === "session" ? "sessions" : page || "handoffs";
  for (const link of document.querySelectorAll("#nav a")) {
    if (link.dataset.page === current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.body.dataset.page = current;
}

setInterval(() => { if (ctx.view && ctx.view.tick) ctx.view.tick(); }, 1000);

window.addEventListener("hashchange", route);

document.addEventListener("DOMContentLoaded", () => {
  $("sign-in-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const token = $("token");
    const project = $("project").value.trim();
    try {
      await signIn(token.value.trim());
      token.value = ""; // the token is forgotten; the HttpOnly cookie stands in for it
      await start(project);
    } catch (error) {
      token.value = "";
      $("sign-in-error").textContent = error instanceof ApiError ? `${error.code}: ${error.message}` : String(error);
    }
  });
  $("sign-out").addEventListener("click", async () => {
    try { await signOut(); } finally { showSignIn("Signed out."); }
  });
  const project = localStorage.getItem(PROJECT_KEY);
  if (project) start(project).catch(() => showSignIn());
  else showSignIn();
});
