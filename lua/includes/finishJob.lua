-- moveToFinished's whole step (protocol.md): the checks, the writes, keep,
-- metrics and the optional fetch-next, over moveToFinished's KEYS and ARGV. Both
-- moveToFinished-14.lua and moveToFinishedDeadline-14.lua run it; the deadline
-- form adds its index writes around the reply.
-- @include "addEvent"
-- @include "fetchNext"
local function finishJob(keys, argv)
  local jobId = argv[1]
  local now = tonumber(argv[2])
  local jobKey = keys[12]
  local lockKey = jobKey .. ":lock"
  local token = argv[8]

  -- Read: every check before any write.
  if redis.call("EXISTS", jobKey) == 0 then
    return -1
  end
  if token ~= "0" then
    local holder = redis.call("GET", lockKey)
    if not holder then
      return -2
    end
    if holder ~= token then
      return -6
    end
  end
  -- LREM is the active check: when it removes nothing it has written nothing.
  if redis.call("LREM", keys[2], -1, jobId) == 0 then
    return -3
  end

  -- Write.
  redis.call("DEL", lockKey)
  redis.call("SREM", keys[5], jobId)
  redis.call("HINCRBY", jobKey, "atm", 1)

  local target = argv[5]
  local keep = tonumber(argv[10])
  if keep == 0 then
    redis.call("DEL", jobKey)
  else
    redis.call("HSET", jobKey, argv[3], argv[4], "finishedOn", now)
    redis.call("ZADD", keys[11], now, jobId)
    if keep > 0 then
      local excess = redis.call("ZCARD", keys[11]) - keep
      if excess > 0 then
        local oldest = redis.call("ZRANGE", keys[11], 0, excess - 1)
        for _, oldId in ipairs(oldest) do
          redis.call("DEL", argv[7] .. oldId)
        end
        redis.call("ZREMRANGEBYRANK", keys[11], 0, excess - 1)
      end
    end
  end
  addEvent(keys[4], target, jobId, argv[3], argv[4])

  -- Metrics: a running count, and per-minute counts in <metrics>:data, newest
  -- first, at most <size> minutes long.
  local metricsSize = tonumber(argv[11]) or 0
  if metricsSize > 0 then
    local metricsKey = keys[13]
    local count = redis.call("HINCRBY", metricsKey, "count", 1)
    local minute = math.floor(now / 60000)
    local prev = redis.call("HMGET", metricsKey, "prevMinute", "prevCount")
    local prevMinute = tonumber(prev[1])
    if not prevMinute then
      redis.call("HSET", metricsKey, "prevMinute", minute, "prevCount", 0)
    elseif minute > prevMinute then
      local dataKey = metricsKey .. ":data"
      redis.call("LPUSH", dataKey, count - 1 - (tonumber(prev[2]) or 0))
      -- minutes with no finished job count zero
      local gap = math.min(minute - prevMinute - 1, metricsSize)
      for _ = 1, gap do
        redis.call("LPUSH", dataKey, 0)
      end
      redis.call("LTRIM", dataKey, 0, metricsSize - 1)
      redis.call("HSET", metricsKey, "prevMinute", minute, "prevCount", count - 1)
    end
  end

  if argv[6] == "1" then
    local k = {
      wait = keys[1], active = keys[2], prioritized = keys[3], events = keys[4],
      stalled = keys[5], limiter = keys[6], delayed = keys[7], paused = keys[8],
      meta = keys[9], pc = keys[10], marker = keys[14],
    }
    local nextJob = fetchNext(k, argv[7], now, token, tonumber(argv[9]),
      tonumber(argv[12]) or 0, tonumber(argv[13]) or 0)
    if nextJob[2] ~= 0 then
      return nextJob
    end
  end
  return 0
end
