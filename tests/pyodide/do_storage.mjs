// Durable Object storage for the Pyodide edge runner (edge_runner.mjs): `DurableObjectStorage`
// with its SQL API on real SQLite (better-sqlite3 12), transactions and the alarm slot.
import { createRequire } from "node:module";

const Database = createRequire(import.meta.url)("better-sqlite3");

// ---------------------------------------------------------------------------------------------
// Durable Object SQL on real SQLite, refusing what workerd refuses (transaction statements,
// `PRAGMA user_version`: STORE-6).
// ---------------------------------------------------------------------------------------------
const TX_RE = /^\s*(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE)\b/i;
const TX_MESSAGE =
  "To execute a transaction, please use the state.storage.transaction() or " +
  "state.storage.transactionSync() APIs instead of the SQL BEGIN TRANSACTION or SAVEPOINT " +
  "statements. The JavaScript API is safer because it will automatically roll back on " +
  "exceptions, and because it interacts correctly with Durable Objects' automatic atomic " +
  "write coalescing.";
// workerd denies these through SQLite's authorizer; better-sqlite3 has no authorizer hook, so the
// pragmas are matched here (also in their table-valued form) and the function is overridden.
const DENIED_PRAGMA_RE = /\bpragma(?:\s+(?:\w+\s*\.\s*)?|_)(user_version|journal_mode)\b/i;

// An ArrayBuffer of its own (what workerd hands out for a BLOB), from a Node Buffer.
const toArrayBuffer = (buf) => buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);

// A binding as workerd's `sql.exec` converts it (each one a number, a string, null or bytes):
// an ArrayBuffer or any view of one is bytes; a BigInt (what Pyodide makes of an integer beyond
// Number.MAX_SAFE_INTEGER) is refused, as workerd refuses it; any other object becomes its
// string (a Python `bytes` passed without conversion is a proxy whose string is "b'...'").
function toBinding(value) {
  if (value === undefined || value === null) return null;
  if (typeof value === "bigint") throw new TypeError("Cannot convert a BigInt value to a number");
  if (ArrayBuffer.isView(value)) {
    return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  }
  if (value instanceof ArrayBuffer) return Buffer.from(value);
  if (typeof value === "boolean") return value ? 1 : 0;
  if (typeof value === "number" || typeof value === "string") return value;
  return String(value);
}

// What `cursor.raw()` returns in workerd (a JSG iterator of value arrays); `toArray()` is the
// iterator helper that workerd's V8 has and Node 20's lacks.
class RawIterator {
  constructor(rows) {
    this._rows = rows;
  }
  next() {
    return this._rows.next();
  }
  [Symbol.iterator]() {
    return this;
  }
  toArray() {
    return [...this];
  }
}

class SqlStorageCursor {
  constructor(columnNames, rows, rowsWritten) {
    this.columnNames = columnNames;
    this.rowsRead = rows.length; // approximation: rows returned, not rows scanned
    this.rowsWritten = rowsWritten;
    this._rows = rows[Symbol.iterator]();
  }
  next() {
    const step = this._rows.next();
    return step.done ? step : { done: false, value: this._object(step.value) };
  }
  [Symbol.iterator]() {
    return this;
  }
  toArray() {
    return [...this];
  }
  one() {
    const rows = this.toArray();
    if (rows.length !== 1) {
      const got = rows.length === 0 ? "no results" : "multiple results";
      throw new Error(`Expected exactly one result from SQL query, but got ${got}.`);
    }
    return rows[0];
  }
  raw() {
    return new RawIterator(this._rows);
  }
  _object(values) {
    const row = {};
    this.columnNames.forEach((name, i) => {
      row[name] = values[i];
    });
    return row;
  }
}

// workerd keeps the statements it prepared per query text (SqlStorage's statement cache); so
// does this stand-in, so a statement costs what it costs there, not a parse each time.
class SqlStorage {
  constructor(db) {
    this._db = db;
    this._statements = new Map();
    this._changes = db.prepare("SELECT total_changes() AS n").pluck(true);
  }
  _prepare(query) {
    let stmt = this._statements.get(query);
    if (stmt === undefined) {
      stmt = this._db.prepare(query);
      if (stmt.reader) stmt.raw(true);
      this._statements.set(query, stmt);
    }
    return stmt;
  }
  exec(query, ...bindings) {
    if (TX_RE.test(query)) throw new Error(TX_MESSAGE);
    if (DENIED_PRAGMA_RE.test(query)) throw new Error("not authorized: SQLITE_AUTH");
    const params = bindings.map(toBinding);
    let stmt;
    try {
      stmt = this._prepare(query);
    } catch (err) {
      // workerd runs several statements in one exec; better-sqlite3 only through exec().
      if (!/more than one statement/.test(err.message) || params.length) throw err;
      const before = this._changes.get();
      this._db.exec(query);
      return new SqlStorageCursor([], [], this._changes.get() - before);
    }
    if (!stmt.reader) {
      const info = stmt.run(...params);
      return new SqlStorageCursor([], [], info.changes);
    }
    const columns = stmt.columns().map((c) => c.name);
    // A read-only statement writes nothing; workerd counts rows written natively.
    const before = stmt.readonly ? 0 : this._changes.get();
    const rows = stmt.all(...params);
    const written = stmt.readonly ? 0 : this._changes.get() - before;
    for (const row of rows) {
      for (let i = 0; i < row.length; i++) {
        if (Buffer.isBuffer(row[i])) row[i] = toArrayBuffer(row[i]);
      }
    }
    return new SqlStorageCursor(columns, rows, written);
  }
  get databaseSize() {
    const pragma = (name) => this._db.pragma(name, { simple: true });
    return pragma("page_count") * pragma("page_size");
  }
}

class DurableObjectStorage {
  constructor() {
    this._db = new Database(":memory:");
    this._db.pragma("foreign_keys = ON");
    this._db.function("sqlite_version", () => {
      throw new Error("not authorized to use function: sqlite_version: SQLITE_AUTH");
    });
    this.sql = new SqlStorage(this._db);
    this._depth = 0;
    this._alarm = null;
    this.onAlarmSet = () => {};
  }
  // Atomic: a SAVEPOINT per call (nests), rolled back when the callback throws.
  transactionSync(fn) {
    const name = `tx${this._depth++}`;
    this._db.exec(`SAVEPOINT ${name}`);
    try {
      const result = fn();
      this._db.exec(`RELEASE ${name}`);
      return result;
    } catch (err) {
      this._db.exec(`ROLLBACK TO ${name}`);
      this._db.exec(`RELEASE ${name}`);
      throw err;
    } finally {
      this._depth--;
    }
  }
  async getAlarm() {
    return this._alarm;
  }
  async setAlarm(when) {
    this._alarm = when instanceof Date ? when.getTime() : Number(when);
    this.onAlarmSet(this._alarm);
  }
  async deleteAlarm() {
    this._alarm = null;
  }
}
export { DurableObjectStorage };
