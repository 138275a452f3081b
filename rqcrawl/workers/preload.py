"""An RQ settings module that imports the crawler into a forking worker's parent:

    RQ_CONFIG=rqcrawl.workers.preload rq worker crawl

RQ imports the module named by `-c`/`RQ_CONFIG` before it starts working, and every forked
work-horse inherits the parent's modules, so a job does not pay for importing requests,
parsel and lxml. A plain `rq worker crawl` now does the same at its first job (each job's
meta preloads the crawler where RQ fetches it: rqcrawl.frontier.jobmeta); this module moves
that import before the first job and keeps the command lines that name it working. It
defines no RQ setting: the Redis URL and the rest come as usual. The recommended worker
(RQ_WORKER_CLASS=rqcrawl.workers.CrawlWorker) is still much faster: it also keeps
connections, settings and the URLs it has seen across jobs, and does not fork.
"""

from rqcrawl.workers import jobs  # noqa: F401
