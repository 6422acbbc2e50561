-- Puts a ready job where a worker will find it: prioritized when its priority
-- is above 0 (score = priority * 2^32 + a per-queue sequence), else the left
-- of wait, or of paused while the queue is paused.
local function pushReady(prefix, jobId, priority, isPaused, waitKey, pausedKey, prioritizedKey, pcKey)
  if priority > 0 then
    local seq = redis.call("INCR", pcKey)
    redis.call("ZADD", prioritizedKey, priority * 4294967296 + seq, jobId)
  elseif isPaused then
    redis.call("LPUSH", pausedKey, jobId)
  else
    redis.call("LPUSH", waitKey, jobId)
  end
end
