-- wrk script of scripts/bench (part e): POSTs /v1/check bodies for 10k keys, each request
-- formatted once in init() so wrk spends its CPU on the load, not on Lua; the same requests go
-- to sluiced and to nginx (`return 204`) so both answer identical traffic. Prints one line of
-- `name=value` fields at the end.
--   wrk ... -s bench/wrk_check.lua URL -- [policy] [keys]
local requests = {}
local n = 10000
local next_index = 1
local threads = 0

function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

function init(args)
  local policy = args[1] or "bench"
  n = tonumber(args[2] or "10000")
  for i = 1, n do
    local body = string.format('{"key":"k:%d","policy":"%s"}', i - 1, policy)
    requests[i] = wrk.format("POST", "/v1/check", {["Content-Type"] = "application/json"}, body)
  end
  -- Threads start apart in the key space.
  next_index = ((id or 0) * 4099) % n + 1
end

function request()
  local r = requests[next_index]
  next_index = next_index % n + 1
  return r
end

function done(summary, latency, requests)
  local seconds = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    "requests=%d per_sec=%.0f p50_us=%.1f p99_us=%.1f p999_us=%.1f non2xx=%d " ..
    "errors=%d\n",
    summary.requests, summary.requests / seconds, latency:percentile(50),
    latency:percentile(99), latency:percentile(99.9), e.status,
    e.connect + e.read + e.write + e.timeout))
end
