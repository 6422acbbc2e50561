-- What the atomic sweeps share: reading ARGV and KEYS, the throttle, appending lists,
-- a call's time budget, and reclaiming a list of ids in order (reclaimJob).
-- @include "reclaimJob"

-- The sweep's arguments, and its keys by name.
local function sweepArgs()
  local prefix = ARGV[2]
  local args = {
    maxStalled = tonumber(ARGV[1]), prefix = prefix, now = tonumber(ARGV[3]),
    interval = tonumber(ARGV[4]) or 0,
  }
  local k = {
    stalled = KEYS[1], wait = KEYS[2], active = KEYS[3], failed = KEYS[4],
    check = KEYS[5], meta = KEYS[6], paused = KEYS[7], marker = KEYS[8],
  }
  return args, k
end

-- Appends the items of `from` to the list `to`.
local function appendAll(to, from)
  for _, item in ipairs(from) do
    to[#to + 1] = item
  end
end

-- A call's time budget, µs (0 = none): returns a function that is true once the call has
-- run that long (TIME). Where TIME does not move inside a script, it is never true.
local function budgetSpent(budgetUs)
  local function clockUs()
    local t = redis.call("TIME")
    return tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  local startedUs = budgetUs > 0 and clockUs() or 0
  return function()
    return budgetUs > 0 and clockUs() - startedUs >= budgetUs
  end
end

-- True when a sweep ran within the check interval; otherwise opens a new one.
local function throttled(k, args)
  if args.interval <= 0 then
    return false
  end
  if redis.call("EXISTS", k.check) == 1 then
    return true
  end
  redis.call("SET", k.check, args.now, "PX", args.interval)
  return false
end
