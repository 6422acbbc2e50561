-- Moves one reclaimed job on: HINCRBY its attempts, then to failed past the
-- max stalled count, else to the right of wait (paused while paused).
-- Returns true when it went to failed.
-- @include "addEvent"
local function reclaimJob(k, prefix, jobId, now, maxStalled, isPaused)
  local jobKey = prefix .. jobId
  local attempts = redis.call("HINCRBY", jobKey, "atm", 1)
  if attempts > maxStalled then
    local reason = "job stalled more than allowable limit"
    redis.call("ZADD", k.failed, now, jobId)
    redis.call("HSET", jobKey, "failedReason", reason, "finishedOn", now)
    addEvent(k.events, "failed", jobId, "failedReason", reason)
    return true
  end
  if isPaused then
    redis.call("RPUSH", k.paused, jobId)
  else
    redis.call("RPUSH", k.wait, jobId)
  end
  addEvent(k.events, "stalled", jobId)
  return false
end
