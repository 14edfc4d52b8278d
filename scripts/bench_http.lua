-- wrk script for scripts/bench_http.py: one request shape per run, chosen by the first argument.
--
--   wrk -t2 -c32 -d10s --latency -s scripts/bench_http.lua URL -- \
--       MODE TOKEN PROJECT EPOCH TAG SEED_FACTS HEAD SESSION
--
-- MODE is facts | commands | resource | changes | search | hello. Every POST facts request carries a
-- command_id and fact_id made of the run TAG, the wrk thread's number and a per-thread counter,
-- so no two requests of any run (warm-up included) share an id. done() prints one line
-- "BENCH_JSON {...}" with the request count, duration, error counts and the latency
-- percentiles in microseconds straight from wrk's histogram.

local thread_count = 0

function setup(thread)
  thread_count = thread_count + 1
  thread:set("thread_id", thread_count)
end

local words = {
  "server", "latency", "sqlite", "commit", "handoff", "session", "memory", "agent", "ledger",
  "cursor", "snapshot", "search", "index", "token", "project", "receipt", "revision", "epoch",
  "fsync", "python", "profile", "request", "response", "change", "feed", "lease", "claim",
  "fact", "review", "deploy", "schema", "migration", "budget", "queue", "worker", "origin",
}

local mode, project, epoch, tag, session
local seed_facts, head_seq
local counter = 0
local headers
local base

-- Besides the common words, each fact carries a few of RARE_TERMS rare terms ("r0" ..
-- "r1999"), as real notes carry names and identifiers; a search asks for two rare terms, so
-- it matches a small share of the facts, like a real lookup, instead of all of them.
local RARE_TERMS = 2000

local function rare()
  return "r" .. math.random(0, RARE_TERMS - 1)
end

local function sentence(n)
  local parts = {}
  for i = 1, n do
    parts[i] = words[math.random(#words)]
  end
  for i = n + 1, n + 4 do
    parts[i] = rare()
  end
  return table.concat(parts, " ")
end

function init(args)
  mode = args[1]
  local token = args[2]
  project = args[3]
  epoch = args[4]
  tag = args[5]
  seed_facts = tonumber(args[6])
  head_seq = tonumber(args[7])
  session = args[8]
  -- thread_id is a global set by setup() through thread:set()
  math.randomseed((thread_id or 0) * 7919 + os.time())
  headers = {
    ["Authorization"] = "Bearer " .. token,
    ["Content-Type"] = "application/json",
  }
  base = "/v1/projects/" .. project
end

function request()
  if mode == "facts" then
    counter = counter + 1
    local id = tag .. "-" .. thread_id .. "-" .. counter
    -- about 200 bytes of content: 22 common words and 4 rare terms
    local body = '{"command_id":"c-' .. id .. '","payload":{"fact_id":"f-' .. id
      .. '","session_id":"' .. session .. '","content":"' .. sentence(22) .. '"}}'
    return wrk.format("POST", base .. "/facts", headers, body)
  elseif mode == "commands" then
    -- a generic put of a new custom.note (POST /v1/commands, the one-statement path on
    -- PostgreSQL), about 200 bytes of payload
    counter = counter + 1
    local id = tag .. "-" .. thread_id .. "-" .. counter
    local body = '{"command_id":"c-' .. id .. '","project_id":"' .. project
      .. '","expected_revision":null,"operation":"resource.put",'
      .. '"resource":{"kind":"custom.note","id":"n-' .. id .. '"},"change":"upsert",'
      .. '"payload":{"text":"' .. sentence(22) .. '"}}'
    return wrk.format("POST", "/v1/commands", headers, body)
  elseif mode == "resource" then
    local path = base .. "/resources/fact/seed-" .. math.random(0, seed_facts - 1)
    return wrk.format("GET", path, headers)
  elseif mode == "changes" then
    local after = math.random(0, math.max(0, head_seq - 1000))
    local path = base .. "/changes?project_epoch=" .. epoch .. "&after_seq=" .. after
      .. "&limit=1000"
    return wrk.format("GET", path, headers)
  elseif mode == "search" then
    local q = rare() .. "+" .. rare()
    return wrk.format("GET", base .. "/search?q=" .. q, headers)
  else
    return wrk.format("GET", "/hello", headers)
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"bytes":%d,'
      .. '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},'
      .. '"latency_us":{"p50":%d,"p90":%d,"p95":%d,"p99":%d,"max":%d,"mean":%.1f}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(95),
    latency:percentile(99), latency.max, latency.mean
  ))
end
