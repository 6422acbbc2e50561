-- Reclaiming a job whose lock has gone (it is already out of active): its
-- attempts go up by one; past the max stalled count it goes to failed,
-- otherwise to the right of wait (paused while paused). The protocol's sweep
-- adds no events: an XADD here would cost each reclaimed job several µs more
-- inside the hold.
-- @include "batched"

-- Counts one more attempt; true (and the job moved to failed) past the max.
local function failIfPastMax(k, prefix, jobId, now, maxStalled)
  local jobKey = prefix .. jobId
  if redis.call("HINCRBY", jobKey, "atm", 1) > maxStalled then
    redis.call("ZADD", k.failed, now, jobId)
    redis.call("HSET", jobKey, "failedReason", "job stalled more than allowable limit",
      "finishedOn", now)
    return true
  end
  return false
end

-- Reclaims each id, in order. Those not failed are pushed to wait (or paused)
-- in batches, in the same order as one RPUSH each would leave them, and a
-- worker is woken. Returns the ids moved to failed and those moved to wait.
local function reclaimAll(k, args, ids, isPaused)
  local failed, moved = {}, {}
  for _, jobId in ipairs(ids) do
    if failIfPastMax(k, args.prefix, jobId, args.now, args.maxStalled) then
      failed[#failed + 1] = jobId
    else
      moved[#moved + 1] = jobId
    end
  end
  batched("RPUSH", isPaused and k.paused or k.wait, moved)
  if #moved > 0 and not isPaused then
    redis.call("ZADD", k.marker, 0, "0")
  end
  return failed, moved
end
