-- Moves one reclaimed job on: HINCRBY its attempts, then to failed past the
-- max stalled count, else to the right of wait (paused while paused).
-- Returns true when it went to failed. The protocol's sweep adds no events:
-- an XADD here would cost each reclaimed job several µs more inside the hold.
local function reclaimJob(k, prefix, jobId, now, maxStalled, isPaused)
  local jobKey = prefix .. jobId
  local attempts = redis.call("HINCRBY", jobKey, "atm", 1)
  if attempts > maxStalled then
    redis.call("ZADD", k.failed, now, jobId)
    redis.call("HSET", jobKey, "failedReason", "job stalled more than allowable limit",
      "finishedOn", now)
    return true
  end
  if isPaused then
    redis.call("RPUSH", k.paused, jobId)
  else
    redis.call("RPUSH", k.wait, jobId)
  end
  return false
end
