-- The fetch step shared by moveToActive and moveToFinished's fetch-next:
-- promote due delayed jobs, honour pause and the rate limiter, then move one
-- job to active, lock it with the caller's token and return it.
-- @include "addEvent"
-- @include "pushToWaitOrPrioritized"
local function fetchNext(k, prefix, now, token, lockMs, limiterMax, limiterMs)
  -- k: wait, active, prioritized, events, stalled, limiter, delayed, paused,
  -- meta, pc, marker (the moveToActive key names)
  local isPaused = redis.call("HGET", k.meta, "paused") == "1"

  -- 1. promote due delayed jobs, at most 1000 a call so one call stays short
  local due = redis.call("ZRANGEBYSCORE", k.delayed, "-inf", now, "LIMIT", 0, 1000)
  for _, jobId in ipairs(due) do
    redis.call("ZREM", k.delayed, jobId)
    local jobKey = prefix .. jobId
    local priority = tonumber(redis.call("HGET", jobKey, "priority")) or 0
    redis.call("HSET", jobKey, "delay", 0)
    pushReady(prefix, jobId, priority, isPaused, k.wait, k.paused, k.prioritized, k.pc)
    addEvent(k.events, "waiting", jobId, "prev", "delayed")
  end

  -- 2. a paused queue hands out nothing
  if isPaused then
    return {0, 0, 0, 0}
  end

  -- 3. the rate limiter: at its max, say how long until it resets
  if limiterMax > 0 then
    local used = tonumber(redis.call("GET", k.limiter)) or 0
    if used >= limiterMax then
      local ttl = redis.call("PTTL", k.limiter)
      if ttl < 0 then
        -- a counter without expiry would block the queue forever
        redis.call("DEL", k.limiter)
      else
        return {0, 0, ttl, 0}
      end
    end
  end

  -- 4. take from the right of wait, else the lowest score of prioritized
  local jobId = redis.call("LMOVE", k.wait, k.active, "RIGHT", "LEFT")
  if not jobId then
    local popped = redis.call("ZPOPMIN", k.prioritized)
    if #popped > 0 then
      jobId = popped[1]
      redis.call("LPUSH", k.active, jobId)
    end
  end

  if not jobId then
    local nextDelayed = redis.call("ZRANGE", k.delayed, 0, 0, "WITHSCORES")
    if #nextDelayed > 0 then
      return {0, 0, 0, tonumber(nextDelayed[2])}
    end
    return {0, 0, 0, 0}
  end

  -- 5. count, lock and stamp the job taken
  if limiterMax > 0 then
    if redis.call("INCR", k.limiter) == 1 then
      redis.call("PEXPIRE", k.limiter, limiterMs)
    end
  end
  local jobKey = prefix .. jobId
  redis.call("SET", jobKey .. ":lock", token, "PX", lockMs)
  redis.call("HSET", jobKey, "processedOn", now)
  redis.call("HINCRBY", jobKey, "ats", 1)
  addEvent(k.events, "active", jobId, "prev", "waiting")

  -- 6. the job as a flat field/value array, and its id
  return {redis.call("HGETALL", jobKey), jobId, 0, 0}
end
