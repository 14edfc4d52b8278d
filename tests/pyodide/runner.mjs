// Run a Python snippet under npm `pyodide` in Node, fully offline, and print one JSON line.
//
// Usage: node [--experimental-wasm-jspi] tests/pyodide/runner.mjs [--pkg DIR]... [--sockets]
//          (--file SNIPPET.py | --code CODE)
//
// Pyodide loads from the repo's node_modules/pyodide/ (no CDN). Each --pkg DIR (default: the
// repo's aidememo/) is copied, .py files only, into /pkgs/<basename> of the Pyodide FS, and /pkgs
// is put first on sys.path. The snippet runs with top-level await allowed; whatever it assigns to
// RESULT must be JSON-serialisable. stdout carries exactly one line:
//   {"ok": true, "result": RESULT, "python": "...", "pyodide": "...", "load_ms": N, "run_ms": N}
//   {"ok": false, "error": "<traceback>", ...}            (exit status 1)
// Python's own stdout and stderr go to this process's stderr.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "..", "..");
const indexURL = path.join(repo, "node_modules", "pyodide") + path.sep;

function parseArgs(argv) {
  const opts = { pkgs: [], code: null, sockets: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${arg} needs a value`);
      return argv[++i];
    };
    if (arg === "--pkg") opts.pkgs.push(path.resolve(next()));
    else if (arg === "--file") opts.code = readFileSync(next(), "utf8");
    else if (arg === "--code") opts.code = next();
    else if (arg === "--sockets") opts.sockets = true;
    else throw new Error(`unknown argument ${arg}`);
  }
  if (opts.code === null) throw new Error("give the snippet with --file PATH or --code CODE");
  if (opts.pkgs.length === 0) opts.pkgs.push(path.join(repo, "aidememo"));
  return opts;
}

// Copy the .py files of a host directory into the Pyodide FS (no __pycache__, no other files
// but a distribution's METADATA, which importlib.metadata reads: vendored python_modules/).
function copyTree(FS, src, dst) {
  FS.mkdirTree(dst);
  let count = 0;
  for (const entry of readdirSync(src, { withFileTypes: true })) {
    const from = path.join(src, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== "__pycache__") count += copyTree(FS, from, `${dst}/${entry.name}`);
    } else if (entry.isFile() && (entry.name.endsWith(".py") || entry.name === "METADATA")) {
      FS.writeFile(`${dst}/${entry.name}`, readFileSync(from));
      count += 1;
    }
  }
  return count;
}

function emit(obj, code) {
  process.stdout.write(JSON.stringify(obj) + "\n");
  process.exitCode = code;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  for (const need of ["pyodide.mjs", "pyodide.asm.wasm", "python_stdlib.zip"]) {
    if (!existsSync(path.join(indexURL, need))) {
      throw new Error(`${need} missing under ${indexURL}: run npm ci in the repo root`);
    }
  }
  const { loadPyodide } = await import(path.join(indexURL, "pyodide.mjs"));
  const t0 = performance.now();
  const toStderr = (line) => process.stderr.write(line + "\n");
  const py = await loadPyodide({ indexURL, stdout: toStderr, stderr: toStderr });
  const loadMs = Math.round(performance.now() - t0);
  // --sockets: Python's `socket` reaches real TCP through Node (Pyodide's NodeSockFS), where
  // workerd gives Python Workers its own sockets; a blocking call suspends the WebAssembly
  // stack (JSPI), so Node needs --experimental-wasm-jspi.
  if (opts.sockets) await py.useNodeSockFS();

  for (const pkg of opts.pkgs) {
    if (!statSync(pkg).isDirectory()) throw new Error(`--pkg ${pkg} is not a directory`);
    copyTree(py.FS, pkg, `/pkgs/${path.basename(pkg)}`);
  }
  const globals = py.toPy({ __name__: "__main__", SNIPPET: opts.code });
  const t1 = performance.now();
  const meta = { pyodide: py.version, load_ms: loadMs };
  try {
    const out = await py.runPythonAsync(
      [
        "import sys, json",
        "sys.dont_write_bytecode = True",
        "sys.path.insert(0, '/pkgs')",
        "_ns = {'__name__': '__snippet__'}",
        "from pyodide.code import eval_code_async",
        "await eval_code_async(SNIPPET, _ns, filename='<snippet>')",
        "json.dumps({'python': sys.version, 'result': _ns.get('RESULT')})",
      ].join("\n"),
      { globals },
    );
    const parsed = JSON.parse(out);
    emit({ ok: true, ...meta, run_ms: Math.round(performance.now() - t1), ...parsed }, 0);
  } catch (err) {
    emit({ ok: false, ...meta, run_ms: Math.round(performance.now() - t1), error: String(err) }, 1);
  } finally {
    globals.destroy();
  }
}

main().catch((err) => emit({ ok: false, error: String(err?.stack ?? err) }, 2));
