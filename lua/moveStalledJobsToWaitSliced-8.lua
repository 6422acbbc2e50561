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
          (optional; default 100)
  ARGV[6] time budget, µs (optional; default 250; 0 = none): a call takes
          no further chunk of ids once it has run this long (TIME), so a
          call whose ids are slow to visit (all stalled at a million ids:
          about 10 µs an id) stops before its slice

  Returns {<ids moved to failed>, <ids moved to wait>} when a call ends the
  pass, and {{}, {}} when throttled, as moveStalledJobsToWait-8.lua does. A
  call that leaves the pass unfinished returns a third element, the count of
  active ids still to visit: the client calls again until a reply has two
  elements. When active holds no more than `slice` ids and the budget is not
  spent first, one call is the whole pass, and does what the protocol script
  does.

  One pass (the protocol's move and mark) is spread over calls. The first
  call of a pass checks the throttle and notes LLEN active in
  <prefix>stalled-pass as the count to visit. Each call takes up to `slice`
  ids from the right (oldest) end of active, CHUNK ids an RPOP, and, for each
  one, in one atomic step: reclaims it when it is marked (in stalled) and its
  lock is gone (unmark, attempts + 1, then failed past the max, else wait or
  paused); otherwise puts it back at the left end, order kept (LPUSH), and
  marks it if it is not marked yet. Before each chunk but the first it reads
  TIME and stops once the call has run its time budget. Where TIME does not
  move inside a script, the budget never ends a call and the slice bounds it.

  The marks are kept from pass to pass, not rebuilt. The protocol's sweep
  deletes stalled and marks every active id again; spread over calls that
  would make each pass add every id to a new set and drop the old one, and
  Redis grows a set's hash table by doubling it, so the call that takes a
  new set past 2^k members allocates a table of 2^(k+1) slots (8 MB at a
  million ids), and the old set's million members are freed at the pass's
  end. Kept marks already hold the id of every healthy job: a healthy pass
  writes no mark at all, and a mark is only added or removed for a job that
  came into active or is reclaimed. What bounds a call: at most `slice` ids
  visited (the re-mark below included), a fixed number of commands on each,
  each O(1), a few on each chunk, and a few more on the pass's own keys; no
  command reads, writes or deletes a whole key but UNLINK, whose freeing
  Redis does off the main thread; and the time budget.

  Every script of the protocol that takes an id out of active unmarks it,
  so kept marks stay those of ids in active. Marks of ids taken out by
  anything else (an outside LREM, or a hand-built state) would survive
  where the protocol's sweep drops them; a pass that ends with more marks
  than the ids it kept has such marks, and re-marks: it renames stalled to
  <prefix>stalled-prev and visits active once more (reclaiming nothing),
  moving each id's mark back (SMOVE), then UNLINKs what is left, the marks
  of ids not in active. A re-mark rebuilds stalled, with the table growth
  above: it is the price of outside writes, not of a pass. Stray marks
  hidden by marks other scripts removed meanwhile are found by a later pass.

  What it gives up against the single-call sweep:
  - A pass is not one instant; workers run between its calls.
    * A job that enters active during a pass may not be visited: the next
      pass marks it, so it is reclaimed at worst one pass later.
    * A job finished during a pass drops out of active and is never visited.
      The count to visit was fixed when the pass started, so the pass's last
      calls visit again as many ids it put back; one whose lock has gone
      since its first visit is reclaimed at its second, one pass sooner than
      the protocol would. Its lock is gone when checked, as the protocol asks.
    * During a re-mark, extendLock removes a mark that is moved back later
      (it is still in stalled-prev): that job, if its lock then lapses, is
      reclaimed one pass sooner in the same way.
    * Between calls active is rotated: the visited part sits at the left.
      Once the pass ends the order is as before, but for jobs that came or
      went meanwhile.
  - The throttle is checked when a pass starts only; the calls that carry
    it on run whatever the interval. Any client's call carries on the pass
    in progress, so a pass left unfinished (its client died) is finished by
    the next call, and each id is still checked and moved once per visit.
  - Two keys beyond KEYS, built from the prefix (same hash tag):
    stalled-pass (a hash: phase, ids still to visit, ids kept) while a pass
    runs, and stalled-prev during a re-mark.
]]
-- @include "sweepCommon"
-- @include "batched"

local CHUNK = 25 -- ids an RPOP takes; the time budget is checked between chunks
local DEFAULT_BUDGET_US = 250

local args, k = sweepArgs()
local prefix = args.prefix
local slice = math.max(1, tonumber(ARGV[5]) or 100)
local budgetUs = tonumber(ARGV[6]) or DEFAULT_BUDGET_US
local prevKey = prefix .. "stalled-prev"
local passKey = prefix .. "stalled-pass"

local pass = redis.call("HMGET", passKey, "phase", "visit", "kept")
local phase, toVisit, kept = pass[1], tonumber(pass[2]), tonumber(pass[3])
if not phase then
  if throttled(k, args) then
    return {{}, {}}
  end
  phase, toVisit, kept = "reclaim", redis.call("LLEN", k.active), 0
end

local spent = budgetSpent(budgetUs)
local visits = 0 -- ids this call has taken, in both phases

-- The next chunk of ids from the right of active, or nil when the call is
-- done: its slice taken, the pass's count visited, or its time budget spent.
local function takeChunk()
  local take = math.min(CHUNK, slice - visits, toVisit)
  if take <= 0 or (visits > 0 and spent()) then
    return nil
  end
  local visited = redis.call("RPOP", k.active, take) or {}
  visits = visits + take
  -- fewer than asked: active ran out before the count, jobs left it meanwhile
  toVisit = #visited < take and 0 or toVisit - #visited
  return visited
end

local failed, moved = {}, {}
if phase == "reclaim" then
  local isPaused = redis.call("HGET", k.meta, "paused") == "1"
  for visited in takeChunk do
    local back, unmarked, reclaim = {}, {}, {}
    for _, jobId in ipairs(visited) do
      if redis.call("SISMEMBER", k.stalled, jobId) == 0 then
        back[#back + 1] = jobId
        unmarked[#unmarked + 1] = jobId
      elseif redis.call("EXISTS", prefix .. jobId .. ":lock") == 0 then
        -- unmarked at once: a second copy of the id in active is kept, as LREM 1 leaves it
        redis.call("SREM", k.stalled, jobId)
        reclaim[#reclaim + 1] = jobId
      else
        back[#back + 1] = jobId
      end
    end
    -- RPOP gave the rightmost first; LPUSH in that order keeps their order,
    -- and each chunk goes left of the one before, where it was.
    batched("LPUSH", k.active, back)
    batched("SADD", k.stalled, unmarked)
    local chunkFailed, chunkMoved = reclaimAll(k, args, reclaim, isPaused)
    appendAll(failed, chunkFailed)
    appendAll(moved, chunkMoved)
    kept = kept + #back
  end
  if toVisit == 0 and redis.call("SCARD", k.stalled) > kept then
    -- Marks beyond the ids kept: some are of ids no longer in active. Re-mark.
    phase, toVisit = "remark", redis.call("LLEN", k.active)
    redis.call("UNLINK", prevKey) -- none is left, but RENAME would free one here
    redis.call("RENAME", k.stalled, prevKey)
  end
end
if phase == "remark" then
  for visited in takeChunk do
    for _, jobId in ipairs(visited) do
      redis.call("SMOVE", prevKey, k.stalled, jobId)
    end
    batched("LPUSH", k.active, visited)
  end
end

if toVisit <= 0 then
  redis.call("UNLINK", prevKey, passKey)
  return {failed, moved}
end
redis.call("HSET", passKey, "phase", phase, "visit", toVisit, "kept", kept)
return {failed, moved, toVisit}
