// The `[ai]` and `[[vectorize]]` bindings of the Pyodide edge runner: small stand-ins with the
// shapes and limits Cloudflare documents (Workers AI cannot run offline, nor can Vectorize),
// counting their calls. tests/edge/runtime/ai_vectorize.py is the CPython tier's twin; the
// embedding is tests/doubles/hashed_embedding.py's, computed the same way here: FNV-1a
// (32 bits) of each lower-case word (weight 1) and of each character trigram of "#word#"
// (weight 0.5), modulo 384, scaled to unit length.
//
// Workers AI: `run("@cf/baai/bge-small-en-v1.5", {text})` -> `{shape: [n, 384], data, pooling}`,
// 1..100 non-empty texts. Vectorize (cosine): upsert/insert/deleteByIds -> `{mutationId}`,
// applied `delayMs` later (asynchronous, in order); query(vector, {topK, namespace,
// returnValues, returnMetadata, filter}) -> `{count, matches}` with topK <= 20 with values or
// metadata and <= 100 without, filters on the metadata indexes only; getByIds(ids); ids of
// 1..64 bytes, namespaces of at most 64 bytes, metadata of at most 10 KiB, 384 dimensions.
const MODEL = "@cf/baai/bge-small-en-v1.5";
const DIMENSIONS = 384;
const encoder = new TextEncoder();

function fnv1a(text) {
  let h = 0x811c9dc5;
  for (const byte of encoder.encode(text)) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

export function hashedVector(text) {
  const out = new Array(DIMENSIONS).fill(0);
  for (const word of text.toLowerCase().match(/[a-z0-9]+/g) ?? []) {
    out[fnv1a(word) % DIMENSIONS] += 1.0;
    const marked = `#${word}#`;
    for (let i = 0; i + 3 <= marked.length; i++) out[fnv1a(marked.slice(i, i + 3)) % DIMENSIONS] += 0.5;
  }
  const norm = Math.sqrt(out.reduce((s, v) => s + v * v, 0));
  if (norm === 0) {
    out[0] = 1;
    return out;
  }
  return out.map((v) => v / norm);
}

class Ai {
  constructor() {
    this.calls = 0;
  }
  async run(model, inputs) {
    this.calls += 1;
    if (model !== MODEL) throw new Error(`AiError: no such model ${model}`);
    const texts = typeof inputs?.text === "string" ? [inputs.text] : inputs?.text;
    if (!Array.isArray(texts) || texts.length < 1 || texts.length > 100) {
      throw new Error("AiError: text must be a string or 1..100 strings");
    }
    if (!texts.every((t) => typeof t === "string" && t.length > 0)) {
      throw new Error("AiError: every text must be a non-empty string");
    }
    return { shape: [texts.length, DIMENSIONS], data: texts.map(hashedVector), pooling: "mean" };
  }
}

class VectorizeIndexImpl {
  constructor(delayMs, indexed) {
    this.delayMs = delayMs;
    this.indexed = new Set(indexed);
    this.calls = {};
    this._visible = new Map();
    this._queue = [];
    this._mutations = 0;
  }
  _count(what) {
    this.calls[what] = (this.calls[what] ?? 0) + 1;
    const now = Date.now();
    while (this._queue.length && this._queue[0].at <= now) this._queue.shift().apply();
  }
  settle() {
    while (this._queue.length) this._queue.shift().apply();
  }
  _mutate(apply) {
    this._mutations += 1;
    this._queue.push({ at: Date.now() + this.delayMs, apply });
    return { mutationId: `mutation-${this._mutations}` };
  }
  _checked(v) {
    const bytes = encoder.encode(String(v?.id ?? "")).length;
    if (typeof v?.id !== "string" || bytes < 1 || bytes > 64) throw new Error("VECTOR_INVALID: id");
    const values = Array.from(v.values ?? []);
    if (values.length !== DIMENSIONS) throw new Error("VECTOR_DIMENSION_MISMATCH");
    if (v.namespace != null && encoder.encode(String(v.namespace)).length > 64) {
      throw new Error("VECTOR_INVALID: namespace over 64 bytes");
    }
    const metadata = v.metadata == null ? null : { ...v.metadata };
    if (metadata && encoder.encode(JSON.stringify(metadata)).length > 10240) {
      throw new Error("VECTOR_INVALID: metadata over 10 KiB");
    }
    return { id: v.id, values: values.map(Number), namespace: v.namespace ?? null, metadata };
  }
  async upsert(vectors) {
    this._count("upsert");
    const rows = Array.from(vectors).map((v) => this._checked(v));
    if (rows.length < 1 || rows.length > 1000) throw new Error("VECTOR_INVALID: 1..1000 vectors");
    return this._mutate(() => rows.forEach((r) => this._visible.set(r.id, r)));
  }
  async insert(vectors) {
    this._count("insert");
    const rows = Array.from(vectors).map((v) => this._checked(v));
    return this._mutate(() => rows.forEach((r) => this._visible.has(r.id) || this._visible.set(r.id, r)));
  }
  async deleteByIds(ids) {
    this._count("deleteByIds");
    const gone = Array.from(ids).map(String);
    return this._mutate(() => gone.forEach((id) => this._visible.delete(id)));
  }
  async getByIds(ids) {
    this._count("getByIds");
    return Array.from(ids)
      .map((id) => this._visible.get(String(id)))
      .filter(Boolean)
      .map((v) => ({ id: v.id, values: [...v.values], metadata: { ...(v.metadata ?? {}) }, namespace: v.namespace }));
  }
  async query(vector, options = {}) {
    this._count("query");
    const q = Array.from(vector).map(Number);
    if (q.length !== DIMENSIONS) throw new Error("VECTOR_QUERY_ERROR: dimensions");
    const topK = options.topK ?? 5;
    const rich = Boolean(options.returnValues) || ![undefined, null, false, "none"].includes(options.returnMetadata);
    if (topK < 1 || topK > (rich ? 20 : 100)) throw new Error(`VECTOR_QUERY_ERROR: topK ${topK}`);
    const filter = options.filter ?? {};
    const scored = [];
    for (const v of this._visible.values()) {
      if (options.namespace != null && v.namespace !== options.namespace) continue;
      let ok = true;
      for (const [key, cond] of Object.entries(filter)) {
        if (!this.indexed.has(key)) continue;
        const want = cond !== null && typeof cond === "object" ? cond.$eq : cond;
        if ((v.metadata ?? {})[key] !== want) ok = false;
      }
      if (ok) scored.push([cosine(q, v.values), v]);
    }
    scored.sort((a, b) => b[0] - a[0] || (a[1].id < b[1].id ? -1 : 1));
    const matches = scored.slice(0, topK).map(([score, v]) => ({ id: v.id, score }));
    return { count: matches.length, matches };
  }
}

function cosine(a, b) {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return dot / ((Math.sqrt(na) || 1) * (Math.sqrt(nb) || 1));
}

// Bind `config.ai` ({binding}) and `config.vectorize` ([{binding, index_name}]) on `env`, as
// wrangler.toml declares them; returns the doubles (for the driver's counters).
export function attachAiVectorize(env, config, delayMs = 50) {
  const made = { ai: null, vectorize: null };
  if (config.ai?.binding) env[config.ai.binding] = made.ai = new Ai();
  for (const { binding } of config.vectorize ?? []) {
    env[binding] = made.vectorize = new VectorizeIndexImpl(delayMs, ["source_id"]);
  }
  return made;
}
