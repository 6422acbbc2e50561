-- Runs `command key id ...` over a list of ids, at most 5000 ids a call:
-- Lua's unpack fails near 8000 arguments.
local function batched(command, key, ids)
  for from = 1, #ids, 5000 do
    redis.call(command, key, unpack(ids, from, math.min(from + 4999, #ids)))
  end
end
