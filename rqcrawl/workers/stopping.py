"""A stop asked by a signal, taken at a safe point.

`rqcrawl crawl` and `rqcrawl export --follow` stop on Ctrl-C (SIGINT) or SIGTERM. A
handler that raised KeyboardInterrupt (Python's default for SIGINT) broke whatever call was
running: inside SQLAlchemy's pool pre-ping it left the connection half set up, the next use
of the task table failed (`can't change 'autocommit' now`) and the crawl wrote no export; a
second signal broke the stop itself. Here the first signal only sets a flag, and the later
ones are ignored: the command's loop reads the flag between two of its steps (REFRESH apart,
FOLLOW_STOP_CHECK for a follower, which then ends once what it took is on disk).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType


class StopAsked(Exception):
    """A signal asked the crawl to stop (raised at a safe point, by Stop.check)."""


class Stop:
    """The flag that `signals` set (also when we were started with them ignored: a shell
    starts a script's background job with SIGINT ignored, and Ctrl-C must still stop it)."""

    def __init__(self, *signals: signal.Signals):
        self.asked = threading.Event()
        self.signals = signals
        for sig in signals:
            signal.signal(sig, self._ask)

    def _ask(self, signum: int, frame: FrameType | None) -> None:
        """The first signal asks; the burst's later ones are ignored by the kernel from then
        on. Each one that ran this handler could interrupt it again between two bytecodes:
        under a flood of SIGTERM on a busy machine the handlers nested until a RecursionError
        broke the stop (exit status -15, seen in a clean-clone suite run)."""
        ignore_signals(*self.signals)
        self.asked.set()

    def check(self) -> None:
        """Raise StopAsked if a signal came."""
        if self.asked.is_set():
            raise StopAsked

    def exiting(self) -> None:
        """The work is done and the process leaves: the signals are ignored from now on."""
        ignore_signals(*self.signals)


def ignore_signals(*signals: signal.Signals) -> None:
    """Ignore `signals` from now on, once a command's work is done: at exit Python puts the
    default handlers back, and one more SIGTERM of a burst killed the process (exit status
    -15) after it had ended cleanly."""
    for sig in signals:
        signal.signal(sig, signal.SIG_IGN)
