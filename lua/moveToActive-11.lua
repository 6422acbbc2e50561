--[[
  moveToActive: fetch the next job.

  KEYS[1] wait          KEYS[7]  delayed
  KEYS[2] active        KEYS[8]  paused
  KEYS[3] prioritized   KEYS[9]  meta
  KEYS[4] events        KEYS[10] pc (priority sequence)
  KEYS[5] stalled       KEYS[11] marker
  KEYS[6] limiter

  ARGV[1] key prefix
  ARGV[2] timestamp (ms)
  ARGV[3] token
  ARGV[4] lock duration ms
  ARGV[5] limiter max (0 = no limiter)
  ARGV[6] limiter duration ms

  Returns
    {<HGETALL of the job>, <id>, 0, 0}  a job was taken and locked
    {0, 0, 0, 0}                        the queue is paused
    {0, 0, <ms until reset>, 0}         the rate limiter is at its max
    {0, 0, 0, <next delayed due or 0>}  nothing to take
]]
-- @include "fetchNext"

local k = {
  wait = KEYS[1], active = KEYS[2], prioritized = KEYS[3], events = KEYS[4],
  stalled = KEYS[5], limiter = KEYS[6], delayed = KEYS[7], paused = KEYS[8],
  meta = KEYS[9], pc = KEYS[10], marker = KEYS[11],
}
return fetchNext(k, ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]),
  tonumber(ARGV[5]) or 0, tonumber(ARGV[6]) or 0)
