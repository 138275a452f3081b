"""A Python started with this directory on PYTHONPATH behaves as the base install: the
packages named in RQCRAWL_BLOCKED (comma-separated: the extras' packages, rqcrawl.extras) cannot
be imported, as on a machine that ran `pip install rqcrawl` alone. Inherited by every process
it starts (workers, their forks), so a whole crawl runs without the extras (test_base_install)."""

import os
import sys

BLOCKED = set(filter(None, os.environ.get("RQCRAWL_BLOCKED", "").split(",")))


class Blocked:
    """First on sys.meta_path: a blocked package is not found, whatever is installed."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None


sys.meta_path.insert(0, Blocked())
