--[[
  extendLock: renew a lock held under this token.

  KEYS[1] the lock key
  KEYS[2] stalled

  ARGV[1] token
  ARGV[2] lock duration ms
  ARGV[3] job id

  Returns 1 when the lock was renewed (and the id unmarked), else 0.
]]
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  redis.call("SREM", KEYS[2], ARGV[3])
  return 1
end
return 0
