--[[
  moveToFinished: finish a job, and optionally fetch the next.

  KEYS[1] wait          KEYS[8]  paused
  KEYS[2] active        KEYS[9]  meta
  KEYS[3] prioritized   KEYS[10] pc
  KEYS[4] events        KEYS[11] target (completed or failed ZSET)
  KEYS[5] stalled       KEYS[12] the job hash
  KEYS[6] limiter       KEYS[13] metrics:<target>
  KEYS[7] delayed       KEYS[14] marker

  ARGV[1]  job id
  ARGV[2]  timestamp (ms)
  ARGV[3]  property ("returnvalue" or "failedReason")
  ARGV[4]  value
  ARGV[5]  target name ("completed" or "failed")
  ARGV[6]  fetch next ("1" or "0")
  ARGV[7]  key prefix
  ARGV[8]  token ("0" skips the lock check)
  ARGV[9]  lock duration ms for the next job
  ARGV[10] keep (-1 every job; 0 none, the hash is deleted; N the newest N)
  ARGV[11] metrics size in minutes (0 = no metrics)
  ARGV[12] limiter max
  ARGV[13] limiter duration ms

  Returns
    -1  the job hash is missing
    -2  the lock is missing
    -6  the lock is held under another token
    -3  the job is not in active
    0   finished; no next job taken (fetch next off, or nothing to take)
    {<HGETALL of the next job>, <id>, 0, 0}  finished, and the next job taken
  Nothing is written unless every check passes.
]]
-- @include "addEvent"
-- @include "fetchNext"

local jobId = ARGV[1]
local now = tonumber(ARGV[2])
local jobKey = KEYS[12]
local lockKey = jobKey .. ":lock"
local token = ARGV[8]

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
if redis.call("LREM", KEYS[2], -1, jobId) == 0 then
  return -3
end

-- Write.
redis.call("DEL", lockKey)
redis.call("SREM", KEYS[5], jobId)
redis.call("HINCRBY", jobKey, "atm", 1)

local target = ARGV[5]
local keep = tonumber(ARGV[10])
if keep == 0 then
  redis.call("DEL", jobKey)
else
  redis.call("HSET", jobKey, ARGV[3], ARGV[4], "finishedOn", now)
  redis.call("ZADD", KEYS[11], now, jobId)
  if keep > 0 then
    local excess = redis.call("ZCARD", KEYS[11]) - keep
    if excess > 0 then
      local oldest = redis.call("ZRANGE", KEYS[11], 0, excess - 1)
      for _, oldId in ipairs(oldest) do
        redis.call("DEL", ARGV[7] .. oldId)
      end
      redis.call("ZREMRANGEBYRANK", KEYS[11], 0, excess - 1)
    end
  end
end
addEvent(KEYS[4], target, jobId, ARGV[3], ARGV[4])

-- Metrics: a running count, and per-minute counts in <metrics>:data, newest
-- first, at most <size> minutes long.
local metricsSize = tonumber(ARGV[11]) or 0
if metricsSize > 0 then
  local metricsKey = KEYS[13]
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

if ARGV[6] == "1" then
  local k = {
    wait = KEYS[1], active = KEYS[2], prioritized = KEYS[3], events = KEYS[4],
    stalled = KEYS[5], limiter = KEYS[6], delayed = KEYS[7], paused = KEYS[8],
    meta = KEYS[9], pc = KEYS[10], marker = KEYS[14],
  }
  local nextJob = fetchNext(k, ARGV[7], now, token, tonumber(ARGV[9]),
    tonumber(ARGV[12]) or 0, tonumber(ARGV[13]) or 0)
  if nextJob[2] ~= 0 then
    return nextJob
  end
end
return 0
