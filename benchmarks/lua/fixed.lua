-- One pre-signed request, replayed as it is (queue put, queue peek).
--
-- data.request: the whole raw request, head and body. The Blob/Queue Shared Key covers the path,
-- the query and Content-Length but not the body, so a fixed-length body needs one signature.

dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")

local raw

function init(args)
   raw = load_data().request
end

function request()
   return raw
end
