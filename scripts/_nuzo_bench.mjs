// The benchmark's Nuzo baseline (scripts/_nuzo_baseline.py): the reference Nuzo 1.2.0's core
// service on the same memories and queries as scripts/bench_memory.py.
//
// Usage: node _nuzo_bench.mjs NUZO_SRC SPEC_JSON OUT_JSON
//
// SPEC_JSON: {"store": path (new), "memories": [{content, kind, scope, tags}],
//             "queries": [{query, scope, include_global, limit}], "rounds": n}
// Remembers every memory through `service.remember` (one transaction each, as Nuzo's CLI does),
// timing the whole loop, then runs each query `rounds` times through `service.recall` with
// usage recording off, timing every call with the monotonic clock. OUT_JSON gets
// {"remember_s", "remember_cpu_s", "recall_ns": [...], "recall_cpu_ns": [...] (the process's CPU
// time around each call, microsecond resolution), "top_ids" and "top_scores": [[the first
// round's result ids / scores] per query]}.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [src, specPath, outPath] = process.argv.slice(2);
const core = await import(pathToFileURL(join(src, "packages", "core", "dist", "index.js")).href);
const spec = JSON.parse(readFileSync(specPath, "utf8"));

const database = new core.SQLiteMemoryDatabase({ path: spec.store });
const service = core.createMemoryService({
  store: database,
  searchIndex: database,
  auditLog: database,
  clock: new core.SystemClock(),
  ids: new core.RandomIdGenerator(),
  policy: new core.DefaultPolicyEngine(new core.RegexSecretScanner()),
  transactions: database,
});

try {
  let start = process.hrtime.bigint();
  const rememberCpu0 = process.cpuUsage();
  for (const m of spec.memories) {
    await service.remember({
      content: m.content,
      kind: m.kind,
      scope: m.scope,
      tags: m.tags,
      source: "bench:memory",
      actor: "bench",
    });
  }
  const rememberNs = process.hrtime.bigint() - start;
  const rememberCpu = process.cpuUsage(rememberCpu0);
  const recallNs = [];
  const recallCpuNs = [];
  const topIds = [];
  const topScores = [];
  for (let round = 0; round < spec.rounds; round += 1) {
    for (const q of spec.queries) {
      const cpu0 = process.cpuUsage();
      start = process.hrtime.bigint();
      const results = await service.recall({
        query: q.query,
        scope: q.scope,
        includeGlobal: q.include_global === true,
        limit: q.limit,
        recordUsage: false,
      });
      recallNs.push(Number(process.hrtime.bigint() - start));
      const cpu = process.cpuUsage(cpu0);
      recallCpuNs.push((cpu.user + cpu.system) * 1000);
      if (round === 0) {
        topIds.push(results.map((r) => r.memory.id));
        topScores.push(results.map((r) => r.score));
      }
    }
  }
  writeFileSync(
    outPath,
    JSON.stringify({
      remember_s: Number(rememberNs) / 1e9,
      remember_cpu_s: (rememberCpu.user + rememberCpu.system) / 1e6,
      recall_ns: recallNs,
      recall_cpu_ns: recallCpuNs,
      top_ids: topIds,
      top_scores: topScores,
    }),
  );
} finally {
  database.close();
}
