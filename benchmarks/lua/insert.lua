-- Point inserts: POST /{account}/{table}, each with a key never used before.
--
-- A Shared Key signature covers the path but not the body, so every insert into the table shares
-- one pre-signed Authorization (data.auth); the keys are generated here from a per-run prefix, the
-- thread id and a counter, so they are unique however long the run is.

dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")

local data
local head
local counter = 0
local prefix

function init(args)
   data = load_data()
   head = "POST " .. data.target .. " HTTP/1.1\r\n" .. data.head .. "Authorization: " .. data.auth .. "\r\n"
   prefix = data.prefix .. tid .. "-"
end

function request()
   counter = counter + 1
   local pk = string.format("%s%03d", data.pk_prefix, counter % data.partitions)
   local rk = string.format("%s%09d", prefix, counter)
   local body = entity_body(data.frags, pk, rk)
   return head .. "Content-Length: " .. #body .. "\r\n\r\n" .. body
end
