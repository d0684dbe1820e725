-- Replays a list of pre-signed requests (one per distinct key), cycling through it.
-- Used by: read, upsert, range, mix (and the scale-mode reads).
--
-- data.lines: file with one request per line: METHOD \t TARGET \t AUTHORIZATION \t PK \t RK
--   (PK/RK empty for bodiless requests; otherwise the body is the entity built from data.frags;
--   AUTHORIZATION empty when a SAS in TARGET signs the request)
-- data.heads[METHOD]: the constant header block for that method (CRLF-terminated lines)

dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")

local entries = {}
local frags
local position = 0
local count = 0

function init(args)
   local data = load_data()
   frags = data.frags
   for line in io.lines(data.lines) do
      local method, target, auth, pk, rk = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)$")
      local head = method .. " " .. target .. " HTTP/1.1\r\n" .. data.heads[method]
      if auth ~= "" then
         head = head .. "Authorization: " .. auth .. "\r\n"
      end
      if pk == "" and rk == "" then
         entries[#entries + 1] = head .. "\r\n"
      else
         entries[#entries + 1] = { head, pk, rk }
      end
   end
   count = #entries
   -- Threads start at different points of the (shuffled) list.
   position = math.floor((tid - 1) * count / thread_total())
end

function request()
   position = position % count + 1
   local entry = entries[position]
   if type(entry) == "string" then
      return entry
   end
   local body = entity_body(frags, entry[2], entry[3])
   return entry[1] .. "Content-Length: " .. #body .. "\r\n\r\n" .. body
end
