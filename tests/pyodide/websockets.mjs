// WebSockets for the Pyodide edge runner (edge_runner.mjs): importing this module installs
// workerd's `WebSocketPair` and a `Response` that allows status 101 with a `webSocket` globally.

// ---------------------------------------------------------------------------------------------
// WebSockets: workerd's WebSocketPair and Response(101, {webSocket}), which Node lacks.
// ---------------------------------------------------------------------------------------------
class WebSocket {
  constructor() {
    this.readyState = 1;
    this.peer = null;
    this.received = []; // what the other end sent (read by drivers on the client end)
    this.closeCode = null;
    this.closeReason = "";
    this._accepted = false;
    this._attachment = null;
  }
  send(data) {
    if (!this._accepted) throw new Error("You must call accept() on this WebSocket before sending.");
    if (this.readyState !== 1) throw new Error("Can't call WebSocket send() after close().");
    if (typeof data !== "string") throw new TypeError("the live feed sends text");
    this.peer.received.push(data);
  }
  close(code = 1000, reason = "") {
    if ([1004, 1005, 1006, 1015].includes(code)) throw new Error(`invalid close code ${code}`);
    if (this.readyState === 3) return;
    this.readyState = 3;
    this.peer.closeCode = code;
    this.peer.closeReason = reason;
  }
  // Structured clone, as workerd: a Python object would arrive as a PyProxy and be refused.
  serializeAttachment(value) {
    this._attachment = structuredClone(value);
  }
  deserializeAttachment() {
    return this._attachment === null ? null : structuredClone(this._attachment);
  }
}

class WebSocketPair {
  constructor() {
    const client = new WebSocket();
    const server = new WebSocket();
    client.peer = server;
    server.peer = client;
    client._accepted = true;
    this[0] = client;
    this[1] = server;
  }
}
globalThis.WebSocketPair = WebSocketPair;

const NodeResponse = globalThis.Response;
globalThis.Response = class Response extends NodeResponse {
  constructor(body, init) {
    const upgrade = init?.status === 101;
    if (upgrade && !init.webSocket) throw new RangeError("status 101 needs a webSocket");
    super(body, upgrade ? { ...init, status: 200 } : init);
    this._upgrade = upgrade;
    this.webSocket = init?.webSocket ?? null;
    this._text = typeof body === "string" ? body : undefined; // for the HTTP front (--serve)
  }
  get status() {
    return this._upgrade ? 101 : super.status;
  }
};

export { WebSocket, WebSocketPair };
