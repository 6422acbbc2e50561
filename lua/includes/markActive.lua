-- The sweep's mark pass: every id now in active goes into stalled, so the
-- next sweep reclaims those whose lock has gone by then.
-- @include "batched"
local function markActive(activeKey, stalledKey)
  local active = redis.call("LRANGE", activeKey, 0, -1)
  batched("SADD", stalledKey, active)
  return #active
end
