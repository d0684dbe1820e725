-- Blob workloads: Put Blob of new names, Get Blob of preloaded names, List Blobs.
--
-- Every request carries the same account SAS (data.sas), so nothing is signed per request.
--   put:  PUT /{account}/{container}/{prefix}{thread}-{counter}?{sas}, a body of data.size bytes
--   get:  GET /{account}/{container}/{name}?{sas}, cycling through data.names
--   list: GET /{account}/{list_container}?restype=container&comp=list&{sas} (5,000 blobs in one page)

dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")

local data
local counter = 0
local body
local put_head
local fixed
local names
local position = 0

function init(args)
   data = load_data()
   local base = "/" .. data.account .. "/" .. data.container .. "/"
   if data.mode == "put" then
      body = string.rep("b", data.size)
      put_head = {
         "PUT " .. base .. data.prefix .. tid .. "-",
         false,  -- the counter
         "?" .. data.sas .. " HTTP/1.1\r\n" .. data.head .. "x-ms-blob-type: BlockBlob\r\nContent-Length: "
            .. data.size .. "\r\n\r\n",
         body,
      }
   elseif data.mode == "get" then
      names = {}
      for i, name in ipairs(data.names) do
         names[i] = "GET " .. base .. name .. "?" .. data.sas .. " HTTP/1.1\r\n" .. data.head .. "\r\n"
      end
      position = math.floor((tid - 1) * #names / thread_total())
   else
      fixed = "GET /" .. data.account .. "/" .. data.list_container .. "?restype=container&comp=list&"
         .. data.sas .. " HTTP/1.1\r\n" .. data.head .. "\r\n"
   end
end

function request()
   if data.mode == "put" then
      counter = counter + 1
      put_head[2] = string.format("%09d", counter)
      return table.concat(put_head)
   elseif data.mode == "get" then
      position = position % #names + 1
      return names[position]
   end
   return fixed
end
