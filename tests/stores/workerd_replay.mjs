// Replay SQL statements in a real SQLite-backed Durable Object (workerd, through Miniflare).
//
// Usage: node tests/stores/workerd_replay.mjs STATEMENTS.json
// Input: [[sql, [param, ...]], ...] where a BLOB param is {"hex": "..."}.
// Output, one JSON line: {"results": [rows | {"error": message}, ...]}, rows as arrays of
// column values in column order with BLOBs (ArrayBuffer) as {"hex": "..."}.
// Each statement runs inside its own transactionSync, the only transaction API workerd allows.
import { readFileSync } from "node:fs";
import { Miniflare } from "miniflare";

const script = `
const toBytes = (h) => Uint8Array.from(h.match(/../g) ?? [], (b) => parseInt(b, 16));
const toHex = (buf) => [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, "0")).join("");
export class Replay {
  constructor(state) { this.state = state; }
  async fetch(request) {
    const statements = await request.json();
    const sql = this.state.storage.sql;
    const results = statements.map(([query, params]) => {
      const bindings = params.map((p) => (p !== null && typeof p === "object" ? toBytes(p.hex) : p));
      try {
        const rows = this.state.storage.transactionSync(() => sql.exec(query, ...bindings).raw().toArray());
        return rows.map((row) => row.map((v) => (v instanceof ArrayBuffer ? { hex: toHex(v) } : v)));
      } catch (e) {
        return { error: String(e) };
      }
    });
    return Response.json({ results });
  }
}
export default { fetch: (request, env) => env.REPLAY.get(env.REPLAY.idFromName("replay")).fetch(request) };
`;

// Miniflare 5's configuration: a Worker's manifest of modules, its env bindings and exports.
const mf = new Miniflare({
  workers: [
    {
      config: {
        name: "replay",
        compatibilityDate: "2025-01-01",
        manifest: {
          mainModule: "replay.mjs",
          modules: { "replay.mjs": { type: "esm", contents: script } },
        },
        env: { REPLAY: { type: "durable-object", worker: "replay", exportName: "Replay" } },
        exports: { Replay: { type: "durable-object", storage: "sqlite" } },
      },
    },
  ],
});
try {
  const body = readFileSync(process.argv[2], "utf8");
  const response = await mf.dispatchFetch("http://replay.invalid/", { method: "POST", body });
  process.stdout.write(JSON.stringify(await response.json()) + "\n");
} finally {
  await mf.dispose();
}
