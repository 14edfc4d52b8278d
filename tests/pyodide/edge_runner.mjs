// Run the edge bundle (worker/ + durable_objects/ + the core) under npm `pyodide` with the REAL
// `workers-runtime-sdk`, offline, behind a small JavaScript stand-in of the Workers runtime, then
// run driver snippets (one after the other, in this one process) that send requests through
// `Default.fetch`; print one JSON line.
//
// Usage: node tests/pyodide/edge_runner.mjs --bundle BUNDLE_DIR --vendor PYTHON_MODULES_DIR
//          --config CONFIG.json [--sockets] [--timeout S]
//          (--driver DRIVER.py [--driver DRIVER2.py ...] | --serve PORT)
//
// With --timeout S the drivers' run is bounded: after S seconds the runner prints
// `{"ok": false, "error": "... timed out in DRIVER ..."}` and exits with status 3 (a socket
// wait suspends Python and leaves Node's event loop free, so the timer fires).
//
// With --sockets Python's `socket` reaches real TCP through Node (Pyodide's NodeSockFS), where
// workerd gives Python Workers its own sockets: the PostgreSQL mode's pg8000 connections to the
// Hyperdrive stand-in's address. A blocking socket call suspends the WebAssembly stack (JSPI),
// so Node runs with --experimental-wasm-jspi. It can suspend only inside a call Pyodide entered
// as "promising": every handler below (RPC, fetch, alarm) is an `async def` of edge_glue.py,
// whose body runs as an asyncio task, and Pyodide's event loop enters each task step so.
//
// With --serve PORT (0: any free port) the runtime serves HTTP on 127.0.0.1 instead of running
// drivers (for scripts/bench_edge_overhead.py --pyodide): each request goes to `Default.fetch`
// as `https://edge.bench<path>` (what the Worker sees behind Cloudflare's TLS); stdout carries
// one line `{"listening": PORT}`, and SIGTERM stops it.
//
// BUNDLE_DIR and PYTHON_MODULES_DIR are what scripts/build_edge.py builds for wrangler (copied
// into /bundle and /python_modules): the Workers SDK comes from the vendored python_modules/,
// as in the runtime, never from this host, so a module the build leaves out fails the import.
// CONFIG.json, from wrangler.toml
// (without "main", no Worker is imported and the driver uses the runtime objects directly):
//   {"main": "worker/entry.py", "durable_objects": [{"name": BINDING, "class_name": CLS}],
//    "ratelimits": [{"name": BINDING, "limit": N, "period": S}], "vars": {...}, "secrets": {...},
//    "ai": {"binding": "AI"}, "vectorize": [{"binding": "VECTORIZE", "index_name": NAME}],
//    "hyperdrive": [{"binding": "HYPERDRIVE", "connection_string": "postgresql://..."}],
//    "compat_flags": {...}}
// As wrangler does, the main module is uploaded under its basename at the bundle root
// (/bundle/entry.py) and imported as the Worker's main module; Durable Object classes are looked
// up on it by class name. A driver defines `async def main()`, whose JSON-serialisable return
// value is its result; it reaches the runtime through the JS module `edge_harness` (registered
// in main() below). stdout carries one line, results keyed by the driver's file name stem:
//   {"ok": true, "result": {STEM: RESULT, ...}, "pyodide": "...", "load_ms": N,
//    "run_ms": {STEM: N, ...}}
//   {"ok": false, "error": "...", ...}                       (exit status 1)
//
// What is real and what is a stand-in:
// - real: Pyodide 314.0.7, the vendored SDK's `workers` package (Request/Response wrappers, _EnvWrapper,
//   _BindingWrapper, DurableObjectContext, python_to_rpc/python_from_rpc), Node 20's fetch API
//   classes (`Request`, `Response`, `Headers`: what the SDK wraps), SQLite (better-sqlite3 12).
// - stand-ins, each as small as the SDK and our code need:
//   * `_cloudflare_compat_flags`: the two flags the SDK reads, with their values at our
//     compatibility date (both on since 2026-02: python_request_headers_preserve_commas,
//     python_workflows_implicit_dependencies).
//   * `_pyodide_entrypoint_helper`: `cloudflareWorkersModule` ({env, waitUntil}),
//     `cloudflareSocketsModule` (empty), `patchWaitUntil` (workerd's: keeps a Python awaitable
//     alive until it settles), `doAnImport`/`patch_env_helper` (refuse: unused by our code).
//   * the runtime objects below: ExecutionContext, DurableObjectNamespace/Id/stub with RPC,
//     DurableObjectState, DurableObjectStorage with SqlStorage, Ratelimit, Hyperdrive (the
//     binding's documented properties only: connectionString, host, port, user, password,
//     database; no pooling or caching of its own, PgBouncer stands for that); Workers AI and
//     Vectorize in ai_vectorize.mjs. Their class names are
//     the runtime's, because the SDK picks its wrappers by `constructor.name`.
//   * WebSockets for the live feed: `WebSocketPair` (global, as in workerd) whose server end the
//     object accepts with `state.acceptWebSocket` (hibernatable; `getWebSockets`,
//     `serializeAttachment` by structured clone), and `Response` patched to allow what workerd
//     allows and Node refuses: status 101 with a `webSocket`. No hibernation happens here.
// The stand-ins live by job: Durable Object storage and its SQL in do_storage.mjs, WebSockets
// in websockets.mjs, R2 buckets in r2_binding.mjs; stubs, namespaces, RPC and main() here.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import http from "node:http";
import { createHash, randomBytes } from "node:crypto";
import path from "node:path";
import { attachAiVectorize } from "./ai_vectorize.mjs";
import { attachR2 } from "./r2_binding.mjs";
import { DurableObjectStorage } from "./do_storage.mjs";
import { WebSocket } from "./websockets.mjs";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "..", "..");
const indexURL = path.join(repo, "node_modules", "pyodide") + path.sep;

function parseArgs(argv) {
  const opts = { driver: [], sockets: false };
  for (let i = 0; i < argv.length; i += 2) {
    if (argv[i] === "--sockets") {
      opts.sockets = true;
      i -= 1;
      continue;
    }
    const key = argv[i].replace(/^--/, "");
    const known = ["vendor", "bundle", "config", "driver", "serve", "timeout"];
    if (!known.includes(key) || i + 1 >= argv.length) throw new Error(`bad argument ${argv[i]}`);
    if (key === "serve" || key === "timeout") {
      opts[key] = Number(argv[i + 1]);
      continue;
    }
    const value = path.resolve(argv[i + 1]);
    if (key === "driver") opts.driver.push(value);
    else opts[key] = value;
  }
  for (const key of ["vendor", "bundle", "config"]) {
    if (!opts[key]) throw new Error(`--${key} is required`);
  }
  if (!opts.driver.length && opts.serve === undefined) throw new Error("--driver is required");
  return opts;
}

// Copy the module files of a host directory into the Pyodide FS (no __pycache__): .py, the
// SDK's .js helper, and a distribution's METADATA (read through importlib.metadata).
function copyTree(FS, src, dst) {
  FS.mkdirTree(dst);
  for (const entry of readdirSync(src, { withFileTypes: true })) {
    const from = path.join(src, entry.name);
    if (entry.isDirectory() && entry.name !== "__pycache__") {
      copyTree(FS, from, `${dst}/${entry.name}`);
    } else if (entry.isFile() && /(\.py|\.js|^METADATA)$/.test(entry.name)) {
      FS.writeFile(`${dst}/${entry.name}`, readFileSync(from));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Entrypoints, namespaces, stubs and RPC, called the way workerd calls Python classes.
// ---------------------------------------------------------------------------------------------
class ExecutionContext {
  constructor() {
    this._pending = [];
  }
  waitUntil(promise) {
    this._pending.push(Promise.resolve(promise));
  }
  passThroughOnException() {}
  get [Symbol.toStringTag]() {
    return "ExecutionContext";
  }
  async drain() {
    await Promise.allSettled(this._pending);
  }
}

class DurableObjectId {
  constructor(hex, name) {
    this._hex = hex;
    if (name !== undefined) this.name = name;
  }
  toString() {
    return this._hex;
  }
  equals(other) {
    return String(other) === this._hex;
  }
}

class DurableObjectState {
  constructor(id, storage) {
    this.id = id;
    this.storage = storage;
    this._gates = [];
    this._sockets = [];
  }
  acceptWebSocket(ws, tags) {
    if (!(ws instanceof WebSocket) || ws._accepted) throw new TypeError("not a new server end");
    if (tags !== undefined && !Array.isArray(tags)) throw new TypeError("tags must be an array");
    ws._accepted = true;
    this._sockets.push({ ws, tags: tags ?? [] });
  }
  getWebSockets(tag) {
    return this._sockets
      .filter(({ ws, tags }) => ws.readyState === 1 && (tag === undefined || tags.includes(tag)))
      .map(({ ws }) => ws);
  }
  // Later events wait until the callback settles (the object's input gate). workerd calls the
  // callback later, from a task queued behind the critical section (IoContext::
  // blockConcurrencyWhile: addTask(cs->wait().then(... cb(lock) ...))), never during this call;
  // so does this stand-in. (A Python callable passed without create_proxy is a borrowed proxy
  // that Pyodide destroys when this call returns.)
  blockConcurrencyWhile(fn) {
    const run = Promise.resolve().then(() => fn());
    // A callback that throws breaks the object in workerd: every later event fails.
    this._gates.push(run.catch((err) => (this._broken ??= err)));
    return run;
  }
  waitUntil(promise) {
    this._gates.push(Promise.resolve(promise).catch(() => {}));
  }
  abort(reason) {
    throw new Error(`Durable Object aborted: ${reason ?? ""}`);
  }
  async _opened() {
    while (this._gates.length) await this._gates.shift();
    if (this._broken) throw this._broken;
  }
}

// Property names a stub must not answer with an RPC method: Pyodide probes `then` to decide
// whether a JS object is awaitable (workerd's stubs are not thenable either).
const NOT_RPC = new Set(["then"]);

class DurableObjectStub {
  constructor(namespace, id) {
    this.id = id;
    this.name = id.name;
    this._ns = namespace;
  }
  fetch(input, init) {
    return this._ns._fetch(this.id, new Request(input, init));
  }
}

function makeStub(namespace, id) {
  return new Proxy(new DurableObjectStub(namespace, id), {
    get(target, prop, receiver) {
      if (typeof prop !== "string" || prop in target || NOT_RPC.has(prop)) {
        return Reflect.get(target, prop, receiver);
      }
      return (...args) => namespace._call(id, prop, args);
    },
  });
}

class DurableObjectNamespace {
  constructor(runtime, binding, className) {
    this._runtime = runtime;
    this._binding = binding;
    this._className = className;
    this._objects = new Map();
    this._hexByName = new Map(); // workerd derives an id from a name natively; kept, not rehashed
  }
  idFromName(name) {
    let hex = this._hexByName.get(name);
    if (hex === undefined) {
      hex = createHash("sha256").update(`${this._binding}\0${name}`).digest("hex");
      this._hexByName.set(name, hex);
    }
    return new DurableObjectId(hex, name);
  }
  idFromString(hex) {
    return new DurableObjectId(hex);
  }
  newUniqueId() {
    return new DurableObjectId(randomBytes(32).toString("hex"));
  }
  get(id) {
    return makeStub(this, id);
  }
  getByName(name) {
    return this.get(this.idFromName(name));
  }
  // One live instance per id, created on its first event as workerd does.
  _instance(id) {
    const key = String(id);
    let obj = this._objects.get(key);
    if (!obj) {
      const storage = new DurableObjectStorage();
      const state = new DurableObjectState(id, storage);
      const cls = this._runtime.mainModule[this._className];
      obj = { id, name: id.name, storage, state, py: cls(state, this._runtime.env) };
      storage.onAlarmSet = (when) => this._runtime.scheduleAlarm(this, obj, when);
      this._objects.set(key, obj);
    }
    return obj;
  }
  // An RPC call: arguments and result cross the boundary by structured clone, and workerd's
  // wrapper converts them with the SDK's python_from_rpc / python_to_rpc on the Python side.
  async _call(id, method, args) {
    const obj = this._instance(id);
    if (obj.state._gates.length || obj.state._broken) await obj.state._opened();
    try {
      const { glue } = this._runtime;
      const result = await glue.wrapper_func(false, obj.py, method, ...cloned(args));
      return cloned(result);
    } catch (err) {
      throw structuredClone(err); // an error crosses RPC as a plain Error (no Python object)
    }
  }
  async _fetch(id, request) {
    const obj = this._instance(id);
    await obj.state._opened();
    return this._runtime.glue.wrapper_func(true, obj.py, "fetch", request);
  }
}

// A structured clone, as RPC makes of every argument and result; a string (the project object's
// request and answer texts) is its own clone, as it is for workerd, so it is not copied here.
function cloned(value) {
  if (typeof value === "string") return value;
  if (Array.isArray(value) && value.every((v) => typeof v === "string")) return [...value];
  return structuredClone(value);
}

class Ratelimit {
  // A fixed window per key; the real binding counts per Cloudflare location and is eventually
  // consistent, which no offline test can reproduce.
  constructor(limit, period) {
    this._limit = limit;
    this._periodMs = period * 1000;
    this._windows = new Map();
  }
  async limit({ key }) {
    const now = Date.now();
    let win = this._windows.get(key);
    if (!win || now - win.start >= this._periodMs) {
      win = { start: now, count: 0 };
      this._windows.set(key, win);
    }
    win.count += 1;
    return { success: win.count <= this._limit };
  }
  // Every window starts over, as when the period has passed.
  reset() {
    this._windows.clear();
  }
}

// The Hyperdrive binding: what a Python Worker reads of it (Cloudflare "Hyperdrive: Python
// Workers"). The real one hands out the address of Hyperdrive's pooler; this one the
// configured database's (PgBouncer in transaction mode in the tests).
class Hyperdrive {
  constructor(connectionString) {
    const url = new URL(connectionString);
    this.connectionString = connectionString;
    this.host = url.hostname;
    this.port = Number(url.port || 5432);
    this.user = decodeURIComponent(url.username);
    this.password = decodeURIComponent(url.password);
    this.database = decodeURIComponent(url.pathname.replace(/^\//, ""));
  }
}

class Runtime {
  constructor(py, config) {
    this.py = py;
    this.config = config;
    this.namespaces = {};
    this.alarms = new Map(); // "binding/id" -> {obj, when}
    this.env = { ...(config.vars ?? {}), ...(config.secrets ?? {}) };
    for (const { name, class_name: className } of config.durable_objects ?? []) {
      this.namespaces[name] = new DurableObjectNamespace(this, name, className);
      this.env[name] = this.namespaces[name];
    }
    for (const { name, limit, period } of config.ratelimits ?? []) {
      this.env[name] = new Ratelimit(limit, period);
    }
    for (const { binding, connection_string: url } of config.hyperdrive ?? []) {
      this.env[binding] = new Hyperdrive(url);
    }
    this.workersModule = {
      env: this.env,
      waitUntil: (p) => this.background.push(Promise.resolve(p)),
    };
    this.background = [];
  }
  scheduleAlarm(ns, obj, when) {
    this.alarms.set(`${ns._binding}/${String(obj.id)}`, { obj, when });
  }
  // workerd runs an alarm at its time; the driver asks for every alarm due by `nowMs`.
  async fireDueAlarms(nowMs) {
    let fired = 0;
    for (const [key, { obj, when }] of [...this.alarms]) {
      if (when === null || when > nowMs || obj.storage._alarm !== when) continue;
      this.alarms.delete(key);
      obj.storage._alarm = null;
      await obj.state._opened();
      await this.glue.call_relaxed(obj.py, "alarm", { retryCount: 0, isRetry: false });
      fired += 1;
    }
    return fired;
  }
  // A request from the outside world into the Worker: a fresh `Default` per request.
  async fetch(input, init) {
    const request = input instanceof Request ? input : new Request(input, init);
    const ctx = new ExecutionContext();
    const instance = this.mainModule.Default(ctx, this.env);
    // The instance is released once the response has gone out (a task after this one), as
    // workerd ends a request's context after handing its response on.
    const done = () => ctx.drain().finally(() => setImmediate(() => instance.destroy()));
    let response;
    try {
      response = await this.glue.wrapper_func(true, instance, "fetch", request);
    } catch (error) {
      await done();
      throw error;
    }
    // As in workerd, what was handed to waitUntil runs on after the response is returned: a
    // streamed body is written by such a task while the client reads it, so waiting for it
    // first would deadlock on the stream's backpressure.
    done();
    return response;
  }
}

// Serve HTTP on 127.0.0.1:port through `runtime.fetch` until SIGTERM (one request at a time
// or many; keep-alive on).
async function serve(runtime, port) {
  const server = http.createServer(async (req, res) => {
    try {
      const headers = [];
      for (const [name, value] of Object.entries(req.headers)) {
        if (value === undefined) continue;
        headers.push([name, Array.isArray(value) ? value.join(", ") : value]);
      }
      const init = { method: req.method, headers };
      // A request without Content-Length or Transfer-Encoding has no body (RFC 9112 6.3).
      if (req.headers["content-length"] !== undefined || req.headers["transfer-encoding"]) {
        const chunks = [];
        for await (const chunk of req) chunks.push(chunk);
        if (chunks.length) init.body = Buffer.concat(chunks);
      }
      const response = await runtime.fetch(new Request(`https://edge.bench${req.url}`, init));
      res.writeHead(response.status, Object.fromEntries(response.headers));
      // workerd writes a body made from a string straight to the connection; so does this.
      const text = response.bodyUsed ? undefined : response._text;
      res.end(text ?? Buffer.from(await response.arrayBuffer()));
    } catch (err) {
      res.writeHead(500, { "content-type": "text/plain" });
      res.end(String(err?.stack ?? err));
    }
  });
  server.keepAliveTimeout = 120_000;
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  process.stdout.write(JSON.stringify({ listening: server.address().port }) + "\n");
  await new Promise((resolve) => process.once("SIGTERM", resolve));
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const config = JSON.parse(readFileSync(opts.config, "utf8"));
  for (const need of ["pyodide.mjs", "pyodide.asm.wasm", "python_stdlib.zip"]) {
    if (!existsSync(path.join(indexURL, need))) throw new Error(`${need} missing: run npm ci`);
  }
  const { loadPyodide } = await import(path.join(indexURL, "pyodide.mjs"));
  const t0 = performance.now();
  const toStderr = (line) => process.stderr.write(line + "\n");
  const py = await loadPyodide({ indexURL, stdout: toStderr, stderr: toStderr });
  const meta = { pyodide: py.version, load_ms: Math.round(performance.now() - t0) };
  if (opts.sockets) await py.useNodeSockFS();

  copyTree(py.FS, opts.vendor, "/python_modules");
  copyTree(py.FS, opts.bundle, "/bundle");
  const mainPath = config.main ? path.join(opts.bundle, config.main) : null;
  if (mainPath) py.FS.writeFile(`/bundle/${path.basename(mainPath)}`, readFileSync(mainPath));
  py.FS.mkdirTree("/harness");
  for (const name of ["edge_glue.py", "driver_support.py"]) {
    py.FS.writeFile(`/harness/${name}`, readFileSync(path.join(here, name)));
  }

  const runtime = new Runtime(py, config);
  const disposeR2 = await attachR2(runtime.env, config); // real R2 buckets (Miniflare)
  const semantic = attachAiVectorize(runtime.env, config); // Workers AI and Vectorize doubles
  py.registerJsModule("_cloudflare_compat_flags", {
    python_request_headers_preserve_commas: true,
    python_workflows_implicit_dependencies: true,
    ...(config.compat_flags ?? {}),
  });
  py.registerJsModule("_pyodide_entrypoint_helper", {
    cloudflareWorkersModule: runtime.workersModule,
    cloudflareSocketsModule: {},
    patchWaitUntil(ctx) {
      if (Object.prototype.toString.call(ctx) !== "[object ExecutionContext]") return;
      const orig = ctx.waitUntil.bind(ctx);
      ctx.waitUntil = (p) =>
        orig(
          (async () => {
            const owned = typeof p?.copy === "function" ? p.copy() : p;
            try {
              await owned;
            } finally {
              owned?.destroy?.();
            }
          })(),
        );
    },
    doAnImport(name) {
      throw new Error(`doAnImport(${name}) is not available in this harness`);
    },
    patch_env_helper() {
      throw new Error("patch_env is not available in this harness");
    },
  });

  py.runPython(
    "import sys; sys.dont_write_bytecode = True; sys.path[:0] = ['/bundle', '/python_modules', '/harness']",
  );
  const t1 = performance.now();
  try {
    // Without "main" no Worker is loaded: the driver uses the runtime objects directly.
    if (mainPath) runtime.mainModule = py.pyimport(path.basename(mainPath, ".py"));
    runtime.glue = py.pyimport("edge_glue");
    meta.import_ms = Math.round(performance.now() - t1);
    // What the driver reaches as `import edge_harness`.
    py.registerJsModule("edge_harness", {
      fetch: (input, init) => runtime.fetch(input, init),
      fire_due_alarms: (nowMs) => runtime.fireDueAlarms(nowMs ?? Date.now()),
      // Calls made so far to Workers AI and Vectorize queries; every Vectorize write visible.
      semantic_counts: () => ({
        ai: semantic.ai?.calls ?? 0,
        query: semantic.vectorize?.calls.query ?? 0,
      }),
      settle_vectors: () => semantic.vectorize?.settle(),
      // The rate-limit windows start over, as when their period has passed.
      reset_rate_limits: () => {
        for (const value of Object.values(runtime.env)) {
          if (value instanceof Ratelimit) value.reset();
        }
      },
      objects: () =>
        Object.entries(runtime.namespaces).flatMap(([binding, ns]) =>
          [...ns._objects.values()].map((o) => ({ binding, name: o.name ?? null })),
        ),
      // A fresh Durable Object state (own SQLite), for drivers that test storage directly.
      new_state: () => {
        const id = new DurableObjectId(randomBytes(32).toString("hex"));
        return new DurableObjectState(id, new DurableObjectStorage());
      },
      params: config.driver_params ?? {},
    });
    if (opts.serve !== undefined) {
      await serve(runtime, opts.serve);
      await disposeR2();
      return;
    }
    const result = {};
    meta.run_ms = {};
    let running = null;
    if (opts.timeout) {
      setTimeout(() => {
        emit({ ok: false, ...meta, error: `timed out in ${running} after ${opts.timeout} s` }, 3);
        process.exit();
      }, opts.timeout * 1000).unref();
    }
    for (const driver of opts.driver) {
      const stem = path.basename(driver, ".py");
      running = stem;
      const globals = py.toPy({ SNIPPET: readFileSync(driver, "utf8"), NAME: `<${stem}>` });
      const t2 = performance.now();
      const out = await py.runPythonAsync(
        [
          "import json",
          "from pyodide.code import eval_code_async",
          "_ns = {'__name__': '__driver__'}",
          "await eval_code_async(SNIPPET, _ns, filename=NAME)",
          "json.dumps(await _ns['main']())",
        ].join("\n"),
        { globals },
      );
      globals.destroy();
      result[stem] = JSON.parse(out);
      meta.run_ms[stem] = Math.round(performance.now() - t2);
    }
    await Promise.allSettled(runtime.background);
    await disposeR2();
    emit({ ok: true, ...meta, result }, 0);
  } catch (err) {
    await disposeR2().catch(() => {});
    emit({ ok: false, ...meta, error: String(err?.stack ?? err) }, 1);
  }
}

function emit(obj, code) {
  process.stdout.write(JSON.stringify(obj) + "\n");
  process.exitCode = code;
}

// Exit once main() is done: with --sockets the stores' open PostgreSQL connections are Node
// sockets that would keep the process alive after its result (workerd closes an isolate's
// sockets when it ends; nothing here does). stdout to a pipe or file is written synchronously.
main()
  .catch((err) => emit({ ok: false, error: String(err?.stack ?? err) }, 2))
  .finally(() => process.exit());
