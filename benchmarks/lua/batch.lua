-- Batches of data.size inserts: POST /{account}/$batch, multipart exactly as the Python SDK
-- writes it (spec 3.12.2); each batch is a fresh partition, so every insert is new.
--
-- The outer Content-Type (and so the signature) names a fixed boundary, so one pre-signed
-- Authorization serves every batch. A failed changeset still answers 202, so response() looks
-- for an error part and counts it in sub_errors.

EXTRA_STATS = { "sub_errors" }

dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")

local data
local template
local head
local counter = 0
local prefix
sub_errors = 0

function init(args)
   data = load_data()
   template = data.template
   head = "POST " .. data.target .. " HTTP/1.1\r\n" .. data.head .. "Authorization: " .. data.auth .. "\r\n"
   prefix = data.prefix .. tid .. "-"
end

function request()
   counter = counter + 1
   local pk = string.format("%s%09d", prefix, counter)
   local parts = { template.start }
   for index = 0, data.size - 1 do
      local json = entity_body(data.frags, pk, string.format("r%03d", index))
      parts[#parts + 1] = template.part_a .. index .. template.part_b .. #json .. template.part_c .. json .. "\r\n"
   end
   parts[#parts + 1] = template["end"]
   local body = table.concat(parts)
   return head .. "Content-Length: " .. #body .. "\r\n\r\n" .. body
end

function response(status, headers, body)
   if status == 202 and body:find("odata.error", 1, true) then
      sub_errors = sub_errors + 1
   end
end
