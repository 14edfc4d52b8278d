// Make a memory store at an earlier schema version (1..6) with the reference Nuzo's own
// migration code, for the compatibility tier (tests/compat/test_nuzo_migrations.py).
//
// Usage: node nuzo_legacy_store.mjs NUZO_SRC STORE VERSION ROWS_JSON
//
// The build's compiled schema module is loaded with every step after VERSION disabled (its
// `if (currentVersion < N)` guards gain `&& N <= VERSION`), so the store holds exactly the DDL
// that Nuzo wrote at that version. ROWS_JSON is a list of memory rows (only the columns that
// version has); each active row also gets its FTS row (tags space-joined, as Nuzo indexes them).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [src, store, versionText, rowsPath] = process.argv.slice(2);
const version = Number(versionText);
if (!Number.isInteger(version) || version < 1 || version > 6) {
  throw new Error(`version must be 1..6, got ${versionText}`);
}
const core = join(src, "packages", "core");
const schemaPath = join(core, "dist", "sqlite", "schema.js");
let text = readFileSync(schemaPath, "utf8");
let guards = 0;
text = text.replace(/if \(currentVersion < (\d+)\) \{/g, (_, n) => {
  guards += 1;
  return `if (currentVersion < ${n} && ${n} <= ${version}) {`;
});
if (guards !== 7) {
  throw new Error(`expected 7 migration steps in ${schemaPath}, found ${guards}`);
}
const base = pathToFileURL(join(core, "dist", "sqlite") + "/").href;
text = text.replace(/from "(\.\.?\/[^"]+)"/g, (_, rel) => `from "${new URL(rel, base).href}"`);
const { migrate } = await import("data:text/javascript," + encodeURIComponent(text));

const Database = createRequire(join(core, "package.json"))("better-sqlite3");
const db = new Database(store);
migrate(db);
const rows = JSON.parse(readFileSync(rowsPath, "utf8"));
const insertRow = db.transaction((items) => {
  for (const row of items) {
    const columns = Object.keys(row);
    db.prepare(
      `INSERT INTO memories (${columns.join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`,
    ).run(...columns.map((c) => row[c]));
    if (row.archived_at === null || row.archived_at === undefined) {
      db.prepare("INSERT INTO memories_fts (id, scope, content, tags) VALUES (?, ?, ?, ?)").run(
        row.id,
        row.scope,
        row.content,
        JSON.parse(row.tags ?? "[]").join(" "),
      );
    }
  }
});
insertRow(rows);
const got = db.pragma("user_version", { simple: true });
db.pragma("journal_mode = DELETE");
db.close();
if (got !== version) {
  throw new Error(`store is at user_version ${got}, wanted ${version}`);
}
