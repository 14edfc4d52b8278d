// Run many reference-Nuzo CLI commands in one Node process, for the compatibility tier
// (tests/compat/nuzo_oracle.py): starting Node 22 and loading the CLI costs far more than a
// command, so one process serves a whole test session.
//
// Usage: node nuzo_batch.mjs NUZO_CLI_INDEX_JS
// Reads one JSON request a line on stdin, {"argv": [...], "env": {...}, "cwd": "..."}, runs the
// CLI's own exported `runCliProcess(["node", "nuzo", ...argv], io)` (the function its bin runs)
// with `env` applied to process.env and `cwd` as the working directory, and answers one JSON
// line on stdout: {"code", "stdout", "stderr"}. Output is collected as the CLI's default IO would
// print it (console.log: each message plus a newline).
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const { runCliProcess } = await import(pathToFileURL(process.argv[2]).href);
const baseEnv = { ...process.env };
const reply = process.stdout.write.bind(process.stdout);

for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (line.trim() === "") continue;
  const request = JSON.parse(line);
  for (const key of Object.keys(process.env)) {
    if (!(key in baseEnv)) delete process.env[key];
  }
  Object.assign(process.env, baseEnv, request.env ?? {});
  if (request.cwd) process.chdir(request.cwd);
  const out = [];
  const err = [];
  const io = {
    stdout: (message) => out.push(`${message}\n`),
    stderr: (message) => err.push(`${message}\n`),
    readStdin: () => "",
  };
  let code;
  try {
    code = await runCliProcess(["node", "nuzo", ...request.argv], io);
  } catch (error) {
    err.push(`batch runner: ${error?.stack ?? error}\n`);
    code = 70;
  }
  process.exitCode = 0;
  reply(`${JSON.stringify({ code, stdout: out.join(""), stderr: err.join("") })}\n`);
}
