--[[
  moveToActiveDeadline: fetch the next job, and index its lock's deadline
  (the echomq-deadline protocol).

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

  Returns what moveToActive-11.lua returns:
    {<HGETALL of the job>, <id>, 0, 0}  a job was taken and locked
    {0, 0, 0, 0}                        the queue is paused
    {0, 0, <ms until reset>, 0}         the rate limiter is at its max
    {0, 0, 0, <next delayed due or 0>}  nothing to take

  The same fetch step as moveToActive-11.lua; a job taken also gets its entry
  in the deadline index, score = timestamp + lock duration (when its lock
  expires): one ZADD, O(log N).

  Derived key (from the prefix, so the same hash tag and slot):
    <prefix>deadlines  ZSET, the deadline index
]]
-- @include "fetchNext"

local k = {
  wait = KEYS[1], active = KEYS[2], prioritized = KEYS[3], events = KEYS[4],
  stalled = KEYS[5], limiter = KEYS[6], delayed = KEYS[7], paused = KEYS[8],
  meta = KEYS[9], pc = KEYS[10], marker = KEYS[11],
}
local prefix, now, lockMs = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4])
local taken = fetchNext(k, prefix, now, ARGV[3], lockMs,
  tonumber(ARGV[5]) or 0, tonumber(ARGV[6]) or 0)
if taken[2] ~= 0 then
  redis.call("ZADD", prefix .. "deadlines", now + lockMs, taken[2])
end
return taken
