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
-- @include "sweepCommon"
-- @include "markActive"

local args, k = sweepArgs()
if throttled(k, args) then
  return {{}, {}}
end

local isPaused = redis.call("HGET", k.meta, "paused") == "1"
local reclaimed = {}
for _, jobId in ipairs(redis.call("SMEMBERS", k.stalled)) do
  if redis.call("EXISTS", args.prefix .. jobId .. ":lock") == 0
      and redis.call("LREM", k.active, 1, jobId) > 0 then
    reclaimed[#reclaimed + 1] = jobId
  end
end
local failed, moved = reclaimAll(k, args, reclaimed, isPaused)
redis.call("DEL", k.stalled)

markActive(k.active, k.stalled)
return {failed, moved}
