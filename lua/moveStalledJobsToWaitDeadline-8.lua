--[[
  moveStalledJobsToWaitDeadline: the stalled sweep of the echomq-deadline
  protocol, whose cost follows the expired deadlines, not the active list.

  KEYS[1] stalled       KEYS[5] stalled-check (throttle)
  KEYS[2] wait          KEYS[6] meta
  KEYS[3] active        KEYS[7] paused
  KEYS[4] failed        KEYS[8] marker

  ARGV[1] max stalled count
  ARGV[2] key prefix
  ARGV[3] timestamp (ms)
  ARGV[4] check interval ms (0 = no throttle: every call sweeps)
  ARGV[5] full pass interval ms (extra, optional; default 60000; 0 = every call)
  ARGV[6] limit: expired deadlines read a call at most (extra, optional; 0 or
          absent = all of them, in one call). With a limit, one pass over the
          expired deadlines is spread over calls (below).
  ARGV[7] time budget, µs (extra, optional; default 250; 0 = none): with a
          limit, a call reads no further chunk of deadlines once it has run
          this long (TIME), as moveStalledJobsToWaitSliced-8.lua does

  Returns {<ids moved to failed>, <ids moved to wait>}; {{}, {}} when throttled.
  With a limit, a call that leaves its pass unfinished returns a third
  element, the count of expired deadlines still to read: the client calls
  again until a reply has two elements.

  Derived keys (from the prefix, so the same hash tag and slot):
    <prefix>deadlines      ZSET: one entry a locked job, score = when its lock
                           expires (ms); moveToActive and fetch-next add it,
                           extendLock moves it, finishing removes it
    <prefix>deadline-full  STRING: the full pass's throttle, set with PX
    <prefix>deadline-pass  HASH: a pass spread over calls (with a limit) while it
                           runs: full (ids of active its full pass has walked),
                           now (its timestamp), score and kept (where it stopped)

  The index says when to look; the lock says what is true. Each id whose
  deadline has passed (ZRANGEBYSCORE -inf <timestamp>, oldest first):
  - its lock exists (renewed, or written without the index): the lock wins;
    the entry moves to when that lock expires (PTTL; a lock without expiry is
    looked at again a full pass interval later) and the id is unmarked;
  - its lock is gone and it is not marked: it is marked (SADD stalled): seen
    lockless once;
  - its lock is gone and it was marked by an earlier sweep: the entry and the
    mark are removed, and it is reclaimed when LREM takes it out of active (a
    job already finished or taken by another sweep is not), through
    reclaimJob.lua as the protocol sweep does: attempts + 1, then failed past
    the max stalled count, else wait (paused while paused).
  So a job is reclaimed only when its lock was gone at the previous sweep too:
  the two-pass grace. A job finished between the two sweeps has left active,
  the index and stalled, and is not requeued. Unlike moveStalledJobsToWait-8,
  healthy jobs are not marked: a lock that lapses between two sweeps is marked
  by the first sweep after it and reclaimed by the next one, one interval later
  than the protocol sweep would, never sooner. `stalled` holds only marked
  lockless ids and is not rewritten each sweep.

  Cost: a healthy queue's call is a few commands whatever the active list's
  length (no id has an expired deadline). Each expired id costs O(log N) in
  the index and a share of batched commands, 5000 ids a call: its lock is
  looked up with MGET (a PTTL only for a lock that exists), its mark read with
  SMISMEMBER and written with SADD, SREM and ZREM. A reclaimed one is taken
  out of active from its right (oldest) end, where stalled jobs sit: RPOP a
  chunk, push back what is not reclaimed, while most of a chunk is; an LREM
  from the right for each one left; and reclaimJob's HINCRBY, the one command
  each reclaimed id pays alone. SMISMEMBER and ZMSCORE need Redis 6.2.

  A pass spread over calls (a limit). The first call of a pass checks the
  throttle, starts the full pass when it is due (below), and notes the
  pass's timestamp in deadline-pass once that is done: the pass reads the
  deadlines expired by then, oldest first, at most `limit` ids a call (the
  full pass's counted too), CHUNK ids a read (ZRANGEBYSCORE ... LIMIT), each id
  settled as above, and the next call goes on where the last stopped. Where
  it stopped is a score and how many entries of that score the pass left in
  place (those it marked): ids settled by the pass either leave the range
  (a live lock's entry moves past the pass's timestamp, a reclaimed one's
  entry is removed) or stay marked, so each call reads from that score on,
  skipping that many: never an offset into the whole range (ZRANGEBYSCORE
  walks an offset one entry at a time). A marked id is so read once a pass
  and reclaimed by a later pass, never by a call of the pass that marked it:
  the two-pass grace holds between passes as it does between sweeps.
  What it gives up against one call: workers run between calls. An entry
  that moves (extendLock) or leaves (a finish) meanwhile from the score the
  pass stopped at makes the next call skip one id of that score: it is read
  by the next pass (marked, or reclaimed, one pass later, never sooner).
  Deadlines that expire during a pass wait for the next pass. The throttle
  is checked when a pass starts only, and any client's call carries on the
  pass in progress. The full pass, when it is due, opens the pass and is
  spread over its calls too: `limit` ids of active a call at most (LRANGE
  from the right end, ZMSCORE), its place in deadline-pass; the pass's
  timestamp is taken when it is done, so what it indexed as due is read by
  the same pass. A job that leaves active meanwhile shifts the ids still to
  walk by one, so one may be missed and found by the next full pass.

  Missing entries. A job in active without an entry (a worker running
  moveToActive-11.lua beside this protocol, a script stopped half way, an
  entry deleted by hand) is never due. A full pass finds it: at most once a
  full pass interval (its throttle key), when ZCARD deadlines differs from
  LLEN active, every id of active is looked up (ZMSCORE, 5000 a call) and one
  without an entry is indexed as due now (lockless) or when its lock expires.
  The expired scan of the same call (or pass) then marks a lockless one, and
  the next sweep reclaims it: found within one full pass interval of going missing,
  reclaimed within two. The full pass is O(N), once a full pass interval, and
  only when the counts differ (one call without a limit, spread over the
  pass's calls with one); equal counts with a missing entry and a stale
  one (an id that left active by another protocol's script) wait until the
  stale entry has expired and been cleared (two sweeps after it expires).
]]
-- @include "sweepCommon"

local DEFAULT_FULL_MS = 60000
local LOOKUP_BATCH = 5000 -- ids a ZMSCORE, SMISMEMBER or MGET: Lua's unpack fails near 8000
local TAIL_CHUNK = 1000 -- ids of active an RPOP takes while reclaimed ones sit at its end
local CHUNK = 25 -- deadlines a read of a limited call; its time budget is checked between reads
local DEFAULT_BUDGET_US = 250

local args, k = sweepArgs()
local prefix, now = args.prefix, args.now
local deadlines = prefix .. "deadlines"
local fullMs = tonumber(ARGV[5]) or DEFAULT_FULL_MS
local limit = tonumber(ARGV[6]) or 0
local budgetUs = tonumber(ARGV[7]) or DEFAULT_BUDGET_US
local passKey = prefix .. "deadline-pass"
-- When a lock without expiry is looked at again.
local recheckMs = fullMs > 0 and fullMs or DEFAULT_FULL_MS

-- A limited pass in progress: how far its full pass has walked active from the right end,
-- or its timestamp, the score it stopped at and the entries of that score it left in place;
-- none of them: this call starts a sweep (or a pass).
local pass = limit > 0 and redis.call("HMGET", passKey, "full", "now", "score", "kept") or {}
local fullAt = tonumber(pass[1])
-- Scores are kept as Redis wrote them: a number passed back would be formatted with %.14g.
local passNow, atScore, keptAt = pass[2], pass[3], tonumber(pass[4]) or 0
if not fullAt and not passNow and throttled(k, args) then
  return {{}, {}}
end

-- When the lock of jobId expires (ms), or nil when it is gone.
local function lockDue(jobId)
  local ttl = redis.call("PTTL", prefix .. jobId .. ":lock")
  if ttl == -2 then
    return nil
  end
  return now + (ttl == -1 and recheckMs or ttl)
end

-- True when the full pass is due: its interval has passed (the interval starts again now)
-- and the index and active differ in length.
local function fullPassDue()
  if fullMs > 0 then
    if redis.call("EXISTS", prefix .. "deadline-full") == 1 then
      return false
    end
    redis.call("SET", prefix .. "deadline-full", now, "PX", fullMs)
  end
  return redis.call("ZCARD", deadlines) ~= redis.call("LLEN", k.active)
end

-- Indexes each of `ids` (of active) that has no entry: due now when its lock is gone.
local function indexMissing(ids)
  for from = 1, #ids, LOOKUP_BATCH do
    local to = math.min(from + LOOKUP_BATCH - 1, #ids)
    local scores = redis.call("ZMSCORE", deadlines, unpack(ids, from, to))
    for i, score in ipairs(scores) do
      if not score then
        local jobId = ids[from + i - 1]
        redis.call("ZADD", deadlines, lockDue(jobId) or now, jobId)
      end
    end
  end
end

-- Takes one copy of each of `ids` out of active, the rightmost as LREM -1
-- would; returns the set of those that were there. While most of a chunk at
-- the right end is of `ids`, RPOP the next chunk; what they held besides goes
-- back in order at the end. Then one LREM from the right for each id not
-- found yet.
local function takeOutOfActive(ids)
  local wanted, left, taken, keep = {}, #ids, {}, {}
  for _, jobId in ipairs(ids) do
    wanted[jobId] = true
  end
  while left > 0 do
    local chunk = redis.call("RPOP", k.active, math.min(TAIL_CHUNK, left))
    if not chunk then
      break -- active is empty
    end
    local found = 0
    for _, jobId in ipairs(chunk) do -- the rightmost first
      if wanted[jobId] then
        wanted[jobId], taken[jobId], found = nil, true, found + 1
      else
        keep[#keep + 1] = jobId
      end
    end
    left = left - found
    if found * 2 < #chunk then
      break -- the rest are not at the end: one LREM each
    end
  end
  local back = {} -- leftmost first, so RPUSH leaves them where they were
  for i = #keep, 1, -1 do
    back[#back + 1] = keep[i]
  end
  batched("RPUSH", k.active, back)
  for _, jobId in ipairs(ids) do
    if wanted[jobId] and redis.call("LREM", k.active, -1, jobId) > 0 then
      taken[jobId] = true
    end
  end
  return taken
end

-- Settles each of `due` (expired deadlines, oldest first) as the header says, in
-- batches; returns the ids moved to failed, those moved to wait, and for each of
-- `due` whether its entry stays where it was (marked now: seen lockless once).
local isPaused -- read once a call, when something is reclaimed
local function settle(due)
  local wasMarked, hasLock = {}, {}
  for from = 1, #due, LOOKUP_BATCH do
    local to = math.min(from + LOOKUP_BATCH - 1, #due)
    local found = redis.call("SMISMEMBER", k.stalled, unpack(due, from, to))
    local lockKeys = {}
    for i = from, to do
      wasMarked[i] = found[i - from + 1] == 1
      lockKeys[#lockKeys + 1] = prefix .. due[i] .. ":lock"
    end
    local values = redis.call("MGET", unpack(lockKeys))
    for i, value in ipairs(values) do
      hasLock[from + i - 1] = value ~= false
    end
  end
  -- A lock that exists wins (one PTTL each); the set writes go in batches after.
  local mark, unmark, gone, stays = {}, {}, {}, {}
  for i, jobId in ipairs(due) do
    if hasLock[i] then
      redis.call("ZADD", deadlines, lockDue(jobId) or now, jobId)
      if wasMarked[i] then
        unmark[#unmark + 1] = jobId
      end
    elseif not wasMarked[i] then
      mark[#mark + 1] = jobId -- seen lockless once
      stays[i] = true
    else
      gone[#gone + 1] = jobId -- marked by an earlier sweep, and its lock is still gone
    end
  end
  batched("SADD", k.stalled, mark)
  batched("SREM", k.stalled, unmark)
  batched("SREM", k.stalled, gone)
  batched("ZREM", deadlines, gone)
  -- Reclaimed in the order they became due: a job already finished or taken by
  -- another sweep is not in active, and is not.
  local inActive = takeOutOfActive(gone)
  local reclaim = {}
  for _, jobId in ipairs(gone) do
    if inActive[jobId] then
      reclaim[#reclaim + 1] = jobId
    end
  end
  if #reclaim == 0 then
    return {}, {}, stays
  end
  if isPaused == nil then
    isPaused = redis.call("HGET", k.meta, "paused") == "1"
  end
  local failed, moved = reclaimAll(k, args, reclaim, isPaused)
  return failed, moved, stays
end

if limit <= 0 then -- one call: the full pass when due, then every expired deadline
  if fullPassDue() then
    indexMissing(redis.call("LRANGE", k.active, 0, -1))
  end
  local failed, moved = settle(redis.call("ZRANGEBYSCORE", deadlines, "-inf", now))
  return {failed, moved}
end

local spent = budgetSpent(budgetUs)
local read = 0 -- ids this call has read: of active (the full pass), then expired deadlines
if not fullAt and not passNow and fullPassDue() then
  fullAt = 0 -- the pass starts with a full pass
end
if fullAt then
  -- The full pass a chunk at a time from the right (oldest) end, where fetches do not move
  -- what is left to walk; a job that leaves active meanwhile shifts the rest by one, so one
  -- id may be missed, to be found by the next full pass.
  while read < limit do
    if read > 0 and spent() then
      break
    end
    local take = math.min(CHUNK, limit - read)
    local ids = redis.call("LRANGE", k.active, -(fullAt + take), -(fullAt + 1))
    indexMissing(ids)
    fullAt, read = fullAt + #ids, read + #ids
    if #ids < take then
      fullAt = nil -- walked to the left end
      break
    end
  end
  if fullAt then
    redis.call("HSET", passKey, "full", fullAt)
    return {{}, {}, math.max(1, redis.call("LLEN", k.active) - fullAt)}
  end
  redis.call("HDEL", passKey, "full")
end
-- The expired deadlines: those of the pass's timestamp, taken once its full pass is done, so
-- what that indexed as due is read by the same pass.
passNow = passNow or ARGV[3]

local failed, moved, ended = {}, {}, false
while read < limit do
  if read > 0 and spent() then
    break
  end
  local take = math.min(CHUNK, limit - read)
  local rows = redis.call("ZRANGEBYSCORE", deadlines, atScore or "-inf", passNow, "WITHSCORES",
    "LIMIT", keptAt, take)
  local due, scores = {}, {}
  for i = 1, #rows, 2 do
    due[#due + 1], scores[#scores + 1] = rows[i], rows[i + 1]
  end
  local chunkFailed, chunkMoved, stays = settle(due)
  appendAll(failed, chunkFailed)
  appendAll(moved, chunkMoved)
  -- Where the pass stopped: the last score read, and the entries of it left in place.
  for i, score in ipairs(scores) do
    if score ~= atScore then -- one number has one text as Redis writes it
      atScore, keptAt = score, 0
    end
    if stays[i] then
      keptAt = keptAt + 1
    end
  end
  read = read + #due
  if #due < take then
    ended = true -- no expired deadline left to read
    break
  end
end
local left = 0
if not ended then
  left = redis.call("ZCOUNT", deadlines, atScore or "-inf", passNow) - keptAt
end
if left <= 0 then
  redis.call("DEL", passKey)
  return {failed, moved}
end
if atScore then
  redis.call("HSET", passKey, "now", passNow, "score", atScore, "kept", keptAt)
else -- the full pass took the whole call: no deadline read yet
  redis.call("HSET", passKey, "now", passNow)
end
return {failed, moved, left}
