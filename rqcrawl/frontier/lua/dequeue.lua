local id = redis.call('LMOVE', queue, intermediate, 'LEFT', 'RIGHT')
if not id then return false end
local job = redis.call('HGETALL', prefix .. id)
table.insert(job, 1, id)
return job
