-- Large blob transfers: a blob uploaded as blocks and committed, and ranged downloads.
--
-- Every request carries the same account SAS (data.sas), so nothing is signed per request.
--   blocks: per wrk thread (one connection each, so its requests go one after the other), blob
--           {prefix}{thread}-{n} is uploaded as #data.block_ids Put Blocks of data.size bytes,
--           then committed by one Put Block List of those ids; then the next blob (a request
--           that fails is sent again)
--   range:  GET /{account}/{container}/{name}?{sas} with x-ms-range, cycling through data.ranges

dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")

local data
local base
local body
local blob = 0
local block = 0  -- blocks of the current blob answered 201
local committing = false
local ranges
local position = 0

function init(args)
   data = load_data()
   base = "/" .. data.account .. "/" .. data.container .. "/"
   if data.mode == "blocks" then
      body = string.rep("k", data.size)
   else
      ranges = {}
      for i, range in ipairs(data.ranges) do
         ranges[i] = "GET " .. base .. data.name .. "?" .. data.sas .. " HTTP/1.1\r\n" .. data.head
            .. "x-ms-range: bytes=" .. range .. "\r\n\r\n"
      end
      position = math.floor((tid - 1) * #ranges / thread_total())
   end
end

-- The next block is the one after those answered 201, not after those generated: wrk calls
-- request() once more than it sends, on its first thread, to check the script.
function request()
   if data.mode == "range" then
      position = position % #ranges + 1
      return ranges[position]
   end
   local name = base .. data.prefix .. tid .. "-" .. blob
   if block < #data.block_ids then
      committing = false
      return "PUT " .. name .. "?comp=block&blockid=" .. data.block_ids[block + 1] .. "&" .. data.sas
         .. " HTTP/1.1\r\n" .. data.head .. "Content-Length: " .. data.size .. "\r\n\r\n" .. body
   end
   committing = true
   return "PUT " .. name .. "?comp=blocklist&" .. data.sas .. " HTTP/1.1\r\n" .. data.head
      .. "Content-Type: application/xml\r\nContent-Length: " .. #data.block_list .. "\r\n\r\n"
      .. data.block_list
end

function response(status, headers, body)
   if data.mode ~= "blocks" or status ~= 201 then
      return
   end
   if committing then
      block = 0
      blob = blob + 1
   else
      block = block + 1
   end
end
