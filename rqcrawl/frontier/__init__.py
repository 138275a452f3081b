"""The frontier: a crawl's state in Redis (held, in flight, deferred URLs, the Bloom filter,
levels, leases, shards) and in SQL (the task table of revisits), what it admits (`rules`:
scope, link and trap rules; `sitemaps`: the URLs seed sites list), the records of ended URLs
(`records`), and the RQ jobs it releases.

`state` owns every key and every change of that state, `scripts` every Lua script, `keys` every
key's name, `configs` the crawl's settings in Redis; `dispatch` turns what a change released
into RQ jobs; the other modules serve them.
"""
