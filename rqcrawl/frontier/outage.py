"""A task table that does not answer: what the crawl does meanwhile.

Kept apart from rqcrawl.frontier.tasks so that a stock worker, which imports rqcrawl.workers.jobs
for every job, catches the error without importing SQLAlchemy.

A task-table operation that fails for a connection reason is tried again a few times
(rqcrawl.frontier.tasks); past that bound it raises TableUnavailable, and the URL whose visit needed
the table is put back (deferred TABLE_WAIT seconds, the same attempt: no retry spent, no
failure recorded), the pump skips its turn, and `status` says the table is unreachable. When
the database answers again the crawl goes on where it was.
"""

from __future__ import annotations


class TableUnavailable(Exception):
    """The task table's database did not answer (connection refused, lost, timed out)."""
