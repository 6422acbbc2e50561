--[[
  moveToFinishedDeadline: finish a job, and optionally fetch the next, keeping
  the deadline index (the echomq-deadline protocol).

  KEYS[1] wait          KEYS[8]  paused
  KEYS[2] active        KEYS[9]  meta
  KEYS[3] prioritized   KEYS[10] pc
  KEYS[4] events        KEYS[11] target (completed or failed ZSET)
  KEYS[5] stalled       KEYS[12] the job hash
  KEYS[6] limiter       KEYS[13] metrics:<target>
  KEYS[7] delayed       KEYS[14] marker

  ARGV[1]  job id
  ARGV[2]  timestamp (ms)
  ARGV[3]  property ("returnvalue" or "failedReason")
  ARGV[4]  value
  ARGV[5]  target name ("completed" or "failed")
  ARGV[6]  fetch next ("1" or "0")
  ARGV[7]  key prefix
  ARGV[8]  token ("0" skips the lock check)
  ARGV[9]  lock duration ms for the next job
  ARGV[10] keep (-1 every job; 0 none, the hash is deleted; N the newest N)
  ARGV[11] metrics size in minutes (0 = no metrics)
  ARGV[12] limiter max
  ARGV[13] limiter duration ms

  Returns what moveToFinished-14.lua returns:
    -1  the job hash is missing
    -2  the lock is missing
    -6  the lock is held under another token
    -3  the job is not in active
    0   finished; no next job taken (fetch next off, or nothing to take)
    {<HGETALL of the next job>, <id>, 0, 0}  finished, and the next job taken
  Nothing is written unless every check passes (the index neither).

  The same step as moveToFinished-14.lua (includes/finishJob.lua); once the
  job is finished its deadline entry is removed (ZREM), and a next job taken
  gets its own (ZADD, score = timestamp + lock duration), in that order, so an
  id that comes straight back keeps an entry.

  Derived key (from the prefix, so the same hash tag and slot):
    <prefix>deadlines  ZSET, the deadline index
]]
-- @include "finishJob"

local reply = finishJob(KEYS, ARGV)
local taken = type(reply) == "table"
if taken or reply == 0 then
  local deadlines = ARGV[7] .. "deadlines"
  redis.call("ZREM", deadlines, ARGV[1])
  if taken then
    redis.call("ZADD", deadlines, tonumber(ARGV[2]) + tonumber(ARGV[9]), reply[2])
  end
end
return reply
