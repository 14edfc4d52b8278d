// The console's calls: the member routes with the session cookie, never a token (CONSOLE-2).

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || code);
    this.status = status;
    this.code = code;
  }
}

const CONSOLE_HEADER = { "x-aidememo-console": "1" };

async function answer(response) {
  if (response.ok) return response.json();
  let code = "http_" + response.status;
  let message = response.statusText;
  try {
    const body = await response.json();
    if (body && body.error) ({ code, message } = body.error);
  } catch { /* not JSON */ }
  throw new ApiError(response.status, code, message);
}

export function projectPath(project, tail) {
  return `/v1/projects/${encodeURIComponent(project)}${tail}`;
}

export async function get(path) {
  return answer(await fetch(path, { credentials: "same-origin", cache: "no-store" }));
}

export async function signIn(token) {
  const response = await fetch("/console/session", {
    method: "POST",
    credentials: "same-origin",
    headers: { ...CONSOLE_HEADER, authorization: "Bearer " + token },
  });
  return answer(response);
}

export async function signOut() {
  const response = await fetch("/console/session", {
    method: "DELETE", credentials: "same-origin", headers: CONSOLE_HEADER,
  });
  return answer(response);
}

export async function download(project, artifactId, revision) {
  const response = await fetch(
    projectPath(project, `/artifacts/${encodeURIComponent(artifactId)}/downloads`),
    {
      method: "POST",
      credentials: "same-origin",
      headers: { ...CONSOLE_HEADER, "content-type": "application/json" },
      body: JSON.stringify({ revision }),
    },
  );
  if (!response.ok) await answer(response);
  return response.blob();
}

// The live feed (LIVE-1..LIVE-7) from `afterSeq`: `onBatch(batch)`, `onNotice(message)`,
// `onClose(code, reason)`. The cookie rides on the upgrade; no token is in the URL.
export function openLive(project, epoch, afterSeq, handlers) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const query = `?project_epoch=${encodeURIComponent(epoch)}&after_seq=${afterSeq}&limit=10000`;
  const socket = new WebSocket(`${scheme}//${location.host}${projectPath(project, "/changes/live")}${query}`);
  socket.addEventListener("message", (event) => {
    const message = JSON.parse(event.data);
    if (message.entries) handlers.onBatch(message);
    else handlers.onNotice(message);
  });
  socket.addEventListener("close", (event) => handlers.onClose(event.code, event.reason));
  return socket;
}
