-- Filtered full-table scan: GET /{account}/{table}()?$filter=<residual predicate>, followed
-- through every continuation page until the server stops sending x-ms-continuation-* headers.
--
-- The signature ignores the query string, so one Authorization serves every page. Each thread
-- keeps a queue of pending continuations (a page's response queues the next page, which the next
-- request() sends). When a scan completes, the thread's rows-scanned rate is
-- completed_scans * data.rows / (time of last completion - time of first request).

EXTRA_STATS = { "scans", "scan_rate", "continued_pages" }

dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")

local ffi = require("ffi")
ffi.cdef([[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clock_id, bench_timespec *tp);
]])
local clock = ffi.new("bench_timespec")

local function now()
   ffi.C.clock_gettime(1, clock) -- CLOCK_MONOTONIC
   return tonumber(clock.tv_sec) + tonumber(clock.tv_nsec) * 1e-9
end

local data
local tail
local queue = {}
local head_index = 1
local tail_index = 0
local started
scans = 0
scan_rate = 0
continued_pages = 0

function init(args)
   data = load_data()
   tail = " HTTP/1.1\r\n" .. data.head .. "Authorization: " .. data.auth .. "\r\n\r\n"
end

function request()
   if started == nil then
      started = now()
   end
   local target = data.target
   if tail_index >= head_index then
      target = queue[head_index]
      queue[head_index] = nil
      head_index = head_index + 1
   end
   return "GET " .. target .. tail
end

function response(status, headers, body)
   if status ~= 200 then
      return -- counted by wrk as a status error; the scan is abandoned
   end
   local next_pk, next_rk
   for name, value in pairs(headers) do
      local lower = name:lower()
      if lower == "x-ms-continuation-nextpartitionkey" then
         next_pk = value
      elseif lower == "x-ms-continuation-nextrowkey" then
         next_rk = value
      end
   end
   if next_pk then
      continued_pages = continued_pages + 1
      tail_index = tail_index + 1
      queue[tail_index] = data.target .. "&NextPartitionKey=" .. urlencode(next_pk)
         .. "&NextRowKey=" .. urlencode(next_rk or "")
   else
      scans = scans + 1
      scan_rate = scans * data.rows / (now() - started)
   end
end
