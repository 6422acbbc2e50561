-- Appends one lifecycle event to the queue's stream, trimmed near 10,000 entries.
local function addEvent(eventsKey, eventName, jobId, ...)
  return redis.call("XADD", eventsKey, "MAXLEN", "~", 10000, "*",
    "event", eventName, "jobId", jobId, ...)
end
