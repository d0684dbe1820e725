-- Page blob workload: Put Page (update) of data.size bytes at a random page-aligned offset.
--
--   PUT /{account}/{container}/{name}?comp=page&{sas}, x-ms-range: bytes={offset}-{offset+size-1}
-- Each thread writes to one of data.names (thread id modulo their number), at offsets drawn
-- from data.pages slots of data.size bytes, with a generator seeded by the thread id.

dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")

local data
local head
local tail
local body

function init(args)
   data = load_data()
   math.randomseed(tid * 7919)
   local name = data.names[(tid - 1) % #data.names + 1]
   body = string.rep("p", data.size)
   head = "PUT /" .. data.account .. "/" .. data.container .. "/" .. name .. "?comp=page&" .. data.sas
      .. " HTTP/1.1\r\n" .. data.head .. "x-ms-page-write: update\r\nContent-Length: " .. data.size
      .. "\r\nx-ms-range: bytes="
   tail = "\r\n\r\n" .. body
end

function request()
   local offset = math.random(0, data.pages - 1) * data.size
   return head .. offset .. "-" .. (offset + data.size - 1) .. tail
end
