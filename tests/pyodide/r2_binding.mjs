// The `[[r2_buckets]]` bindings of the Pyodide edge runner: each one is a REAL R2 bucket of
// Miniflare 5 (workerd's own R2 implementation, in memory, offline), reached from Node with
// `mf.getR2Bucket`, behind a class named `R2Bucket` so the Workers SDK wraps it as it wraps
// the runtime's binding (`_EnvWrapper` picks wrappers by constructor name).
//
// One difference from workerd is the stand-in's: a stream put from Node must have a length
// Miniflare can see, and a Node `Request` body has none, so `put` reads a stream value whole
// before handing it on. Everything else (onlyIf, head, ranged get, delete, the body stream of
// a get) is Miniflare's.
import { Miniflare } from "miniflare";

class R2Bucket {
  constructor(inner) {
    this._inner = inner;
  }
  async put(key, value, options) {
    if (value instanceof ReadableStream) {
      value = new Uint8Array(await new Response(value).arrayBuffer());
    }
    return (await this._inner.put(key, value, plain(options))) ?? null;
  }
  async head(key) {
    return (await this._inner.head(key)) ?? null;
  }
  async get(key, options) {
    return (await this._inner.get(key, plain(options))) ?? null;
  }
  async delete(keys) {
    return this._inner.delete(keys);
  }
  async list(options) {
    return this._inner.list(plain(options));
  }
}

// Options cross Miniflare's Node proxy by structured serialisation: plain objects only.
function plain(options) {
  return options === undefined || options === null ? undefined : JSON.parse(JSON.stringify(options));
}

// Bind every bucket of `config.r2_buckets` into `env`; returns the function that disposes them.
export async function attachR2(env, config) {
  const buckets = (config.r2_buckets ?? []).map((b) => b.binding);
  if (!buckets.length) return async () => {};
  // Miniflare 5's configuration: a Worker's manifest of modules and its env bindings.
  const mf = new Miniflare({
    workers: [
      {
        config: {
          name: "r2",
          compatibilityDate: "2025-11-01",
          manifest: {
            mainModule: "r2.mjs",
            modules: {
              "r2.mjs": {
                type: "esm",
                contents: "export default { fetch() { return new Response('') } }",
              },
            },
          },
          env: Object.fromEntries(buckets.map((name) => [name, { type: "r2", name }])),
        },
      },
    ],
  });
  for (const name of buckets) env[name] = new R2Bucket(await mf.getR2Bucket(name));
  return () => mf.dispose();
}
