-- What the three atomic sweeps share: reading ARGV and KEYS, the throttle,
-- and reclaiming a list of ids in order (reclaimJob).
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
