--[[
  moveToFinished: finish a job, and optionally fetch the next.

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

  Returns
    -1  the job hash is missing
    -2  the lock is missing
    -6  the lock is held under another token
    -3  the job is not in active
    0   finished; no next job taken (fetch next off, or nothing to take)
    {<HGETALL of the next job>, <id>, 0, 0}  finished, and the next job taken
  Nothing is written unless every check passes.
]]
-- @include "finishJob"

return finishJob(KEYS, ARGV)
