--[[
  moveStalledJobsToWaitLinear: the atomic stalled sweep in one pass over active.

  KEYS[1] stalled       KEYS[5] stalled-check (throttle)
  KEYS[2] wait          KEYS[6] meta
  KEYS[3] active        KEYS[7] paused
  KEYS[4] failed        KEYS[8] marker

  ARGV[1] max stalled count
  ARGV[2] key prefix
  ARGV[3] timestamp (ms)
  ARGV[4] check interval ms (0 = no throttle: every call sweeps)

  Returns {<ids moved to failed>, <ids moved to wait>}; {{}, {}} when throttled.

  The contract and the rules of moveStalledJobsToWait-8.lua; only the way ids
  leave active differs. The protocol script removes each reclaimed id with its
  own LREM, a scan of active, so a sweep that reclaims most of a long list is
  quadratic. Here the marked ids whose lock is gone are collected first; then
  active is read once and rewritten once without them, order kept, taking for
  each id the occurrence nearest the left as LREM 1 does. An id that is not in
  active any more (it finished, or another sweep took it) is skipped as before.
  Up to FEW_LREM ids are still removed with LREM: a few scans cost less than
  rewriting a long list. The rewritten list is also what the mark pass marks,
  so active is read once in all.
]]
-- @include "sweepCommon"
-- @include "markActive"
-- @include "batched"

local FEW_LREM = 16

local args, k = sweepArgs()
local prefix = args.prefix
if throttled(k, args) then
  return {{}, {}}
end

local isPaused = redis.call("HGET", k.meta, "paused") == "1"

-- Move pass, step 1: the marked ids whose lock has gone.
local marked = redis.call("SMEMBERS", k.stalled)
local lockless, lockCount = {}, 0
for _, jobId in ipairs(marked) do
  if redis.call("EXISTS", prefix .. jobId .. ":lock") == 0 then
    lockless[jobId] = true
    lockCount = lockCount + 1
  end
end

-- Step 2: take them out of active. `removed` holds those that were there;
-- `kept` is active afterwards, when it was read.
local removed, kept = {}, nil
if lockCount > FEW_LREM then
  local active = redis.call("LRANGE", k.active, 0, -1)
  kept = {}
  for _, jobId in ipairs(active) do
    if lockless[jobId] then
      lockless[jobId] = nil -- the first occurrence only, as LREM 1
      removed[jobId] = true
    else
      kept[#kept + 1] = jobId
    end
  end
  if #kept < #active then
    redis.call("UNLINK", k.active) -- freed off the main thread: no O(N) free in the hold
    batched("RPUSH", k.active, kept)
  end
elseif lockCount > 0 then
  for _, jobId in ipairs(marked) do
    if lockless[jobId] and redis.call("LREM", k.active, 1, jobId) > 0 then
      removed[jobId] = true
    end
  end
end

-- Step 3: reclaim, in the order the protocol script visits them.
local reclaimed = {}
for _, jobId in ipairs(marked) do
  if removed[jobId] then
    reclaimed[#reclaimed + 1] = jobId
  end
end
local failed, moved = reclaimAll(k, args, reclaimed, isPaused)
redis.call("UNLINK", k.stalled)

-- Mark pass: every id now in active.
if kept then
  batched("SADD", k.stalled, kept)
else
  markActive(k.active, k.stalled)
end
return {failed, moved}
