-- Get Messages (one message) and Delete Message of what it got, as a consumer does.
--
-- data.get: the pre-signed Get Messages request. A delete names the message id and pop receipt,
-- which change every time and which a Shared Key signature would cover, so deletes carry a queue
-- SAS (data.sas, permission p) and need no signature of their own. The ids and receipts a Get
-- returns are queued per thread; the next request() sends the oldest delete, else another Get.

EXTRA_STATS = { "deleted", "taken", "empty_gets" }

dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")

local data
local pending = {}
local first = 1
local last = 0

function init(args)
   data = load_data()
   deleted = 0
   taken = 0
   empty_gets = 0
end

function request()
   if first <= last then
      local item = pending[first]
      pending[first] = nil
      first = first + 1
      return "DELETE " .. data.delete_prefix .. item[1] .. "?popreceipt=" .. urlencode(item[2]) .. "&"
         .. data.sas .. " HTTP/1.1\r\n" .. data.delete_head .. "\r\n"
   end
   return data.get
end

function response(status, headers, body)
   if status == 204 then
      deleted = deleted + 1
   elseif status == 200 then
      local found = false
      for id, receipt in body:gmatch("<MessageId>([^<]+)</MessageId>.-<PopReceipt>([^<]+)</PopReceipt>") do
         last = last + 1
         pending[last] = { id, receipt }
         taken = taken + 1
         found = true
      end
      if not found then
         empty_gets = empty_gets + 1
      end
   end
end
