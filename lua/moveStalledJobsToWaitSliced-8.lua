--[[
  moveStalledJobsToWaitSliced: the atomic stalled sweep, a bounded slice a call.

  KEYS[1] stalled       KEYS[5] stalled-check (throttle)
  KEYS[2] wait          KEYS[6] meta
  KEYS[3] active        KEYS[7] paused
  KEYS[4] failed        KEYS[8] marker

  ARGV[1] max stalled count
  ARGV[2] key prefix
  ARGV[3] timestamp (ms)
  ARGV[4] check interval ms (0 = no throttle: every call sweeps)
  ARGV[5] slice: at most this many ids of active are visited a call
          (optional; default 100: about 1 ms of Redis a call)

  Returns {<ids moved to failed>, <ids moved to wait>} when a call ends the
  pass, and {{}, {}} when throttled, as moveStalledJobsToWait-8.lua does. A
  call that leaves the pass unfinished returns a third element, the count of
  active ids still to visit: the client calls again until a reply has two
  elements. When active holds no more than `slice` ids one call is the whole
  pass, and does what the protocol script does.

  One pass (the protocol's move and mark) is spread over calls. The first
  call of a pass checks the throttle, renames stalled (the previous pass's
  marks) to <prefix>stalled-prev and notes LLEN active in <prefix>stalled-pass
  as the count to visit. Each call takes up to `slice` ids from the right
  (oldest) end of active (RPOP) and, for each one, in one atomic step:
  reclaims it when it is in stalled-prev and its lock is gone (attempts + 1,
  then failed past the max, else wait or paused); otherwise marks it (SADD
  stalled) and puts it back at the left end, order kept (LPUSH). No call
  scans active, so a call costs O(slice) however long active is. When the
  count is visited, stalled-prev and stalled-pass are deleted (UNLINK).

  What it gives up against the single-call sweep:
  - A pass is not one instant; workers run between its calls.
    * A job that enters active during a pass may not be visited: the next
      pass marks it, so it is reclaimed at worst one pass later.
    * A job finished during a pass drops out of active and is never visited.
    * extendLock removes the new mark (stalled) but not the previous one
      (stalled-prev): a job whose lock is extended and then lapses again
      before its visit is reclaimed in this pass, one pass sooner than the
      protocol would. Its lock is gone when checked, as the protocol asks.
    * Between calls active is rotated: the visited part sits at the left.
      Once the pass ends the order is as before, but for jobs that came or
      went meanwhile.
  - The throttle is checked when a pass starts only; the calls that carry
    it on run whatever the interval. Any client's call carries on the pass
    in progress, so a pass left unfinished (its client died) is finished by
    the next call, and each id is still checked and moved once per visit.
  - Two keys beyond KEYS, built from the prefix (same hash tag):
    stalled-prev and stalled-pass.
]]
-- @include "sweepCommon"
-- @include "batched"

local args, k = sweepArgs()
local prefix = args.prefix
local slice = math.max(1, tonumber(ARGV[5]) or 100)
local prevKey = prefix .. "stalled-prev"
local passKey = prefix .. "stalled-pass"

local toVisit = tonumber(redis.call("GET", passKey))
if not toVisit then
  -- A new pass: the throttle, then the previous pass's marks set aside.
  if throttled(k, args) then
    return {{}, {}}
  end
  if redis.call("EXISTS", k.stalled) == 1 then
    redis.call("RENAME", k.stalled, prevKey)
  else
    redis.call("DEL", prevKey)
  end
  toVisit = redis.call("LLEN", k.active)
end

local isPaused = redis.call("HGET", k.meta, "paused") == "1"
local failed, moved = {}, {}
local take = math.min(slice, toVisit)
local visited = take > 0 and redis.call("RPOP", k.active, take) or false
if visited then
  local kept, reclaim = {}, {}
  for _, jobId in ipairs(visited) do
    if redis.call("SISMEMBER", prevKey, jobId) == 1
        and redis.call("EXISTS", prefix .. jobId .. ":lock") == 0 then
      -- once: a second copy of the id in active is kept, as LREM 1 leaves it
      redis.call("SREM", prevKey, jobId)
      reclaim[#reclaim + 1] = jobId
    else
      kept[#kept + 1] = jobId
    end
  end
  -- RPOP gave the rightmost first; LPUSH in that order keeps their order.
  batched("LPUSH", k.active, kept)
  batched("SADD", k.stalled, kept)
  failed, moved = reclaimAll(k, args, reclaim, isPaused)
  toVisit = toVisit - #visited
  if #visited < take then
    toVisit = 0 -- active ran out before the count: jobs left it meanwhile
  end
else
  toVisit = 0
end
if toVisit <= 0 then
  -- UNLINK: stalled-prev may still hold every id of a long list, and freeing
  -- it here would be one O(N) step; Redis frees it off the main thread.
  redis.call("UNLINK", prevKey, passKey)
  return {failed, moved}
end
redis.call("SET", passKey, toVisit)
return {failed, moved, toVisit}
