--[[
  extendLockDeadline: renew a lock held under this token, and move its deadline
  (the echomq-deadline protocol).

  KEYS[1] the lock key
  KEYS[2] stalled
  KEYS[3] deadlines   (extra, beyond extendLock-2.lua's: <prefix>deadlines, the
                       deadline index; the same hash tag as the lock)

  ARGV[1] token
  ARGV[2] lock duration ms
  ARGV[3] job id
  ARGV[4] timestamp (ms; extra, optional: without it the server's TIME is used)

  Returns 1 when the lock was renewed (and the id unmarked), else 0, as
  extendLock-2.lua does. A renewal also sets the id's deadline to timestamp +
  lock duration (ZADD, not XX: an entry that was lost is written again).
]]
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  redis.call("SREM", KEYS[2], ARGV[3])
  local now = tonumber(ARGV[4])
  if not now then
    local t = redis.call("TIME")
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  redis.call("ZADD", KEYS[3], now + tonumber(ARGV[2]), ARGV[3])
  return 1
end
return 0
