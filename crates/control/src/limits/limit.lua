-- infergate's shared rate limits: the arithmetic of infergate_flow::limit::bucket and
-- take_all, line for line, run atomically inside Redis so that every gateway replica sees one
-- level per bucket and one clock. Kept in step with the Rust by a conformance test.
--
-- KEYS[i]   one hash per bucket: field l = level (cost x period_ms units), a = its time (ms)
-- ARGV[1]   "take" or "adjust"
-- ARGV[2]   now in ms, or "" for Redis's own clock (what the gateway sends)
-- take:     ARGV[3i], ARGV[3i+1], ARGV[3i+2] = limit, period_ms, cost of KEYS[i]
--           all or nothing; returns {1, 0, 0} admitted, or {0, i, wait_ms} refused by
--           KEYS[i] (wait_ms -1: it never fits)
-- adjust:   ARGV[3], ARGV[4], ARGV[5] = limit, period_ms, signed delta for KEYS[1];
--           returns {1, 0, 0}
--
-- Every value stays an integer below 2^53, where doubles are exact; divisions are corrected
-- to exact integer division, and numbers are written with %d (Lua's default %.14g would
-- round them).

local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

local function cdiv(a, b)
  local q = idiv(a, b)
  if q * b < a then
    q = q + 1
  end
  return q
end

local now
local own_clock = ARGV[2] == ''
if own_clock then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + idiv(tonumber(t[2]), 1000)
else
  now = tonumber(ARGV[2])
end

local function load(key)
  local v = redis.call('HMGET', key, 'l', 'a')
  return tonumber(v[1]) or 0, tonumber(v[2]) or 0
end

-- Bucket::drain: a clock that went back drains nothing and keeps the later time.
local function drain(units, at, limit)
  if now <= at then
    return units, at
  end
  local elapsed = now - at
  if elapsed >= cdiv(units, limit) then
    return 0, now
  end
  return units - elapsed * limit, now
end

-- An empty bucket is what an unknown key reads as, so it is deleted; otherwise the key lives
-- until its level has drained. Expiry runs on Redis's clock, so with a caller's clock (tests)
-- keys do not expire.
local function save(key, units, at, limit)
  if units == 0 then
    redis.call('DEL', key)
    return
  end
  redis.call('HSET', key, 'l', string.format('%d', units), 'a', string.format('%d', at))
  if own_clock then
    local ttl = cdiv(units, limit) + (at - now)
    redis.call('PEXPIRE', key, string.format('%d', ttl))
  end
end

local op = ARGV[1]
if op == 'take' then
  local fitted = {}
  local worst, worst_wait = 0, 0
  for i = 1, #KEYS do
    local base = 3 * i
    local limit = tonumber(ARGV[base])
    local period = tonumber(ARGV[base + 1])
    local cost = tonumber(ARGV[base + 2])
    local cap = limit * period
    local stored, stored_at = load(KEYS[i])
    local units, at = drain(stored, stored_at, limit)
    -- Bucket::room: a level past two capacities counts as two.
    if units > 2 * cap then
      units = 2 * cap
    end
    local c = math.min(cost, limit + 1) * period
    local wait = nil
    if c > cap then
      wait = -1
    elseif units + c <= cap then
      fitted[i] = {units + c, at, limit}
    else
      wait = cdiv(units + c - cap, limit)
    end
    -- take_all: a charge that never fits names the refusal, else the longest wait does.
    if wait ~= nil then
      if worst == 0 or (worst_wait ~= -1 and (wait == -1 or wait > worst_wait)) then
        worst, worst_wait = i, wait
      end
    end
  end
  if worst > 0 then
    return {0, worst, worst_wait}
  end
  for i = 1, #KEYS do
    save(KEYS[i], fitted[i][1], fitted[i][2], fitted[i][3])
  end
  return {1, 0, 0}
elseif op == 'adjust' then
  local limit = tonumber(ARGV[3])
  local period = tonumber(ARGV[4])
  local delta = tonumber(ARGV[5])
  local cap = limit * period
  local stored, stored_at = load(KEYS[1])
  local units, at = drain(stored, stored_at, limit)
  -- Bucket::adjust: clamped to 0..=2 x capacity, the step bounded before it is multiplied.
  local step = math.min(math.abs(delta), 2 * limit) * period
  if delta < 0 then
    units = math.max(units - step, 0)
  elseif step >= 2 * cap - math.min(units, 2 * cap) then
    units = 2 * cap
  else
    units = units + step
  end
  save(KEYS[1], units, at, limit)
  return {1, 0, 0}
end
return redis.error_reply('infergate limit script: unknown op ' .. tostring(op))
