-- Shared by every benchmark script (loaded with dofile).
--
-- Environment (set by benchmarks/wrk_runner.py):
--   BENCH_DATA     Lua data file written by the Python generator (returns a table)
--   BENCH_THREADS  number of wrk threads, to spread threads over the request list
--
-- A script may set the global EXTRA_STATS to a list of per-thread numeric globals; done()
-- sums them over the threads and adds them to the JSON line it prints.

local threads = {}
local thread_count = 0

-- Runs in the main Lua state once per thread, before that thread's init().
function setup(thread)
   thread_count = thread_count + 1
   thread:set("tid", thread_count)
   table.insert(threads, thread)
end

-- The generator's data table (heads, fragments, file names...).
function load_data()
   return dofile(os.getenv("BENCH_DATA"))
end

-- Number of wrk threads (for the starting offset of each thread in a shared list).
function thread_total()
   return tonumber(os.getenv("BENCH_THREADS") or "1")
end

-- Entity JSON from the three fragments around PartitionKey and RowKey.
function entity_body(frags, pk, rk)
   return frags[1] .. pk .. frags[2] .. rk .. frags[3]
end

-- Percent-encode everything but unreserved characters (continuation tokens in a query string).
function urlencode(value)
   return (value:gsub("[^%w%-%._~]", function(c)
      return string.format("%%%02X", c:byte())
   end))
end

local function json_number(value)
   if value == nil then
      return "0"
   end
   if value ~= value or value == math.huge or value == -math.huge then
      return "0"
   end
   return string.format("%.6f", value)
end

-- Prints one line "BENCH_JSON {...}" that the Python driver parses.
function done(summary, latency, requests)
   local fields = {
      requests = summary.requests,
      duration_us = summary.duration,
      bytes = summary.bytes,
      status_errors = summary.errors.status,
      connect_errors = summary.errors.connect,
      read_errors = summary.errors.read,
      write_errors = summary.errors.write,
      timeouts = summary.errors.timeout,
      p50_us = latency:percentile(50),
      p90_us = latency:percentile(90),
      p99_us = latency:percentile(99),
      mean_us = latency.mean,
      max_us = latency.max,
   }
   for _, name in ipairs(EXTRA_STATS or {}) do
      local total = 0
      for _, thread in ipairs(threads) do
         total = total + (tonumber(thread:get(name)) or 0)
      end
      fields[name] = total
   end
   local parts = {}
   for name, value in pairs(fields) do
      parts[#parts + 1] = string.format('"%s": %s', name, json_number(value))
   end
   io.write("BENCH_JSON {" .. table.concat(parts, ", ") .. "}\n")
end
