--[[
  moveStalledJobsToWait: the atomic stalled sweep.

  KEYS[1] stalled       KEYS[5] stalled-check (throttle)
  KEYS[2] wait          KEYS[6] meta
  KEYS[3] active        KEYS[7] paused
  KEYS[4] failed        KEYS[8] marker

  ARGV[1] max stalled count
  ARGV[2] key prefix
  ARGV[3] timestamp (ms)
  ARGV[4] check interval ms (0 = no throttle: every call sweeps)

  Two passes. Move: each id the previous sweep marked whose lock is gone and
  that is still in active is reclaimed: its attempts go up by one, and it goes
  to failed past the max stalled count, else to wait. Mark: every id now in
  active is marked for the next sweep.

  Returns {<ids moved to failed>, <ids moved to wait>}; {{}, {}} when throttled.

  Each reclaimed id costs one LREM, a scan of active: when most of a long
  active list has stalled the sweep is quadratic in its length
  (moveStalledJobsToWaitLinear-8.lua keeps the contract in one pass).
]]
-- @include "addEvent"
-- @include "reclaimJob"
-- @include "markActive"

local maxStalled = tonumber(ARGV[1])
local prefix = ARGV[2]
local now = tonumber(ARGV[3])
local interval = tonumber(ARGV[4]) or 0
local k = {
  stalled = KEYS[1], wait = KEYS[2], active = KEYS[3], failed = KEYS[4],
  meta = KEYS[6], paused = KEYS[7], marker = KEYS[8],
  events = prefix .. "events",
}

if interval > 0 then
  if redis.call("EXISTS", KEYS[5]) == 1 then
    return {{}, {}}
  end
  redis.call("SET", KEYS[5], now, "PX", interval)
end

local isPaused = redis.call("HGET", k.meta, "paused") == "1"
local failed, moved = {}, {}
local marked = redis.call("SMEMBERS", k.stalled)
for _, jobId in ipairs(marked) do
  if redis.call("EXISTS", prefix .. jobId .. ":lock") == 0
      and redis.call("LREM", k.active, 1, jobId) > 0 then
    if reclaimJob(k, prefix, jobId, now, maxStalled, isPaused) then
      failed[#failed + 1] = jobId
    else
      moved[#moved + 1] = jobId
    end
  end
end
redis.call("DEL", k.stalled)
if #moved > 0 and not isPaused then
  redis.call("ZADD", k.marker, 0, "0")
end

markActive(k.active, k.stalled)
return {failed, moved}
