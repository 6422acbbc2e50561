--[[
  addJob: enqueue one job.

  KEYS[1] wait
  KEYS[2] paused
  KEYS[3] meta
  KEYS[4] id          (job id counter)
  KEYS[5] events
  KEYS[6] marker

  ARGV[1] key prefix  ("emq:{q}:")
  ARGV[2] job id      ("" takes the next value of the id counter)
  ARGV[3] name
  ARGV[4] data        (JSON text)
  ARGV[5] timestamp   (ms)
  ARGV[6] priority    (0 or more)
  ARGV[7] delay ms    (0 or more)

  Returns the job id, or -5 when a job with that id exists (nothing written).
]]
-- @include "addEvent"
-- @include "pushToWaitOrPrioritized"

local prefix = ARGV[1]
local jobId = ARGV[2]
if jobId == "" then
  jobId = tostring(redis.call("INCR", KEYS[4]))
end
local jobKey = prefix .. jobId
if redis.call("EXISTS", jobKey) == 1 then
  return -5
end

local now = tonumber(ARGV[5])
local priority = tonumber(ARGV[6]) or 0
local delay = tonumber(ARGV[7]) or 0
redis.call("HSET", jobKey, "name", ARGV[3], "data", ARGV[4], "timestamp", now,
  "priority", priority, "delay", delay, "atm", 0, "ats", 0)

local isPaused = redis.call("HGET", KEYS[3], "paused") == "1"
if delay > 0 then
  -- the delayed set and the priority sequence are not in KEYS: they share the
  -- prefix, and so the hash tag and the cluster slot
  redis.call("ZADD", prefix .. "delayed", now + delay, jobId)
  addEvent(KEYS[5], "delayed", jobId, "delay", now + delay)
else
  pushReady(prefix, jobId, priority, isPaused, KEYS[1], KEYS[2],
    prefix .. "prioritized", prefix .. "pc")
  addEvent(KEYS[5], "added", jobId, "name", ARGV[3])
end

if not isPaused then
  redis.call("ZADD", KEYS[6], 0, "0")
end
return jobId
