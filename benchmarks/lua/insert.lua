-- Point inserts: POST /{account}/{table}, each with a key never used before.
--
-- A Shared Key signature covers the path but not the body, so every insert into the table shares
-- one pre-signed Authorization (data.auth); the keys are generated here from a per-run prefix, the
-- thread id and a counter, so they are unique however long the run is.

dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")

local data
local counter = 0
local prefix
local partition_keys = {}
local pieces = {}  -- head with Content-Length, fragments, and slots for the two keys

-- Keys have a fixed length (three-digit partitions, nine-digit counters), so the body's length
-- and the whole head are known once; each request() fills two slots and concatenates.
function init(args)
   data = load_data()
   prefix = data.prefix .. tid .. "-"
   for index = 0, data.partitions - 1 do
      partition_keys[index] = string.format("%s%03d", data.pk_prefix, index)
   end
   local frags = data.frags
   local length = #frags[1] + #partition_keys[0] + #frags[2] + #string.format("%s%09d", prefix, 0) + #frags[3]
   pieces[1] = "POST " .. data.target .. " HTTP/1.1\r\n" .. data.head .. "Authorization: " .. data.auth
      .. "\r\nContent-Length: " .. length .. "\r\n\r\n" .. frags[1]
   pieces[2] = false  -- PartitionKey
   pieces[3] = frags[2]
   pieces[4] = false  -- RowKey
   pieces[5] = frags[3]
end

function request()
   counter = counter + 1
   pieces[2] = partition_keys[counter % data.partitions]
   pieces[4] = string.format("%s%09d", prefix, counter)
   return table.concat(pieces)
end
