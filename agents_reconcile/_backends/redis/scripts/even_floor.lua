-- On a Redis Cluster (cluster/retention.py): raise a bucket's floor (the highest write count
-- pruned in it) to ARGV[1] when it is lower, so that a session of any bucket reads at least
-- every count pruned in the journal. KEYS[1] the bucket's floor. Replies 1 when raised, else 0.
local found = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if found < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
  return 1
end
return 0
