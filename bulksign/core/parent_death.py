"""Child processes that end with their parent, even when it is killed by SIGKILL (Linux's parent-death signal).
More in docs/architecture/core.md."""

from __future__ import annotations

import ctypes
import os
import signal

#: prctl's option that asks the kernel for a signal when the parent dies (linux/prctl.h).
_PR_SET_PDEATHSIG = 1


def end_with_parent(*, parent: int, signum: int = signal.SIGTERM) -> None:
    """In a child just forked by process ``parent``: ``signum`` comes when the parent dies, however it dies.

    Strictly, when the parent's thread that forked ends: fork from a thread that lasts as long as the process.
    A parent already gone before this call sends nothing, so the child ends here instead (call this before the
    child does anything).
    """
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum)
    if os.getppid() != parent:
        os._exit(1)
