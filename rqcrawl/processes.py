"""Processes of this machine: whether one is running, by its id (a follower's lock, a
worker's registration: both name the pid of their holder), and children that end with the
process that started them."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # linux/prctl.h
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def alive(pid: int) -> bool:
    """Whether process `pid` exists (another user's counts: it exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def end_with_parent(parent: int) -> None:
    """In a child of process `parent`, after its fork (before an exec, which keeps it): a
    SIGTERM when `parent` ends, however it ends. `rqcrawl crawl` starts its workers and its
    embedded Redis in sessions of their own; killed (SIGKILL, the OOM killer), it left them
    running for good. Linux only (prctl); elsewhere nothing. The signal comes when the
    thread that started the child ends, so only a process's main thread calls this."""
    if _LIBC is None:
        return
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it ended before the call: no signal will come
        os.kill(os.getpid(), signal.SIGTERM)
