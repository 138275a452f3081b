"""The `rqcrawl` command: seed a crawl, watch it, export it. One module per group of
commands (control, watching, exporting, local), on the group and options they share."""

from rqcrawl.cli import control, exporting, local, watching
from rqcrawl.cli.group import LAZY_SUBCOMMANDS, main
from rqcrawl.cli.local import FORK_WORKERS

__all__ = ["FORK_WORKERS", "LAZY_SUBCOMMANDS", "main", "control", "exporting", "local", "watching"]
