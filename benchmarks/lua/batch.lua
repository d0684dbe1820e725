-- Batches of data.size inserts: POST /{account}/$batch, multipart exactly as the Python SDK
-- writes it (spec 3.12.2); each batch is a fresh partition, so every insert is new.
--
-- The outer Content-Type (and so the signature) names a fixed boundary, so one pre-signed
-- Authorization serves every batch. A failed changeset still answers 202, so response() looks
-- for an error part and counts it in sub_errors.

EXTRA_STATS = { "sub_errors" }

dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")

local data
local counter = 0
local prefix
local pieces = {}  -- the whole request but the PartitionKey, which goes in the slots below
local pk_slots = {}
sub_errors = 0

-- Every batch of a thread has the same bytes but its PartitionKey, whose length is fixed (the
-- thread's prefix and nine digits), so the request is built once around empty slots and each
-- request() only fills them: the client's CPU is shared with the server on this machine.
function init(args)
   data = load_data()
   local template = data.template
   local frags = data.frags
   prefix = data.prefix .. tid .. "-"
   local pk_length = #string.format("%s%09d", prefix, 0)
   local body = {}
   local static = template.start
   for index = 0, data.size - 1 do
      local rk = string.format("r%03d", index)
      local json_length = #frags[1] + pk_length + #frags[2] + #rk + #frags[3]
      static = static .. template.part_a .. index .. template.part_b .. json_length .. template.part_c .. frags[1]
      body[#body + 1] = static
      body[#body + 1] = false  -- a PartitionKey slot
      static = frags[2] .. rk .. frags[3] .. "\r\n"
   end
   body[#body + 1] = static .. template["end"]
   local length = 0
   for _, piece in ipairs(body) do
      length = length + (piece and #piece or pk_length)
   end
   pieces[1] = "POST " .. data.target .. " HTTP/1.1\r\n" .. data.head .. "Authorization: " .. data.auth
      .. "\r\nContent-Length: " .. length .. "\r\n\r\n"
   for _, piece in ipairs(body) do
      pieces[#pieces + 1] = piece or ""
      if not piece then
         pk_slots[#pk_slots + 1] = #pieces
      end
   end
end

function request()
   counter = counter + 1
   local pk = string.format("%s%09d", prefix, counter)
   for i = 1, #pk_slots do
      pieces[pk_slots[i]] = pk
   end
   return table.concat(pieces)
end

function response(status, headers, body)
   if status == 202 and body:find("odata.error", 1, true) then
      sub_errors = sub_errors + 1
   end
end
