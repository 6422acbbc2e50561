-- The sweep's mark pass: every id now in active goes into stalled, so the
-- next sweep reclaims those whose lock has gone by then. SADD takes at most
-- 5000 ids a call: Lua's unpack fails near 8000 arguments.
local function markActive(activeKey, stalledKey)
  local active = redis.call("LRANGE", activeKey, 0, -1)
  for from = 1, #active, 5000 do
    redis.call("SADD", stalledKey, unpack(active, from, math.min(from + 4999, #active)))
  end
  return #active
end
